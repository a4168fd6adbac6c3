"""Every dev conformance program partitioned from Shardy's propagated output (``*.out.mlir``)
and from shardwise's own propagation of ``*.in.mlir``: every rank simulated, every result
block equal to the unpartitioned program's (float32 rel. error <= 1e-5, integers exact)."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus import conformance_dir, corpus_params

pytest.importorskip("array_api_compat")


def _dev(suffix: str) -> list[Path]:
    root = conformance_dir()
    return sorted((root / "dev").glob(f"*{suffix}")) if root is not None and (root / "dev").is_dir() else []


@pytest.mark.parametrize("path", corpus_params(_dev(".out.mlir") + _dev(".in.mlir")))
def test_dev_program_partitions_and_simulates_exactly(path: Path) -> None:
    from shardwise import check_partition, load_mlir, partition

    module = load_mlir(path)
    part = partition(module, propagate=path.name.endswith(".in.mlir"))
    res = check_partition(module, part.global_module, part.ranks, seed=0)
    assert res.passed, [(o.index, o.max_abs, o.max_rel) for o in res.outputs if not o.passed]
