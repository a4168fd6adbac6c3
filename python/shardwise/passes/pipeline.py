"""Shardy's textual pass pipelines, parsed and run over a shardwise ``Module``.

``run_pipeline(module, "builtin.module(sdy-lift-inlined-meshes,func.func(sdy-sink-data-flow-edges{sink-debug-sharding-origins=true}))")``
runs the passes in order, in place. The syntax is MLIR's: a comma-separated list of passes, each
with optional ``{name=value ...}`` options, and nested ``func.func(...)`` lists that run on every
function (a whole nested list per function, as MLIR's pass manager does). The composite
pipelines ``sdy-import-pipeline``, ``sdy-propagation-pipeline`` and ``sdy-export-pipeline``
expand to the passes jaxlib's Shardy runs for them (``import_pipeline.cc``,
``propagation_pipeline.cc``, ``export_pipeline.cc``).

The whole pipeline is checked before anything runs: ``PipelineError`` for malformed text, an
unknown pass or option, a bad option value, or a pass marked ``UNSUPPORTED``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from shardwise import _native
from shardwise.ir.core import Module
from shardwise.ir.gc import no_cyclic_gc
from shardwise.passes.native import RULE_PASSES, run_native, runs_natively
from shardwise.passes.registry import PASSES, UNSUPPORTED, OptionValue, PipelineError
from shardwise.rules.registry import has_user_rules

__all__ = [
    "COMPOSITES",
    "Nested",
    "PassStep",
    "expand_pipeline",
    "native_steps",
    "parse_pipeline",
    "run_pipeline",
]


@dataclass
class PassStep:
    """One pass of a pipeline and the option values written for it (text)."""

    name: str
    options: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        if not self.options:
            return self.name
        return self.name + "{" + " ".join(f"{k}={v}" for k, v in self.options.items()) + "}"


@dataclass
class Nested:
    """A nested pass list anchored on ``anchor`` (``builtin.module`` or ``func.func``)."""

    anchor: str
    steps: list[PassStep | Nested] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.anchor}({','.join(str(s) for s in self.steps)})"


Step = PassStep | Nested


# ---------------------------------------------------------------------------------- parsing


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, msg: str) -> PipelineError:
        near = self.text[max(0, self.pos - 30) : self.pos + 30]
        return PipelineError(f"malformed pass pipeline at offset {self.pos}: {msg} (near {near!r})")

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def name(self) -> str:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "-_."):
            self.pos += 1
        if start == self.pos:
            raise self.error("expected a pass or op name")
        return self.text[start : self.pos]

    def steps(self) -> list[Step]:
        out: list[Step] = []
        if self.peek() == ")":
            return out
        while True:
            out.append(self.step())
            if self.peek() == ",":
                self.pos += 1
                continue
            return out

    def step(self) -> Step:
        name = self.name()
        if self.peek() == "(":
            self.pos += 1
            nested = Nested(name, self.steps())
            if self.peek() != ")":
                raise self.error("expected ')'")
            self.pos += 1
            return nested
        step = PassStep(name)
        if self.peek() == "{":
            self.pos += 1
            step.options = self.options()
        return step

    def options(self) -> dict[str, str]:
        out: dict[str, str] = {}
        while True:
            c = self.peek()
            if c == "}":
                self.pos += 1
                return out
            if not c:
                raise self.error("unterminated option list")
            key = self.name()
            self.skip_ws()
            if self.pos < len(self.text) and self.text[self.pos] == "=":
                self.pos += 1
                out[key] = self.value()
            else:
                out[key] = "true"

    def value(self) -> str:
        self.skip_ws()
        start = self.pos
        depth = 0
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == '"':
                end = self.text.find('"', self.pos + 1)
                if end < 0:
                    raise self.error("unterminated string")
                self.pos = end + 1
                continue
            if c == "{":
                depth += 1
            elif c == "}":
                if depth == 0:
                    break
                depth -= 1
            elif c.isspace() and depth == 0:
                break
            self.pos += 1
        value = self.text[start : self.pos]
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        return value


def parse_pipeline(text: str) -> Nested:
    """Parses pipeline text into a ``Nested`` anchored on ``builtin.module`` (a bare pass list
    is taken as module-level). ``PipelineError`` for malformed text."""
    p = _Parser(text.strip())
    steps = p.steps()
    if p.peek():
        raise p.error("unexpected text")
    if len(steps) == 1 and isinstance(steps[0], Nested) and steps[0].anchor == "builtin.module":
        return steps[0]
    return Nested("builtin.module", steps)


# ---------------------------------------------------------------------------------- composite pipelines


def _bool(options: Mapping[str, OptionValue], name: str) -> bool:
    return bool(options[name])


def _debug_options(o: Mapping[str, OptionValue]) -> str:
    """``{debug-sharding-origins=... debug-propagation-edge-sharding=...}`` when either of the
    propagation pipeline's debug options is set, else nothing."""
    origins, edges = bool(o.get("debug-sharding-origins", False)), bool(o.get("debug-propagation-edge-sharding", False))
    if not origins and not edges:
        return ""
    return f"{{debug-sharding-origins={str(origins).lower()} debug-propagation-edge-sharding={str(edges).lower()}}}"


def _import_steps(dedup_fully: bool, gather_scatter_batching: bool = False, debug: str = "") -> str:
    steps = [
        "symbol-dce",
        "sdy-lift-inlined-meshes",
        "sdy-remove-size-one-axes",
        "sdy-propagate-sharding-from-func-to-call",
        "sdy-constant-or-scalar-splitter",
    ]
    if gather_scatter_batching:
        steps.append("func.func(sdy-explicit-gather-scatter-batching)")
    steps += ["symbol-dce", "sdy-manual-axes-cleanup", "sdy-save-module", "sdy-add-data-flow-edges"]
    if dedup_fully:
        steps += ["sdy-apply-sharding-constraints" + debug, "sdy-sharding-group-import"]
    return ",".join(steps)


def _export_steps(o: Mapping[str, OptionValue]) -> str:
    sink = f"sink-debug-propagation-edge-sharding={str(_bool(o, 'dump-propagation-edges')).lower()} sink-debug-sharding-origins={str(_bool(o, 'dump-sharding-origins')).lower()}"
    steps = ["func.func(sdy-constant-or-scalar-merger)", "func.func(sdy-sink-data-flow-edges{" + sink + "})"]
    if not _bool(o, "avoid-export-for-partitioning"):
        steps += ["sdy-remove-sharding-groups", "func.func(sdy-sharding-constraint-to-reshard)"]
    if _bool(o, "update-non-divisible-input-output-shardings"):
        steps += ["sdy-update-non-divisible-input-output-shardings", "sdy-remove-sub-axes-in-input-output-shardings"]
    steps += ["sdy-close-shardings", "sdy-save-module"]
    if not _bool(o, "avoid-export-for-partitioning"):
        full = str(_bool(o, "enable-insert-explicit-collectives")).lower()
        steps.append("func.func(sdy-insert-explicit-reshards{enable-full-version=" + full + "})")
        if _bool(o, "enable-insert-explicit-collectives"):
            steps += [
                "sdy-save-module",
                "canonicalize{enable-patterns={sdy-reshard}}",
                "func.func(sdy-reshard-to-collectives)",
            ]
        steps.append("canonicalize{enable-patterns={sdy-collective}}")
        if _bool(o, "enable-insert-explicit-collectives") and _bool(o, "remove-all-gather-reduce-scatter-for-cmv1"):
            steps.append("func.func(sdy-remove-all-gather-reduce-scatter-for-cmv1)")
        steps.append("sdy-save-module")
    if _bool(o, "dump-propagation-edges") or _bool(o, "dump-sharding-origins"):
        steps.append("sdy-remove-propagation-debug-info")
    if not _bool(o, "keep-sharding-rules"):
        steps.append("func.func(sdy-drop-sharding-rules)")
    return ",".join(steps)


_EXPORT_DEFAULTS: dict[str, OptionValue] = {
    "dump-directory": "",
    "avoid-export-for-partitioning": False,
    "enable-insert-explicit-collectives": False,
    "remove-all-gather-reduce-scatter-for-cmv1": False,
    "keep-sharding-rules": False,
    "dump-sharding-origins": False,
    "dump-propagation-edges": False,
    "avoid-reshards-on-calls": False,
    "update-non-divisible-input-output-shardings": True,
}


def _propagation_steps(o: Mapping[str, OptionValue]) -> str:
    dedup = _bool(o, "dedup-functions-fully")
    debug = _debug_options(o)
    steps = [_import_steps(dedup, debug=debug)]
    if dedup:
        steps.append("sdy-add-func-data-flow-edges")
    else:
        steps += [
            "sdy-flatten-call-graph",
            "symbol-dce",
            "sdy-import-func-calls",
            "symbol-dce",
            "sdy-apply-sharding-constraints" + debug,
            "sdy-sharding-group-import",
        ]
    propagate_options = "keep-sharding-rules=true" + (" " + debug[1:-1] if debug else "")
    steps += ["sdy-pre-order-funcs", "sdy-user-priority-propagate{" + propagate_options + "}"]
    if dedup:
        steps += ["sdy-propagate-to-func-results", "func.func(sdy-sink-func-data-flow-edges)"]
    else:
        steps += ["sdy-export-named-computations", "sdy-propagate-to-func-results"]
    steps += ["sdy-unflatten-call-graph", "symbol-dce", "sdy-insert-func-call-reshards"]
    export = {
        **_EXPORT_DEFAULTS,
        "avoid-reshards-on-calls": dedup,
        "dump-sharding-origins": bool(o.get("debug-sharding-origins", False)),
        "dump-propagation-edges": bool(o.get("debug-propagation-edge-sharding", False)),
    }
    steps.append(_export_steps(export))
    return ",".join(steps)


#: Composite pipelines: name -> (option defaults, expansion into pipeline text).
COMPOSITES: dict[str, tuple[dict[str, OptionValue], Callable[[Mapping[str, OptionValue]], str]]] = {
    "sdy-import-pipeline": (
        {"dedup-functions-fully": False},
        lambda o: _import_steps(_bool(o, "dedup-functions-fully")),
    ),
    # jaxlib registers only dedup-functions-fully; the debug options are those of Shardy's
    # ``PropagationOptions``, which its C++ pipeline builder passes on the same way.
    "sdy-propagation-pipeline": (
        {"dedup-functions-fully": False, "debug-sharding-origins": False, "debug-propagation-edge-sharding": False},
        _propagation_steps,
    ),
    "sdy-export-pipeline": (_EXPORT_DEFAULTS, _export_steps),
}


def _expand_composite(step: PassStep) -> list[Step]:
    defaults, expand = COMPOSITES[step.name]
    opts: dict[str, OptionValue] = dict(defaults)
    for k, v in step.options.items():
        if k not in defaults:
            raise PipelineError(f"pipeline {step.name} has no option {k!r} (options: {', '.join(defaults)})")
        d = defaults[k]
        if isinstance(d, bool):
            if v.lower() not in ("true", "false", "1", "0"):
                raise PipelineError(f"option {k} of pipeline {step.name} takes true or false, got {v!r}")
            opts[k] = v.lower() in ("true", "1")
        else:
            opts[k] = v
    return parse_pipeline(expand(opts)).steps


def expand_pipeline(pipeline: str | Nested) -> Nested:
    """The pipeline with composite pipelines replaced by their passes."""
    root = parse_pipeline(pipeline) if isinstance(pipeline, str) else pipeline

    def expand(steps: list[Step]) -> list[Step]:
        out: list[Step] = []
        for s in steps:
            if isinstance(s, Nested):
                out.append(Nested(s.anchor, expand(s.steps)))  # noqa: F821 (a recursive closure, deleted after use)
            elif s.name in COMPOSITES:
                out.extend(expand(_expand_composite(s)))  # noqa: F821 (a recursive closure, deleted after use)
            else:
                out.append(s)
        return out

    out = Nested(root.anchor, expand(root.steps))
    del expand  # a recursive closure refers to itself: without this, the cycle waits for the collector
    return out


def native_steps(pipeline: str, native: Mapping[str, Sequence[str]]) -> list[str] | None:
    """The passes of ``pipeline`` (composites expanded) in order, as
    ``_native.run_native_passes`` takes them, when every one runs natively (``runs_natively``
    with ``native``, ``_native.native_pass_options()``, whatever rules the user registered);
    ``None`` otherwise. A ``func.func(...)`` nest is flattened:
    the native passes of a function anchor act on every function, in module order. Raises
    ``PipelineError`` for malformed pipeline text."""
    out: list[str] = []

    def flatten(steps: list[Step]) -> bool:
        for s in steps:
            if isinstance(s, Nested):
                if s.anchor not in ("builtin.module", "func.func") or not flatten(s.steps):  # noqa: F821
                    return False
            elif _native_step(s, native):
                out.append(str(s))
            else:
                return False
        return True

    ok = flatten(expand_pipeline(pipeline).steps)
    del flatten  # a recursive closure refers to itself (see expand_pipeline)
    return out if ok else None


# ---------------------------------------------------------------------------------- running


@dataclass
class _Bound:
    name: str
    options: dict[str, OptionValue]


def _bind(steps: list[Step], anchor: str) -> list[_Bound | tuple[str, list[_Bound]]]:
    out: list[_Bound | tuple[str, list[_Bound]]] = []
    for s in steps:
        if isinstance(s, Nested):
            if s.anchor != "func.func" or anchor != "builtin.module":
                raise PipelineError(
                    f"cannot nest a {s.anchor} pass list inside {anchor}; only builtin.module(func.func(...)) is supported"
                )
            inner = _bind(s.steps, "func.func")
            out.append(("func.func", [b for b in inner if isinstance(b, _Bound)]))
            continue
        if s.name in UNSUPPORTED:
            raise PipelineError(f"pass {s.name} is not supported here: {UNSUPPORTED[s.name]}")
        info = PASSES.get(s.name)
        if info is None:
            raise PipelineError(
                f"unknown pass {s.name!r}; shardwise runs the pipelines {', '.join(COMPOSITES)} and the passes {', '.join(sorted(PASSES))}"
            )
        if anchor == "func.func" and info.anchor != "func.func":
            raise PipelineError(f"pass {s.name} runs on builtin.module, it cannot be nested in func.func(...)")
        out.append(_Bound(s.name, info.resolve(s.options)))
    return out


class _OpNames:
    """The op names that may occur in the module while a pipeline runs: a superset, built by
    one walk when first asked, grown by each pass that ran by the names it declares it adds
    (``PassInfo.adds``), and built again after a pass that declares none. Lets passes that
    would find nothing to act on (``PassInfo.acts_on``) be skipped without each walking the
    module to find that out."""

    __slots__ = ("module", "names")

    def __init__(self, module: Module) -> None:
        self.module = module
        self.names: set[str] | None = None

    def __call__(self) -> set[str]:
        if self.names is None:
            self.names = {op.name for op in self.module.walk()}
        return self.names

    def ran(self, name: str) -> None:
        adds = PASSES[name].adds
        if adds is None:
            self.names = None
        elif self.names is not None:
            self.names |= adds


def _native_step(step: PassStep, native: Mapping[str, Sequence[str]]) -> bool:
    """Whether ``step`` runs natively: its registration stands for the native pass
    (``PassInfo.native``; not a pass a user registered under that name) and ``runs_natively``."""
    info = PASSES.get(step.name)
    return info is not None and info.native and runs_natively(step.name, step.options, native)


@dataclass
class _Segment:
    """Consecutive steps of a pipeline that run together: natively (``native``: the steps as
    ``NativeProgram.run`` takes them) or on the Python IR (``python``: bound steps).
    ``user_rules``: the users' rules are set on the ops first (``set_user_rules``, with this
    ``conservative`` flag), a native segment starting with a pass that reads rules while the
    user has a rule registered."""

    native: list[str] | None
    python: list[_Bound | tuple[str, list[_Bound]]]
    names: list[str]
    user_rules: bool | None = None


def _segments(steps: list[Step], bound: list[_Bound | tuple[str, list[_Bound]]]) -> list[_Segment]:
    """``steps`` (expanded, at module level) and their bindings cut into runs of native and
    Python steps. A ``func.func(...)`` nest is native when all its passes are; its passes then
    act on every function in turn (as ``native_steps``)."""
    native = _native.native_pass_options()
    user_rules = has_user_rules()
    out: list[_Segment] = []
    for step, item in zip(steps, bound, strict=True):
        if isinstance(step, Nested):
            inner = [s for s in step.steps if isinstance(s, PassStep)]
            is_native = all(_native_step(s, native) for s in inner)
            texts = [str(s) for s in inner]
            name = f"{step.anchor}(" + ",".join(s.name for s in inner) + ")"
        else:
            inner = [step]
            is_native = _native_step(step, native)
            texts, name = [str(step)], step.name
        # The users' rules are set on the ops right before each pass that reads rules (they
        # may read the program around the op as that pass sees it).
        reads_rules = user_rules and is_native and any(s.name in RULE_PASSES for s in inner)
        if reads_rules:
            conservative = any(
                s.options.get("conservative-propagation", "false").lower() in ("true", "1") for s in inner
            )
            out.append(_Segment(texts, [item], [name], conservative))
            continue
        last = out[-1] if out else None
        if last is not None and (last.native is not None) == is_native:
            if last.native is not None:
                last.native.extend(texts)
            last.python.append(item)
            last.names.append(name)
        else:
            out.append(_Segment(texts if is_native else None, [item], [name]))
    return out


def run_pipeline(module: Module, pipeline: str, *, timings: dict[str, float] | None = None) -> None:
    """Runs Shardy's pass ``pipeline`` (text, as ``mlir-opt --pass-pipeline`` takes it) on
    ``module`` in place.

    Consecutive passes that run natively (``passes.native.runs_natively``: a native pass
    without a debugging option and, with a rule registered by the user, not one of
    ``RULE_PASSES``; not a pass a user registered under a native pass's name) run as one
    ``NativeProgram.run`` (the GIL released) on the module's Rust program, read from its
    Python ops when they are built (``native_program``); the module then holds the result
    (``Module.assign_native``: its Python ops are built again when asked for, with the objects
    of the ops and values the passes kept). The other passes run on the Python IR. A
    function pass written at module level runs on every function. ``timings``, when given,
    receives the wall time of each pass or native run of passes in seconds (summed over
    repeats), for profiles such as ``benches/bench_propagate.py``. A Python pass that would
    change nothing because the module has none of the ops it acts on (``PassInfo.acts_on``) is
    not called.

    Raises ``PipelineError`` (before running anything) for malformed text, an unknown or
    unsupported pass, or a bad option; ``ProgramError`` naming the op and its location where
    Shardy emits an error or the module does not verify."""
    root = expand_pipeline(pipeline)
    if root.anchor != "builtin.module":
        raise PipelineError(f"a pipeline must be anchored on builtin.module, got {root.anchor}")
    bound = _bind(root.steps, "builtin.module")
    with no_cyclic_gc():
        for segment in _segments(root.steps, bound):
            start = time.perf_counter()
            # Without a Python version of every pass, the native reader's refusal is the error.
            required = any(PASSES[b.name].run is None for b in _flat(segment.python))
            native = segment.native
            if native is not None and run_native(module, native, required=required, user_rules=segment.user_rules):
                if timings is not None:
                    name = "native(" + ",".join(segment.names) + ")"
                    timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
                continue
            _run_python(module, segment.python, timings)


def _flat(items: list[_Bound | tuple[str, list[_Bound]]]) -> list[_Bound]:
    return [b for item in items for b in ([item] if isinstance(item, _Bound) else item[1])]


def _run_python(
    module: Module, items: list[_Bound | tuple[str, list[_Bound]]], timings: dict[str, float] | None
) -> None:
    op_names = _OpNames(module)
    for item in items:
        start = time.perf_counter()
        if isinstance(item, _Bound):
            info = PASSES[item.name]
            if info.may_act(item.options, op_names):
                info.run_python(module, item.options)
                op_names.ran(item.name)
            name = item.name
        else:
            _, inner = item
            for f in list(module.funcs):
                if not f.regions[0].blocks:
                    continue
                for b in inner:
                    info = PASSES[b.name]
                    run = info.run
                    if run is None:
                        info.run_python(module, b.options)  # raises: the pass has no Python version
                    elif info.may_act(b.options, op_names):
                        run(module, f, b.options)
                        op_names.ran(b.name)
            name = "func.func(" + ",".join(b.name for b in inner) + ")"
        if timings is not None:
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
