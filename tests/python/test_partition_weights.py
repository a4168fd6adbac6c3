"""The hidet workflow end to end (issue 26; the hidet RFC's ``partition(g, config, out_dir)``
and ``load_partition(out_dir, rank)``): one call searches, partitions and saves each rank's
weight shards; ``load_partition`` brings a rank up with them; ``run`` and ``launch`` feed them
to the programs and check against the unpartitioned program on the same values."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import shardwise as sw
from shardwise.cli import main
from shardwise.errors import ProgramError, SearchError, ShardwiseError
from shardwise.execute.interpreter import run
from shardwise.ir.core import Module
from shardwise.spmd.load import (
    check_outdir,
    global_weights,
    load_global,
    simulate_outdir,
    unpartitioned,
)
from shardwise.spmd.partition.check import compare_outputs
from shardwise.testing.auto_programs import mlp

MESH = {"data": 2, "model": 4}
#: Replicated w1 and w2 take 64 KiB each: 44 KB per device forces both to be split 4 ways.
BUDGET = 44_000


def _weights(seed: int = 1) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        1: rng.standard_normal((64, 256)).astype(np.float32),
        2: rng.standard_normal((256, 64)).astype(np.float32),
    }


@pytest.fixture(scope="module")
def searched(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, sw.Partition, dict[int, np.ndarray]]:
    """One search + partition with weights (given by index and by ``arg{i}`` name)."""
    out = tmp_path_factory.mktemp("weights") / "p"
    w = _weights()
    part = sw.partition(
        mlp(),
        out,
        mesh=MESH,
        search=True,
        memory_budget=BUDGET,
        time_limit=5,
        weights={1: w[1], "arg2": w[2]},
    )
    return out, part, w


def test_one_call_searches_partitions_and_writes_the_weights(
    searched: tuple[Path, sw.Partition, dict[int, np.ndarray]],
) -> None:
    out, part, _ = searched
    rep = part.search_report
    assert rep is not None and rep.feasible and rep.peak_memory <= BUDGET
    meta = json.loads((out / "meta.json").read_text())
    assert (
        meta["search"]["feasible"] and meta["search"]["memory_budget"] == BUDGET and meta["search"]["method"] == "ilp"
    )
    assert meta["search"]["comm_bytes"] == rep.comm_bytes and meta["search"]["peak_memory"] == rep.peak_memory
    assert meta["weights"] == {"args": [1, 2], "path": "weights/rank{rank}.npz"}
    assert sorted(p.name for p in (out / "weights").iterdir()) == [f"rank{r}.npz" for r in range(8)]
    # The budget splits both weights 4 ways: each rank holds a quarter.
    assert meta["arguments"][1]["local_shape"] == [64, 64] and meta["arguments"][2]["local_shape"] == [64, 64]
    assert set(part.weights) == {1, 2}


def test_load_partition_returns_each_ranks_shards_which_reassemble(
    searched: tuple[Path, sw.Partition, dict[int, np.ndarray]],
) -> None:
    out, _, w = searched
    g = load_global(out)
    f = g.func("main")
    for r in range(8):
        _, meta, shards = sw.load_partition(out, r)
        assert set(shards) == {1, 2}
        for i, a in shards.items():
            assert list(a.shape) == meta["arguments"][i]["local_shape"] and a.dtype == np.float32
            s = f.args[i].sharding
            assert s is not None
            np.testing.assert_array_equal(a, w[i][s.device_slices(w[i].shape, r, meshes=g.meshes)])
    back = global_weights(out)
    assert set(back) == {1, 2}
    for i in (1, 2):
        np.testing.assert_array_equal(back[i], w[i])


def test_run_feeds_the_weights_and_matches_the_unpartitioned_program(
    searched: tuple[Path, sw.Partition, dict[int, np.ndarray]],
) -> None:
    out, _, w = searched
    res = check_outdir(out, seed=3)
    assert res.passed, res.outputs
    # The simulated ranks computed with the given weights (x random from the seed): the same
    # answer as the unpartitioned program on those weights, computed here independently.
    from shardwise.execute.inputs import random_inputs

    g = load_global(out)
    x = np.asarray(random_inputs(g.func("main"), 3)[0])
    ref = run(unpartitioned(g), [x, w[1], w[2]])
    np.testing.assert_allclose(np.asarray(ref[0]), np.tanh(x @ w[1]) @ w[2], rtol=1e-4, atol=1e-4)
    sim = simulate_outdir(out, seed=3)
    checks = compare_outputs(g, ref, sim.outputs)
    assert all(c.passed for c in checks), checks
    # Other weights give other results: the saved ones were used, not random ones.
    other = run(unpartitioned(g), [x, w[1] * 2, w[2]])
    assert not all(c.passed for c in compare_outputs(g, other, sim.outputs))


def test_cli_run_check_uses_the_weights(
    searched: tuple[Path, sw.Partition, dict[int, np.ndarray]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    out, _, _ = searched
    assert main(["run", str(out), "--check"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None or importlib.util.find_spec("array_api_compat") is None,
    reason="the MPI tests need mpi4py and mpich (pip install -e '.[test]')",
)
def test_launch_on_mpi_ranks_uses_the_weights(
    searched: tuple[Path, sw.Partition, dict[int, np.ndarray]],
) -> None:
    from shardwise.spmd.launch import launch

    out, _, _ = searched
    res = launch(out, 8, backend="mpi", check=True, timeout=180, keep_outputs=True)
    assert res.passed, res.checks
    sim = simulate_outdir(out, seed=0)
    assert res.outputs is not None
    for r in range(8):
        assert res.outputs[r][0].tobytes() == sim.outputs[r][0].tobytes(), f"rank {r} differs from the simulator"


def test_without_search_it_is_the_spmd_partitioner(tmp_path: Path) -> None:
    from shardwise.spmd.partition import partition as spmd_partition

    m, _ = sw.auto_shard(mlp(), MESH, memory_budget=BUDGET, time_limit=5)
    a = sw.partition(m, tmp_path / "a")
    b = spmd_partition(m, tmp_path / "b")
    assert a.search_report is None and "search" not in a.meta and "weights" not in a.meta
    assert a.meta == b.meta and [r.to_mlir() for r in a.ranks] == [r.to_mlir() for r in b.ranks]
    assert not (tmp_path / "a" / "weights").exists()
    with pytest.raises(SearchError, match="memory_budget only apply to a search"):
        sw.partition(m, memory_budget=BUDGET)


def test_bf16_weights_round_trip(tmp_path: Path) -> None:
    import ml_dtypes

    b = sw.Builder(sw.Mesh({"x": 2}))
    x = b.arg((4, 8), "bf16", sharding=b.sharding([None, ["x"]]))
    w = b.arg((8, 6), "bf16", sharding=b.sharding([["x"], None]))
    m = b.ret(b.dot_general(x, w, contracting=((1,), (0,))))
    wv = np.arange(48, dtype=np.float32).reshape(8, 6).astype(ml_dtypes.bfloat16)
    sw.partition(m, tmp_path / "p", weights={1: wv})
    _, _, shards = sw.load_partition(tmp_path / "p", 1)
    assert shards[1].dtype == wv.dtype and shards[1].tobytes() == wv[4:].tobytes()
    assert check_outdir(tmp_path / "p").passed


def _no_leftovers(parent: Path) -> None:
    assert list(parent.iterdir()) == [], f"partial output left: {list(parent.iterdir())}"


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        (
            {1: np.zeros((64, 255), np.float32)},
            r"weights for argument 1 \(1\): expected shape \[64, 256\] float32 \(f32\), got shape \[64, 255\] float32",
        ),
        (
            {"arg2": np.zeros((256, 64), np.float64)},
            r"weights for argument 2 \('arg2'\): expected shape \[256, 64\] float32 \(f32\), got shape \[256, 64\] float64",
        ),
        (
            {"w9": np.zeros(3)},
            r"weights for 'w9': @main has no such argument \(known: indices 0..2, arg0, arg1, arg2\)",
        ),
        ({3: np.zeros(3)}, r"weights for argument 3: @main has 3 arguments \(0..2\)"),
        (
            {
                1: np.zeros((64, 256), np.float32),
                "arg1": np.zeros((64, 256), np.float32),
            },
            r"weights name argument 1 twice \(as 1 and 'arg1'\)",
        ),
        (
            {1: "not an array"},
            r"weights for argument 1 \(1\): expected an array of shape \[64, 256\] f32, got str",
        ),
    ],
    ids=["shape", "dtype", "unknown-name", "unknown-index", "twice", "not-array"],
)
def test_bad_weights_are_one_line_errors_before_any_work(tmp_path: Path, weights: dict[Any, Any], match: str) -> None:
    out = tmp_path / "parent" / "p"
    out.parent.mkdir()
    with pytest.raises(ProgramError, match=match) as e:
        sw.partition(
            mlp(),
            out,
            mesh=MESH,
            search=True,
            memory_budget=BUDGET,
            time_limit=5,
            weights=weights,
        )
    assert "\n" not in str(e.value)
    _no_leftovers(out.parent)


def test_an_infeasible_plan_is_an_error_unless_allowed(tmp_path: Path) -> None:
    out = tmp_path / "parent" / "p"
    out.parent.mkdir()
    with pytest.raises(
        SearchError,
        match=r"memory budget 1,000 B per device is below [\d,]+ B, .* the smallest peak found is [\d,]+ B",
    ) as e:
        sw.partition(mlp(), out, mesh=MESH, method="local", memory_budget=1000, time_limit=0.5)
    assert "\n" not in str(e.value)
    _no_leftovers(out.parent)
    part = sw.partition(
        mlp(),
        out,
        mesh=MESH,
        method="local",
        memory_budget=1000,
        time_limit=0.5,
        allow_infeasible=True,
    )
    assert part.search_report is not None and not part.search_report.feasible
    assert json.loads((out / "meta.json").read_text())["search"]["feasible"] is False


def test_a_failure_while_writing_the_weights_leaves_no_partial_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "parent" / "p"
    out.parent.mkdir()
    calls = []
    real = np.savez

    def savez(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 3:  # two ranks' weights written, then the disk fills up
            raise OSError(28, "No space left on device")
        real(*args, **kwargs)

    monkeypatch.setattr(np, "savez", savez)
    with pytest.raises(OSError, match="No space left"):
        sw.partition(
            mlp(),
            out,
            mesh=MESH,
            search=True,
            memory_budget=BUDGET,
            time_limit=5,
            weights=_weights(),
        )
    _no_leftovers(out.parent)


def test_bad_weight_files_are_one_line_errors(
    searched: tuple[Path, sw.Partition, dict[int, np.ndarray]], tmp_path: Path
) -> None:
    import shutil

    src, _, _ = searched
    out = tmp_path / "p"
    shutil.copytree(src, out)
    (out / "weights" / "rank3.npz").write_bytes(b"not a zip file")
    with pytest.raises(ShardwiseError, match=r"rank3.npz: not a readable .npz of weights") as e:
        sw.load_partition(out, 3)
    assert "\n" not in str(e.value)
    np.savez(out / "weights" / "rank3.npz", arg1=np.zeros((64, 64), np.float32))
    with pytest.raises(ShardwiseError, match=r"rank3.npz: no array arg2"):
        sw.load_partition(out, 3)
    np.savez(
        out / "weights" / "rank3.npz",
        arg1=np.zeros((64, 64), np.float32),
        arg2=np.zeros((64, 63), np.float32),
    )
    with pytest.raises(
        ShardwiseError,
        match=r"arg2 has shape \[64, 63\] float32; meta.json says local shape \[64, 64\] f32",
    ):
        sw.load_partition(out, 3)
    np.savez(
        out / "weights" / "rank3.npz",
        arg1=np.array([{"a": 1}], dtype=object),
        arg2=np.zeros((64, 64), np.float32),
    )
    with pytest.raises(
        ShardwiseError,
        match=r"rank3.npz: not a readable .npz of weights \(.*allow_pickle",
    ):
        sw.load_partition(out, 3)
    (out / "weights" / "rank3.npz").unlink()
    with pytest.raises(ShardwiseError, match=r"weights/rank3.npz is missing"):
        sw.load_partition(out, 3)
    sw.load_partition(out, 2)  # the other ranks still load


def _module_file(tmp_path: Path) -> Path:
    src = tmp_path / "mlp.mlir"
    mlp().save(str(src))
    return src


def test_cli_partition_auto_with_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _module_file(tmp_path)
    w = _weights(seed=7)
    npz = tmp_path / "w.npz"
    np.savez(npz, arg1=w[1], arg2=w[2])
    out = tmp_path / "p"
    argv = [
        "partition",
        str(src),
        "-o",
        str(out),
        "--mesh",
        "data=2,model=4",
        "--auto",
        "--memory-budget",
        "44KB",
        "--time-limit",
        "5",
        "--weights",
        str(npz),
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "search (ilp" in printed and "weights/rank0..7.npz (arg1, arg2)" in printed
    back = global_weights(out)
    np.testing.assert_array_equal(back[1], w[1])
    np.testing.assert_array_equal(back[2], w[2])
    assert main(["run", str(out), "--check"]) == 0


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (
            ["--weights", "{npz_bad_shape}"],
            r"weights for argument 1 \('arg1'\): expected shape \[64, 256\] float32 \(f32\), got shape \[2, 2\] float32",
        ),
        (
            ["--weights", "{npz_unknown}"],
            r"weights for 'bias': @main has no such argument",
        ),
        (
            ["--weights", "{missing}"],
            r"--weights .*missing.npz: not a readable .npz of arrays",
        ),
        (
            ["--weights", "{npy}"],
            r"--weights .*w.npy: not a readable .npz of arrays \(a single .npy array",
        ),
        (
            ["--memory-budget", "44KB"],
            r"memory_budget only apply to a search: pass search=True or a method \(--auto\)",
        ),
        (
            [
                "--auto",
                "--memory-budget",
                "1KB",
                "--method",
                "local",
                "--time-limit",
                "0.5",
            ],
            r"memory budget 1,000 B per device is below [\d,]+ B",
        ),
    ],
    ids=[
        "shape",
        "unknown",
        "missing-file",
        "npy",
        "budget-without-auto",
        "infeasible",
    ],
)
def test_cli_partition_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], match: str
) -> None:
    src = _module_file(tmp_path)
    files = {
        "npz_bad_shape": tmp_path / "bad.npz",
        "npz_unknown": tmp_path / "unknown.npz",
        "missing": tmp_path / "missing.npz",
        "npy": tmp_path / "w.npy",
    }
    np.savez(files["npz_bad_shape"], arg1=np.zeros((2, 2), np.float32))
    np.savez(files["npz_unknown"], bias=np.zeros(3, np.float32))
    np.save(files["npy"], np.zeros(3))
    out = tmp_path / "parent" / "p"
    out.parent.mkdir()
    argv = [
        "partition",
        str(src),
        "-o",
        str(out),
        "--mesh",
        "data=2,model=4",
        *[a.format(**files) for a in extra],
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shardwise: error: "), err
    import re

    assert re.search(match, err), err
    _no_leftovers(out.parent)


def test_names_from_jax_arg_info(tmp_path: Path) -> None:
    m: Module = mlp(batch=8, d=16, hidden=32)
    f = m.func("main")
    f.arg_attrs[1]["jax.arg_info"] = "\"params['w1']\""
    w1 = np.ones((16, 32), np.float32)
    part = sw.partition(m, tmp_path / "p", mesh={"x": 2}, weights={"params['w1']": w1})
    assert part.meta["weights"]["args"] == [1]
    _, _, shards = sw.load_partition(tmp_path / "p", 0)
    np.testing.assert_array_equal(shards[1], w1)  # replicated: each rank holds all of it
