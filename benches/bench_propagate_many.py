"""``shardwise.propagate_many``: candidate sets of in/out shardings per second, and annotations
(annotated values) per second, on a ~1k-op transformer step (7 layers), on 1 and 2 threads
(issue 5, Batch). Each candidate annotates three arguments with random shardings (one in ten
removes the stored sharding instead); results are checked against one-by-one propagation
in tests/python/test_propagate_many.py and tests/python/test_propagate_replay.py.

    pip install -e '.[bench]' && pytest benches/bench_propagate_many.py -p no:cacheprovider
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from programs import transformer_step  # noqa: E402
from test_propagate_many import _candidates  # noqa: E402

import shardwise  # noqa: E402
from shardwise.importers.mlir import load_mlir  # noqa: E402

from bench_report import CANDIDATES  # noqa: E402

_MODULE: list[Any] = []


def _module() -> Any:
    if not _MODULE:
        _MODULE.append(load_mlir(transformer_step(7)))
    return _MODULE[0]


@pytest.mark.parametrize("threads", [1, 2])
def test_candidates_per_second(benchmark: Any, threads: int) -> None:
    m = _module()
    cands = _candidates(m, 200, seed=7)
    results = benchmark.pedantic(shardwise.propagate_many, args=(m, cands), kwargs={"threads": threads}, rounds=3, iterations=1)
    assert results.batched
    seconds = benchmark.stats.stats.min
    annotations = sum(len(c) for c in cands)
    CANDIDATES[threads] = {
        "ops": sum(1 for _ in m.walk()),
        "candidates": len(cands),
        "annotations": annotations,
        "seconds": seconds,
        "per_second": len(cands) / seconds,
        "annotations_per_second": annotations / seconds,
    }
