"""Finds the conformance corpus (``../shared/conformance`` beside a source checkout, or
``$SHARDWISE_CONFORMANCE``) and extracts the meshes and shardings written in its modules."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

#: The repository root of a source checkout (``pip install -e .``): python/shardwise/testing/..
_ROOT = Path(__file__).resolve().parents[3]


def conformance_dir() -> Path | None:
    """``$SHARDWISE_CONFORMANCE``, or ``../shared/conformance`` beside the repository of a source
    checkout; None when that is not a directory."""
    env = os.environ.get("SHARDWISE_CONFORMANCE")
    path = Path(env) if env else _ROOT.parent / "shared" / "conformance"
    return path if path.is_dir() else None


def corpus_files() -> list[Path]:
    path = conformance_dir()
    return sorted(path.rglob("*.mlir")) if path else []


_MESH_OP = re.compile(r"sdy\.mesh\s+@(?:[\w$.]+|\"[^\"]*\")\s*=\s*<")
_PREFIXED = re.compile(r"#sdy\.sharding_per_value<|#sdy\.sharding<")
_BARE = re.compile(r"<(?=@|mesh<)")


def balanced_end(text: str, start: int) -> int:
    """Index one past the '>' closing the '<' at ``start``."""
    depth = 0
    in_str = False
    i = start
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "<":
            depth += 1
        elif c == ">" and text[i - 1] != "-":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced '<' at offset {start}")


def extract(text: str) -> Iterator[tuple[str, str]]:
    """Yields (kind, text) for each mesh definition ("mesh_op"), ``#sdy.sharding``,
    ``#sdy.sharding_per_value`` and stripped ``<@mesh, ...>`` sharding ("bare") in ``text``."""
    for m in _MESH_OP.finditer(text):
        yield "mesh_op", text[m.start() : balanced_end(text, m.end() - 1)]
    covered: list[tuple[int, int]] = []
    for m in _PREFIXED.finditer(text):
        end = balanced_end(text, m.end() - 1)
        covered.append((m.start(), end))
        kind = "per_value" if "per_value" in m.group() else "sharding"
        yield kind, text[m.start() : end]
    for m in _BARE.finditer(text):
        if any(a <= m.start() < b for a, b in covered):
            continue
        end = balanced_end(text, m.start())
        covered.append((m.start(), end))
        yield "bare", text[m.start() : end]
