"""The solver's records behind ``shardwise.explain`` (``rust/src/propagation/explain.rs``), as
Python data: which layer took each propagation step (``Layer``), each axis moved through an op
along a factor (``Hop``), and each axis an operand or result could not take because of a
conflict (``Conflict``, reasons in ``REASONS``). ``PropagationTrace`` holds them
(``steps``, ``hops``, ``conflicts``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shardwise import _native
from shardwise.ir.core import Op, Value
from shardwise.sharding import AxisRef

__all__ = ["REASONS", "Conflict", "ConflictWith", "Hop", "Layer", "Node", "load_conflicts", "load_hops", "load_steps"]

#: Why an axis did not reach an operand or result, by reason name (the checks of Shardy's
#: ``basic_factor_propagation.cc`` and ``aggressive_factor_propagation.cc``, in Shardy's order).
REASONS: dict[str, str] = {
    "blocked-factor": "the op's sharding rule blocks propagation along this factor",
    "direction": "the layer's direction policy (op priority heuristic or propagation barrier) does not propagate this factor from that tensor",
    "incompatible-sharding": "another tensor shards the same factor along different axes (Shardy getCompatibleMajorAxes)",
    "overlaps-other-factor": "the axis already shards another factor of a tensor (compatiblePrefixNoConflictsAcrossFactors)",
    "replicated": "the axis is explicitly replicated in a tensor",
    "unreduced": "the axis is unreduced in a tensor",
    "closed": "a tensor's dimension is closed (or has a lower user priority, closed until its round)",
    "overflow-axes": "a tensor's factor has overflow axes",
    "not-divisible": "the factor is not the minor-most of its dimension and the axis does not divide its size",
    "conservative-sub-axis": "conservative propagation takes no sub-axes",
    "elementwise-operand": "the aggressive strategy gives an elementwise op's operands only axes a result has",
    "not-propagated": "none of Shardy's conflict checks explains it",
}


@dataclass(frozen=True)
class Layer:
    """The propagation layer that ran a round: user priority ``p{user_priority}`` (``None``
    outside ``sdy-user-priority-propagate``; round ``p0`` also takes dimensions without a
    priority), op priority step ``op_priority`` (0 to 4, Shardy's op heuristics; ``None``
    outside ``sdy-op-priority-propagate``) and the factor propagation ``strategy``
    (``"basic"`` or ``"aggressive"``)."""

    user_priority: int | None
    op_priority: int | None
    strategy: str

    def __str__(self) -> str:
        """``p1 / op-priority 3 / aggressive``: user priority, op priority step, strategy."""
        parts = []
        if self.user_priority is not None:
            parts.append(f"p{self.user_priority}")
        if self.op_priority is not None:
            parts.append(f"op-priority {self.op_priority}")
        parts.append(self.strategy)
        return " / ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "user_priority": self.user_priority,
            "op_priority": self.op_priority,
            "strategy": self.strategy,
            "name": str(self),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Layer:
        return cls(d["user_priority"], d["op_priority"], d["strategy"])


@dataclass(frozen=True, eq=False)
class Node:
    """An operand (``kind="operand"``) or result (``"result"``) of a propagation step, by
    position among the step's tensors, and the value holding its sharding (``None`` when it
    has none). For a data flow edge the operands are its sources; for a function's results,
    operand 0 is the returned value and result 0 the result."""

    kind: str
    index: int
    value: Value | None

    def __str__(self) -> str:
        return f"{self.kind} {self.index}"


@dataclass(frozen=True, eq=False)
class Hop:
    """Axis ``axis`` moving through ``op`` from ``source`` to ``target`` at step ``step``,
    along factor ``factor`` of the op's rule (``None`` when the axis merges sub-axes of two
    factors), in layer ``layer``."""

    step: int
    op: Op
    axis: AxisRef
    factor: int | None
    source: Node
    target: Node
    layer: Layer | None


@dataclass(frozen=True, eq=False)
class ConflictWith:
    """What an axis conflicted with: tensor ``tensor`` of the op, its factor ``factor`` and axis
    ``axis`` involved (``None`` where no single one is)."""

    tensor: Node
    factor: int | None
    axis: AxisRef | None


@dataclass(frozen=True, eq=False)
class Conflict:
    """Axes ``axes`` (the first not taken, then those after it in the source) of factor
    ``factor`` that ``target`` could not take from ``source`` when ``op`` was propagated
    through, for ``reason`` (a key of ``REASONS``), conflicting with ``with_``. ``visit``
    orders conflicts (the solver's visit counter; each conflict is kept at its last visit);
    ``step`` is the step of that visit when it changed a sharding."""

    visit: int
    step: int | None
    op: Op
    layer: Layer
    factor: int
    target: Node
    source: Node
    axes: tuple[AxisRef, ...]
    reason: str
    with_: ConflictWith | None


def _layer(w: _native.Layer) -> Layer:
    return Layer(w.user_priority, w.op_priority, w.strategy)


def _node(w: _native.Node, values: Sequence[Value]) -> Node:
    return Node(w.kind, w.index, None if w.value is None else values[w.value])


def load_steps(result: Any, ops: Sequence[Op]) -> dict[int, tuple[Op, Layer]]:
    """``step -> (op, layer)`` from a ``_native.PropagationResult`` (``ops``: the frozen
    module's)."""
    return {s.step: (ops[s.op], _layer(s.layer)) for s in result.debug_steps}


def load_hops(result: Any, values: Sequence[Value], ops: Sequence[Op], steps: dict[int, tuple[Op, Layer]]) -> list[Hop]:
    """The ``Hop`` records of a ``_native.PropagationResult``, in step order."""
    out = []
    for h in result.debug_hops:
        layer = steps.get(h.step)
        out.append(
            Hop(
                h.step,
                ops[h.op],
                AxisRef._from_core(h.axis),
                h.factor,
                _node(h.source, values),
                _node(h.target, values),
                None if layer is None else layer[1],
            )
        )
    return out


def load_conflicts(result: Any, values: Sequence[Value], ops: Sequence[Op]) -> list[Conflict]:
    """The ``Conflict`` records of a ``_native.PropagationResult``, by visit."""
    out = []
    for c in result.debug_conflicts:
        w = None
        if c.with_ is not None:
            a = c.with_.axis
            w = ConflictWith(
                _node(c.with_.tensor, values), c.with_.factor, None if a is None else AxisRef._from_core(a)
            )
        out.append(
            Conflict(
                c.visit,
                c.step,
                ops[c.op],
                _layer(c.layer),
                c.factor,
                _node(c.target, values),
                _node(c.source, values),
                tuple(AxisRef._from_core(a) for a in c.axes),
                c.reason,
                w,
            )
        )
    out.sort(key=lambda c: c.visit)
    return out
