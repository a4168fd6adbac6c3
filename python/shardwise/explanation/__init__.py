"""``shardwise.explanation``: ``explain(module, value)``, why a value got its sharding.

``explain(module, value)`` propagates ``module`` (a copy) with the solver's records on
(``PropagationTrace``: the data of Shardy's ``debug-sharding-origins`` and
``debug-propagation-edge-sharding``, plus the layer of each step and the axes dropped by
conflicts, ``rust/src/propagation/explain.rs``) and returns an ``Explanation`` of ``value``:

* its final sharding;
* per axis of it: the user sharding it came from (a function argument or result, a sharding
  constraint, a manual computation's in or out sharding: Shardy's origin, with the op and its
  location), the layer that decided it (user priority, op priority step, basic or aggressive
  strategy: the layer of the step that brought it) and the chain of steps it travelled from
  the user sharding to the value (op, location, factor of the op's sharding rule, the operand or
  result it entered by and left by, step and layer), found by following the recorded moves
  backwards, each to an earlier step;
* the axes it could have had but does not: each axis that another operand or result of an op
  had along a factor of the value and that the value did not take, with the reason (see
  ``records.REASONS``: another sharding of the same factor, an axis used by another factor, a
  closed or lower-priority dimension, a non-divisible size, ...) and what it conflicted with,
  as decided at the last visit of the op.

Values are named as the printed module names them (``names``): ``%12``, ``%arg0``, ``result0``,
``@f:%3``. ``Explanation.to_dict()`` is JSON-serialisable (schema in ``Explanation``);
``Explanation.render()`` gives rich tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shardwise.explanation.names import UnknownValueError, resolve, resolve_value
from shardwise.explanation.records import Layer
from shardwise.ir.core import Module, Value

__all__ = ["AxisExplanation", "ChainStep", "DroppedAxis", "Explanation", "OriginInfo", "UnknownValueError", "explain"]


@dataclass(frozen=True)
class OriginInfo:
    """The user sharding an axis came from: ``name`` as Shardy writes it (``input: 0``,
    ``output: 1``, ``constraint_2``, ``mc_0_input: 1``), ``kind`` (``input``, ``output``,
    ``constraint``, ``mc_input``, ``mc_output``), ``index`` (argument, result, in/out sharding),
    ``where`` (``%arg0``, ``result1``, or the op name of a constraint or manual computation) and
    its ``location`` (source location text, or ``None``)."""

    name: str
    kind: str
    index: int
    where: str
    location: str | None


@dataclass(frozen=True)
class ChainStep:
    """One move of an axis: at ``step`` (layer ``layer``), through op ``op`` (at
    ``location``), from its ``source`` (``operand 0``; a value ``source_value``) to its
    ``target`` (``result 0``; ``target_value``), along factor ``factor`` of the op's sharding
    rule (``factor_name``: Shardy's factor symbol, ``i``, ``j``, ...; ``None`` where the axis
    merges two factors' sub-axes), as axis ``axis``."""

    step: int
    op: str
    location: str | None
    factor: int | None
    factor_name: str | None
    source: str
    source_value: str | None
    target: str
    target_value: str | None
    axis: str
    layer: Layer | None


@dataclass(frozen=True)
class AxisExplanation:
    """Axis ``axis`` of dimension ``dim`` of the value's sharding: its ``origin`` (``None`` when
    no user sharding is recorded for it, e.g. a sharding set by hand on an op result), the
    ``chain`` of moves from the origin to the value (empty when the value holds the user
    sharding itself) and the layer ``decided_by`` (that of the last move; ``None`` for a user
    sharding)."""

    axis: str
    dim: int
    origin: OriginInfo | None
    chain: tuple[ChainStep, ...]
    decided_by: Layer | None


@dataclass(frozen=True)
class DroppedAxis:
    """Axes ``axes`` (the first the value did not take, then those after it in the source) of
    factor ``factor`` (``factor_name``) of op ``op`` (at ``location``), that the value, as the
    op's ``target`` (``operand 1``), did not take from the op's ``source`` (``source_value``)
    for ``reason`` (a key of ``records.REASONS``; ``description`` says it in words),
    conflicting with ``with_tensor`` (``with_value``, its factor ``with_factor`` and axis
    ``with_axis``) where one tensor is to blame; decided in layer ``layer`` at step ``step``
    (``None`` when that visit changed nothing)."""

    op: str
    location: str | None
    factor: int
    factor_name: str
    axes: tuple[str, ...]
    target: str
    source: str
    source_value: str | None
    reason: str
    description: str
    with_tensor: str | None
    with_value: str | None
    with_factor: int | None
    with_axis: str | None
    layer: Layer
    step: int | None


@dataclass(frozen=True)
class Explanation:
    """Why value ``value`` (its printed name; type ``type``, defined by op ``defined_by``, at
    ``location``) has sharding ``sharding`` (Shardy's text, ``None`` when it has none) after
    ``pipeline``: one ``AxisExplanation`` per axis, in dimension order, and the ``DroppedAxis``
    records of axes it did not take, in the order the solver met them.

    ``to_dict()`` gives (JSON-serialisable)::

        {"value": str, "type": str, "defined_by": str | None, "location": str | None,
         "sharding": str | None, "pipeline": str,
         "axes": [{"axis": str, "dim": int,
                   "origin": {"name", "kind", "index", "where", "location"} | None,
                   "decided_by": LAYER | None,
                   "chain": [{"step", "op", "location", "factor", "factor_name", "source",
                              "source_value", "target", "target_value", "axis",
                              "layer": LAYER | None}, ...]}, ...],
         "dropped": [{"op", "location", "factor", "factor_name", "axes": [str], "target",
                      "source", "source_value", "reason", "description", "with_tensor",
                      "with_value", "with_factor", "with_axis", "layer": LAYER,
                      "step"}, ...]}

    where ``LAYER`` is ``{"user_priority": int | None, "op_priority": int | None,
    "strategy": "basic" | "aggressive", "name": str}``. ``from_dict`` reads it back."""

    value: str
    type: str
    defined_by: str | None
    location: str | None
    sharding: str | None
    pipeline: str
    axes: tuple[AxisExplanation, ...] = field(default_factory=tuple)
    dropped: tuple[DroppedAxis, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        from shardwise.explanation.serial import to_dict

        return to_dict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Explanation:
        """The explanation ``to_dict`` gave. Raises ``ValueError`` (``ShardwiseError``) for a
        dict of another shape."""
        from shardwise.explanation.serial import from_dict

        return from_dict(d)

    def render(self) -> Any:
        """Rich renderable: a summary table, the chain of each axis, and the dropped axes."""
        from shardwise.explanation.render import render

        return render(self)

    def __rich__(self) -> Any:
        return self.render()


def explain(
    module: Module,
    value: Value | str,
    *,
    pipeline: str = "full",
    conservative: bool = False,
    trace: Any = None,
) -> Explanation:
    """Explains the sharding ``value`` gets from propagation (see the module documentation).

    ``module`` is left unchanged: a copy is propagated with ``pipeline`` (a name of
    ``shardwise.api.PIPELINES`` or a Shardy pass-pipeline string with one propagation pass;
    ``conservative`` as ``shardwise.propagate``). ``value`` is a ``Value`` of ``module`` or a
    name of the printed, propagated module (``names``). With ``trace`` (a
    ``PropagationTrace`` filled by ``shardwise.propagation.propagate(module, ...,
    trace=trace)``), ``module`` is taken as already propagated and nothing is run.

    Raises ``UnknownValueError`` (a ``ShardwiseError``, so ``ValueError``) for a name that
    names no value, listing close names; ``ValueError`` for a pipeline without a propagation
    pass; what ``shardwise.propagate`` raises."""
    from shardwise.explanation.build import build, run_with_trace

    if trace is not None:
        target, name = resolve_value(module, value) if isinstance(value, Value) else resolve(module, value)
        return build(module, target, name, trace, {}, "given trace")
    return run_with_trace(module, value, pipeline, conservative)
