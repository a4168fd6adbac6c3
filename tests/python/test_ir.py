"""Program IR: MLIR import/export round trips, the builder, from_jax, and running exported
modules under XLA."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from corpus import conformance_dir, corpus_files, corpus_params, require_corpus
from shardwise import Mesh, ProgramError, ShardingError, TensorSharding
from shardwise.importers import load_mlir
from shardwise.ir import Builder, Func, TensorType

jax = pytest.importorskip("jax")
from shardwise._jaxlib import context, ir

FILES = corpus_files()


def _jaxlib_print(text: str) -> str:
    with context():
        return str(ir().Module.parse(text))


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params(FILES))
def test_corpus_round_trip_is_identical(path: Path) -> None:
    """load_mlir -> to_mlir prints exactly what jaxlib prints for the original module: every
    op, attribute and sharding kept."""
    text = path.read_text()
    assert load_mlir(text).to_mlir() == _jaxlib_print(text)


@pytest.mark.corpus
def test_corpus_round_trip_compare_py(tmp_path: Path) -> None:
    """The same, judged by ../shared/tools/compare.py (value by value, with sharding rules):
    each Shardy result module of the dev corpus, read and written back, equals itself."""
    root = require_corpus()
    dev = root / "dev"
    for p in sorted(dev.glob("*.out.mlir")):
        load_mlir(p).save(tmp_path / p.name)
    r = subprocess.run(
        [
            sys.executable,
            str(root.parent / "tools" / "compare.py"),
            "--dir",
            str(dev),
            "--actual-dir",
            str(tmp_path),
            "--check-rules",
        ],
        capture_output=True,
        text=True,
    )
    last = r.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"conformance: (\d+)/(\d+) cases exact, (\d+)/(\d+) values match", last)
    assert m and m.group(1) == m.group(2) and m.group(3) == m.group(4) and int(m.group(2)) >= 50, (
        r.stdout[-2000:] + r.stderr[-2000:]
    )


def test_import_structure_and_shardings() -> None:
    text = """
    sdy.mesh @mesh = <["x"=2, "y"=4]>
    func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<16xf32>)
        -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>, jax.result_info = "out"}) {
      %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<16xf32>) -> tensor<8x16xf32>
      %1 = stablehlo.add %arg0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>} : tensor<8x16xf32>
      %2 = sdy.sharding_constraint %1 <@mesh, [{}, {"y"}]> : tensor<8x16xf32>
      return %2 : tensor<8x16xf32>
    }
    """
    m = load_mlir(text)
    assert m.meshes == {"mesh": Mesh({"x": 2, "y": 4})}
    f = m.func("main")
    assert isinstance(f, Func) and f.sym_name == "main"
    assert (
        str(f.args[0].sharding) == '#sdy.sharding<@mesh, [{"x"}, {}]>' and f.args[0].sharding.mesh == m.meshes["mesh"]
    )
    assert f.args[1].sharding is None and f.args[1].type == TensorType((16,), "f32")
    assert str(f.result_shardings[0]) == '#sdy.sharding<@mesh, [{}, {"y"}]>'
    assert f.result_attrs[0] == {"jax.result_info": '"out"'}
    names = [op.name for op in f.body.ops]
    assert names == ["stablehlo.broadcast_in_dim", "stablehlo.add", "sdy.sharding_constraint", "func.return"]
    bcast, add, cons, ret = f.body.ops
    assert bcast.attributes == {"broadcast_dimensions": "array<i64: 1>"}
    assert "sdy.sharding" not in add.attributes and str(add.result.sharding) == '#sdy.sharding<@mesh, [{"x", ?}, {?}]>'
    assert "sharding" not in cons.attributes and str(cons.result.sharding) == '#sdy.sharding<@mesh, [{}, {"y"}]>'
    assert ret.operands == [cons.result] and add.operands == [f.args[0], bcast.result]
    assert add.location is not None and add.location.startswith("loc(")
    # Changing a sharding in the IR changes the output.
    add.result.sharding = TensorSharding(m.meshes["mesh"], [["x"], ["y"]])
    assert 'stablehlo.add %arg0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>}' in m.to_mlir()


def test_locations_read_as_jaxlib_prints_them_and_survive_copies() -> None:
    """Locations are printed when first read (the importer keeps jaxlib's objects): the text is
    jaxlib's, for the original ops, their copies and ops given a location by hand."""
    text = """
    func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
      %0 = stablehlo.negate %arg0 : tensor<8xf32> loc("model.py":12:3)
      %1 = stablehlo.abs %0 : tensor<8xf32> loc(callsite("layer"("model.py":40:7) at "main.py":3:1))
      %2 = stablehlo.add %0, %1 : tensor<8xf32> loc(fused["a.py":1:2, "b.py":3:4])
      return %2 : tensor<8xf32>
    }
    """
    expected = [
        'loc("model.py":12:3)',
        'loc(callsite("layer"("model.py":40:7) at "main.py":3:1))',
        'loc(fused["a.py":1:2, "b.py":3:4])',
    ]
    with context():
        module = ir().Module.parse(text)
        printed = [str(op.location) for op in module.body.operations[0].regions[0].blocks[0].operations][:3]
    assert printed == expected
    m = load_mlir(text)
    copy = m.copy()  # copied before any location is read
    assert [op.location for op in m.func().body.ops[:3]] == expected
    assert [op.location for op in copy.func().body.ops[:3]] == expected
    neg = copy.func().body.ops[0]
    assert neg.where() == 'stablehlo.negate at loc("model.py":12:3)'
    neg.location = None
    assert neg.where() == "stablehlo.negate" and m.func().body.ops[0].location == expected[0]
    # Equal types read from jaxlib are one object (printed and parsed once).
    f = m.func()
    assert f.body.ops[0].results[0].type is f.body.ops[1].results[0].type is f.args[0].type


def test_manual_computation_operand_and_result_shardings() -> None:
    root = conformance_dir()
    if root is None:
        pytest.skip("../shared/conformance is absent")
    m = load_mlir(root / "dev" / "shard_map_partial_manual.in.mlir")
    mc = next(op for op in m.walk() if op.name == "sdy.manual_computation")
    assert mc.operand_shardings is not None and len(mc.operand_shardings) == 2
    assert str(mc.result.sharding) == '#sdy.sharding<@mesh, [{?}, {?}], replicated={"x"}>'
    assert mc.attributes["manual_axes"] == '#sdy<manual_axes{"x"}>'


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("func.func @f() {\n  %0 = foo.bar : () -> ()\n}", r'"-":2:\d+: Dialect `foo. not found'),
        (
            "func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n  return %b : tensor<2xf32>\n}",
            r'"-":2:\d+: .*undeclared SSA value',
        ),
        ("this is not mlir", r'"-":1:1'),
    ],
)
def test_malformed_mlir_names_the_location(text: str, needle: str) -> None:
    with pytest.raises(ProgramError, match=needle):
        load_mlir(text)


def test_invalid_sharding_names_the_op() -> None:
    text = """
    sdy.mesh @mesh = <["x"=2]>
    func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8xf32> {
      return %arg0 : tensor<8xf32>
    }
    """
    # The native verifier (Shardy's rules) rejects it first, with the op and location;
    # jaxlib's verifier with its own words.
    with pytest.raises(ProgramError) as e:
        load_mlir(text)
    assert str(e.value) == (
        'invalid MLIR: func.func at loc("-":3:5): argument 0: invalid sharding #sdy.sharding<@mesh, [{"x"}, {}]>: '
        "expected 1 dimension shardings for a tensor of rank 1 (shape [8]), got 2"
    )
    with pytest.raises(ProgramError, match=r"sharding doesn't match tensor rank: 2 != 1"):
        load_mlir(text, reader="jaxlib")


def test_save_is_atomic(tmp_path: Path) -> None:
    b = Builder(Mesh({"x": 2}))
    m = b.ret(b.tanh(b.arg((4,))))
    out = tmp_path / "m.mlir"
    m.save(out)
    assert load_mlir(out).to_mlir() == out.read_text()
    out.write_text("old")
    bad = Builder()
    x = bad.arg((4,))
    bad.op("stablehlo.add", [x], [x.type])  # wrong operand count: jaxlib rejects it
    with pytest.raises(ProgramError, match="does not verify"):
        bad.ret(x).save(out)
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["m.mlir"]


def _mlp(mesh: Mesh) -> tuple[Builder, object]:
    b = Builder(mesh)
    x = b.arg((16, 32), sharding=b.sharding([["x"], None]))
    w1 = b.arg((32, 64), sharding=b.sharding([None, ["y"]]))
    w2 = b.arg((64, 32), sharding=b.sharding([None, None]))
    h = b.tanh(b.dot_general(x, w1, contracting=((1,), (0,))))
    y = b.dot_general(h, w2, contracting=((1,), (0,)))
    y = b.sharding_constraint(y, b.sharding([["x"], None]))
    s = b.reduce(b.multiply(y, y), dims=(1,), kind="sum")
    mx = b.reduce(y, dims=(0,), kind="max")
    t = b.transpose(b.reshape(y, (16, 4, 8)), (1, 0, 2))
    c = b.concatenate([b.slice(t, (0, 0, 0), (2, 16, 8)), b.slice(t, (2, 0, 0), (4, 16, 8))], dim=0)
    bias = b.broadcast_in_dim(b.constant(0.5), (4, 16, 8), ())
    out = b.add(c, bias)
    rep = [b.sharding([None] * r) for r in (1, 1, 3)]
    return b, b.ret(s, mx, out, shardings=rep)


def _mlp_reference(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> list[np.ndarray]:
    y = np.tanh(x @ w1) @ w2
    t = y.reshape(16, 4, 8).transpose(1, 0, 2)
    return [(y * y).sum(1), y.max(0), t + 0.5]


def test_builder_module_verifies_and_runs_under_xla() -> None:
    from jax.sharding import AxisType
    from jax.sharding import PartitionSpec as P

    if len(jax.devices()) < 8:
        pytest.skip("needs 8 CPU devices (XLA_FLAGS set before jax was imported)")
    mesh = Mesh({"x": 2, "y": 4})
    _, module = _mlp(mesh)
    text = module.to_mlir()
    assert "sdy.sharding_constraint %" in text and "stablehlo.dot_general" in text
    jmesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s, dtype=np.float32) for s in ((16, 32), (32, 64), (64, 32))]
    got = __import__("xla_run").run_sharded(text, args, [P("x", None), P(None, "y"), P()], jmesh)
    for g, want in zip(got, _mlp_reference(*args)):
        np.testing.assert_allclose(g, want, rtol=2e-5, atol=2e-5)


def test_from_jax_round_trip_runs_under_xla() -> None:
    import jax.numpy as jnp
    from jax.sharding import AxisType
    from jax.sharding import PartitionSpec as P
    from shardwise.importers import from_jax

    if len(jax.devices()) < 8:
        pytest.skip("needs 8 CPU devices")

    def f(x, w):  # type: ignore[no-untyped-def]
        h = jnp.einsum("bd,df->bf", x, w)
        return jax.nn.relu(h).sum(axis=0, keepdims=True) + jnp.cumsum(h, axis=1)[:1]

    mesh = Mesh({"x": 2, "y": 4})
    x = jax.ShapeDtypeStruct((8, 16), jnp.float32)
    w = jax.ShapeDtypeStruct((16, 32), jnp.float32)
    m = from_jax(f, x, w, mesh=mesh, in_specs=[P("x", None), P(None, "y")])
    f0 = m.func("main")
    assert str(f0.args[0].sharding) == '#sdy.sharding<@mesh, [{"x"}, {}]>'
    f0.result_shardings = [TensorSharding(m.meshes["mesh"], [None, None])]
    jmesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((8, 16), dtype=np.float32), rng.standard_normal((16, 32), dtype=np.float32)]
    (got,) = __import__("xla_run").run_sharded(m.to_mlir(), args, [P("x", None), P(None, "y")], jmesh)
    np.testing.assert_allclose(got, np.asarray(f(*args)), rtol=2e-5, atol=2e-5)


def test_builder_errors() -> None:
    b = Builder(Mesh({"x": 2}))
    x = b.arg((4, 6))
    with pytest.raises(ValueError, match=r"stablehlo.reshape: tensor<4x6xf32> has 24 elements, shape \(5, 5\) has 25"):
        b.reshape(x, (5, 5))
    with pytest.raises(ValueError, match="do not match"):
        b.dot_general(x, x, contracting=((1,), (1,)), batch=((0,), (1,)))
    with pytest.raises(ShardingError):
        b.sharding_constraint(x, b.sharding([["x"]]))  # rank 1 sharding on a rank-2 value
    y = b.ret(x)
    assert y.func("main").result_types == [TensorType((4, 6), "f32")]
    with pytest.raises(ValueError, match="finished"):
        b.tanh(x)


def test_generic_form_needs_no_jax_and_reparses() -> None:
    b = Builder(Mesh({"x": 2}))
    v = b.arg((4,), sharding=b.sharding([["x"]]))
    m = b.ret(b.exp(v))
    generic = m.to_mlir(generic=True)
    assert re.search(r'"stablehlo.exponential"\(%v\d+\)', generic)
    assert load_mlir(generic).to_mlir() == m.to_mlir()
