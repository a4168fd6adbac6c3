"""Partitioning programs with ``func.call`` as JAX lowers them (private functions for
``jax.nn.relu``, ``jnp.where``, nested ``jax.jit``), called once or many times, with different
shardings per call site, nested, inside ``while`` / ``case`` bodies, returning several results:
the calls are inlined before partitioning (``spmd/partition/inline.py``, XLA's
``CallInliner``), propagation stays identical to Shardy's, and the simulated ranks compute the
unpartitioned program's numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import shardwise as sw
from shardwise.cli import main
from shardwise.errors import ProgramError
from shardwise.spmd.partition.inline import inline_calls

jax = pytest.importorskip("jax")
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
from jax_mesh import mesh_2x4, sharded_arg
from shardy_oracle import shardy

pytestmark = pytest.mark.jax


def _mesh() -> Any:
    return mesh_2x4()


@jax.jit
def _inner(a: Any) -> Any:
    return jax.nn.relu(a) * 2.0


@jax.jit
def _two(a: Any, b: Any) -> tuple[Any, Any]:
    return jnp.where(a > b, a, b), jax.nn.relu(a - b)


def _same_callee_two_shardings(x: Any, y: Any, w: Any) -> Any:
    # One @relu, called with x @ w sharded (x, y) and y @ w sharded (y-less rows).
    return jax.nn.relu(x @ w) + jax.nn.relu(y @ w)


def _nested(x: Any, w: Any) -> Any:
    return _inner(x @ w).sum(axis=1)


def _several_results(x: Any, w: Any) -> Any:
    a, b = _two(x @ w, (x @ w).T.T * 0.5)
    return a - b


def _in_scan(c: Any, xs: Any) -> Any:
    return jax.lax.scan(lambda c, x: (jax.nn.relu(c @ x), jnp.where(c > 0, c, 0.0).sum()), c, xs)


def _in_cond(p: Any, x: Any) -> Any:
    return jax.lax.cond(p > 0, lambda v: jax.nn.relu(v) * 2.0, lambda v: jnp.where(v > 0, v, -v), x)


def _cases(mesh: Any) -> list[tuple[str, Any, tuple[Any, ...]]]:
    def a(shape: tuple[int, ...], spec: Any) -> Any:
        return sharded_arg(mesh, shape, spec)

    return [
        (
            "same_callee_two_shardings",
            _same_callee_two_shardings,
            (a((16, 32), P("x", None)), a((16, 32), P(None, "y")), a((32, 32), P(None, "y"))),
        ),
        ("nested", _nested, (a((16, 32), P("x", None)), a((32, 64), P(None, "y")))),
        ("several_results", _several_results, (a((16, 32), P("x", None)), a((32, 32), P(None, "y")))),
        ("in_scan", _in_scan, (a((16, 16), P("x", None)), a((3, 16, 16), P(None, None, "y")))),
        ("in_cond", _in_cond, (jax.ShapeDtypeStruct((), jnp.float32), a((8, 16), P("x", "y")))),  # type: ignore[no-untyped-call]
    ]


@pytest.mark.parametrize("case", ["same_callee_two_shardings", "nested", "several_results", "in_scan", "in_cond"])
def test_program_with_calls_partitions_and_checks(case: str) -> None:
    mesh = _mesh()
    _name, fn, args = next(c for c in _cases(mesh) if c[0] == case)
    text = jax.jit(fn).lower(*args).as_text()
    module = sw.load_mlir(text)
    assert any(op.name == "func.call" for op in module.walk()), "the lowered program must keep its calls"
    propagated = sw.propagate(module)
    assert propagated.to_mlir() == shardy(text)
    part = sw.partition(propagated)
    assert not any(op.name == "func.call" for op in part.global_module.walk())
    assert [f.sym_name for f in part.global_module.funcs] == ["main"]
    for r in part.ranks:
        r.to_mlir()  # jaxlib parses and verifies it (ProgramError otherwise)
    res = sw.check_partition(module, part.global_module, part.ranks, seed=1)
    assert res.passed, res.outputs


def test_cli_partition_run_on_a_raw_lowered_program(tmp_path: Path) -> None:
    mesh = _mesh()
    _, fn, args = _cases(mesh)[0]
    src = tmp_path / "calls.mlir"
    src.write_text(jax.jit(fn).lower(*args).as_text())
    out = tmp_path / "part"
    assert main(["partition", str(src), "-o", str(out)]) == 0
    assert main(["run", str(out), "--check"]) == 0


def test_call_sites_with_other_shardings_get_reshards() -> None:
    """A call whose operand sharding differs from the callee's argument sharding is joined by
    an ``sdy.reshard`` to the argument's sharding (and the same for results)."""
    text = """
sdy.mesh @mesh = <["x"=2]>
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<8xf32> {
  %0 = call @f(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @f(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} : tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""
    module = sw.load_mlir(text)
    assert inline_calls(module) == 1
    names = [op.name for op in module.func("main").body.ops]
    assert names == ["sdy.reshard", "stablehlo.negate", "sdy.reshard", "func.return"]
    assert [f.sym_name for f in module.funcs] == ["main"]
    part = sw.partition(sw.load_mlir(text))
    assert sw.check_partition(sw.load_mlir(text), part.global_module, part.ranks).passed


@pytest.mark.parametrize(
    ("callee", "message"),
    [
        ("func.func private @f(%arg0: tensor<8xf32>) -> tensor<8xf32>", "declaration without a body"),
        (
            "func.func private @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n  %0 = call @f(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n  return %0 : tensor<8xf32>\n}",
            "recursive",
        ),
    ],
)
def test_calls_that_cannot_be_inlined_raise(callee: str, message: str) -> None:
    text = f"""
sdy.mesh @mesh = <["x"=2]>
func.func @main(%arg0: tensor<8xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{"x"}}]>}}) -> tensor<8xf32> {{
  %0 = call @f(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}
{callee}
"""
    with pytest.raises(ProgramError, match=message):
        inline_calls(sw.load_mlir(text))
