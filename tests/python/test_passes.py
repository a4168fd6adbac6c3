"""Shardy's passes (``shardwise.passes``, the propagation passes included) against jaxlib's
Shardy.

Two oracles:

* the lit corpus (``lit/index.json``): for every case, ``load_mlir(in) -> run_pipeline ->
  to_mlir`` must equal jaxlib's printing of the expected output (debugging attributes
  included), with the warnings the case expects; and ``compare.py --check-rules`` must find
  every case exact;
* jaxlib's Shardy run step by step: every lit case's pipeline (propagation included), and
  ``sdy-propagation-pipeline`` on each JAX program of the dev corpus, is run by jaxlib one pass
  at a time; before each pass shardwise implements, the module jaxlib has so
  far is given to our pass, whose output must equal jaxlib's output of that pass. This covers
  the export passes that Shardy's propagation pipeline runs on propagated modules.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corpus import conformance_dir
from shardwise.errors import PassWarning, ProgramError
from shardwise.passes import PASSES, PipelineError, expand_pipeline, run_pipeline
from shardwise.propagation import ShardingGroupWarning

pytestmark = [pytest.mark.jax, pytest.mark.corpus]

_LIT = (conformance_dir() or Path("/nonexistent")) / "lit"
_CASES: list[dict[str, Any]] = (
    json.loads((_LIT / "index.json").read_text())["cases"] if (_LIT / "index.json").is_file() else []
)
_DEV = (conformance_dir() or Path("/nonexistent")) / "dev"
#: The dev corpus: JAX programs through ``sdy-propagation-pipeline``.
_DEV_CASES: list[dict[str, Any]] = (
    [{**c, "id": c["name"], "dir": _DEV} for c in json.loads((_DEV / "index.json").read_text())["cases"]]
    if (_DEV / "index.json").is_file()
    else []
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
    from shardwise._jaxlib import context

    return ir, passmanager, context()


def _normalized(text: str) -> str:
    ir, _, ctx = _jaxlib()
    with ctx:
        return str(ir.Module.parse(text))


# ---------------------------------------------------------------------------------- lit cases

_SUPPORTED = [c for c in _CASES if _supported(c["pipeline"])]
_EXPECTED_WARNING = re.compile(r"expected-warning[^{]*\{\{(.*?)\}\}")


def _expected_warnings(case: dict[str, Any]) -> list[str]:
    """The messages of the case's ``expected-warning`` lines (what Shardy emits)."""
    return _EXPECTED_WARNING.findall((_LIT / case["in"]).read_text())


def _run_lit_case(case: dict[str, Any]) -> str:
    """``load_mlir -> run_pipeline -> to_mlir`` of a lit case, checking its warnings: each
    message of the case's ``expected-warning`` lines must be warned (the sharding group cases
    get a ``ShardingGroupWarning``, the cloned-callee cases the "has multiple call ops"
    ``PassWarning``), and where the case verifies its diagnostics no other pass warning may
    be. Shardy warns about cloned callees once per process, so the corpus records that
    warning only for the first such case; shardwise warns on every run, and those extra
    warnings are allowed."""
    from shardwise import load_mlir

    module = load_mlir((_LIT / case["in"]).read_text())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_pipeline(module, case["pipeline"])
    messages = [(w.category, str(w.message)) for w in caught if issubclass(w.category, PassWarning)]
    expected = _expected_warnings(case)
    assert bool(expected) == ("warning" in case["expected_diagnostics"]), case["id"]
    for text in expected:
        assert any(text in m for _, m in messages), (text, messages)
    for category, m in messages:
        if "sharding groups" in m:
            assert category is ShardingGroupWarning, m
        if case["verify_diagnostics"] and "has multiple call ops" not in m:
            assert any(text in m for text in expected), m
    return module.to_mlir()


@pytest.mark.parametrize("case", _params(_SUPPORTED))
def test_lit_case(case: dict[str, Any]) -> None:
    expected = _normalized((_LIT / case["out"]).read_text())
    assert _run_lit_case(case) == expected


def test_lit_counts() -> None:
    """Every lit case runs (each is exact, see ``test_lit_case``), the propagation passes and
    their debugging options included."""
    if not _CASES:
        pytest.skip("../shared/conformance/lit is absent")
    assert len(_SUPPORTED) == len(_CASES) == 527
    counts: dict[str, int] = {}
    for c in _SUPPORTED:
        counts[c["pipeline"]] = counts.get(c["pipeline"], 0) + 1
    assert counts["builtin.module(sdy-constant-or-scalar-splitter)"] == 71
    assert counts["builtin.module(sdy-import-pipeline{dedup-functions-fully=true})"] == 8
    assert counts["builtin.module(sdy-propagation-pipeline)"] == 76
    assert sum(n for p, n in counts.items() if "debug" in p) == 44
    assert sum(1 for c in _SUPPORTED if _expected_warnings(c)) == 6


def test_lit_corpus_with_compare_py(tmp_path: Path) -> None:
    """The whole lit corpus through the command path (``load_mlir -> run_pipeline ->
    to_mlir``), judged by the corpus's own tool: ``compare.py --check-rules`` must find every
    case exact, every value and sharding rule matching."""
    tool = (conformance_dir() or Path("/nonexistent")).parent / "tools" / "compare.py"
    if not _CASES or not tool.is_file():
        pytest.skip("../shared/conformance/lit or ../shared/tools/compare.py is absent")
    for case in _CASES:
        (tmp_path / f"{case['id']}.out.mlir").write_text(_run_lit_case(case))
    done = subprocess.run(
        [sys.executable, str(tool), "--dir", str(_LIT), "--actual-dir", str(tmp_path), "--check-rules", "-q"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    m = re.search(r"conformance: (\d+)/(\d+) cases exact, (\d+)/(\d+) values match", summary)
    assert m is not None, summary
    assert m.group(1) == m.group(2) == str(len(_CASES)) and m.group(3) == m.group(4), summary


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
            except Exception:  # noqa: BLE001 (jaxlib rejects the step: the comparison ends)
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
        names_before = {op.name for op in module.walk()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PassWarning)
            run_pipeline(module, f"builtin.module({step})")
        if module.to_mlir() != after:
            failures.append(step)
        # What the pass declares it may add (``PassInfo.adds``; the pipeline skips later
        # passes on it) covers every op name it added.
        adds = PASSES[_step_name(step)].adds
        new_names = {op.name for op in module.walk()} - names_before
        if adds is not None and not new_names <= adds:
            failures.append(f"{step} added {sorted(new_names - adds)}, not declared")
    assert not failures, failures


# ---------------------------------------------------------------------------------- debug options on real programs

#: Programs on which jaxlib's Shardy crashes (segmentation fault) with
#: ``debug-sharding-origins``: it numbers the user shardings before it inserts the open
#: constraints of conflicting sharding groups, then reads the missing origin name of those
#: (``propagation_pipeline__006``, ``shard_alike_group``); it assumes every manual computation
#: operand has a data flow edge, which tokens do not (``propagation_pipeline__011``). Never
#: run through jaxlib with that option here.
_ORIGINS_CRASH = {"propagation_pipeline__006", "propagation_pipeline__011", "shard_alike_group"}

_PIPELINE_DEBUG = {
    "origins": "debug-sharding-origins=true",
    "edges": "debug-propagation-edge-sharding=true",
}


def _debug_pipeline(case: dict[str, Any], mode: str) -> str:
    """The case's ``sdy-propagation-pipeline`` with the debug option of ``mode``, expanded,
    without ``sdy-save-module`` (not a jaxlib pass) and ``sdy-remove-propagation-debug-info``
    (so that the debugging attributes reach the end)."""
    base = case["pipeline"].replace("builtin.module(", "").rstrip(")")
    options = _PIPELINE_DEBUG[mode]
    text = base.replace("}", f" {options}}}") if "{" in base else f"{base}{{{options}}}"
    steps = [str(s) for s in expand_pipeline(f"builtin.module({text})").steps]
    keep = [s for s in steps if _step_name(s) not in ("sdy-save-module", "sdy-remove-propagation-debug-info")]
    return "builtin.module(" + ",".join(keep) + ")"


_PROPAGATION_PIPELINE_CASES = [c for c in _CASES if "sdy-propagation-pipeline" in c["pipeline"]] + _DEV_CASES


@pytest.mark.parametrize("mode", sorted(_PIPELINE_DEBUG))
@pytest.mark.parametrize("case", _params(_PROPAGATION_PIPELINE_CASES))
def test_propagation_pipeline_debug_options_match_jaxlib(case: dict[str, Any], mode: str) -> None:
    """``sdy-propagation-pipeline{debug-...=true}`` (Shardy's ``PropagationOptions``; jaxlib
    registers the pipeline without them, so its passes are run as one list) on every program
    of the lit and dev corpora: the module at the end of the pipeline, debugging attributes
    included, must be jaxlib's. Where Shardy's own behaviour is undefined (an axis propagated
    from a sharding that is no user sharding has no origin; Shardy looks it up anyway and
    prints garbage such as ``": 0"`` or crashes), shardwise warns ``ShardingOriginWarning``,
    writes no origin for it, and jaxlib is not run. Where Shardy's verifier rejects the edges
    it wrote (a data flow edge with several sources, a while loop's or a function's called
    twice, gets edges from operand 1), the pass fails in both, with the same message."""
    from shardwise import load_mlir
    from shardwise.propagation import ShardingOriginWarning

    pipeline = _debug_pipeline(case, mode)
    source = (case.get("dir", _LIT) / case["in"]).read_text()
    module = load_mlir(source)
    ours_error: ProgramError | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run_pipeline(module, pipeline)
        except ProgramError as e:
            ours_error = e
    if any(issubclass(w.category, ShardingOriginWarning) for w in caught):
        assert mode == "origins" and ours_error is None
        assert '= ": ' not in module.to_mlir()
        return
    if mode == "origins" and case["id"] in _ORIGINS_CRASH:
        pytest.skip("jaxlib's Shardy crashes on this program with debug-sharding-origins")
    ir, passmanager, ctx = _jaxlib()
    with ctx:
        m = ir.Module.parse(source)
        try:
            passmanager.PassManager.parse(pipeline).run(m.operation)
        except Exception as e:  # noqa: BLE001 - jaxlib raises MLIRError
            found = re.search(
                r"'sdy.(func_)?data_flow_edge' op expected a value ref to have an operand index in range \[0, \d+\), got: \d+",
                str(e),
            )
            assert mode == "edges" and found is not None, str(e)
            assert ours_error is not None and found.group(0) in str(ours_error), (str(e), ours_error)
            return
        expected = str(m)
    assert ours_error is None, ours_error
    assert module.to_mlir() == expected


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

    p = parse_pipeline(
        "builtin.module(sdy-remove-size-one-axes, func.func(sdy-sink-data-flow-edges{sink-debug-sharding-origins=true}),canonicalize{enable-patterns={sdy-collective} max-iterations=10})"
    )
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


_NAMED = """
sdy.mesh @mesh = <["x"=2]>
func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = sdy.named_computation<"f">(%arg0) (%arg1: tensor<8x8xf32>) {
    %1 = stablehlo.add %arg1, %arg1 : tensor<8x8xf32>
    sdy.return %1 : tensor<8x8xf32>
  } : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
"""


def test_pipeline_skips_python_passes_without_their_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python pass is not called on a module without any op it acts on
    (``PassInfo.acts_on``); it is called once an earlier pass of the pipeline may have added
    one (``PassInfo.adds``; ``None``: look at the module again), after a native pass (which
    may add anything), and whatever the module has when an option makes it act anyway
    (``acts_always_with``)."""
    from shardwise import load_mlir
    from shardwise.passes import PassInfo

    calls: list[str] = []

    def fake(name: str, acts_on: frozenset[str] | None, adds: frozenset[str] | None = frozenset()) -> None:
        def run(module: object, options: object) -> None:
            calls.append(name)

        info = PassInfo(name, "builtin.module", run, {"force": False}, "", acts_on, ("force",), adds)
        monkeypatch.setitem(PASSES, name, info)

    fake("test-on-calls", frozenset({"func.call"}))
    fake("test-may-add-calls", None, adds=frozenset({"func.call"}))
    fake("test-may-add-anything", None, adds=None)
    run_pipeline(load_mlir(_SIMPLE), "builtin.module(test-on-calls)")
    assert calls == []  # no call
    run_pipeline(load_mlir(_SIMPLE), "builtin.module(test-on-calls{force=true})")
    assert calls == ["test-on-calls"]
    calls.clear()
    run_pipeline(load_mlir(_SIMPLE), "builtin.module(test-on-calls,test-may-add-calls,test-on-calls)")
    assert calls == ["test-may-add-calls", "test-on-calls"]
    calls.clear()
    run_pipeline(load_mlir(_SIMPLE), "builtin.module(test-may-add-anything,test-on-calls)")
    assert calls == ["test-may-add-anything"]  # the module is looked at again: still no call
    calls.clear()
    # The native sdy-export-named-computations turns the named computation into a call.
    run_pipeline(load_mlir(_NAMED), "builtin.module(test-on-calls,sdy-export-named-computations,test-on-calls)")
    assert calls == ["test-on-calls"]


def test_a_pass_a_user_registers_under_a_native_name_replaces_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from shardwise import load_mlir
    from shardwise.passes import register_pass

    calls: list[str] = []
    monkeypatch.setitem(PASSES, "sdy-close-shardings", PASSES["sdy-close-shardings"])  # restored afterwards
    assert PASSES["sdy-close-shardings"].native and PASSES["sdy-close-shardings"].run is None
    register_pass("sdy-close-shardings")(lambda module, options: calls.append("mine"))
    run_pipeline(load_mlir(_SIMPLE), "builtin.module(sdy-remove-sharding-groups,sdy-close-shardings)")
    PASSES["sdy-close-shardings"](load_mlir(_SIMPLE))
    assert calls == ["mine", "mine"]


@pytest.mark.parametrize(
    "pipeline, message",
    [
        ("builtin.module(sdy-no-such-pass)", "unknown pass 'sdy-no-such-pass'"),
        ("builtin.module(sdy-import-func-calls{no-such-option=true})", "has no option 'no-such-option'"),
        (
            "builtin.module(sdy-import-func-calls{add-data-flow-edges-on-named-computations=maybe})",
            "takes true or false",
        ),
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


@pytest.mark.parametrize("first", ["shardwise.passes", "shardwise.propagation", "shardwise.passes.native"])
def test_propagation_passes_are_registered_on_import(first: str) -> None:
    """Importing ``shardwise.passes`` declares the four propagation passes, whichever module
    is imported first: no import cycle, no ``register_passes()`` call needed."""
    code = (
        f"import {first}\n"
        "import shardwise.passes as p\n"
        "names = ['sdy-basic-propagate', 'sdy-aggressive-propagate', 'sdy-op-priority-propagate', 'sdy-user-priority-propagate']\n"
        "assert all(n in p.PASSES for n in names) and not p.UNSUPPORTED, sorted(p.PASSES)\n"
        "assert p.PASSES['sdy-basic-propagate'].options['debug-sharding-origins'] is False\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "pipeline",
    [
        "builtin.module(sdy-basic-propagate)",
        "builtin.module(sdy-propagation-pipeline)",
        (
            "builtin.module(sdy-add-data-flow-edges,sdy-apply-sharding-constraints{debug-sharding-origins=true},"
            "sdy-op-priority-propagate{debug-sharding-origins=true debug-propagation-edge-sharding=true},"
            "func.func(sdy-sink-data-flow-edges{sink-debug-sharding-origins=true sink-debug-propagation-edge-sharding=true}))"
        ),
    ],
)
def test_propagation_runs_in_pipelines(pipeline: str) -> None:
    from shardwise import load_mlir

    module = load_mlir(_SIMPLE)
    run_pipeline(module, pipeline)
    ir, passmanager, ctx = _jaxlib()
    with ctx:
        m = ir.Module.parse(_SIMPLE)
        passmanager.PassManager.parse(pipeline).run(m.operation)
        assert module.to_mlir() == str(m)


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
    ours = [
        _step_name(str(s))
        for s in expand_pipeline("builtin.module(sdy-import-pipeline{dedup-functions-fully=true})").steps
    ]
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
        (
            _CROSSING_GROUP,
            "sdy-sharding-group-import",
            r"sdy.sharding_group at loc\(.*\): ShardingGroupOps values cannot cross ManualComputationOp boundaries for groupId: 3",
        ),
        (
            _EMPTY_MANUAL,
            "sdy-manual-axes-cleanup",
            r"sdy.manual_computation at loc\(.*\): op has manual_axes when there are no in/out shardings",
        ),
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
        with pytest.raises(Exception):  # noqa: B017 (jaxlib raises whichever MLIR error the parse or run gives)
            passmanager.PassManager.parse(f"builtin.module({pipeline})").run(m.operation)
