"""``shardwise.propagate`` on JAX programs generated at test time (jaxlib's Shardy as the
oracle), properties of propagation, and the ``shardwise propagate`` command."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import shardwise as sw
from corpus import conformance_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardwise.cli import main

jax = pytest.importorskip("jax")
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from shardwise._jaxlib import context, ir


def _shardy(text: str, pipeline: str = "builtin.module(sdy-propagation-pipeline)") -> str:
    from jaxlib.mlir import passmanager

    with context():
        m = ir().Module.parse(text)
        passmanager.PassManager.parse(pipeline).run(m.operation)
        return str(m)


def _mesh() -> object:
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 CPU devices (XLA_FLAGS set before jax was imported)")
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)


def _arg(shape: tuple[int, ...], spec: object, mesh: object) -> object:
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))  # type: ignore[no-untyped-call]


def _attention(x, wq, wk, wv):  # type: ignore[no-untyped-def]
    b, s, d = x.shape
    q = (x @ wq).reshape(b, s, 4, d // 4)
    k = (x @ wk).reshape(b, s, 4, d // 4)
    v = (x @ wv).reshape(b, s, 4, d // 4)
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, s, d)


def _mlp_loss(w1, w2, x):  # type: ignore[no-untyped-def]
    return jnp.mean(jax.nn.gelu(x @ w1) @ w2)


def _scan(c, xs):  # type: ignore[no-untyped-def]
    return jax.lax.scan(lambda c, x: (jnp.tanh(c @ x), c.sum()), c, xs)


def _cond(p, x):  # type: ignore[no-untyped-def]
    return jax.lax.cond(p > 0, lambda v: v * 2.0, lambda v: jnp.sin(v).T.T, x)


def _conv(x, k):  # type: ignore[no-untyped-def]
    return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _programs(mesh: object) -> list[tuple[str, object, tuple[object, ...]]]:
    a = lambda shape, spec: _arg(shape, spec, mesh)
    return [
        (
            "attention",
            _attention,
            (
                a((8, 16, 32), P("x", None, None)),
                a((32, 32), P(None, "y")),
                a((32, 32), P(None, "y")),
                a((32, 32), P(None, "y")),
            ),
        ),
        (
            "mlp_grad",
            jax.grad(_mlp_loss, argnums=(0, 1)),
            (a((32, 64), P(None, "y")), a((64, 32), P("y", None)), a((16, 32), P("x", None))),
        ),
        ("scan", _scan, (a((16, 16), P("x", None)), a((5, 16, 16), P(None, None, "y")))),
        ("cond", _cond, (jax.ShapeDtypeStruct((), jnp.float32), a((8, 8), P("x", "y")))),  # type: ignore[no-untyped-call]
        ("conv", _conv, (a((8, 16, 16, 4), P("x", None, None, None)), a((3, 3, 4, 8), P(None, None, None, "y")))),
        (
            "reshape_chain",
            lambda v: (v.reshape(4, 2, 8, 8).transpose(1, 0, 3, 2).reshape(8, 64) * 2).sum(0),
            (a((8, 64), P(("x", "y"), None)),),
        ),
    ]


def test_jax_programs_generated_now_match_shardy() -> None:
    mesh = _mesh()
    for name, fn, args in _programs(mesh):
        text = jax.jit(fn).lower(*args).as_text()
        ours = sw.propagate(sw.load_mlir(text)).to_mlir()
        assert ours == _shardy(text), name


@pytest.mark.parametrize("pipeline", ["basic", "aggressive", "op-priority", "user-priority"])
def test_named_pipelines_match_shardy(pipeline: str) -> None:
    from shardwise.api import PIPELINES

    mesh = _mesh()
    _name, fn, args = _programs(mesh)[1]
    text = jax.jit(fn).lower(*args).as_text()
    # The single passes expect imported input (data-flow edges etc.): take Shardy's import.
    imported = _shardy(text, "builtin.module(sdy-import-pipeline)")
    assert sw.propagate(sw.load_mlir(imported), pipeline).to_mlir() == _shardy(imported, PIPELINES[pipeline])


def test_conservative_option() -> None:
    from shardwise.api import pipeline_text

    assert (
        pipeline_text("basic", conservative=True)
        == "builtin.module(sdy-basic-propagate{conservative-propagation=true})"
    )
    with pytest.raises(ValueError, match="conservative=True needs a pipeline name"):
        pipeline_text("builtin.module(sdy-basic-propagate)", conservative=True)
    mesh = _mesh()
    text = jax.jit(lambda v: v.reshape(2, 32)).lower(_arg((64,), P(("x", "y")), mesh)).as_text()
    for conservative in (False, True):
        # jaxlib runs the same passes; the conservative option sits on its propagation step.
        want = _shardy(text, pipeline_text("full", conservative=conservative))
        got = sw.propagate(sw.load_mlir(text), conservative=conservative).to_mlir()
        assert got == want
    assert _shardy(text, pipeline_text("full")) == _shardy(text)  # the expansion is Shardy's pipeline


# ----------------------------------------------------------------------------- properties

_MESH = sw.Mesh({"x": 2, "y": 4})
_SPECS = [
    [None, None],
    [["x"], None],
    [None, ["y"]],
    [["x"], ["y"]],
    [["y"], None],
    [["x", "y"], None],
    [None, ["y", "x"]],
]


@st.composite
def _programs_st(draw: st.DrawFn) -> sw.Module:
    b = sw.Builder(_MESH)
    n, d = 8, 8
    vals = [b.arg((n, d), sharding=b.sharding(draw(st.sampled_from(_SPECS)))) for _ in range(draw(st.integers(1, 3)))]
    for _ in range(draw(st.integers(1, 8))):
        x = draw(st.sampled_from(vals))
        kind = draw(st.sampled_from(["add", "tanh", "transpose", "dot", "reshape", "constraint", "reduce"]))
        if kind == "add":
            y = b.add(x, draw(st.sampled_from(vals)))
        elif kind == "tanh":
            y = b.tanh(x)
        elif kind == "transpose":
            y = b.transpose(x, (1, 0))
        elif kind == "dot":
            y = b.dot_general(x, draw(st.sampled_from(vals)), contracting=((1,), (0,)))
        elif kind == "reshape":
            y = b.reshape(b.reshape(x, (4, 2, 8)), (n, d))
        elif kind == "constraint":
            y = b.sharding_constraint(x, b.sharding(draw(st.sampled_from(_SPECS))))
        else:
            y = b.broadcast_in_dim(b.reduce(x, dims=(1,)), (n, d), (0,))
        vals.append(y)
    return b.ret(*vals[-2:])


def _all_shardings(m: sw.Module) -> list[tuple[object, object]]:
    f = m.func("main")
    return [(v.type, v.sharding) for v in m.values()] + [(t, s) for t, s in zip(f.result_types, f.result_shardings)]


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_programs_st())
def test_propagation_properties(m: sw.Module) -> None:
    user = {id(a): a.sharding for a in m.func("main").args}
    out = sw.propagate(m)
    # idempotent: propagating again changes nothing
    assert sw.propagate(out).to_mlir() == out.to_mlir()
    # user shardings (closed here) are kept
    for a in out.func("main").args:
        assert str(a.sharding) == str(user[id(m.func("main").args[a.index])])
    # every sharding is valid for its value
    for t, s in _all_shardings(out):
        if s is not None:
            s.validate(t.shape, meshes=out.meshes)  # type: ignore[union-attr, attr-defined]
    # and it is what Shardy gives
    assert out.to_mlir() == _shardy(m.to_mlir())


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.binary(min_size=0, max_size=40), st.integers(0, 10**6))
def test_fuzzed_modules_never_panic(noise: bytes, seed: int) -> None:
    """Random damage to a valid module: parse errors or clean shardwise errors, never a panic."""
    base = (
        _MESH.op_text("mesh")
        + """
    func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x8xf32> {
      %0 = stablehlo.tanh %arg0 : tensor<8x8xf32>
      %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<8x8xf32>) -> tensor<8x8xf32>
      return %1 : tensor<8x8xf32>
    }"""
    )
    pos = seed % len(base)
    text = base[:pos] + noise.decode("latin-1") + base[pos + len(noise) // 2 :]
    try:
        m = sw.load_mlir(text)
    except sw.ShardwiseError:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            sw.propagate(m)
        except sw.ShardwiseError:
            pass


# ----------------------------------------------------------------------------- the command


def test_propagate_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = conformance_dir()
    if root is None:
        pytest.skip("../shared/conformance is absent")
    src = root / "dev" / "mlp_tp_megatron.in.mlir"
    out = tmp_path / "out.mlir"
    assert main(["propagate", str(src), "-o", str(out), "--pipeline", "builtin.module(sdy-propagation-pipeline)"]) == 0
    assert "propagated" in capsys.readouterr().out
    assert out.read_text() == _shardy((root / "dev" / "mlp_tp_megatron.out.mlir").read_text(), "builtin.module()")
    assert (
        main(["propagate", str(src), "-o", str(tmp_path / "x.mlir"), "--pipeline", "builtin.module(no-such-pass)"]) == 2
    )
    assert "no-such-pass" in capsys.readouterr().err and not (tmp_path / "x.mlir").exists()
