"""``shardwise launch``: partitioned programs on 2, 4 and 8 MPI ranks (Builder programs and dev
conformance programs) checked against the unpartitioned program, results bit-equal to the
in-process simulator's; a failing or hung rank ends the job within seconds with its traceback
and leaves no process behind; a wrong ``-n`` is a clear error."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from corpus import conformance_dir

pytest.importorskip("mpi4py", reason="the MPI tests need mpi4py and mpich (pip install -e '.[test]')")
pytest.importorskip("array_api_compat")

from shardwise import Builder, Mesh, load_mlir, partition
from shardwise.cli import main
from shardwise.errors import ShardwiseError
from shardwise.ir.core import Module
from shardwise.spmd.launch import LaunchError, LaunchTimeout, launch, run_job


def _leftovers(marker: str) -> list[str]:
    """Command lines of live processes mentioning ``marker`` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found


def _mlp(mesh: dict[str, int]) -> Module:
    """A two-layer MLP: batch on the first axis, Megatron column/row split on the last."""
    b = Builder(Mesh(mesh))
    first, last = next(iter(mesh)), list(mesh)[-1]
    x = b.arg((16, 24), sharding=b.sharding([[first], None]))
    w1 = b.arg((24, 32), sharding=b.sharding([None, [last]]))
    w2 = b.arg((32, 8), sharding=b.sharding([[last], None]))
    h = b.tanh(b.dot_general(x, w1, contracting=((1,), (0,))))
    y = b.dot_general(h, w2, contracting=((1,), (0,)))
    return b.ret(b.reduce(y, dims=(1,), kind="sum"))


def _check_equals_simulator(outdir: Path, n: int) -> None:
    from shardwise.execute.simulator import simulate
    from shardwise.spmd.load import load_global, load_partition

    res = launch(outdir, n, check=True, timeout=120, keep_outputs=True)
    assert res.checks is not None and res.passed, res.checks
    assert len(res.seconds) == n and all(s > 0 for s in res.seconds)
    from shardwise.execute.inputs import random_inputs
    from shardwise.spmd.partition.check import shard_inputs

    g = load_global(outdir)
    ranks = [load_partition(outdir, r)[0] for r in range(n)]
    sim = simulate(ranks, shard_inputs(g, random_inputs(g.func("main"), 0), n))
    assert res.outputs is not None
    for r in range(n):
        for got, want in zip(res.outputs[r], sim.outputs[r], strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), f"rank {r} differs from the simulator"
        assert res.collectives[r] == sim.collectives[r]


@pytest.mark.parametrize("mesh", [{"x": 2}, {"x": 2, "y": 2}, {"x": 2, "y": 4}], ids=["2", "4", "8"])
def test_builder_mlp_on_mpi_ranks(tmp_path: Path, mesh: dict[str, int]) -> None:
    part = partition(_mlp(mesh), tmp_path / "p")
    assert part.collectives, "the MLP needs collectives"
    _check_equals_simulator(tmp_path / "p", part.mesh.size)


_DEV = ["mlp_tp_megatron", "attention_causal_seq_sharded", "transformer_block_fwd_3axis"]


@pytest.mark.corpus
@pytest.mark.parametrize("name", _DEV)
def test_dev_program_on_8_mpi_ranks(tmp_path: Path, name: str) -> None:
    root = conformance_dir()
    if root is None or not (root / "dev" / f"{name}.out.mlir").is_file():
        pytest.skip("../shared/conformance is absent (set SHARDWISE_CONFORMANCE to point at it)")
    part = partition(load_mlir(root / "dev" / f"{name}.out.mlir"), tmp_path / "p")
    assert part.mesh.size == 8
    _check_equals_simulator(tmp_path / "p", 8)


def test_cli_launch_check_and_wrong_n(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partition(_mlp({"x": 2, "y": 2}), tmp_path / "p")
    assert main(["launch", "-n", "4", str(tmp_path / "p"), "--check", "--timeout", "120"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps lines
    assert "4 MPI ranks vs the unpartitioned program" in out and "PASS" in out and "4 ranks (mpi)" in out
    assert main(["launch", "-n", "8", str(tmp_path / "p")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "launch -n 8: the partition in" in err and "has 4 ranks" in err and "pass -n 4" in err
    with pytest.raises(ShardwiseError, match="not a partition directory"):
        launch(tmp_path, 4)
    with pytest.raises(ShardwiseError, match="unknown backend 'gloo'"):
        launch(tmp_path / "p", 4, backend="gloo")
    assert not _leftovers(str(tmp_path))


def test_failing_rank_ends_the_job_with_its_traceback(tmp_path: Path) -> None:
    outdir = tmp_path / "p"
    partition(_mlp({"x": 2, "y": 2}), outdir)
    (outdir / "rank2.mlir").write_text("this is not MLIR")
    t = time.monotonic()
    with pytest.raises(LaunchError) as info:
        launch(outdir, 4, check=True, timeout=120)
    assert time.monotonic() - t < 60
    e = info.value
    assert e.rank == 2 and e.returncode not in (0, None)
    assert "rank 2 failed" in str(e) and "Traceback" in str(e) and "cannot parse MLIR" in str(e)
    assert not _leftovers(str(tmp_path))


def test_hung_rank_is_killed_at_the_timeout(tmp_path: Path) -> None:
    marker = str(tmp_path / "hang-marker")
    code = f"import time; from mpi4py import MPI; MPI.COMM_WORLD.Get_rank() == 1 and time.sleep(300); MPI.COMM_WORLD.Barrier()  # {marker}"
    t = time.monotonic()
    with pytest.raises(LaunchTimeout, match="ran past its timeout of 2 s"):
        run_job(3, ["-c", code], timeout=2)
    assert time.monotonic() - t < 30
    assert not _leftovers(marker)


def test_raising_rank_in_a_plain_job(tmp_path: Path) -> None:
    """``python -m mpi4py`` aborts the job on an uncaught exception (no hang at the barrier)."""
    marker = str(tmp_path / "raise-marker")
    code = (
        f"from mpi4py import MPI; r = MPI.COMM_WORLD.Get_rank(); r == 0 and 1 / 0; MPI.COMM_WORLD.Barrier()  # {marker}"
    )
    with pytest.raises(LaunchError, match="ZeroDivisionError") as info:
        run_job(2, ["-c", code], timeout=60)
    assert not isinstance(info.value, LaunchTimeout)
    assert not _leftovers(marker)


def test_ranks_refuse_a_job_of_the_wrong_size(tmp_path: Path) -> None:
    """mpiexec started by hand with the wrong -n: every rank reports the mismatch."""
    partition(_mlp({"x": 2, "y": 2}), tmp_path / "p")
    with pytest.raises(LaunchError, match=r"has 4 ranks but the MPI job has 2; run with -n 4") as info:
        run_job(2, ["-m", "shardwise.spmd.launch", str(tmp_path / "p")], timeout=60)
    assert info.value.rank in (0, 1)
    assert not _leftovers(str(tmp_path))
