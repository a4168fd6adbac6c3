"""The ``Explanation`` of a value's sharding (``shardwise.explain``) and its parts, as data,
with their JSON-serialisable dict form (``Explanation.to_dict`` / ``from_dict``, schema in
``Explanation``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from shardwise.errors import ShardwiseError
from shardwise.propagation.records import Layer

__all__ = ["AxisExplanation", "ChainStep", "DroppedAxis", "Explanation", "OriginInfo", "from_dict", "to_dict"]


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
    for ``reason`` (a key of ``shardwise.propagation.records.REASONS``; ``description`` says it in words),
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
        return to_dict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Explanation:
        """The explanation ``to_dict`` gave. Raises ``ValueError`` (``ShardwiseError``) for a
        dict of another shape."""
        return from_dict(d)

    def render(self) -> Any:
        """Rich renderable: a summary table, the chain of each axis, and the dropped axes."""
        # ``rich`` is imported when an explanation is first rendered, not with shardwise
        # (``render`` imports this module only for annotations).
        from shardwise.explanation.render import render

        return render(self)

    def __rich__(self) -> Any:
        return self.render()


# ---------------------------------------------------------------------------- dict form


def _layer(x: Layer | None) -> dict[str, Any] | None:
    return None if x is None else x.to_dict()


def to_dict(e: Explanation) -> dict[str, Any]:
    """The JSON-serialisable dict of ``e``."""

    def chain(c: ChainStep) -> dict[str, Any]:
        return {
            **{f.name: getattr(c, f.name) for f in dataclasses.fields(c) if f.name != "layer"},
            "layer": _layer(c.layer),
        }

    def axis(a: AxisExplanation) -> dict[str, Any]:
        return {
            "axis": a.axis,
            "dim": a.dim,
            "origin": None if a.origin is None else dataclasses.asdict(a.origin),
            "decided_by": _layer(a.decided_by),
            "chain": [chain(c) for c in a.chain],
        }

    def dropped(d: DroppedAxis) -> dict[str, Any]:
        out = {f.name: getattr(d, f.name) for f in dataclasses.fields(d) if f.name != "layer"}
        out["axes"] = list(d.axes)
        out["layer"] = d.layer.to_dict()
        return out

    return {
        "value": e.value,
        "type": e.type,
        "defined_by": e.defined_by,
        "location": e.location,
        "sharding": e.sharding,
        "pipeline": e.pipeline,
        "axes": [axis(a) for a in e.axes],
        "dropped": [dropped(d) for d in e.dropped],
    }


def from_dict(d: dict[str, Any]) -> Explanation:
    """The ``Explanation`` of a ``to_dict`` dict. Raises ``ShardwiseError`` (a ``ValueError``)
    naming the missing or unexpected key."""
    try:
        axes = tuple(
            AxisExplanation(
                a["axis"],
                a["dim"],
                None if a["origin"] is None else OriginInfo(**a["origin"]),
                tuple(
                    ChainStep(**{**c, "layer": None if c["layer"] is None else Layer.from_dict(c["layer"])})
                    for c in a["chain"]
                ),
                None if a["decided_by"] is None else Layer.from_dict(a["decided_by"]),
            )
            for a in d["axes"]
        )
        dropped = tuple(
            DroppedAxis(**{**x, "axes": tuple(x["axes"]), "layer": Layer.from_dict(x["layer"])}) for x in d["dropped"]
        )
        return Explanation(
            d["value"], d["type"], d["defined_by"], d["location"], d["sharding"], d["pipeline"], axes, dropped
        )
    except (KeyError, TypeError) as e:
        raise ShardwiseError(f"not an Explanation dict (see Explanation's schema): {type(e).__name__}: {e}") from None
