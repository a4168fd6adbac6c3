"""The native MLIR reader and printer (``rust/src/mlir``, ``shardwise.importers.native``)
against jaxlib's parser and printer: over every module of the conformance corpus and the real
flax/optax training steps lowered raw (calls, ``chlo``, ``while`` and all),

* the module read natively is the module the jaxlib importer builds (same ops, operands,
  types, attributes as jaxlib prints them, shardings and locations), or the text is refused as
  unsupported and ``load_mlir`` hands it to jaxlib;
* the native printer prints the text byte for byte as jaxlib prints it, and so does
  ``to_mlir(printer="native")`` after propagation.

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
from shardwise.testing.corpus import conformance_dir, corpus_files
from shardwise.testing.real_models import model_names, real_model

#: The real models use ops without a sharding rule (chlo.square): propagation warns.
pytestmark = pytest.mark.filterwarnings("ignore::shardwise.rules.exceptions.UnknownOpWarning")

#: Corpus modules the native reader refuses (jaxlib reads them): Shardy's lit tests of
#: ``#stablehlo.mesh`` attributes, which jaxlib prints in another spelling than they are
#: written (``axes=[<name = "z", size = 4>]``).
REFUSED = {"lit/lift_inlined_meshes__008.in.mlir", "lit/lift_inlined_meshes__008.out.mlir"}


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
            got = _native.print_mlir(text)
        except _native.MlirReadError as e:
            assert e.unsupported, f"{path}: {e}"
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
    assert _native.print_mlir(text) == expected


def test_unsupported_text_falls_back_to_jaxlib_and_native_refuses_it() -> None:
    text = next(p for p in _corpus_cases() if str(p).endswith("lift_inlined_meshes__008.in.mlir")).read_text()
    assert load_mlir(text).funcs  # auto: jaxlib reads it
    with pytest.raises(ProgramError, match=r"cannot parse MLIR: line \d+, column \d+: stablehlo mesh"):
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
