"""Rough edges a new user met (issue 24): each test failed before its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import shardwise as sw
from shardwise.cli import main
from shardwise.spmd.launch import launch
from shardwise.testing.auto_programs import mlp

_UNKNOWN_OPS = """
sdy.mesh @mesh = <["x"=2]>
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<8xf32> {
  %0 = stablehlo.custom_call @mystery(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  %1 = stablehlo.custom_call @mystery(%0) : (tensor<8xf32>) -> tensor<8xf32>
  %2 = stablehlo.custom_call @other_mystery(%1) : (tensor<8xf32>) -> tensor<8xf32>
  return %2 : tensor<8xf32>
}
"""


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``shardwise ARGS`` in a fresh process: what a user's terminal sees (file descriptors, not
    Python's ``sys.stdout``)."""
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "shardwise.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def test_auto_json_stdout_is_only_json(tmp_path: Path) -> None:
    """HiGHS printed its banner on the process's standard output (file descriptor 1)."""
    src, dst = tmp_path / "mlp.mlir", tmp_path / "out.mlir"
    mlp().save(str(src))
    res = _cli(
        "auto", str(src), "-o", str(dst), "--mesh", "data=2,model=4", "--method", "ilp", "--time-limit", "5", "--json"
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["method"] == "ilp"
    assert "HiGHS" not in res.stdout


def test_load_mlir_of_a_missing_path_says_no_such_file(tmp_path: Path) -> None:
    with pytest.raises(sw.ProgramError, match="no such file: 'missing.mlir'"):
        sw.load_mlir("missing.mlir")
    with pytest.raises(sw.ProgramError, match="no such file"):
        sw.load_mlir(tmp_path / "missing.mlir")
    with pytest.raises(sw.ProgramError, match="is a directory"):
        sw.load_mlir(str(tmp_path))
    path = tmp_path / "m.mlir"
    path.write_text(_UNKNOWN_OPS)
    assert sw.load_mlir(str(path)).func("main") is not None  # a str path still works
    assert sw.load_mlir(path).func("main") is not None


def test_auto_shard_with_other_axis_names_says_which_axes() -> None:
    module = sw.load_mlir(
        _UNKNOWN_OPS.replace("custom_call @mystery", "custom_call @mystery").replace("@other_mystery", "@mystery")
    )
    with pytest.raises(sw.ProgramError, match=r"has no axis 'x'.*@mesh = #sdy.mesh<\[\"x\"=2\]>"):
        sw.auto_shard(module, {"data": 2, "model": 4})


def test_every_public_error_is_importable_and_named_from_shardwise() -> None:
    for name in (
        "SearchError",
        "PipelineError",
        "ProgramError",
        "LaunchError",
        "LaunchTimeout",
        "RankAborted",
        "UnknownValueError",
        "OpInfoError",
    ):
        assert issubclass(getattr(sw, name), sw.ShardwiseError), name
    for cls in (
        sw.ShardwiseError,
        sw.ShardingError,
        sw.MeshError,
        sw.ShardingParseError,
        sw.InvalidShardingError,
        sw.ConversionError,
        sw.InvalidRuleError,
    ):
        assert cls.__module__ == "shardwise", cls
    with pytest.raises(sw.PipelineError):
        sw.propagate(sw.load_mlir(_UNKNOWN_OPS), "builtin.module(no-such-pass)")


def test_launch_nccl_without_cupy_fails_once_before_any_rank(tmp_path: Path) -> None:
    try:
        import cupy  # type: ignore[import-not-found]  # noqa: F401

        pytest.skip("CuPy is installed: the check under test does not fire")
    except ImportError:
        pass
    b = sw.Builder(sw.Mesh({"x": 2}))
    x = b.arg((4, 4), sharding=b.sharding([["x"], None]))
    sw.partition(b.ret(b.negate(x)), tmp_path / "p")
    t = time.perf_counter()
    with pytest.raises(sw.ShardwiseError, match="CuPy"):
        launch(tmp_path / "p", 2, backend="nccl")
    assert time.perf_counter() - t < 5
    res = _cli("launch", "-n", "2", str(tmp_path / "p"), "--backend", "nccl")
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and res.stderr.startswith("shardwise: error:"), res.stderr


def test_tables_print_as_pictures() -> None:
    from shardwise.search.auto import auto_shard

    ts = sw.TensorSharding.parse('#sdy.sharding<@mesh, [{"x"}, {}]>', sw.Mesh({"x": 2}))
    grid = str(ts.visualize((4, 4)))
    assert "dev 0" in grid and "dev 1" in grid and "rich" not in grid
    _, report = auto_shard(mlp(), {"data": 2, "model": 4}, method="local", time_limit=2)
    text = str(report.table())
    assert "auto_shard (local)" in text and "predicted" in text and "<rich" not in text


def test_cli_help_is_plain_and_lists_every_command_and_method() -> None:
    res = _cli("--help")
    assert res.returncode == 0
    assert "``" not in res.stdout and "`" not in res.stdout
    for cmd in ("demo", "show", "rules", "propagate", "auto", "partition", "run", "launch", "iopddl"):
        assert f"shardwise {cmd}" in res.stdout, cmd
    for method in ("ilp", "local", "penalty", "limited", "bfs"):
        assert method in res.stdout, method
    for sub in ("auto", "partition", "show"):
        help_text = _cli(sub, "--help").stdout
        assert "x=2,y=4" in help_text and "data=2" not in help_text, sub


def test_cli_run_without_check_runs_the_ranks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = sw.Builder(sw.Mesh({"x": 2}))
    x = b.arg((4, 4), sharding=b.sharding([["x"], None]))
    src = tmp_path / "in.mlir"
    b.ret(b.reduce(x, dims=(0,))).save(str(src))
    assert main(["partition", str(src), "-o", str(tmp_path / "p")]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "2 simulated ranks ran" in out and "all_reduce" in out


def test_cli_pipeline_errors_list_the_short_names_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.mlir"
    src.write_text(_UNKNOWN_OPS)
    for pipeline in ("bogus", "builtin.module(bogus)"):
        assert main(["propagate", str(src), "-o", str(tmp_path / "o.mlir"), "--pipeline", pipeline]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith("shardwise: error:"), err
        names = err.index("full, user-priority, op-priority, aggressive, basic")
        assert names < err.find("the passes") if "the passes" in err else names > 0
    assert not (tmp_path / "o.mlir").exists()


def test_unknown_op_warning_once_per_op_name_without_source_line(tmp_path: Path) -> None:
    src = tmp_path / "in.mlir"
    src.write_text(_UNKNOWN_OPS)
    res = _cli("propagate", str(src), "-o", str(tmp_path / "o.mlir"))
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "warning" in ln.lower()]
    assert len(lines) == 2, res.stderr
    assert sum("@mystery " in ln for ln in lines) == 1 and sum("@other_mystery" in ln for ln in lines) == 1
    assert all(ln.startswith("shardwise: warning: ") for ln in lines)
    assert "rule_for(" not in res.stderr and ".py:" not in res.stderr


def test_from_jax_with_too_few_devices_says_how_to_get_cpu_devices() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    n = len(jax.devices()) * 2
    with pytest.raises(sw.MeshError, match=f"needs {n} devices.*xla_force_host_platform_device_count={n}"):
        sw.from_jax(lambda v: v * 2, jnp.ones((n, 4)), mesh=sw.Mesh({"x": n}), in_specs=[P("x")])


_TWO_MESHES = """
sdy.mesh @a = <["x"=2]>
sdy.mesh @b = <["y"=4]>
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@a, [{"x"}]>}, %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@b, [{"y"}]>}) -> tensor<8xf32> {
  %0 = stablehlo.negate %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@b, [{"y"}]>]>} : tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""


def test_partition_on_two_meshes_names_both_with_a_value_each() -> None:
    with pytest.raises(
        sw.ProgramError, match=r"2 meshes with axes: @a = .*argument 0 of @main.*@b = .*argument 1 of @main"
    ):
        sw.partition(sw.load_mlir(_TWO_MESHES), propagate=False)


def test_partition_ignores_a_declared_mesh_that_nothing_uses() -> None:
    text = _TWO_MESHES.replace('#sdy.sharding<@a, [{"x"}]>', "#sdy.sharding<@b, [{}]>")
    module = sw.load_mlir(text)
    part = sw.partition(module, propagate=False)
    assert part.mesh_name == "b" and len(part.ranks) == 4
    assert sw.check_partition(module, part.global_module, part.ranks).passed


def test_an_empty_module_is_written_and_a_module_that_does_not_verify_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: an empty module was written without its block (jaxlib refused it) and the
    # verifier's error spanned five lines with the printed operation (fault campaign).
    src = tmp_path / "empty.mlir"
    src.write_text("module {\n}\n")
    assert main(["rules", str(src), "-o", str(tmp_path / "out.mlir")]) == 0
    assert (tmp_path / "out.mlir").read_text().startswith("module {")
    m = sw.load_mlir("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> { return %a : tensor<2xf32> }")
    m.func("main").result_types[0] = sw.TensorType((3,), "f32")
    with pytest.raises(sw.ProgramError) as e:
        m.to_mlir()
    # The native verifier names the op and where it was read from.
    assert str(e.value) == (
        'the module does not verify: func.return at loc("-":1:55): has operand types (tensor<2xf32>), '
        "but the enclosing function returns (tensor<3xf32>)"
    )
    with pytest.raises(sw.ProgramError) as e:
        m.to_mlir(printer="jaxlib")
    assert "\n" not in str(e.value) and "doesn't match function result type" in str(e.value)
