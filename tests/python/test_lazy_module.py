"""A module read by ``load_mlir`` stays a Rust program (``Module.native``) until its Python ops
are asked for: ``propagate``, ``copy``, ``to_mlir``, ``save`` and ``propagate_many`` run in
Rust on it, and give what the Python IR and passes give, locations included once built."""

from __future__ import annotations

import pathlib
import warnings

import pytest
import shardwise as sw
from shardwise import _native
from shardwise.errors import PipelineError, ProgramError, ShardwiseError
from shardwise.importers.mlir import load_mlir
from shardwise.passes.pipeline import run_pipeline
from shardwise.rules.registry import register_op_rule, unregister_op_rule
from shardwise.testing.corpus import conformance_dir, corpus_files
from shardwise.testing.programs import transformer_step
from shardwise.testing.real_models import model_names, real_model

_FULL = "builtin.module(sdy-propagation-pipeline)"


def _python(module: sw.Module) -> sw.Module:
    """``propagate`` of the module built as Python ops first (which writes it and reads it back
    natively)."""
    built = module.copy()
    built.op  # noqa: B018 (builds the Python ops)
    assert built.native is None
    return sw.propagate(built)


def _signature(module: sw.Module) -> list[tuple[str, str]]:
    """Every op's name and location, and every value's type and sharding, in pre-order (the
    attributes are in the printed text, which normalizes their spelling). An op a pass
    created has no location in Python and ``loc(unknown)`` natively."""
    out = [(op.name, op.location or "loc(unknown)") for op in module.walk()]
    out += [(str(v.type), str(v.sharding)) for v in module.values()]
    return out


def _same(lazy: sw.Module, python: sw.Module) -> None:
    """``lazy`` (still native) prints as ``python`` and, once built, is the same IR."""
    assert lazy.native is not None
    assert lazy.to_mlir() == python.to_mlir()
    lazy.op  # noqa: B018
    assert lazy.native is None
    assert lazy.to_mlir() == python.to_mlir()  # built from the tables the passes left
    assert _signature(lazy) == _signature(python)


def test_a_loaded_module_stays_native_through_copy_propagate_and_save(tmp_path: pathlib.Path) -> None:
    m = load_mlir(transformer_step(2))
    assert m.native is not None and len(m.native) > 100
    assert "not built" in repr(m)
    copy = m.copy()
    assert copy.native is m.native  # immutable: shared
    out = sw.propagate(m)
    assert out.native is not None and out.native is not m.native
    ops = len(out.native)
    assert m.native is not None  # the input is left as it was
    path = tmp_path / "out.mlir"
    out.save(str(path))
    assert out.native is not None
    python = _python(m)
    assert path.read_text() == python.to_mlir()
    _same(out, python)
    assert ops == sum(1 for _ in out.walk()) == sum(1 for _ in python.walk())  # erased ops not counted
    # Building the input then gives the module as read.
    assert copy.to_mlir() == m.to_mlir()
    assert [op.location for op in m.walk()] == [
        op.location for op in load_mlir(transformer_step(2), reader="jaxlib").walk()
    ]


def test_in_place_propagation_replaces_the_native_program() -> None:
    m = load_mlir(transformer_step(1))
    before = m.native
    assert sw.propagate(m, in_place=True) is m
    assert m.native is not None and m.native is not before
    assert m.to_mlir() == _python(load_mlir(transformer_step(1))).to_mlir()


@pytest.mark.parametrize("pipeline", ["basic", "aggressive", "op-priority", "user-priority", "full"])
def test_every_named_pipeline_runs_natively_and_as_in_python(pipeline: str) -> None:
    text = transformer_step(1)
    for conservative in (False, True):
        lazy = sw.propagate(load_mlir(text), pipeline, conservative=conservative)
        built = load_mlir(text)
        built.op  # noqa: B018
        python = sw.propagate(built, pipeline, conservative=conservative)
        _same(lazy, python)


@pytest.mark.parametrize("name", model_names())
def test_raw_jax_steps_with_calls_propagate_natively_as_in_python(name: str) -> None:
    m = load_mlir(real_model(name).text)
    with warnings.catch_warnings(record=True) as native_warnings:
        warnings.simplefilter("always")
        lazy = sw.propagate(m)
    with warnings.catch_warnings(record=True) as python_warnings:
        warnings.simplefilter("always")
        python = _python(m)
    assert [str(w.message) for w in native_warnings] == [str(w.message) for w in python_warnings]
    _same(lazy, python)


@pytest.mark.skipif(conformance_dir() is None, reason="needs ../shared/conformance")
def test_the_corpus_propagates_natively_as_in_python_with_locations() -> None:
    same = refused = 0
    for path in corpus_files():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                m = load_mlir(path.read_text())
            except ShardwiseError:  # refused modules: test_native_reader and test_faults
                continue
            if m.native is None:  # read by jaxlib
                continue
            try:
                python = _python(m)
            except ShardwiseError as e:
                with pytest.raises(type(e)) as native:
                    sw.propagate(m)
                assert str(native.value) == str(e), path
                refused += 1
                continue
            lazy = sw.propagate(m)
        try:
            _same(lazy, python)
        except AssertionError:
            raise AssertionError(path) from None
        same += 1
    assert same >= 900 and refused >= 150, (same, refused)


def test_a_user_rule_takes_the_python_passes_for_rules_and_leaves_the_input_native() -> None:
    m = load_mlir(transformer_step(1))
    expected = _python(m).to_mlir()

    register_op_rule("shardwise_test.op", lambda op, c: None)
    try:
        out = sw.propagate(m)
    finally:
        unregister_op_rule("shardwise_test.op")
    # The passes that read rules ran on the Python IR, the others natively: the last ones
    # (the export passes) leave a Rust program.
    assert out.native is not None and m.native is not None
    assert out.to_mlir() == expected


def test_propagate_many_runs_native_modules_on_threads_and_notes_the_failing_one() -> None:
    texts = [transformer_step(1), transformer_step(2), transformer_step(1)]
    expected = [_python(load_mlir(t)).to_mlir() for t in texts]
    for threads in (1, 2):
        mods = [load_mlir(t) for t in texts]
        out = sw.propagate_many(mods, threads=threads)
        assert isinstance(out, list)
        assert all(m.native is not None for m in out)
        assert [m.to_mlir() for m in out] == expected
    # One module built: it is read back from its Python ops and propagated with the others,
    # with the same results, and left as it was.
    mods = [load_mlir(t) for t in texts]
    mods[1].op  # noqa: B018
    before = mods[1].to_mlir()
    out = sw.propagate_many(mods, threads=2)
    assert isinstance(out, list) and all(m.native is not None for m in out) and mods[1].native is None
    assert [m.to_mlir() for m in out] == expected
    assert mods[1].to_mlir() == before
    # A program the propagation refuses: the error names it.
    bad = load_mlir(_MISMATCHED_GROUP)
    for threads in (1, 2):
        with pytest.raises(ProgramError, match="must have the same shape") as info:
            sw.propagate_many([load_mlir(texts[0]), load_mlir(texts[1]), bad], threads=threads)
        assert "in program 2 of 3" in info.value.__notes__
    with pytest.raises(ProgramError, match="must have the same shape"):
        sw.propagate(bad)
    with pytest.raises(ProgramError, match="must have the same shape"):
        _python(bad)


_MISMATCHED_GROUP = """module {
  sdy.mesh @m = <["x"=2]>
  func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<4xf32>) -> tensor<8xf32> {
    sdy.sharding_group %arg0 group_id=0 : tensor<8xf32>
    sdy.sharding_group %arg1 group_id=0 : tensor<4xf32>
    return %arg0 : tensor<8xf32>
  }
}
"""


def test_printing_falls_back_to_the_built_module_for_an_op_without_a_native_custom_form() -> None:
    text = """
func.func @main(%arg0: tensor<4xf32>) -> tensor<i32> {
  %0 = "stablehlo.get_dimension_size"(%arg0) {dimension = 0 : i64} : (tensor<4xf32>) -> tensor<i32>
  return %0 : tensor<i32>
}
"""
    m = load_mlir(text)
    assert m.native is not None
    with pytest.raises(_native.MlirReadError, match="no custom form"):
        m.native.print(strict=True)
    generic = m.native.print()
    assert '"stablehlo.get_dimension_size"' in generic
    printed = m.to_mlir()
    built = load_mlir(text)
    built.op  # noqa: B018
    assert printed == built.to_mlir()
    assert m.to_mlir(printer="native") == generic


def test_a_built_module_has_no_native_program_to_replace() -> None:
    m = load_mlir(transformer_step(1))
    program = m.native
    assert program is not None
    m.op  # noqa: B018
    with pytest.raises(ValueError, match="Python ops are built"):
        m.with_native(program)
    assert sw.Module("x").native is None


def test_an_unknown_pass_on_a_native_module_is_refused_as_on_a_built_one() -> None:
    m = load_mlir(transformer_step(1))
    with pytest.raises(PipelineError, match="unknown pass 'sdy-no-such-pass'") as native:
        sw.propagate(m, "builtin.module(sdy-no-such-pass)")
    assert m.native is not None
    with pytest.raises(PipelineError) as python:
        run_pipeline(m.copy(), "builtin.module(sdy-no-such-pass)")
    assert str(native.value) == str(python.value)


_CALLED = """
module {
  sdy.mesh @m = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m, [{"x"}, {}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = call @f(%0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %2 = stablehlo.multiply %1, %arg1 : tensor<8x8xf32>
    return %2 : tensor<8x8xf32>
  }
  func.func private @f(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}"""


def test_native_passes_on_a_built_module_keep_the_python_objects_of_what_they_keep() -> None:
    """``propagate(..., in_place=True)`` and ``run_pipeline`` on a built module run the native
    passes (the module is written with its locations and read back) and build the module again
    with the Python objects of the ops, functions and values the passes kept: arguments and
    results held before read the propagated shardings; the ops they replaced are new objects;
    the text is the one the passes give on the module's text."""
    m = load_mlir(_CALLED)
    main = m.func("main")
    arg1 = main.args[1]
    add = main.body.ops[0]
    location = add.location
    sw.propagate(m, in_place=True)
    assert m.native is not None  # built again when asked for
    assert m.to_mlir() == sw.propagate(load_mlir(_CALLED)).to_mlir()
    new_main = m.func("main")
    assert new_main is main and main.parent is m.op.regions[0].entry and main.regions[0].parent is main
    assert main.result_shardings == sw.propagate(load_mlir(_CALLED)).func("main").result_shardings
    assert new_main.args[1] is arg1 and arg1.owner is new_main.body
    assert str(arg1.sharding) == '#sdy.sharding<@m, [{"x"}, {}]>'
    assert new_main.body.ops[0] is add and add.results[0].sharding is not None
    assert add.parent is new_main.body and add.location == location
    assert add.operands[1] is arg1
    # A pass that replaces ops: the constant splitter's sdy.constant is a new op.
    m2 = load_mlir(
        "module {\n  func.func @main() -> tensor<2xf32> {\n    %0 = stablehlo.constant dense<1.0> : tensor<2xf32>\n    return %0 : tensor<2xf32>\n  }\n}"
    )
    const = m2.func("main").body.ops[0]
    run_pipeline(m2, "builtin.module(sdy-constant-or-scalar-splitter)")
    new = m2.func("main").body.ops[0]
    assert new.name == "sdy.constant" and new is not const


_KERNEL = """
module {
  sdy.mesh @m = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m, [{"x"}, {}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %1 = stablehlo.negate %0 : tensor<8x8xf32>
    return %1 : tensor<8x8xf32>
  }
}"""


def test_a_users_rule_reaches_the_native_passes_and_leaves_no_attribute() -> None:
    """A rule registered for a custom call is set on the op for the native passes that read
    rules (``shardwise.user_rule``) and removed after them: propagation goes through the
    kernel as the rule says, ``sdy-populate-op-sharding-rules`` writes it, and no
    ``shardwise.user_rule`` is left, on a native and on a built module alike."""
    from shardwise.passes import PASSES
    from shardwise.rules import register_rule, unregister_rule

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        without = sw.propagate(load_mlir(_KERNEL)).to_mlir()
    register_rule("my_kernel", "i j -> i j")
    try:
        native = sw.propagate(load_mlir(_KERNEL)).to_mlir()
        built = load_mlir(_KERNEL)
        built.op  # noqa: B018
        sw.propagate(built, in_place=True)
        populated = load_mlir(_KERNEL)
        PASSES["sdy-populate-op-sharding-rules"](populated)
        populated_text = populated.to_mlir()
    finally:
        unregister_rule("my_kernel")
    kernel = next(line for line in native.splitlines() if "@my_kernel" in line)
    assert '<@m, [{"x"}, {}]>' in kernel and kernel not in without
    assert built.to_mlir() == native
    assert "shardwise.user_rule" not in native + populated_text
    assert "custom>" in next(line for line in populated_text.splitlines() if "@my_kernel" in line)
