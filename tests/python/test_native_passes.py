"""The native passes (``rust/src/transforms/``, run by ``shardwise._native.run_native_passes``
on text) give, module for module, the text ``run_pipeline`` gives on the same module loaded and
built as Python ops (written with its locations, read back natively and built again with the
objects the passes kept: ``shardwise.passes.native``), on the conformance corpus and on raw JAX
training steps of real flax models (calls and all), with the same warnings and refusals. The
passes themselves are compared with jaxlib's Shardy pass by pass in ``test_passes.py`` and the
corpus tests."""

from __future__ import annotations

import pathlib
import re
import warnings

import pytest
from shardwise import _native
from shardwise.errors import PassWarning, ProgramError, ShardwiseError
from shardwise.importers.mlir import load_mlir
from shardwise.passes.pipeline import native_steps, run_pipeline
from shardwise.testing.corpus import conformance_dir, corpus_files
from shardwise.testing.native_passes import AFTER, CANONICALIZE, EXPORT, NATIVE, PIPELINE, PROPAGATE
from shardwise.testing.real_models import model_names, plain_model, real_model

#: Each native pass alone (on the corpus as it is: the lit cases of each pass), then the import
#: part in a row, then each propagation pass after it, then the propagation pipeline so far.
_CORPUS_RUNS = (
    [[p] for p in dict.fromkeys(NATIVE + AFTER + EXPORT)]
    + [["sdy-unflatten-call-graph{dedup-functions-fully=true}"], NATIVE]
    + [[*NATIVE, step] for step in PROPAGATE]
    + [PIPELINE, [*NATIVE, PROPAGATE[0], *AFTER, "sdy-insert-explicit-reshards{enable-full-version=true}"]]
)


def _python(text: str, passes: list[str]) -> str:
    """``passes`` run by ``run_pipeline`` on ``text`` loaded and built as Python ops."""
    m = load_mlir(text)
    m.op  # noqa: B018  (built)
    run_pipeline(m, "builtin.module(" + ",".join(passes) + ")")
    return m.to_mlir()


def _native_text(text: str, passes: list[str]) -> str | None:
    """The native passes' output, or None when the native reader does not know the text
    (``load_mlir`` then reads it through jaxlib)."""
    try:
        return _native.run_native_passes(text, passes)
    except _native.MlirReadError as e:
        if e.unsupported:
            return None
        raise


def _both(text: str, passes: list[str]) -> tuple[str | None, list[str], str, list[str]]:
    """The passes' texts on the text and on the built module (or ``ErrorClass: message`` where
    a pass refuses the program), each with the warnings it gave. A pass that leaves a program
    the verifier refuses (a lit case's input that is no valid program) is ``does not verify:
    detail`` on both sides (an ``MlirVerifyError`` on text, a ``ProgramError`` on the built
    module)."""
    with warnings.catch_warnings(record=True) as native_warnings:
        warnings.simplefilter("always")
        try:
            native = _native_text(text, passes)
        except _native.MlirVerifyError as e:
            native = f"does not verify: {e.detail}"
        except ShardwiseError as e:
            native = f"{type(e).__name__}: {e}"
    with warnings.catch_warnings(record=True) as python_warnings:
        warnings.simplefilter("always")
        try:
            python = _python(text, passes)
        except ShardwiseError as e:
            python = f"{type(e).__name__}: {e}"
            unverified = re.match(
                r"ProgramError: the module does not verify: .*? at loc\(.*?\): (.*)", python, re.DOTALL
            )
            if unverified:
                python = f"does not verify: {unverified.group(1)}"
    return native, [str(w.message) for w in native_warnings], python, [str(w.message) for w in python_warnings]


@pytest.mark.skipif(conformance_dir() is None, reason="needs ../shared/conformance")
@pytest.mark.parametrize(
    "passes",
    _CORPUS_RUNS,
    ids=lambda p: "+".join(p) if len(p) < len(NATIVE) else "import" + "+".join(["", *p[len(NATIVE) :]])[:60],
)
def test_native_passes_give_the_same_text_on_built_modules_on_the_corpus(passes: list[str]) -> None:
    same = changed = refused = 0
    for path in corpus_files():
        text = path.read_text()
        try:
            before = load_mlir(text).to_mlir()
        except ShardwiseError:  # the corpus's refused modules: test_native_reader covers them
            continue
        native, native_warnings, python, python_warnings = _both(text, passes)
        if native is None:
            continue
        assert native == python, path
        assert native_warnings == python_warnings, path
        same += 1
        refused += native.startswith("ProgramError: ")
        changed += native != before
    assert same >= 1100
    # The corpus's refused sharding groups (manual computation boundaries, shapes) are refused
    # alike, with the same message.
    assert refused >= (4 if passes == ["sdy-sharding-group-import"] else 0)
    # The passes act on the corpus (lit cases of each): the comparison is not of no-ops.
    least = {
        "symbol-dce": 10,
        "sdy-remove-size-one-axes": 5,
        "sdy-propagate-sharding-from-func-to-call": 10,
        "sdy-manual-axes-cleanup": 5,
        "sdy-flatten-call-graph": 20,
        "sdy-import-func-calls": 50,
        "sdy-sharding-group-import": 5,
        "sdy-pre-order-funcs": 50,
        "sdy-apply-sharding-constraints": 20,
        "sdy-export-named-computations": 20,
        "sdy-propagate-to-func-results": 10,
        "sdy-unflatten-call-graph": 10,
        "sdy-unflatten-call-graph{dedup-functions-fully=true}": 10,
        "sdy-insert-func-call-reshards": 20,
        "sdy-constant-or-scalar-merger": 20,
        "sdy-remove-propagation-debug-info": 20,
        "sdy-drop-sharding-rules": 3,
        "sdy-insert-explicit-reshards": 30,
        EXPORT[1]: 30,
        "sdy-remove-sharding-groups": 20,
        "sdy-sharding-constraint-to-reshard": 30,
        "sdy-update-non-divisible-input-output-shardings": 20,
        "sdy-remove-sub-axes-in-input-output-shardings": 10,
        "sdy-close-shardings": 100,
        "sdy-insert-explicit-reshards{enable-full-version=true}": 300,
        # The corpus has few collectives (Shardy's canonicalization lit cases are not in it):
        # test_native_canonicalize.py compares each pattern with jaxlib's.
        CANONICALIZE: 5,
    }
    assert changed >= (0 if passes == ["sdy-save-module"] else least.get(passes[0] if len(passes) == 1 else "", 50))


@pytest.mark.parametrize("annotated", [True, False], ids=["annotated", "plain"])
@pytest.mark.parametrize("name", model_names())
def test_native_passes_give_the_same_text_on_built_modules_on_real_jax_steps(name: str, annotated: bool) -> None:
    text = real_model(name).text if annotated else plain_model(name).text
    assert "call @" in text or "func.call" in text or "stablehlo" in text
    native, native_warnings, python, python_warnings = _both(text, PIPELINE)
    assert native == python
    assert native_warnings == python_warnings
    assert native != _native.run_native_passes(text, NATIVE)  # propagation acted


def test_inlined_meshes_are_lifted_deduplicated_and_described() -> None:
    text = """
module {
  sdy.mesh @a = <["x"=2]>
  sdy.mesh @b = <["x"=2]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@b, [{"x"}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<mesh<["y"=4, "z"=1]>, [{"y"}]>}) {
    %0 = stablehlo.negate %arg0 : tensor<8xf32>
    %1 = "stablehlo.constant"() <{value = dense<1.0> : tensor<f32>}> {sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[3]>, []>]>} : () -> tensor<f32>
    return %0 : tensor<8xf32>
  }
}"""
    out = _native.run_native_passes(text, ["sdy-lift-inlined-meshes", "sdy-remove-size-one-axes"])
    assert out == _python(text, ["sdy-lift-inlined-meshes", "sdy-remove-size-one-axes"])
    assert "@b" not in out and 'sdy.sharding<@a, [{"x"}]>' in out
    assert 'sdy.mesh @mesh = <["y"=4, "z"=1]>' in out and 'sdy.sharding<@mesh, [{"y"}]>' in out
    assert "sdy.mesh @maximal_mesh_3" in out and "device_ids = dense<3> : tensor<1xi64>" in out


def test_unknown_native_pass_is_a_program_error_and_bad_input_is_refused_before_any_pass() -> None:
    text = 'module {\n  sdy.mesh @m = <["x"=2]>\n}\n'
    with pytest.raises(ProgramError, match="no native pass .*sdy-nonsense.*native passes: symbol-dce"):
        _native.run_native_passes(text, ["sdy-nonsense"])
    with pytest.raises(_native.MlirVerifyError, match="argument 0: unknown mesh @n"):
        _native.run_native_passes(
            'module {\n  sdy.mesh @m = <["x"=1]>\n  func.func @f(%arg0: tensor<2xf32> {sdy.sharding = #sdy.sharding<@n, [{}]>}) {\n    return\n  }\n}\n',
            ["sdy-remove-size-one-axes"],
        )


_MANUAL = """
module {
  sdy.mesh @m = <["x"=2, "y"=2]>
  sdy.mesh @n = <["z"=4]>
  func.func @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@m, [{"x"}]>] out_shardings=[<@OUT, [{"x"}]>] manual_axes={"y", "x"} (%arg1: tensor<4xf32>) {
      sdy.return %arg1 : tensor<4xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}"""


def test_manual_axes_are_sorted_and_added_to_replicated() -> None:
    text = _MANUAL.replace("@OUT", "@m")
    out = _native.run_native_passes(text, ["sdy-manual-axes-cleanup"])
    assert out == _python(text, ["sdy-manual-axes-cleanup"])
    assert 'manual_axes={"x", "y"}' in out and 'replicated={"y"}' in out


def test_manual_computation_on_two_meshes_is_refused_before_the_pass() -> None:
    """The native run verifies its input first, as the loader does: a manual computation whose
    shardings are on two meshes never reaches the pass (which refuses it too)."""
    text = _MANUAL.replace('<@OUT, [{"x"}]>', '<@n, [{"z"}]>')
    with pytest.raises(_native.MlirVerifyError, match="sdy.manual_computation"):
        _native.run_native_passes(text, ["sdy-manual-axes-cleanup"])
    with pytest.raises(ProgramError, match="sdy.manual_computation"):
        _python(text, ["sdy-manual-axes-cleanup"])


def test_a_function_called_twice_is_copied_with_a_warning() -> None:
    text = """
module {
  sdy.mesh @m = <["x"=2]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@m, [{"x"}]>}) -> tensor<8xf32> {
    %0 = call @f(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
    %1 = call @f(%0) : (tensor<8xf32>) -> tensor<8xf32>
    return %1 : tensor<8xf32>
  }
  func.func private @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.negate %arg0 : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}"""
    passes = ["sdy-import-func-calls", "symbol-dce"]
    with warnings.catch_warnings(record=True) as python_warnings:
        warnings.simplefilter("always")
        python = _python(text, passes)
    with warnings.catch_warnings(record=True) as native_warnings:
        warnings.simplefilter("always")
        native = _native.run_native_passes(text, passes)
    assert native == python
    assert native.count('sdy.named_computation<"f">') == 2 and "func.func private @f" not in native
    assert [str(w.message) for w in native_warnings] == [str(w.message) for w in python_warnings]
    assert [w.category for w in native_warnings] == [PassWarning]
    assert "function @f has multiple call ops" in str(native_warnings[0].message)


@pytest.mark.skipif(conformance_dir() is None, reason="needs ../shared/conformance")
def test_mutated_corpus_text_through_native_passes_in_any_order_never_panics() -> None:
    """Corpus modules with a line dropped, a token dropped, or an attribute or symbol renamed,
    through random runs of the native passes (in any order): a result, or a refusal that is a
    ``ValueError`` (read, verify or program error), never a panic."""
    import random

    files = corpus_files()
    rng = random.Random(20261128)
    names = [*dict.fromkeys(NATIVE + AFTER + EXPORT), PROPAGATE[0], PROPAGATE[3]]
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(1500):
        lines = rng.choice(files).read_text().splitlines()
        j = rng.randrange(len(lines))
        kind = rng.randrange(4)
        if kind == 0 and len(lines) > 3:
            del lines[rng.randrange(1, len(lines) - 1)]
        elif kind == 1:
            lines[j] = lines[j].replace("sdy.sharding", "sdy.shardingx", 1)
        elif kind == 2:
            tokens = lines[j].split(" ")
            if len(tokens) > 2:
                del tokens[rng.randrange(len(tokens))]
            lines[j] = " ".join(tokens)
        else:
            lines[j] = lines[j].replace("@", "@q", 1)
        passes = rng.sample(names, rng.randint(1, 5))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _native.run_native_passes("\n".join(lines), passes)
            outcomes["ok"] += 1
        except ValueError:
            outcomes["refused"] += 1
    assert outcomes["ok"] > 500 and outcomes["refused"] > 200, outcomes


_GROUPS = """
module {
  sdy.mesh @m = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = sdy.sharding_constraint %arg0 <@m, [{"x"}, {}]> : tensor<8x8xf32>
    %1 = sdy.sharding_constraint %arg1 <@m, [{}, {"y"}]> : tensor<8x8xf32>
    sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
    sdy.sharding_group %1 group_id=0 : tensor<8x8xf32>
    %2 = stablehlo.custom_call @my_kernel(%0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %3 = stablehlo.add %1, %1 : tensor<8x8xf32>
    return %2, %3 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}"""


def test_native_propagation_warns_with_the_python_categories_and_inserts_group_constraints() -> None:
    """Conflicting sharding groups get an open sharding constraint per member
    (``ShardingGroupWarning``) and a custom call without a rule warns ``UnknownOpWarning``,
    with the categories of the Python propagation pass, on text and on a built module."""
    from shardwise.propagation import ShardingGroupWarning
    from shardwise.rules.exceptions import UnknownOpWarning

    passes = ["sdy-sharding-group-import", PROPAGATE[0]]
    with warnings.catch_warnings(record=True) as native_warnings:
        warnings.simplefilter("always")
        native = _native.run_native_passes(_GROUPS, passes)
    with warnings.catch_warnings(record=True) as python_warnings:
        warnings.simplefilter("always")
        python = _python(_GROUPS, passes)
    assert native == python
    assert [(w.category, str(w.message)) for w in native_warnings] == [
        (w.category, str(w.message)) for w in python_warnings
    ]
    assert {w.category for w in native_warnings} == {ShardingGroupWarning, UnknownOpWarning}
    assert native.count("sdy.sharding_constraint") == 4
    assert "sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, j])->([i, j])" in native


def test_native_propagation_options_are_checked() -> None:
    with pytest.raises(ProgramError, match='pass sdy-basic-propagate has no option "nonsense"'):
        _native.run_native_passes(_GROUPS, ["sdy-basic-propagate{nonsense=1}"])
    with pytest.raises(ProgramError, match='option keep-sharding-rules takes true or false, got "maybe"'):
        _native.run_native_passes(_GROUPS, ["sdy-basic-propagate{keep-sharding-rules=maybe}"])
    with pytest.raises(ProgramError, match="unknown propagation strategy"):
        _native.run_native_passes(_GROUPS, ["sdy-aggressive-propagate{propagation-strategy=fast}"])
    with pytest.raises(ProgramError, match='option debug-sharding-origins takes true or false, got "yes please"'):
        _native.run_native_passes(_GROUPS, ['sdy-user-priority-propagate{debug-sharding-origins="yes please"}'])


def test_propagate_text_runs_natively_only_when_the_whole_pipeline_is_native_and_no_user_rule_is_registered(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``shardwise.api.propagate_text`` gives what loading, ``propagate`` and ``to_mlir`` give for
    a pipeline of native passes, and ``None`` (the caller takes the Python path) for a pipeline
    with a pass that is not native, with a user's rule registered, or for text the native
    reader does not support; ``shardwise propagate`` takes that path and writes the same file."""
    from shardwise.api import propagate, propagate_text
    from shardwise.cli import main
    from shardwise.rules.registry import register_op_rule, unregister_op_rule

    text = real_model(model_names()[0]).text
    pipeline = "builtin.module(sdy-propagation-pipeline)"
    # The default pipeline is native from end to end, pass for pass as PIPELINE lists it.
    steps = native_steps(pipeline, _native.native_pass_options())
    assert steps is not None and [s.split("{")[0] for s in steps] == [s.split("{")[0] for s in PIPELINE]
    module = load_mlir(text)
    propagate(module, pipeline, in_place=True)
    expected = module.to_mlir()
    assert propagate_text(text, pipeline) == expected
    assert propagate_text(text, "builtin.module(sdy-user-priority-propagate,sdy-close-shardings-nonsense)") is None
    debug = (
        "builtin.module(sdy-user-priority-propagate{debug-sharding-origins=true debug-propagation-edge-sharding=true})"
    )
    recorded = propagate_text(text, debug)
    assert recorded is not None and "sdy.sharding_origins" in recorded and "sdy.propagation_edges" in recorded
    # sdy-reshard-to-collectives is not native.
    assert propagate_text(text, "builtin.module(sdy-export-pipeline{enable-insert-explicit-collectives=true})") is None
    register_op_rule("mydialect.op", lambda op, c: None)
    try:
        assert propagate_text(text, pipeline) is None
    finally:
        unregister_op_rule("mydialect.op")
    src, dst = tmp_path / "in.mlir", tmp_path / "out.mlir"
    src.write_text(text)
    assert main(["propagate", str(src), "-o", str(dst)]) == 0  # --pipeline full
    assert dst.read_text() == expected
    assert "natively" in capsys.readouterr().out
