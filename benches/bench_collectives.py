"""Collectives per backend and the demo program end to end, on 8 ranks (issue 7).

* Each collective (all-gather, all-reduce, reduce-scatter, all-to-all, collective-permute on a
  ring) on float32 tensors of 1 MiB and 64 MiB: the full tensor per rank is that size (all-gather
  gathers 1/8 of it from each rank). Backends: the in-process simulator (``ThreadCommunicator``,
  8 threads; pytest-benchmark times ``run_ranks``), MPI (``MpiCommunicator`` with ordered and
  with MPI's own reductions: timed inside the ``mpiexec -n 8`` job, between barriers, slowest
  rank, fastest of several repetitions; this file is that job), NCCL when a GPU is present.
  Bytes are the model volumes per rank (``collective_bytes``).
* ``shardwise/examples/transformer_step.mlir`` partitioned on its mesh: the simulator
  (``simulate``) against ``launch`` on 8 MPI ranks (run time between barriers, fastest of 3).

Run: ``pytest benches/bench_collectives.py`` (needs the bench extra). The table is printed and
written to ``benches/results/collectives.{md,json}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from shardwise.files import write_atomic

MIB = 1 << 20
SIZES = (
    {"64KiB": MIB // 16}
    if os.environ.get("SHARDWISE_BENCH_SMOKE", "") not in ("", "0")
    else {"1MiB": MIB, "64MiB": 64 * MIB}
)
KINDS = ("all_gather", "all_reduce", "reduce_scatter", "all_to_all", "collective_permute")
RANKS = 8
REPEATS = {"64KiB": 2, "1MiB": 20, "64MiB": 3}


def collective(comm: Any, kind: str, x: Any, n: int) -> Any:
    """One ``kind`` collective over all ``n`` ranks on ``x`` (a 1-D float32 tensor)."""
    group = tuple(range(n))
    if kind == "all_gather":
        return comm.all_gather(x, group, 0)
    if kind == "all_reduce":
        return comm.all_reduce(x, group, "add")
    if kind == "reduce_scatter":
        return comm.reduce_scatter(x, group, 0, "add")
    if kind == "all_to_all":
        return comm.all_to_all(x, group, 0, 0)
    return comm.collective_permute(x, [(i, (i + 1) % n) for i in range(n)])


def local_input(kind: str, nbytes: int, rank: int, n: int, xp: Any = np) -> Any:
    """The local float32 input: ``nbytes`` in all, ``nbytes / n`` for all-gather."""
    count = nbytes // 4 // (n if kind == "all_gather" else 1)
    return xp.full((count,), float(rank + 1), dtype=xp.float32)


def model_bytes(kind: str, nbytes: int, n: int) -> int:
    from shardwise.execute.mpi import collective_bytes

    local = nbytes // n if kind == "all_gather" else nbytes
    return collective_bytes(kind, n, local, sends=1, receives=True)[0]


# ---------------------------------------------------------------------------------------------
# The MPI (or NCCL) job: python -m mpi4py bench_collectives.py OUT.json mpi|nccl


def _job(out: str, backend: str) -> None:
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    n = world.Get_size()
    xp: Any = np
    comms: dict[str, Any] = {}
    if backend == "nccl":
        from shardwise.execute.nccl import NcclCommunicator, import_cupy

        xp = import_cupy()
        comms = {"nccl ordered": NcclCommunicator(world), "nccl native": NcclCommunicator(world, reductions="nccl")}
    else:
        from shardwise.execute.mpi import MpiCommunicator

        comms = {"mpi ordered": MpiCommunicator(world), "mpi native": MpiCommunicator(world, reductions="mpi")}
    rows = []
    for size_name, nbytes in SIZES.items():
        for kind in KINDS:
            for name, comm in comms.items():
                if name.endswith("native") and kind not in ("all_reduce", "reduce_scatter"):
                    continue  # the reduction mode only changes reductions
                x = local_input(kind, nbytes, world.Get_rank(), n, xp)
                collective(comm, kind, x, n)  # warm-up: sub-communicators, connections
                best = float("inf")
                for _ in range(REPEATS[size_name]):
                    comm.barrier()
                    t = time.perf_counter()
                    collective(comm, kind, x, n)
                    comm.barrier()
                    best = min(best, world.allreduce(time.perf_counter() - t, op=MPI.MAX))
                del x
                rows.append(
                    {
                        "backend": name,
                        "kind": kind,
                        "size": size_name,
                        "seconds": best,
                        "bytes": model_bytes(kind, nbytes, n),
                    }
                )
    if world.Get_rank() == 0:
        Path(out).write_text(json.dumps(rows))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    _job(sys.argv[1], sys.argv[2])
    sys.exit(0)


# ---------------------------------------------------------------------------------------------
# pytest-benchmark side

import pytest

#: (backend, kind, size) -> {"seconds", "bytes"}; printed and written by test_zz_report
ROWS: dict[tuple[str, str, str], dict[str, Any]] = {}
E2E: dict[str, float] = {}
OUT = Path(os.environ.get("SHARDWISE_BENCH_OUT", Path(__file__).resolve().parent / "results"))


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("kind", KINDS)
def test_simulator_collective(benchmark: Any, kind: str, size: str) -> None:
    import array_api_compat.numpy as xp
    from shardwise.execute.simulator import run_ranks

    nbytes = SIZES[size]
    inputs = [local_input(kind, nbytes, r, RANKS) for r in range(RANKS)]

    def once() -> None:
        run_ranks(RANKS, lambda rank, comm: [collective(comm, kind, inputs[rank], RANKS)], xp)

    benchmark.pedantic(once, rounds=REPEATS[size] if size == "1MiB" else 2, iterations=1, warmup_rounds=1)
    ROWS[("simulator", kind, size)] = {"seconds": benchmark.stats.stats.min, "bytes": model_bytes(kind, nbytes, RANKS)}
    benchmark.extra_info["bytes_per_rank"] = model_bytes(kind, nbytes, RANKS)


@pytest.mark.parametrize("backend", ["mpi", "nccl"])
def test_job_collectives(benchmark: Any, backend: str, tmp_path: Path) -> None:
    """One mpiexec job times every collective inside; the benchmark is the job's wall time
    (start-up included); the per-collective times go to the report."""
    pytest.importorskip("mpi4py")
    from shardwise.spmd.launch import run_job

    if backend == "nccl":
        from shardwise.execute.nccl import gpu_count

        if gpu_count() < 2:
            pytest.skip("NCCL benchmarks need CuPy and at least 2 GPUs (one rank per GPU)")
    ranks = (
        RANKS
        if backend == "mpi"
        else min(RANKS, __import__("shardwise.execute.nccl", fromlist=["gpu_count"]).gpu_count())
    )
    out = tmp_path / "rows.json"
    benchmark.pedantic(
        run_job, args=(ranks, [__file__, str(out), backend]), kwargs={"timeout": 600}, rounds=1, iterations=1
    )
    for row in json.loads(out.read_text()):
        ROWS[(row["backend"], row["kind"], row["size"])] = {"seconds": row["seconds"], "bytes": row["bytes"]}
    benchmark.extra_info["rows"] = json.loads(out.read_text())


def _demo_partition(tmp: Path) -> Path:
    from importlib.resources import files

    from shardwise import load_mlir, partition

    module = load_mlir(files("shardwise.examples").joinpath("transformer_step.mlir").read_text())
    partition(module, tmp / "demo")
    return tmp / "demo"


def test_demo_end_to_end_simulator(benchmark: Any, tmp_path: Path) -> None:
    from shardwise.execute.inputs import random_inputs
    from shardwise.execute.simulator import simulate
    from shardwise.spmd.load import load_global, load_meta, load_partition
    from shardwise.spmd.partition.check import shard_inputs

    outdir = _demo_partition(tmp_path)
    n = load_meta(outdir)["num_ranks"]
    g = load_global(outdir)
    ranks = [load_partition(outdir, r)[0] for r in range(n)]
    local = shard_inputs(g, random_inputs(g.func("main"), 0), n)
    benchmark.pedantic(simulate, args=(ranks, local), rounds=3, iterations=1, warmup_rounds=1)
    E2E[f"simulator ({n} threads)"] = benchmark.stats.stats.min


def test_demo_end_to_end_mpi(benchmark: Any, tmp_path: Path) -> None:
    pytest.importorskip("mpi4py")
    from shardwise.spmd.launch import launch

    outdir = _demo_partition(tmp_path)
    res = benchmark.pedantic(
        launch, args=(outdir, 8), kwargs={"repeat": 4, "check": True, "timeout": 600}, rounds=1, iterations=1
    )
    assert res.passed
    E2E["mpi (8 ranks), run between barriers"] = max(res.seconds)
    E2E["mpi (8 ranks), whole job incl. start-up and check"] = res.wall_seconds
    benchmark.extra_info["run_seconds"] = res.seconds


def test_zz_report() -> None:
    """Prints the table of every measured row and writes it (Markdown and JSON) atomically."""
    if not ROWS and not E2E:
        pytest.skip("no benchmark ran")
    lines = [
        "| backend | collective | tensor | time (ms) | bytes sent per rank | GB/s per rank |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for (backend, kind, size), r in sorted(ROWS.items(), key=lambda kv: (kv[0][2], kv[0][1], kv[0][0])):
        rate = r["bytes"] / r["seconds"] / 1e9 if r["seconds"] > 0 else float("nan")
        lines.append(f"| {backend} | {kind} | {size} | {r['seconds'] * 1e3:.3f} | {r['bytes']} | {rate:.2f} |")
    lines += ["", "| demo program (transformer_step.mlir) | seconds |", "|---|---:|"]
    lines += [f"| {k} | {v:.4f} |" for k, v in E2E.items()]
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in (
        ("collectives.md", text),
        (
            "collectives.json",
            json.dumps(
                {
                    "collectives": [{"backend": b, "kind": k, "size": s, **r} for (b, k, s), r in ROWS.items()],
                    "end_to_end": E2E,
                },
                indent=1,
            ),
        ),
    ):
        write_atomic(OUT / name, data)
