"""``shardwise.explain``: explanations checked against facts derived independently of the
solver's records (the annotated argument, the ops connecting values, Shardy's dot rule, the user
priorities written in the program), the dict/JSON form, name lookup and the command line."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest
import shardwise as sw
from shardwise.cli import main
from shardwise.explanation import Explanation, UnknownValueError, explain
from shardwise.explanation.names import resolve
from shardwise.ir.core import Module, Value
from shardwise.propagation import PropagationTrace, run_propagation_pass
from shardwise.propagation.records import REASONS

pytest.importorskip("jax")  # the MLIR importer and printer are jaxlib's

MESH = 'sdy.mesh @mesh = <["x"=2, "y"=4]>\n'

# arg0's "x" (on the dot's i factor) meets arg2's "y" at the add; "y" reaches the add first.
CHAIN = (
    MESH
    + """func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<16x32xf32>, %arg2: tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y", ?}, {}]>}) -> tensor<8x32xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.add %0, %arg2 : tensor<8x32xf32>
  %2 = stablehlo.tanh %1 : tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}
"""
)

# The two operands of a dot disagree on its contracting factor.
DOT = (
    MESH
    + """func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %arg1: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> tensor<8x32xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}
"""
)

# p0 against p1 on one dimension; arg2's dimensions are closed.
PRIORITIES = (
    MESH
    + """func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}p0, {}]>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}p1, {}]>}, %arg2: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x16xf32>
  %1 = stablehlo.multiply %0, %arg2 : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
"""
)


def _ops_joining(module: Module, a: Value, b: Value) -> set[str]:
    """Names of the ops that have both ``a`` and ``b`` among their operands and results."""
    out = set()
    for op in module.walk():
        vals = list(op.operands) + list(op.results)
        if any(v is a for v in vals) and any(v is b for v in vals):
            out.add(op.name)
    return out


def _check_chain(out: Module, e: Explanation) -> None:
    """Each axis's chain runs from its origin to the value along real ops, steps increasing."""
    for a in e.axes:
        if not a.chain:
            continue
        assert a.origin is not None
        if a.origin.kind == "input":
            assert a.chain[0].source_value == a.origin.where
        assert a.chain[-1].target_value == e.value
        assert [c.step for c in a.chain] == sorted({c.step for c in a.chain})
        for prev, nxt in zip(a.chain, a.chain[1:]):
            assert prev.target_value == nxt.source_value
        for c in a.chain:
            assert c.source_value is not None and c.target_value is not None
            src, _ = resolve(out, c.source_value)
            tgt, _ = resolve(out, c.target_value)
            assert c.op in _ops_joining(out, src, tgt)
        assert a.decided_by == a.chain[-1].layer


def test_origin_chain_and_conflict_on_a_small_program() -> None:
    m = sw.load_mlir(CHAIN)
    out = sw.propagate(m)
    e = explain(m, "%2")
    assert e.value == "%2" and e.defined_by == "stablehlo.tanh"
    assert e.sharding == str(out.func("main").body.ops[2].results[0].sharding)
    [y] = e.axes
    assert y.axis == '"y"' and y.dim == 0
    assert y.origin is not None and (y.origin.name, y.origin.where) == ("input: 2", "%arg2")
    assert [c.op for c in y.chain] == ["stablehlo.add", "stablehlo.tanh"]
    _check_chain(out, e)
    # %0 wanted arg0's "x" along the dot's i factor, but already had "y" from the add.
    e0 = explain(m, "%0")
    [d] = e0.dropped
    assert (d.op, d.axes, d.source_value, d.reason) == (
        "stablehlo.dot_general",
        ('"x"',),
        "%arg0",
        "incompatible-sharding",
    )
    assert d.with_axis == '"y"' and d.factor_name == "i" and d.description == REASONS["incompatible-sharding"]
    # the input is left unchanged
    assert m.func("main").body.ops[0].results[0].sharding is None


def test_conflict_on_a_dot_contracting_factor() -> None:
    m = sw.load_mlir(DOT)
    for name, mine, theirs, other in (("%arg0", '"x"', '"y"', "%arg1"), ("arg1", '"y"', '"x"', "%arg0")):
        e = explain(m, name)
        [a] = e.axes
        assert a.axis == mine and a.origin is not None and a.origin.kind == "input" and not a.chain
        [d] = e.dropped
        # Shardy's dot_general rule ([i, k], [k, j]) -> ([i, j]): k is the contracting factor.
        assert (d.factor, d.factor_name, d.reason) == (2, "k", "incompatible-sharding")
        assert d.axes == (theirs,) and d.source_value == other and d.with_axis == mine


def test_user_priority_layers_and_closed_dimensions() -> None:
    m = sw.load_mlir(PRIORITIES)
    e = explain(m, "%0")
    [x] = e.axes
    assert x.axis == '"x"' and x.decided_by is not None and x.decided_by.user_priority == 0
    [d] = e.dropped
    assert d.axes == ('"y"',) and d.source_value == "%arg1" and d.reason == "incompatible-sharding"
    assert d.layer.user_priority == 1  # the p1 sharding met the p0 one in the p1 round
    e2 = explain(m, "arg2")
    assert not e2.axes
    assert {(d.axes, d.reason) for d in e2.dropped} == {(('"x"',), "closed")}


def test_names_values_and_errors() -> None:
    m = sw.load_mlir(CHAIN)
    assert explain(m, "arg0").value == explain(m, "%arg0").value == "%arg0"
    assert explain(m, "result0").value == "%2" == explain(m, "2").value
    v = m.func("main").body.ops[1].results[0]
    assert explain(m, v).value == "%1"
    with pytest.raises(UnknownValueError, match=r"close names: .*%2"):
        explain(m, "%20")
    with pytest.raises(UnknownValueError, match="1 results"):
        explain(m, "result3")
    with pytest.raises(ValueError, match="not a value of this module"):
        explain(m, sw.load_mlir(CHAIN).func("main").args[0])
    with pytest.raises(ValueError, match="one propagation pass"):
        explain(m, "%0", pipeline="builtin.module(sdy-add-data-flow-edges)")


def test_json_round_trip_and_given_trace() -> None:
    m = sw.load_mlir(CHAIN)
    e = explain(m, "%1")
    d = json.loads(json.dumps(e.to_dict()))
    assert Explanation.from_dict(d) == e and d["axes"][0]["origin"]["name"] == "input: 2"
    with pytest.raises(ValueError, match="not an Explanation dict"):
        Explanation.from_dict({"value": "%1"})
    # an already recorded trace: the user-priority pass alone, the module propagated in place
    trace = PropagationTrace()
    work = sw.load_mlir(CHAIN)
    run_propagation_pass(work, "user-priority", trace=trace)
    t = explain(work, "%1", trace=trace)
    assert [a.axis for a in t.axes] == [a.axis for a in e.axes] and t.axes[0].origin == e.axes[0].origin
    assert trace.steps and all(layer.strategy == "aggressive" for _, layer in trace.steps.values())


def test_rich_rendering() -> None:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(explain(sw.load_mlir(CHAIN), "%0"))
    text = console.export_text()
    assert "why %0 is sharded" in text and "input: 2 (%arg2)" in text and "incompatible-sharding" in text


def test_jax_transformer_step_weight_gradient() -> None:
    """The bundled JAX-lowered training step: each weight gradient's axis comes from an
    argument the program annotates with it, along real ops."""
    m = sw.load_mlir(files("shardwise.examples").joinpath("transformer_step.mlir").read_text())
    out = sw.propagate(m)
    args = m.func("main").args
    for k in range(1, len(m.func("main").result_shardings)):
        e = explain(m, f"result{k}")
        for a in e.axes:
            assert a.origin is not None and a.origin.kind == "input"
            s = args[a.origin.index].sharding
            assert s is not None and a.axis in {str(x) for d in s.dims for x in d.axes}
        _check_chain(out, e)
    assert max(len(a.chain) for a in explain(m, "result3").axes) >= 5  # it came from far away


def test_jax_program_generated_now() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax.sharding import AxisType
    from jax.sharding import PartitionSpec as P

    if len(jax.devices()) < 8:
        pytest.skip("needs 8 CPU devices (XLA_FLAGS set before jax was imported)")
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)

    def loss(w1, w2, x):  # type: ignore[no-untyped-def]
        return jnp.mean(jnp.tanh(x @ w1) @ w2)

    args = (jnp.zeros((16, 32)), jnp.zeros((32, 8)), jnp.zeros((4, 16)))
    m = sw.from_jax(
        jax.grad(loss, argnums=(0, 1)), *args, mesh=mesh, in_specs=[P(None, "y"), P("y", None), P("x", None)]
    )
    out = sw.propagate(m)
    e = explain(m, "result0")  # the gradient of w1
    assert e.axes, e.sharding
    for a in e.axes:
        assert a.origin is not None and a.origin.kind == "input"
    _check_chain(out, e)


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.mlir"
    src.write_text(CHAIN)
    dst = tmp_path / "out.mlir"
    assert main(["propagate", str(src), "-o", str(dst), "--explain", "%0", "--explain", "arg0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["value"] for d in data] == ["%0", "%arg0"] and data[0]["dropped"][0]["reason"] == "incompatible-sharding"
    # the names are those of the written module
    assert "%0 = stablehlo.dot_general" in dst.read_text()
    assert main(["propagate", str(src), "-o", str(dst), "--explain", "%1"]) == 0
    assert "why %1 is sharded" in capsys.readouterr().out
    assert main(["propagate", str(src), "-o", str(dst), "--explain", "%9"]) == 2
    assert "close names" in capsys.readouterr().err


def test_demo_shows_an_explanation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "why: the gradient of a weight" in out and "input: 3 (%arg3)" in out and "path from input: 3" in out
