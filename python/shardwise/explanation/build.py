"""``explain``: propagating a copy of a module with the solver's records on, and building an
``Explanation`` from the ``PropagationTrace`` (see ``shardwise.explanation``). Runs pipelines,
so it sits above ``shardwise.api``, ``shardwise.passes`` and ``shardwise.propagation``."""

from __future__ import annotations

from typing import Any

from shardwise import _native
from shardwise.api import pipeline_text
from shardwise.explanation.model import AxisExplanation, ChainStep, DroppedAxis, Explanation, OriginInfo
from shardwise.explanation.names import UnknownValueError, _main, resolve, resolve_value, value_names
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.passes.pipeline import Nested, PassStep, expand_pipeline, run_pipeline
from shardwise.passes.registry import PASSES
from shardwise.propagation import PASS_NAMES, PropagationTrace, run_propagation_pass
from shardwise.propagation.debug import Origin
from shardwise.propagation.records import REASONS, Hop
from shardwise.sharding import AxisRef

__all__ = ["build", "explain", "run_with_trace"]


def explain(
    module: Module,
    value: Value | str,
    *,
    pipeline: str = "full",
    conservative: bool = False,
    trace: Any = None,
) -> Explanation:
    """Explains the sharding ``value`` gets from propagation (see ``shardwise.explanation``).

    ``module`` is left unchanged: a copy is propagated with ``pipeline`` (a name of
    ``shardwise.api.PIPELINES`` or a Shardy pass-pipeline string with one propagation pass;
    ``conservative`` as ``shardwise.propagate``). ``value`` is a ``Value`` of ``module`` or a
    name of the printed, propagated module (``names``). With ``trace`` (a
    ``PropagationTrace`` filled by ``shardwise.propagation.run_propagation_pass(module, ...,
    trace=trace)``), ``module`` is taken as already propagated and nothing is run.

    Raises ``UnknownValueError`` (a ``ShardwiseError``, so ``ValueError``) for a name that
    names no value, listing close names; ``ValueError`` for a pipeline without a propagation
    pass; what ``shardwise.propagate`` raises."""
    if trace is not None:
        target, name = resolve_value(module, value) if isinstance(value, Value) else resolve(module, value)
        return build(module, target, name, trace, {}, "given trace")
    return run_with_trace(module, value, pipeline, conservative)


def _path(module: Module, value: Value) -> tuple[list[int], bool, int]:
    """Where ``value`` sits: the op path (indices through regions 0.., blocks, ops), whether
    it is a block argument, and its index."""
    for path, op in _ops_with_paths(module.op, []):
        if value.owner is op:
            return path, False, value.index
        for ri, region in enumerate(op.regions):
            for bi, block in enumerate(region.blocks):
                if value.owner is block:
                    return path + [ri, bi], True, value.index
    raise UnknownValueError(f"{value!r} is not a value of this module")


def _ops_with_paths(op: Op, path: list[int]) -> Any:
    yield path, op
    for ri, region in enumerate(op.regions):
        for bi, block in enumerate(region.blocks):
            for oi, o in enumerate(block.ops):
                yield from _ops_with_paths(o, path + [ri, bi, oi])


def _follow(module: Module, where: tuple[list[int], bool, int]) -> Value:
    path, is_arg, index = where
    op: Op = module.op
    steps = path[:-2] if is_arg else path
    for k in range(0, len(steps), 3):
        op = op.regions[steps[k]].blocks[steps[k + 1]].ops[steps[k + 2]]
    if is_arg:
        return op.regions[path[-2]].blocks[path[-1]].args[index]
    return op.results[index]


def run_with_trace(module: Module, value: Value | str, pipeline: str, conservative: bool) -> Explanation:
    """Propagates a copy of ``module`` with ``pipeline``, recording, and explains ``value``."""
    root = expand_pipeline(pipeline_text(pipeline, conservative=conservative))
    by_shardy = {v: k for k, v in PASS_NAMES.items()}
    at = [i for i, s in enumerate(root.steps) if isinstance(s, PassStep) and s.name in by_shardy]
    if len(at) != 1:
        raise ValueError(
            f"explain needs a pipeline with exactly one propagation pass ({', '.join(by_shardy)}), got {pipeline!r} ({len(at)})"
        )
    k = at[0]
    step = root.steps[k]
    assert isinstance(step, PassStep)
    work = module.copy()
    picked = _follow(work, _path(module, value)) if isinstance(value, Value) else None
    if k:
        run_pipeline(work, str(Nested(root.anchor, root.steps[:k])))
    options = PASSES[step.name].resolve(step.options)
    trace = PropagationTrace()
    run_propagation_pass(
        work,
        by_shardy[step.name],
        conservative=bool(options.get("conservative-propagation", False)),
        keep_sharding_rules=bool(options.get("keep-sharding-rules", False)),
        propagation_strategy=str(options.get("propagation-strategy", "aggressive")),
        run_op_priority=bool(options.get("run-op-priority-propagation", True)),
        debug_sharding_origins=bool(options.get("debug-sharding-origins", False)),
        debug_propagation_edge_sharding=bool(options.get("debug-propagation-edge-sharding", False)),
        trace=trace,
    )
    holders = _holders(work)
    if k + 1 < len(root.steps):
        run_pipeline(work, str(Nested(root.anchor, root.steps[k + 1 :])))
    target, name = resolve_value(work, picked) if picked is not None else resolve(work, str(value))
    return build(work, target, name, trace, holders, pipeline)


def _holders(module: Module) -> dict[int, Value]:
    """``id(value) -> value holding its sharding`` during propagation, for the values whose
    sharding a ``sdy.data_flow_edge`` held (the export passes remove the edges)."""
    out: dict[int, Value] = {}
    for op in module.walk():
        if op.name == "sdy.data_flow_edge" and op.operands and op.results:
            out[id(op.operands[0])] = op.results[0]
    return out


def _lookup(axes: dict[AxisRef, Origin], a: AxisRef) -> Origin | None:
    if a in axes:
        return axes[a]
    for b, o in axes.items():
        if b.contains(a) or a.contains(b):
            return o
    return None


class _Names:
    def __init__(self, module: Module) -> None:
        main = _main(module)
        self.by_id: dict[int, str] = {}
        for v, n, f in value_names(module):
            self.by_id[id(v)] = n if f is main or f is None else f"@{f.sym_name}:{n}"
        self.main = main

    def of(self, v: Value | None, holders: dict[int, Value]) -> str | None:
        if v is None:
            return None
        n = self.by_id.get(id(v))
        if n is not None:
            return n
        for owner_id, holder in holders.items():
            if holder is v:
                return self.by_id.get(owner_id)
        return None


def _origin_info(o: Origin, trace: Any, names: _Names) -> OriginInfo:
    main = names.main
    if o.kind == "input":
        where, loc = f"%arg{o.index}", None if main is None else main.location
    elif o.kind == "output":
        where, loc = f"result{o.index}", None if main is None else main.location
    else:
        prefix = "constraint" if o.kind == "constraint" else "mc"
        op = next((op for op, n in trace.origin_names.items() if n == f"{prefix}_{o.source}"), None)
        where, loc = (op.name, op.location) if op is not None else (f"{prefix}_{o.source}", None)
    return OriginInfo(str(o), o.kind, o.index, where, loc)


def _chain(
    slot: Value, axis: AxisRef, into: dict[int, list[Hop]], names: _Names, holders: dict[int, Value]
) -> list[ChainStep]:
    out: list[ChainStep] = []
    cur: Value | None = slot
    cur_axis = axis
    bound = 1 << 62
    while cur is not None:
        hops = [
            h
            for h in into.get(id(cur), [])
            if h.step < bound and (h.axis.contains(cur_axis) or cur_axis.contains(h.axis))
        ]
        if not hops:
            break
        exact = [h for h in hops if h.axis.contains(cur_axis)]
        h = min(exact or hops, key=lambda h: h.step)
        out.append(
            ChainStep(
                h.step,
                h.op.name,
                h.op.location,
                h.factor,
                None if h.factor is None else _native.factor_symbol(h.factor),
                str(h.source),
                names.of(h.source.value, holders),
                str(h.target),
                names.of(h.target.value, holders),
                str(h.axis),
                h.layer,
            )
        )
        cur, cur_axis, bound = h.source.value, h.axis, h.step
    out.reverse()
    return out


def build(module: Module, value: Value, name: str, trace: Any, holders: dict[int, Value], pipeline: str) -> Explanation:
    """The ``Explanation`` of ``value`` (printed as ``name``) in the propagated ``module``,
    from ``trace``; ``holders`` maps values to the ``sdy.data_flow_edge`` result that held
    their sharding during propagation."""
    names = _Names(module)
    slot = holders.get(id(value), value)
    sharding = value.sharding
    main = names.main
    if sharding is None and isinstance(main, Func) and name.startswith("result"):
        k = int(name[6:])
        sharding = main.result_shardings[k] if k < len(main.result_shardings) else None
    into: dict[int, list[Hop]] = {}
    for h in trace.hops:
        if h.target.value is not None and h.source.value is not h.target.value:
            into.setdefault(id(h.target.value), []).append(h)
    origins: dict[AxisRef, Origin] = next((axes for v, axes in trace.origins.items() if v is slot), {})
    axes: list[AxisExplanation] = []
    held: list[AxisRef] = []
    if sharding is not None:
        for d, dim in enumerate(sharding.dims):
            for a in dim.axes:
                held.append(a)
                o = _lookup(origins, a)
                chain = _chain(slot, a, into, names, holders)
                axes.append(
                    AxisExplanation(
                        str(a),
                        d,
                        None if o is None else _origin_info(o, trace, names),
                        tuple(chain),
                        chain[-1].layer if chain else None,
                    )
                )
    # One record per (axis, op, source): the last visit's, whose layer decided.
    dropped: dict[tuple[str, int, int], DroppedAxis] = {}
    for c in trace.conflicts:
        if c.target.value is not slot or any(b.contains(c.axes[0]) for b in held):
            continue
        key = (str(c.axes[0]), id(c.op), id(c.source.value))
        w = c.with_
        dropped.pop(key, None)
        dropped[key] = DroppedAxis(
            c.op.name,
            c.op.location,
            c.factor,
            _native.factor_symbol(c.factor),
            tuple(str(a) for a in c.axes),
            str(c.target),
            str(c.source),
            names.of(c.source.value, holders),
            c.reason,
            REASONS[c.reason],
            None if w is None else str(w.tensor),
            None if w is None else names.of(w.tensor.value, holders),
            None if w is None else w.factor,
            None if w is None or w.axis is None else str(w.axis),
            c.layer,
            c.step,
        )
    owner = value.defining_op
    return Explanation(
        name,
        str(value.type),
        None if owner is None else owner.name,
        None if owner is None else owner.location,
        None if sharding is None else str(sharding),
        pipeline,
        tuple(axes),
        tuple(dropped.values()),
    )
