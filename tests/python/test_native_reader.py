"""The native MLIR reader and printer (``rust/src/mlir``, ``shardwise.importers.native``)
against jaxlib's parser and printer: over every module of the conformance corpus and the real
flax/optax training steps lowered raw (calls, ``chlo``, ``while`` and all),

* the module read natively is the module the jaxlib importer builds (same ops, operands,
  types, attributes as jaxlib prints them, shardings and locations), or the text is refused as
  unsupported and ``load_mlir`` hands it to jaxlib;
* the native printer prints the text byte for byte as jaxlib prints it, and so does
  ``to_mlir(printer="native")`` after propagation;
* the native verifier accepts every module jaxlib's verifiers accept.

And without jax installed, a JAX program loads, propagates and saves, with the text jaxlib
would have written."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from shardwise import _native
from shardwise.errors import ProgramError
from shardwise.importers.mlir import load_mlir
from shardwise.importers.native import build_module
from shardwise.ir.core import Module
from shardwise.ir.printer import Writer
from shardwise.passes import run_pipeline
from shardwise.testing.corpus import conformance_dir, corpus_files
from shardwise.testing.real_models import model_names, real_model

#: The real models use ops without a sharding rule (chlo.square): propagation warns.
pytestmark = pytest.mark.filterwarnings("ignore::shardwise.rules.exceptions.UnknownOpWarning")

#: Corpus modules the native reader refuses (jaxlib reads them): none. (``#stablehlo.mesh``
#: attributes, which jaxlib prints in another spelling than they are written,
#: ``axes=[<name = "z", size = 4>]``, are read in jaxlib's spelling unless they have device ids.)
REFUSED: set[str] = set()


def _signature(m: Module) -> tuple[str, list[str | None]]:
    """The generic form of ``m`` (ops, operands, types, attributes, shardings) and the location
    of every op."""
    return Writer().module(m), [op.location for op in m.op.walk()]


def _same_as_jaxlib(text: str) -> bool:
    """Whether the native reader reads ``text`` as jaxlib does; False when it refuses it as
    unsupported (any other error fails)."""
    try:
        tables = _native.read_mlir(text)
    except _native.MlirReadError as e:
        assert e.unsupported, f"native reader rejects text jaxlib reads: {e}"
        return False
    native = _signature(build_module(tables))
    reference = _signature(load_mlir(text, reader="jaxlib"))
    assert native[0] == reference[0]
    assert native[1] == reference[1]
    return True


def _corpus_cases() -> list[Path]:
    return corpus_files()


@pytest.mark.skipif(conformance_dir() is None, reason="needs ../shared/conformance")
def test_corpus_reads_as_jaxlib_reads_it() -> None:
    root = conformance_dir()
    assert root is not None
    refused = set()
    read = 0
    for path in _corpus_cases():
        text = path.read_text()
        try:
            load_mlir(text, reader="jaxlib")
        except ProgramError:
            continue  # malformed on purpose (Shardy's verifier tests)
        if _same_as_jaxlib(text):
            read += 1
        else:
            refused.add(str(path.relative_to(root)))
    assert refused <= REFUSED
    assert read >= 1100


@pytest.mark.parametrize("annotated", [True, False], ids=["annotated", "plain"])
@pytest.mark.parametrize("name", model_names())
def test_real_jax_step_reads_as_jaxlib_reads_it(name: str, annotated: bool) -> None:
    from shardwise.testing.real_models import plain_model

    text = real_model(name).text if annotated else plain_model(name).text
    assert "func.func" in text
    assert _same_as_jaxlib(text)


@pytest.mark.skipif(conformance_dir() is None, reason="needs ../shared/conformance")
def test_corpus_prints_as_jaxlib_prints_it() -> None:
    from shardwise._jaxlib import context, ir

    _ir = ir()
    printed = 0
    for path in _corpus_cases():
        text = path.read_text()
        try:
            with context():
                expected = str(_ir.Module.parse(text))
        except _ir.MLIRError:
            continue
        try:
            # Verified natively (no module jaxlib accepts is refused), and no op printed in
            # the generic form that jaxlib prints in its custom form.
            got = _native.print_mlir(text, verify=True, strict=True)
        except _native.MlirReadError as e:
            assert e.unsupported and e.line > 0, f"{path}: {e}"
            continue
        assert got == expected, path
        printed += 1
    assert printed >= 1100


@pytest.mark.parametrize("name", model_names())
def test_real_jax_step_prints_as_jaxlib_after_propagation(name: str) -> None:
    from shardwise import propagate

    text = real_model(name).text
    m = load_mlir(text)
    assert _native.print_mlir(text) == m.to_mlir(printer="jaxlib")
    out = propagate(m)
    assert out.to_mlir(printer="native") == out.to_mlir(printer="jaxlib")


def _generated() -> list[str]:
    from shardwise.testing.op_programs import op_program_names

    return op_program_names()


@pytest.mark.parametrize("name", [*_generated(), "transformer_step"])
def test_generated_jax_program_reads_and_prints_as_jaxlib(name: str) -> None:
    from shardwise._jaxlib import context, ir
    from shardwise.testing.op_programs import op_program
    from shardwise.testing.programs import transformer_step

    text = transformer_step(2) if name == "transformer_step" else op_program(name)
    assert _same_as_jaxlib(text)
    with context():
        expected = str(ir().Module.parse(text))
    assert _native.print_mlir(text, verify=True, strict=True) == expected


def test_stablehlo_mesh_with_device_ids_reads_and_prints_as_jaxlib() -> None:
    """A StableHLO mesh with device ids (a splat, a permutation, two dimensions) is read natively
    and printed as jaxlib prints it (``device_ids=`` and a canonical dense literal), and the
    native passes run on a module holding one as jaxlib's do."""
    from jaxlib.mlir import passmanager
    from shardwise._jaxlib import context, ir

    text = next(p for p in _corpus_cases() if str(p).endswith("lift_inlined_meshes__008.in.mlir")).read_text()
    mesh = '#stablehlo.mesh<axes = [#stablehlo.mesh_axis<name = "z", size = 4>]>'
    assert mesh in text
    for ids in (
        "dense<[3, 2, 1, 0]> : tensor<4xi64>",
        "dense<[1,1,1,1]> : tensor<4xi64>",
        "dense<[[0, 1], [2, 3]]> : tensor<2x2xi32>",
    ):
        changed = text.replace(mesh, mesh[:-1] + f", device_ids = {ids}>")
        with context():
            expected = str(ir().Module.parse(changed))
        assert "device_ids=dense<" in expected
        assert _native.print_mlir(changed, verify=True, strict=True) == expected
        module = load_mlir(changed, reader="native")
        run_pipeline(module, "builtin.module(sdy-lift-inlined-meshes)")
        with context():
            m = ir().Module.parse(changed)
            passmanager.PassManager.parse("builtin.module(sdy-lift-inlined-meshes)").run(m.operation)
            assert module.to_mlir() == str(m)


def test_unsupported_text_falls_back_to_jaxlib_and_native_refuses_it() -> None:
    # An attribute alias: jaxlib resolves it, the native reader does not read aliases.
    text = (
        '#sh = #sdy.sharding<@mesh, [{"x"}]>\n'
        'sdy.mesh @mesh = <["x"=2]>\n'
        "func.func @main(%a: tensor<2xf32> {sdy.sharding = #sh}) -> tensor<2xf32> {\n"
        "  return %a : tensor<2xf32>\n"
        "}\n"
    )
    module = load_mlir(text)  # auto: jaxlib reads it
    assert '{sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}' in module.to_mlir()
    # Its Python IR, written out, is read natively: the passes run on it.
    run_pipeline(module, "builtin.module(sdy-lift-inlined-meshes)")
    with pytest.raises(ProgramError, match=r"cannot parse MLIR: line 1, column 1: attribute aliases"):
        load_mlir(text, reader="native")
    with pytest.raises(ValueError, match="reader must be one of auto, native, jaxlib, got 'mlir'"):
        load_mlir(text, reader="mlir")


def test_native_errors_name_line_and_column() -> None:
    text = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %b : tensor<4xf32>\n}\n"
    with pytest.raises(ProgramError, match=r"line 2, column 10: use of undefined value %b"):
        load_mlir(text, reader="native")


#: Runs in a fresh interpreter where ``jax`` and ``jaxlib`` cannot be imported, as when they
#: are not installed: loads a raw JAX step (read from stdin), propagates it, saves it.
_NO_JAX = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoJax(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("jax", "jaxlib"):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, NoJax())
    import warnings
    import shardwise as sw
    warnings.simplefilter("ignore")
    text = sys.stdin.read()
    m = sw.load_mlir(text)
    out = sw.propagate(m)
    path = sys.argv[1]
    out.save(path)
    back = sw.load_mlir(path)
    assert "jax" not in sys.modules and "jaxlib" not in sys.modules, sorted(sys.modules)
    print(len(list(back.op.walk())), "ops")
    """
)


def test_without_jax_a_jax_program_loads_propagates_and_saves(tmp_path: Path) -> None:
    text = real_model("mlp").text
    out = tmp_path / "out.mlir"
    r = subprocess.run(
        [sys.executable, "-c", _NO_JAX, str(out)], input=text, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ops" in r.stdout
    # What was saved without jax is, byte for byte, what jaxlib's reader and printer give here.
    from shardwise import propagate

    assert out.read_text() == propagate(load_mlir(text, reader="jaxlib")).to_mlir(printer="jaxlib")


def test_floats_print_digit_for_digit_as_mlir_prints_them() -> None:
    """Random f32 and f64 constants (normal and subnormal, 1e-40 to 3.4e38 and the f64
    extremes) written with 17 significant digits: the native reader gives each the text MLIR's
    printer gives it (the 6-digit form, APFloat's shortest form, or hexadecimal)."""
    import random

    import numpy as np

    rng = random.Random(1)
    values = [0.1, 0.7, 1.0, -2.5, 1e-5, 9.765625e-4, 0.797884583, 3.4028234663852886e38, 1234567.0, 5e-324]
    for _ in range(1500):
        k = rng.random()
        if k < 0.3:
            values.append(rng.uniform(-10, 10))
        elif k < 0.6:
            values.append(10 ** rng.uniform(-40, 38) * rng.choice([1, -1]))
        elif k < 0.8:
            values.append(round(rng.uniform(-1000, 1000), rng.randint(0, 7)))
        else:
            values.append(rng.randint(-(10**9), 10**9) / 2 ** rng.randint(0, 30))
    for ty in ("f32", "f64"):
        cast = [float(np.float32(v)) if ty == "f32" else v for v in values]
        lines = [f"  %c{i} = stablehlo.constant dense<{v:.17e}> : tensor<{ty}>" for i, v in enumerate(cast)]
        text = "func.func @f() {\n" + "\n".join(lines) + "\n  return\n}\n"
        ref = load_mlir(text, reader="jaxlib").funcs[0].body.ops
        got = load_mlir(text, reader="native").funcs[0].body.ops
        assert [o.attributes for o in got] == [o.attributes for o in ref], ty


# -- the native verifier behind ``to_mlir`` --


def _mlp() -> Module:
    from shardwise import Mesh
    from shardwise.ir import Builder

    b = Builder(Mesh({"x": 2, "y": 2}))
    x = b.arg((8, 4), sharding=b.sharding([["x"], None]))
    w = b.arg((4, 2))
    return b.ret(b.tanh(b.dot_general(x, w, contracting=((1,), (0,)))))


def _break(m: Module, how: str) -> str:
    """Breaks ``m`` as a buggy pass or a user's Builder program could; the op the native
    verifier is to name."""
    from shardwise.ir.types import TensorType
    from shardwise.sharding import DimSharding, TensorSharding

    f = m.funcs[0]
    dot = next(op for op in m.op.walk() if op.name == "stablehlo.dot_general")
    tanh = next(op for op in m.op.walk() if op.name == "stablehlo.tanh")
    if how == "operand count":
        tanh.operands.append(tanh.operands[0])
        return "stablehlo.tanh: expects 1 operands, got 2"
    if how == "sharding rank":
        s = f.args[0].sharding
        assert s is not None and s.mesh is not None
        f.args[0].sharding = TensorSharding(s.mesh, [*s.dims, DimSharding((), closed=True)], mesh_name=s.mesh_name)
        return "func.func: argument 0: invalid sharding"
    if how == "result shape":
        dot.results[0].type = TensorType((8, 3), "f32")
        return "stablehlo.dot_general: result shape [8, 3] is not the [8, 2]"
    assert how == "return type"
    f.result_types[0] = TensorType((8, 3), "f32")
    return "func.return: has operand types (tensor<8x2xf32>), but the enclosing function returns (tensor<8x3xf32>)"


@pytest.mark.parametrize("how", ["operand count", "sharding rank", "result shape", "return type"])
def test_to_mlir_refuses_a_broken_module_as_jaxlib_does(how: str, tmp_path: Path) -> None:
    m = _mlp()
    assert m.to_mlir() == m.to_mlir(printer="jaxlib")
    want = _break(m, how)
    for printer in ("auto", "native", "jaxlib"):
        with pytest.raises(ProgramError, match="does not verify") as e:
            m.to_mlir(printer=printer)
        assert "\n" not in str(e.value)
        if printer != "jaxlib":  # the op, and what is wrong
            assert str(e.value).startswith(f"the module does not verify: {want}"), str(e.value)
    out = tmp_path / "m.mlir"
    with pytest.raises(ProgramError):
        m.save(out)
    assert not out.exists()


def test_auto_prints_through_jaxlib_an_op_the_native_printer_has_no_custom_form_for() -> None:
    """``stablehlo.composite`` has a custom form in jaxlib that the native printer lacks: it
    prints the op in the generic form (valid MLIR), and ``auto`` hands the module to jaxlib."""
    import jax
    import jax.numpy as jnp

    double = jax.lax.composite(lambda x: x * 2, name="my.double")
    text = jax.jit(lambda x: double(x)).lower(jnp.ones((4,))).as_text()
    m = load_mlir(text)
    assert m.to_mlir() == m.to_mlir(printer="jaxlib")
    assert '"stablehlo.composite"(%arg0)' in m.to_mlir(printer="native")
    with pytest.raises(_native.MlirReadError, match="no custom form for 'stablehlo.composite'") as e:
        _native.print_mlir(m.to_mlir(generic=True), strict=True)
    assert e.value.unsupported


def _refused(m: Module, printer: str) -> bool:
    """Whether ``to_mlir(printer=printer)`` refuses ``m`` (``ProgramError``)."""
    try:
        m.to_mlir(printer=printer)
    except ProgramError:
        return True
    return False


@pytest.mark.skipif(conformance_dir() is None, reason="needs ../shared/conformance")
def test_mutated_corpus_modules_native_verifier_never_refuses_what_jaxlib_accepts() -> None:
    """Seeded mutations of corpus modules at the IR level (an operand dropped or added, a
    result dimension grown, a sharding's rank changed): the native verifier refuses no module
    jaxlib accepts (but those jaxlib accepts and then prints as text it cannot read back, such
    as a ``stablehlo.reduce`` with an odd number of operands), and refuses every mutation of
    the kinds it checks (operand counts, sharding ranks) that jaxlib refuses."""
    import random

    from shardwise._jaxlib import context, ir
    from shardwise.ir.types import TensorType
    from shardwise.sharding import DimSharding, TensorSharding

    rng = random.Random(7)

    def mutate(m: Module) -> str | None:
        ops = [op for op in m.op.walk() if op.name not in ("builtin.module", "func.func", "sdy.mesh")]
        if not ops:
            return None
        op = rng.choice(ops)
        kind = rng.choice(["drop operand", "add operand", "result shape", "sharding rank"])
        if kind == "drop operand" and op.operands:
            op.operands.pop(rng.randrange(len(op.operands)))
        elif kind == "add operand" and op.operands:
            op.operands.append(op.operands[0])
        elif kind == "result shape" and op.results and isinstance(op.results[0].type, TensorType):
            t = op.results[0].type
            if not t.rank or min(t.shape) < 0:
                return None
            shape = list(t.shape)
            shape[rng.randrange(len(shape))] += 1
            op.results[0].type = TensorType(tuple(shape), t.element_type)
        elif kind == "sharding rank":
            v = next((v for v in op.results if v.sharding is not None and v.sharding.mesh is not None), None)
            if v is None or v.sharding is None or v.sharding.mesh is None or not v.sharding.mesh.axes:
                return None
            s = v.sharding
            v.sharding = TensorSharding(s.mesh, [*s.dims, DimSharding((), closed=True)], mesh_name=s.mesh_name)
        else:
            return None
        return kind

    files = corpus_files()
    rng.shuffle(files)
    seen: dict[str, list[int]] = {}
    for path in files[:250]:
        text = path.read_text()
        try:
            load_mlir(text, reader="jaxlib").to_mlir(printer="jaxlib")
        except ProgramError:
            continue
        m = load_mlir(text)
        kind = mutate(m)
        if kind is None:
            continue
        j, n = _refused(m, "jaxlib"), _refused(m, "native")
        if n and not j:  # only where jaxlib's verifier missed it: its print does not parse
            with context(), pytest.raises(ir().MLIRError):
                ir().Module.parse(m.to_mlir(printer="jaxlib"))
        counts = seen.setdefault(kind, [0, 0])
        counts[0] += j
        counts[1] += j and n
    assert sum(c[0] for c in seen.values()) >= 50, seen
    for kind in ("drop operand", "add operand", "sharding rank"):
        assert seen[kind][1] == seen[kind][0], (kind, seen)


def test_load_mlir_verifies_what_it_reads(tmp_path: Path) -> None:
    """A program that only a verifier rejects (here a ``dot_general`` whose result shape is
    not the operands') is refused at load with the op and its place in the file (jax
    installed or not); ``reader="jaxlib"`` refuses it with MLIR's diagnostics."""
    path = tmp_path / "bad.mlir"
    path.write_text(
        "func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x5xf32> {\n"
        "  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
        "(tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x5xf32>\n"
        "  return %0 : tensor<2x5xf32>\n"
        "}\n"
    )
    for reader in ("native", "auto"):
        with pytest.raises(ProgramError) as e:
            load_mlir(path, reader=reader)
        assert str(e.value) == (
            f'invalid MLIR from {path}: stablehlo.dot_general at loc("{path}":2:8): '
            "result shape [2, 5] is not the [2, 4] of the batching and free dimensions"
        )
    with pytest.raises(ProgramError, match="cannot parse MLIR"):
        load_mlir(path, reader="jaxlib")


#: The ops whose shapes the verifier infers beyond their operand counts
#: (``rust/src/mlir/verify/slicing.rs`` and ``window.rs``).
INFERRED = ("slice", "pad", "gather", "scatter", "convolution", "dynamic_slice", "iota", "reduce", "reduce_window")


@pytest.mark.skipif(conformance_dir() is None, reason="needs ../shared/conformance")
def test_mutated_slicing_and_windowed_ops_are_refused_as_jaxlib_refuses_them() -> None:
    """Seeded mutations of the ops in :data:`INFERRED` in corpus modules: an integer of one of
    their attributes moved (by -1, +1, +2, or to 0 or -1), or one dimension of a result or an
    operand changed. The native verifier refuses exactly what jaxlib refuses, but where jaxlib
    finds the fault at another op whose shapes are not inferred natively (an operand changed
    at its definition)."""
    import random
    import re

    from shardwise.ir.types import TensorType

    rng = random.Random(11)
    names = {f"stablehlo.{n}" for n in INFERRED}
    files = [p for p in corpus_files() if any(f"stablehlo.{n}" in p.read_text() for n in INFERRED[:7])]
    assert len(files) >= 20, len(files)

    def mutate(m: Module) -> str | None:
        ops = [op for op in m.op.walk() if op.name in names]
        if not ops:
            return None
        op = rng.choice(ops)
        kind = rng.choice(["attribute", "attribute", "result", "operand"])
        if kind == "attribute":
            keys = [
                k for k, v in op.attributes.items() if re.search(r"\d", v) and "." not in k and k != "precision_config"
            ]
            if not keys:
                return None
            key = rng.choice(keys)
            text = op.attributes[key]
            # Integers, not the digits of a type (i64, tensor<2x2xi64>).
            nums = [
                n
                for n in re.finditer(r"-?\d+", text)
                if not re.match(r"[a-z]", text[max(n.start() - 1, 0)]) and text[n.end() : n.end() + 1] not in ("x", "i")
            ]
            if not nums:
                return None
            n = rng.choice(nums)
            new = rng.choice([int(n.group()) - 1, int(n.group()) + 1, int(n.group()) + 2, 0, -1])
            op.attributes[key] = text[: n.start()] + str(new) + text[n.end() :]
            return f"{op.name} {key}"
        values = [
            v
            for v in (op.results if kind == "result" else op.operands)
            if isinstance(v.type, TensorType) and v.type.rank and min(v.type.shape) >= 0
        ]
        if not values:
            return None
        v = rng.choice(values)
        shape = list(v.type.shape)
        i = rng.randrange(len(shape))
        shape[i] = max(shape[i] + rng.choice([-1, 1, 2]), 0)
        v.type = TensorType(tuple(shape), v.type.element_type)
        return f"{op.name} {kind}"

    counts = {"jaxlib refused": 0, "native too": 0, "operand missed": 0}
    trials = 0
    while trials < 200:
        m = load_mlir(rng.choice(files).read_text())
        kind = mutate(m)
        if kind is None:
            continue
        trials += 1
        j, n = _refused(m, "jaxlib"), _refused(m, "native")
        assert j or not n, f"{kind}: refused natively, accepted by jaxlib"
        if j and not n:
            assert kind.endswith("operand"), f"{kind}: refused by jaxlib only"
            counts["operand missed"] += 1
        counts["jaxlib refused"] += j
        counts["native too"] += j and n
    assert counts["jaxlib refused"] >= 100, counts


COLLECTIVES = (
    "all_gather",
    "all_slice",
    "all_reduce",
    "reduce_scatter",
    "collective_permute",
    "all_to_all",
    "replicated_to_unreduced",
    "sharded_to_unreduced",
)


@pytest.mark.skipif(conformance_dir() is None, reason="needs ../shared/conformance")
def test_mutated_collectives_are_refused_as_jaxlib_refuses_them() -> None:
    """The collectives of partitioned corpus programs (``partition``'s global module), each
    mutated in one axis reference of its ``out_sharding`` or its own axes (dropped, renamed to
    another mesh axis, or moved to another dimension of the ``out_sharding``): the native
    verifier (``rust/src/mlir/verify/collectives.rs``) refuses exactly what jaxlib refuses."""
    import random
    import re

    from shardwise.spmd.partition import partition

    rng = random.Random(5)
    names = {f"sdy.{n}" for n in COLLECTIVES}
    programs = []
    for path in sorted((conformance_dir() or Path()).glob("dev/*.in.mlir")):
        try:
            g = partition(load_mlir(path.read_text())).global_module
        except ProgramError:
            continue  # what the partitioner does not take (dynamic shapes, several meshes)
        if any(op.name in names for op in g.op.walk()):
            programs.append(g.to_mlir())
    assert len(programs) >= 20, len(programs)
    axis = re.compile(r'"[a-z_0-9]+"(?::\(\d+\)\d+)?')

    def mutate(m: Module) -> str | None:
        op = rng.choice([op for op in m.op.walk() if op.name in names])
        key = rng.choice([k for k in op.attributes if k in ("out_sharding", "axes") or k.endswith("_axes")])
        text = op.attributes[key]
        refs = list(axis.finditer(text))
        if not refs:
            return None
        a = rng.choice(refs)
        kind = rng.choice(["drop", "rename", "move"])
        if kind == "rename":
            other = rng.choice([f'"{n}"' for n in m.meshes[next(iter(m.meshes))].axis_names])
            new = text[: a.start()] + other + text[a.end() :]
        else:
            joins = {"{, ": "{", ", }": "}", ", ,": ","}
            new = re.sub(r"\{, |, \}|, ,", lambda x: joins[x.group()], text[: a.start()] + text[a.end() :])
            if kind == "move":
                braces = [b.start() for b in re.finditer(r"\{", new)]
                if key != "out_sharding" or not braces:
                    return None
                b = rng.choice(braces)
                new = new[: b + 1] + a.group() + ("" if new[b + 1] == "}" else ", ") + new[b + 1 :]
        if new == text:
            return None
        op.attributes[key] = new
        return f"{op.name} {key} {kind}: {new}"

    counts = {"mutations": 0, "jaxlib refused": 0}
    while counts["mutations"] < 150:
        m = load_mlir(rng.choice(programs))
        kind = mutate(m)
        if kind is None:
            continue
        counts["mutations"] += 1
        j, n = _refused(m, "jaxlib"), _refused(m, "native")
        assert j == n, f"{kind}: jaxlib {'refused' if j else 'accepted'}, native {'refused' if n else 'accepted'}"
        counts["jaxlib refused"] += j
    assert counts["jaxlib refused"] >= 75, counts


@pytest.mark.skipif(conformance_dir() is None, reason="needs ../shared/conformance")
def test_mutated_element_types_are_refused_as_jaxlib_refuses_them() -> None:
    """Seeded mutations of corpus modules: the element type of one operand or result of an
    element-wise op changed (to f32, f16, bf16, f64, i1, i32, i64, ui32 or complex<f32>). The
    native verifier (``rust/src/mlir/verify/element_types.rs``) refuses nothing jaxlib accepts,
    and nearly all jaxlib refuses (the rest: another op that uses the value, such as a
    ``stablehlo.case`` index, whose operand types it does not check)."""
    import random

    from shardwise.ir.types import TensorType

    rng = random.Random(3)
    # The quantize ops change the element type by definition (and are left to jaxlib).
    names = set(_native.op_properties()["elementwise"]) - {"stablehlo.uniform_quantize", "stablehlo.uniform_dequantize"}
    files = [p for p in corpus_files() if any(f"{n} " in p.read_text() for n in names)]
    assert len(files) >= 100, len(files)
    kinds = ["f32", "f16", "bf16", "f64", "i1", "i32", "i64", "ui32", "complex<f32>"]
    counts = {"mutations": 0, "jaxlib refused": 0, "native too": 0}
    while counts["mutations"] < 150:
        try:
            m = load_mlir(rng.choice(files).read_text())
        except ProgramError:
            continue  # malformed on purpose (Shardy's verifier tests)
        ops = [op for op in m.op.walk() if op.name in names]
        values = [v for op in ops for v in (*op.operands, *op.results) if isinstance(v.type, TensorType)]
        if not values:
            continue
        v = rng.choice(values)
        v.type = TensorType(tuple(v.type.shape), rng.choice([k for k in kinds if k != v.type.element_type]))
        counts["mutations"] += 1
        j, n = _refused(m, "jaxlib"), _refused(m, "native")
        assert j or not n, f"{v.type}: refused natively, accepted by jaxlib"
        counts["jaxlib refused"] += j
        counts["native too"] += j and n
    assert counts["native too"] >= 0.95 * counts["jaxlib refused"] >= 100, counts
