"""Candidate sets of in/out shardings per second, and annotations (annotated values) per second,
on a ~1k-op transformer step (7 layers), on 1 and 2 threads (issue 5, Batch), two ways:

* ``propagate_many(module, candidates)``: one call, preparing the program included (copy,
  import passes, freezing, the unannotated solve);
* ``CandidateBatch``: the later calls of a prepared batch, as a search loop makes them, each
  round (ten rounds) with 200 candidate sets not seen before (one warm-up call first).

Each candidate annotates three arguments with random shardings (one in ten removes the stored
sharding instead); results are checked against one-by-one propagation in
tests/python/test_propagate_many.py and tests/python/test_propagate_replay.py.

    pip install -e '.[bench]' && pytest benches/bench_propagate_many.py -p no:cacheprovider
"""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import shardwise
from bench_report import CANDIDATES, SMOKE
from shardwise.importers.mlir import load_mlir
from shardwise.testing.programs import random_candidates, transformer_step

#: Layers of the transformer step and candidate sets per call (smaller in a smoke run).
LAYERS, CANDIDATE_SETS = (2, 20) if SMOKE else (7, 200)

_MODULE: list[Any] = []


def _module() -> Any:
    if not _MODULE:
        _MODULE.append(load_mlir(transformer_step(LAYERS)))
    return _MODULE[0]


@pytest.mark.parametrize("threads", [1, 2])
def test_candidates_per_second(benchmark: Any, threads: int) -> None:
    m = _module()
    cands = random_candidates(m, CANDIDATE_SETS, seed=7)
    results = benchmark.pedantic(
        shardwise.propagate_many, args=(m, cands), kwargs={"threads": threads}, rounds=3, iterations=1
    )
    assert results.batched
    _record("propagate_many", threads, m, cands, benchmark.stats.stats.min)


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_candidates_per_second(benchmark: Any, threads: int) -> None:
    m = _module()
    batch = shardwise.CandidateBatch(m)
    assert batch.propagate(random_candidates(m, CANDIDATE_SETS, seed=100), threads=threads).batched
    seeds = iter(range(1000, 2000))
    drawn: list[Any] = []

    def fresh() -> tuple[tuple[Any, ...], dict[str, Any]]:
        drawn.append(random_candidates(m, CANDIDATE_SETS, seed=next(seeds)))
        return (drawn[-1],), {"threads": threads}

    results = benchmark.pedantic(batch.propagate, setup=fresh, rounds=10, iterations=1)
    assert results.batched
    _record("CandidateBatch", threads, m, drawn[-1], benchmark.stats.stats.min)


def _record(call: str, threads: int, m: Any, cands: list[Any], seconds: float) -> None:
    annotations = sum(len(c) for c in cands)
    CANDIDATES[(call, threads)] = {
        "ops": sum(1 for _ in m.walk()),
        "candidates": len(cands),
        "annotations": annotations,
        "seconds": seconds,
        "per_second": len(cands) / seconds,
        "annotations_per_second": annotations / seconds,
    }
