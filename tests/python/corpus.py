"""The conformance corpus in pytest: a skip, or a skipped parameter, that says why when it is
absent. Finding and reading it is ``shardwise.testing.corpus``."""

from __future__ import annotations

from pathlib import Path

import pytest
from shardwise.testing.corpus import balanced_end, conformance_dir, corpus_files, extract

__all__ = ["balanced_end", "conformance_dir", "corpus_files", "corpus_params", "extract", "require_corpus"]


def require_corpus() -> Path:
    path = conformance_dir()
    if path is None:
        pytest.skip("../shared/conformance is absent (set SHARDWISE_CONFORMANCE to point at it)")
    return path


def corpus_params(paths: list[Path]) -> list[object]:
    """``paths`` as pytest parameters with readable ids, or one skipped parameter that says why
    when the corpus is absent."""
    if not paths:
        return [
            pytest.param(
                None,
                marks=pytest.mark.skip(
                    reason="../shared/conformance is absent (set SHARDWISE_CONFORMANCE to point at it)"
                ),
            )
        ]
    return [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in paths]
