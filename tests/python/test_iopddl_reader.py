"""The native IOPDDL reader (``rust/src/search/iopddl.rs``) against the Python reader it
stands in front of: it reads what the Python reader reads into the same arrays, and refuses
(hands back to the Python reader, which names the fault) everything else."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from shardwise import _native
from shardwise.errors import SearchError
from shardwise.search import read_instance
from shardwise.search.graph import StrategyGraph
from shardwise.search.iopddl import parse_instance
from shardwise.search.local import native_graph, solve_local
from shardwise.testing.iopddl import EXAMPLE

IOPDDL = Path(__file__).resolve().parents[3] / "shared" / "iopddl"
ARRAYS = ("offsets", "cost", "usage", "intervals", "edges", "edge_offsets", "edge_cost")


def python_read(text: bytes) -> StrategyGraph:
    return parse_instance(json.loads(text))


def assert_same(a: StrategyGraph, b: StrategyGraph) -> None:
    for k in ARRAYS:
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype == np.int64 and x.shape == y.shape and np.array_equal(x, y), k
    assert (a.usage_limit, a.name) == (b.usage_limit, b.name)


def test_the_example_reads_natively_into_the_python_readers_arrays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = json.dumps(EXAMPLE).encode()
    assert _native.read_iopddl(text) is not None
    p = tmp_path / "example.json"
    p.write_bytes(text)
    g = read_instance(p)
    reference = python_read(text)
    assert_same(g, reference)
    assert solve_local(g, 1.0, seed=1).cost == solve_local(reference, 1.0, seed=1).cost
    # The reader's Rust copy is the one the searches use: the graph is not converted again.
    from shardwise.search import local

    def refuse(*args: object) -> None:
        raise AssertionError("converted again")

    monkeypatch.setattr(local._native, "StrategyGraph", refuse)
    fresh = read_instance(p)
    assert native_graph(fresh).num_nodes == fresh.num_nodes
    with pytest.raises(AssertionError, match="converted again"):
        native_graph(python_read(text))


def mutations(text: str, rng: random.Random) -> list[str]:
    """Texts one edit away from ``text``: a number or a bracket changed, dropped or doubled,
    a key renamed, a value replaced by another JSON value."""
    tokens = [
        "-1",
        "0",
        "1",
        "2",
        "2.0",
        "1e3",
        "true",
        "null",
        '"x"',
        "[]",
        "[0]",
        "[[0, 1]]",
        "9223372036854775808",
        "{}",
    ]
    out = []
    spans = [i for i, c in enumerate(text) if c in '0123456789[]{},":']
    for _ in range(400):
        i = rng.choice(spans)
        j = i + 1
        while j < len(text) and text[j].isdigit() and text[i].isdigit():
            j += 1
        edit = rng.randrange(3)
        if edit == 0:
            out.append(text[:i] + text[j:])
        elif edit == 1:
            out.append(text[:i] + rng.choice(tokens) + text[j:])
        else:
            out.append(text[:i] + text[i:j] + text[i:j] + text[j:])
    for key in ("problem", "nodes", "edges", "intervals", "costs", "usages", "usage_limit", "name"):
        out.append(text.replace(f'"{key}"', f'"{key}x"', 1))
    return out


def test_mutated_instances_read_natively_only_where_the_python_reader_agrees() -> None:
    """Every text the native reader accepts, the Python reader reads into the same graph;
    every one it refuses, the Python reader refuses with a named ``SearchError`` (or reads:
    the native reader may be stricter, never looser)."""
    rng = random.Random(27)
    base = json.dumps(EXAMPLE)
    accepted = refused = 0
    for text in mutations(base, rng):
        raw = text.encode()
        found = _native.read_iopddl(raw)
        try:
            reference = python_read(raw)
        except (SearchError, json.JSONDecodeError, RecursionError):
            reference = None
        if found is None:
            refused += 1
            continue
        accepted += 1
        assert reference is not None, text
        g = StrategyGraph(
            **{k: np.frombuffer(getattr(found, k), dtype="<i8") for k in ARRAYS},
            usage_limit=found.graph.usage_limit,
            name=found.name,
        )
        for k in ("intervals", "edges"):
            object.__setattr__(g, k, getattr(g, k).reshape(-1, 2))
        assert_same(g, reference)
    assert accepted > 20 and refused > 100, (accepted, refused)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"problem": {"nodes": {}}}', 'expected key "problem.edges"'),
        ("{nope", "not a JSON IOPDDL instance"),
        (json.dumps(EXAMPLE).replace('"usage_limit": ', '"usage_limit": -'), "usage_limit: expected an int64 >= 0"),
        (json.dumps(EXAMPLE).replace("[[", "[[1.5, ", 1), "must hold integers"),
    ],
)
def test_what_the_native_reader_refuses_is_named_by_the_python_reader(tmp_path: Path, text: str, message: str) -> None:
    assert _native.read_iopddl(text.encode()) is None
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(SearchError, match=message):
        read_instance(p)


@pytest.mark.skipif(not (IOPDDL / "best_known.csv").exists(), reason="needs ../shared/iopddl")
def test_shared_instances_read_natively_as_the_python_reader_reads_them() -> None:
    import gzip

    for name in ("asplos-2025-iopddl-B.json.gz", "asplos-2025-iopddl-G.json.gz", "asplos-2025-iopddl-V.json.gz"):
        raw = gzip.decompress((IOPDDL / name).read_bytes())
        assert _native.read_iopddl(raw) is not None
        assert_same(read_instance(IOPDDL / name), python_read(raw))
