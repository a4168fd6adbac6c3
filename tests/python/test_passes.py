"""Shardy's import and export passes (``shardwise.passes``) against jaxlib's Shardy.

Two oracles:

* the lit corpus (``lit/index.json``): for every case whose pipeline runs only passes shardwise
  implements, ``load_mlir(in) -> run_pipeline -> to_mlir`` must equal jaxlib's printing of the
  expected output;
* jaxlib's Shardy run step by step: every lit case's pipeline (propagation included), and
  ``sdy-propagation-pipeline`` on each JAX program of the dev corpus, is run by jaxlib one pass
  at a time; before each pass shardwise implements, the module jaxlib has so
  far is given to our pass, whose output must equal jaxlib's output of that pass. This covers
  the export passes that Shardy's propagation pipeline runs on propagated modules.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corpus import conformance_dir

from shardwise.errors import ProgramError
from shardwise.passes import PASSES, PipelineError, expand_pipeline, run_pipeline
from shardwise.passes.call_graph import PassWarning

pytestmark = [pytest.mark.jax, pytest.mark.corpus]

_LIT = (conformance_dir() or Path("/nonexistent")) / "lit"
_CASES: list[dict[str, Any]] = json.loads((_LIT / "index.json").read_text())["cases"] if (_LIT / "index.json").is_file() else []
_DEV = (conformance_dir() or Path("/nonexistent")) / "dev"
#: The dev corpus: JAX programs through ``sdy-propagation-pipeline``.
_DEV_CASES: list[dict[str, Any]] = (
    [{**c, "id": c["name"], "dir": _DEV} for c in json.loads((_DEV / "index.json").read_text())["cases"]] if (_DEV / "index.json").is_file() else []
)


def _step_name(step: str) -> str:
    inner = step[len("func.func(") : -1] if step.startswith("func.func(") else step
    return inner.split("{")[0]


def _supported(pipeline: str) -> bool:
    try:
        return all(_step_name(str(s)) in PASSES for s in expand_pipeline(pipeline).steps)
    except PipelineError:
        return False


def _params(cases: list[dict[str, Any]]) -> list[Any]:
    if not cases:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/conformance/lit is absent"))]
    return [pytest.param(c, id=c["id"]) for c in cases]


def _jaxlib() -> tuple[Any, Any, Any]:
    from jaxlib.mlir import ir, passmanager

    from shardwise.importers._jaxlib import context

    return ir, passmanager, context()


def _normalized(text: str) -> str:
    ir, _, ctx = _jaxlib()
    with ctx:
        return str(ir.Module.parse(text))


# ---------------------------------------------------------------------------------- lit cases

_SUPPORTED = [c for c in _CASES if _supported(c["pipeline"])]


@pytest.mark.parametrize("case", _params(_SUPPORTED))
def test_lit_case(case: dict[str, Any]) -> None:
    from shardwise import load_mlir

    module = load_mlir((_LIT / case["in"]).read_text())
    expected = _normalized((_LIT / case["out"]).read_text())
    if "warning" in case["expected_diagnostics"]:
        with pytest.warns(PassWarning, match="has multiple call ops"):
            run_pipeline(module, case["pipeline"])
    else:
        # Shardy warns about cloned callees once per process, so the corpus records the
        # warning only for the first such case; shardwise warns once per run.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PassWarning)
            run_pipeline(module, case["pipeline"])
    assert module.to_mlir() == expected


def test_lit_counts() -> None:
    """How many lit cases each supported pipeline covers (all of them pass, see
    ``test_lit_case``)."""
    if not _CASES:
        pytest.skip("../shared/conformance/lit is absent")
    counts: dict[str, int] = {}
    for c in _SUPPORTED:
        counts[c["pipeline"]] = counts.get(c["pipeline"], 0) + 1
    assert counts["builtin.module(sdy-constant-or-scalar-splitter)"] == 71
    assert counts["builtin.module(sdy-import-pipeline{dedup-functions-fully=true})"] == 8
    assert sum(counts.values()) >= 191, counts  # more once propagation passes are registered


# ---------------------------------------------------------------------------------- stepwise


def _steps(case: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(step, module before, module after) for each step of the case's pipeline, run by
    jaxlib; stops at the first step jaxlib fails (expected-error cases)."""
    ir, passmanager, ctx = _jaxlib()
    with ctx:
        text = str(ir.Module.parse((case.get("dir", _LIT) / case["in"]).read_text()))
        for step in (str(s) for s in expand_pipeline(case["pipeline"]).steps):
            if _step_name(step) == "sdy-save-module":  # not a registered pass in jaxlib
                continue
            module = ir.Module.parse(text)
            try:
                passmanager.PassManager.parse(f"builtin.module({step})").run(module.operation)
            except Exception:
                return
            after = str(module)
            yield step, text, after
            text = after


_SEEN: set[tuple[str, str]] = set()


@pytest.mark.parametrize("case", _params(_CASES) + _params(_DEV_CASES))
def test_each_pass_matches_jaxlib(case: dict[str, Any]) -> None:
    from shardwise import load_mlir

    failures = []
    for step, before, after in _steps(case):
        if _step_name(step) not in PASSES or (step, before) in _SEEN:
            continue
        _SEEN.add((step, before))
        module = load_mlir(before)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PassWarning)
            run_pipeline(module, f"builtin.module({step})")
        if module.to_mlir() != after:
            failures.append(step)
    assert not failures, failures


# ---------------------------------------------------------------------------------- pipelines and errors

_SIMPLE = """
sdy.mesh @mesh = <["x"=2, "y"=1]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.constant dense<1.0> : tensor<8x8xf32>
  %1 = stablehlo.add %arg0, %0 : tensor<8x8xf32>
  %2 = stablehlo.add %1, %0 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
"""


def test_pipeline_syntax_and_nesting() -> None:
    from shardwise import load_mlir
    from shardwise.passes import parse_pipeline

    p = parse_pipeline("builtin.module(sdy-remove-size-one-axes, func.func(sdy-sink-data-flow-edges{sink-debug-sharding-origins=true}),canonicalize{enable-patterns={sdy-collective} max-iterations=10})")
    assert str(p) == (
        "builtin.module(sdy-remove-size-one-axes,func.func(sdy-sink-data-flow-edges{sink-debug-sharding-origins=true}),"
        "canonicalize{enable-patterns={sdy-collective} max-iterations=10})"
    )
    module = load_mlir(_SIMPLE)
    run_pipeline(module, "sdy-remove-size-one-axes,sdy-constant-or-scalar-splitter")  # a bare list is module-level
    text = module.to_mlir()
    assert '[{"x"}, {}]' in text and text.count("sdy.constant") == 2
    PASSES["sdy-close-shardings"](module)
    assert '[{"x"}, {}]' in module.to_mlir()


@pytest.mark.parametrize(
    "pipeline, message",
    [
        ("builtin.module(sdy-no-such-pass)", "unknown pass 'sdy-no-such-pass'"),
        ("builtin.module(sdy-import-func-calls{no-such-option=true})", "has no option 'no-such-option'"),
        ("builtin.module(sdy-import-func-calls{add-data-flow-edges-on-named-computations=maybe})", "takes true or false"),
        ("builtin.module(func.func(sdy-lift-inlined-meshes))", "cannot be nested in func.func"),
        ("builtin.module(sdy-close-shardings", "expected ')'"),
    ],
)
def test_pipeline_errors(pipeline: str, message: str) -> None:
    from shardwise import load_mlir

    module = load_mlir(_SIMPLE)
    before = module.to_mlir()
    with pytest.raises(PipelineError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_pipeline(module, pipeline)
    assert module.to_mlir() == before  # nothing ran


@pytest.mark.parametrize("pipeline", ["builtin.module(sdy-basic-propagate)", "builtin.module(sdy-propagation-pipeline)"])
def test_propagation_is_reported_unsupported_until_registered(pipeline: str) -> None:
    from shardwise import load_mlir
    from shardwise.passes import UNSUPPORTED

    missing = [_step_name(str(s)) for s in expand_pipeline(pipeline).steps if _step_name(str(s)) in UNSUPPORTED]
    if not missing:
        pytest.skip("the propagation passes are registered")
    with pytest.raises(PipelineError, match=f"pass {missing[0]} is not supported here"):
        run_pipeline(load_mlir(_SIMPLE), pipeline)


def test_propagation_pipeline_expansion_matches_jaxlib() -> None:
    _, passmanager, ctx = _jaxlib()
    for options in ("", "{dedup-functions-fully=true}"):
        with ctx:
            printed = str(passmanager.PassManager.parse(f"builtin.module(sdy-propagation-pipeline{options})"))
        names = [_step_name(n.strip()) for n in _top_level(printed[len("builtin.module(") : -1])]
        ours = [_step_name(str(s)) for s in expand_pipeline(f"builtin.module(sdy-propagation-pipeline{options})").steps]
        assert ours == names


def _top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def test_import_pipeline_expansion_matches_jaxlib() -> None:
    _, passmanager, ctx = _jaxlib()
    with ctx:
        printed = str(passmanager.PassManager.parse("builtin.module(sdy-import-pipeline{dedup-functions-fully=true})"))
    names = [n.split("{")[0] for n in printed[len("builtin.module(") : -1].split(",")]
    ours = [_step_name(str(s)) for s in expand_pipeline("builtin.module(sdy-import-pipeline{dedup-functions-fully=true})").steps]
    assert ours == names


_CROSSING_GROUP = """
sdy.mesh @mesh = <["a"=2]>
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  sdy.sharding_group %arg0 group_id=3 : tensor<8xf32>
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a"}]>] out_shardings=[<@mesh, [{"a"}]>] manual_axes={"a"} (%arg1: tensor<4xf32>) {
    %1 = stablehlo.add %arg1, %arg1 : tensor<4xf32>
    sdy.sharding_group %1 group_id=3 : tensor<4xf32>
    sdy.return %1 : tensor<4xf32>
  } : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""

_EMPTY_MANUAL = """
sdy.mesh @mesh = <["a"=2]>
func.func @main() {
  sdy.manual_computation() in_shardings=[] out_shardings=[] manual_axes={"a"} () {
    %0 = stablehlo.constant dense<1.0> : tensor<2xf32>
    sdy.return
  } : () -> ()
  return
}
"""


@pytest.mark.parametrize(
    "text, pipeline, message",
    [
        (_CROSSING_GROUP, "sdy-sharding-group-import", r"sdy.sharding_group at loc\(.*\): ShardingGroupOps values cannot cross ManualComputationOp boundaries for groupId: 3"),
        (_EMPTY_MANUAL, "sdy-manual-axes-cleanup", r"sdy.manual_computation at loc\(.*\): op has manual_axes when there are no in/out shardings"),
    ],
)
def test_errors_name_the_op_and_location(text: str, pipeline: str, message: str) -> None:
    from shardwise import load_mlir

    module = load_mlir(text)
    with pytest.raises(ProgramError, match=message):
        run_pipeline(module, f"builtin.module({pipeline})")
    # jaxlib's Shardy rejects the same modules.
    ir, passmanager, ctx = _jaxlib()
    with ctx:
        m = ir.Module.parse(text)
        with pytest.raises(Exception):
            passmanager.PassManager.parse(f"builtin.module({pipeline})").run(m.operation)
