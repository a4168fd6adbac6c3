"""NcclCommunicator (CuPy + NCCL, one GPU per MPI rank) against ThreadCommunicator on the same
inputs: data movement (all-gather, all-to-all, collective-permute) and integer/boolean
reductions bit-equal, float reductions within rounding (GPU arithmetic may contract to FMA);
``shardwise launch --backend nccl --check`` on a Builder MLP. Skipped without CuPy or a GPU;
NCCL allows one rank per GPU, so the jobs use as many ranks as there are GPUs (at most 8).

This file is also the MPI job: ``python -m mpi4py test_nccl.py OUT.pickle``."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_mpi_comm import cases, make_input


def _nccl_cases(n: int) -> list[Any]:
    return [c for c in cases(n) if "bfloat16" not in c[0]]  # CuPy has no bfloat16


def _job(out: str) -> None:
    from mpi4py import MPI
    from shardwise.execute.nccl import NcclCommunicator, import_cupy

    cp = import_cupy()
    world = MPI.COMM_WORLD
    comm = NcclCommunicator(world)
    r, n = comm.rank, comm.size
    res = {
        name: cp.asnumpy(f(comm, cp.asarray(make_input(name, r, dtype, shape)), r))
        for name, _, dtype, shape, f in _nccl_cases(n)
    }
    rows = world.gather(res, root=0)
    if r == 0:
        Path(out).write_bytes(pickle.dumps(rows))


if __name__ == "__main__":
    _job(sys.argv[1])
    sys.exit(0)


def _gpus() -> int:
    from shardwise.execute.nccl import gpu_count

    return gpu_count()


pytestmark = [
    pytest.mark.skipif(
        _gpus() == 0, reason="NCCL tests need CuPy (pip install 'shardwise[cuda]') and a CUDA GPU; none here"
    ),
]
pytest.importorskip("mpi4py", reason="the NCCL backend is bootstrapped over MPI (mpi4py and mpich)")


def test_nccl_collectives_match_the_simulator(tmp_path: Path) -> None:
    import array_api_compat.numpy as xp
    from shardwise.execute.simulator import run_ranks
    from shardwise.spmd.launch import run_job

    n = min(_gpus(), 8)
    out = tmp_path / "nccl.pickle"
    run_job(n, [str(Path(__file__)), str(out)], timeout=300)
    got: list[dict[str, np.ndarray]] = pickle.loads(out.read_bytes())
    want, _ = run_ranks(
        n,
        lambda rank, comm: [
            {
                name: np.asarray(f(comm, make_input(name, rank, dtype, shape), rank))
                for name, _, dtype, shape, f in _nccl_cases(n)
            }
        ],
        xp,
    )
    for r in range(n):
        for name, _, dtype, _, _ in _nccl_cases(n):
            a, b = got[r][name], want[r][0][name]
            assert a.dtype == b.dtype and a.shape == b.shape, name
            if np.dtype(dtype).kind in "fc" and name.startswith(("all_reduce", "reduce_scatter")):
                scale = max(float(np.abs(b.astype(np.complex128)).max()), 1.0)
                assert (
                    np.abs(a.astype(np.complex128) - b.astype(np.complex128)).max()
                    <= 16 * n * np.finfo(a.dtype).eps * scale
                ), name
            else:
                assert a.tobytes() == b.tobytes(), f"rank {r}: {name}"


def test_launch_nccl_check(tmp_path: Path) -> None:
    from shardwise import Builder, Mesh, partition
    from shardwise.spmd.launch import launch

    n = min(_gpus(), 8)
    b = Builder(Mesh({"x": n}))
    x = b.arg((8 * n, 16), sharding=b.sharding([["x"], None]))
    w = b.arg((16, 4 * n), sharding=b.sharding([None, ["x"]]))
    y = b.tanh(b.dot_general(x, w, contracting=((1,), (0,))))
    partition(b.ret(b.reduce(y, dims=(1,), kind="sum"), shardings=[b.sharding([None])]), tmp_path / "p")
    res = launch(tmp_path / "p", n, backend="nccl", check=True, timeout=300)
    assert res.passed, res.checks
