"""Shardy's sharding debug information (``transforms/propagation/debugging/source_sharding.cc``):
the origin of each axis of each sharding (``sdy.sharding_origins``, ``debug-sharding-origins``)
and the propagation edges that moved it (``sdy.propagation_edges``,
``debug-propagation-edge-sharding``).

``DebugInfo`` holds the records (Shardy's ``ShardingDebugMappings``) of a propagation solve
on the Python IR (``shardwise.propagation.run_propagation_pass``, which ``shardwise.explain``
runs for its trace): the Rust solver records them (``rust/src/propagation/debug.rs``),
``load_solver_records`` loads them and ``save`` writes them onto the module as Shardy does.
The attribute text comes from the solver's printers (``_native.sharding_origins_text``,
``_native.propagation_edges_text``). The pipelines' passes write the same records natively
(``rust/src/transforms/propagation/source_sharding.rs``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shardwise import _native
from shardwise.errors import ProgramError
from shardwise.ir.attrs import quote, unquote
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.rewrite import Uses, enclosing_func, owning_op
from shardwise.ir.sdy import (
    DATA_FLOW_EDGE,
    MANUAL_COMPUTATION,
    SHARDING_CONSTRAINT,
    lookup_data_flow_edge,
    post_order,
)
from shardwise.sharding import AxisRef

SHARDING_ORIGINS = "sdy.sharding_origins"
SHARDING_ORIGIN_NAME = "sdy.sharding_origin_name"
PROPAGATION_EDGES = "sdy.propagation_edges"

INPUT, CONSTRAINT, OUTPUT, MC_INPUT, MC_OUTPUT = "input", "constraint", "output", "mc_input", "mc_output"


@dataclass(frozen=True)
class Origin:
    """Where an axis of a sharding came from (Shardy's ``OriginSharding``)."""

    kind: str
    index: int
    source: int = 0

    def __str__(self) -> str:
        if self.kind == CONSTRAINT:
            return f"constraint_{self.source}"
        if self.kind == MC_INPUT:
            return f"mc_{self.source}_input: {self.index}"
        if self.kind == MC_OUTPUT:
            return f"mc_{self.source}_output: {self.index}"
        return f"{self.kind}: {self.index}"


@dataclass(frozen=True)
class Edge:
    """A propagation edge: ``(source kind, index) -> (target kind, index)`` at ``step``; kinds
    are ``"operand"`` and ``"result"``."""

    source: tuple[str, int]
    target: tuple[str, int]
    step: int


@dataclass
class DebugInfo:
    """The mappings of Shardy's ``ShardingDebugMappings``."""

    origins: bool
    edges: bool
    uses: Uses
    step: int = 0
    value_origins: dict[int, tuple[Value, dict[AxisRef, Origin]]] = field(default_factory=dict)
    op_edges: dict[int, tuple[Op, dict[AxisRef, list[Edge]]]] = field(default_factory=dict)
    #: Per function, the edges of each result (Shardy records all of them under result 0).
    func_result_edges: dict[int, tuple[Func, list[dict[AxisRef, list[Edge]]]]] = field(default_factory=dict)

    def save(self, module: Module) -> None:
        """``SourceShardingHandler::saveOnModule``: the origins of each recorded value on the
        attribute that holds its sharding (and on the function result it is returned as), then
        ``self`` for each user sharding's own axes; the edges of each recorded op (replacing any
        it had) and of each function result."""
        if self.origins:
            for v, origins in self.value_origins.values():
                _save_origins(v, origins, self.uses)
            _override_to_self(module, self.uses)
        if self.edges:
            for op, axes in self.op_edges.values():
                if isinstance(op, Func):
                    continue
                text = _edges_text(axes)
                if text is not None:
                    op.attributes[PROPAGATION_EDGES] = text
            for func, results in self.func_result_edges.values():
                for i, axes in enumerate(results):
                    text = _edges_text(axes)
                    if text is not None and i < len(func.result_attrs):
                        func.result_attrs[i][PROPAGATION_EDGES] = text

    def check_edges(self) -> None:
        """What Shardy's verifier checks of the ``sdy.propagation_edges`` a pass wrote: every
        operand or result an edge names exists on the op. Shardy's propagation names operand
        ``i`` of a (function) data flow edge for its ``i``-th source, and the edge of a while
        loop, or of a function called twice, has two sources but one operand: the verifier
        then fails the pass, and so does this (``ProgramError``, with the verifier's message).
        (Later Shardy versions exempt ``sdy.func_data_flow_edge``; jaxlib 0.10.2's does not.)"""
        for op, axes in self.op_edges.values():
            if isinstance(op, Func):
                continue
            for edges in axes.values():
                for e in edges:
                    for kind, index in (e.source, e.target):
                        count = len(op.operands) if kind == "operand" else len(op.results)
                        if not 0 <= index < count:
                            article = "an" if kind == "operand" else "a"
                            raise ProgramError(
                                f"{op.where()}: '{op.name}' op expected a value ref to have {article} {kind} index in range "
                                f"[0, {count}), got: {index} (sdy.propagation_edges written by propagation; Shardy's "
                                "verifier rejects them the same way)"
                            )

    def load_solver_records(self, result: Any, values: Sequence[Value], ops: Sequence[Op]) -> None:
        """Takes the records of a propagation solve (``_native.PropagationResult`` with
        debugging records; ``values`` and ``ops`` are the frozen module's, which its indices
        refer to) and sets Shardy's ``sdy.sharding_origin_name`` on each sharding constraint
        and manual computation."""
        for value, entries in result.debug_origins:
            v = values[value]
            axes = self.value_origins.setdefault(id(v), (v, {}))[1]
            for a, o in entries:
                axes.setdefault(AxisRef._from_core(a), Origin(o.kind, o.index, o.source_id))
        for op_index, entries in result.debug_edges:
            op = ops[op_index]
            edges = self.op_edges.setdefault(id(op), (op, {}))[1]
            for a, lst in entries:
                edges.setdefault(AxisRef._from_core(a), []).extend(_edge(e) for e in lst)
        for func_index, per_result in result.debug_func_result_edges:
            func = ops[func_index]
            assert isinstance(func, Func)
            self.func_result_edges[id(func)] = (
                func,
                [{AxisRef._from_core(a): [_edge(e) for e in lst] for a, lst in entries} for entries in per_result],
            )
        if self.origins:
            for op_index, name in result.debug_origin_names:
                ops[op_index].attributes[SHARDING_ORIGIN_NAME] = quote(name)
        step = result.debug_next_step
        if step is not None:
            self.step = int(step)


def _edge(e: _native.Edge) -> Edge:
    return Edge((e.source_kind, e.source_index), (e.target_kind, e.target_index), e.step)


def max_step(module: Module) -> int:
    """The largest step of the ``sdy.propagation_edges`` in ``module`` (-1 when none); Shardy
    numbers a pass's steps on from the next one."""
    import re

    best = -1
    for op in module.walk():
        text = op.attributes.get(PROPAGATION_EDGES)
        if text:
            for m in re.finditer(r"step-(\d+)", text):
                best = max(best, int(m.group(1)))
    return best


def _dict_text(axes: dict[AxisRef, Origin]) -> str:
    return _native.sharding_origins_text([(a._core, str(origin)) for a, origin in axes.items()])


def _save_origins(v: Value, axes: dict[AxisRef, Origin], uses: Uses) -> None:
    op = owning_op(v)
    if op is None:
        return
    func = enclosing_func(op)
    text = _dict_text(axes)
    if func is not None and func.regions[0].blocks:
        ret = func.return_op
        for user, index in uses.of(v):
            if user is ret:
                func.result_attrs[index][SHARDING_ORIGINS] = text
                break
    if isinstance(op, Func):
        op.arg_attrs[v.index][SHARDING_ORIGINS] = text
    elif op.name in (SHARDING_CONSTRAINT, DATA_FLOW_EDGE):
        op.attributes[SHARDING_ORIGINS] = text
    else:
        dicts = _split_array(op.attributes.get(SHARDING_ORIGINS)) or ["{}"] * len(op.results)
        dicts[v.index] = text
        op.attributes[SHARDING_ORIGINS] = "[" + ", ".join(dicts) + "]"


def _split_array(text: str | None) -> list[str] | None:
    if text is None or not text.startswith("["):
        return None
    out: list[str] = []
    depth = 0
    start = 1
    in_str = False
    i = 1
    while i < len(text) - 1:
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{[<(":
            depth += 1
        elif c in "}]>)":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
        i += 1
    last = text[start : len(text) - 1].strip()
    if last:
        out.append(last)
    return out


def _parse_dict(text: str) -> list[tuple[str, str]]:
    body = text.strip()[1:-1]
    out = []
    for item in _split_array("[" + body + "]") or []:
        k, _, val = item.partition(" = ")
        out.append((k, val))
    return out


def _to_self(text: str, name: str) -> str:
    items = _parse_dict(text)
    return "{" + ", ".join(f"{k} = {quote('self') if unquote(v) == name else v}" for k, v in items) + "}"


def _override_to_self(module: Module, uses: Uses) -> None:
    ops = [o for top in list(module.ops) for o in post_order(top)]
    for op in ops:
        if (
            op.name == SHARDING_CONSTRAINT
            and SHARDING_ORIGINS in op.attributes
            and SHARDING_ORIGIN_NAME in op.attributes
        ):
            op.attributes[SHARDING_ORIGINS] = _to_self(
                op.attributes[SHARDING_ORIGINS], unquote(op.attributes[SHARDING_ORIGIN_NAME])
            )
    for f in module.funcs:
        for i, d in enumerate(f.arg_attrs):
            if SHARDING_ORIGINS in d:
                d[SHARDING_ORIGINS] = _to_self(d[SHARDING_ORIGINS], str(Origin(INPUT, i)))
        for i, d in enumerate(f.result_attrs):
            if SHARDING_ORIGINS in d:
                d[SHARDING_ORIGINS] = _to_self(d[SHARDING_ORIGINS], str(Origin(OUTPUT, i)))
    for op in ops:
        if op.name != MANUAL_COMPUTATION or SHARDING_ORIGIN_NAME not in op.attributes:
            continue
        name = unquote(op.attributes[SHARDING_ORIGIN_NAME])
        for a in op.regions[0].entry.args:
            edge = lookup_data_flow_edge(a, uses)
            if edge is not None and SHARDING_ORIGINS in edge.attributes:
                edge.attributes[SHARDING_ORIGINS] = _to_self(
                    edge.attributes[SHARDING_ORIGINS], f"{name}_input: {a.index}"
                )
        for r in op.results:
            edge = lookup_data_flow_edge(r, uses)
            if edge is not None and SHARDING_ORIGINS in edge.attributes:
                edge.attributes[SHARDING_ORIGINS] = _to_self(
                    edge.attributes[SHARDING_ORIGINS], f"{name}_output: {r.index}"
                )


def _edges_text(axes: dict[AxisRef, list[Edge]]) -> str | None:
    entries = [
        (a._core, [_native.Edge(e.source[0], e.source[1], e.target[0], e.target[1], e.step) for e in edges])
        for a, edges in axes.items()
    ]
    return _native.propagation_edges_text(entries)
