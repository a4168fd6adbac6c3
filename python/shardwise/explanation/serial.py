"""``Explanation.to_dict`` / ``from_dict`` (schema in ``shardwise.explanation.Explanation``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from shardwise.errors import ShardwiseError
from shardwise.explanation import AxisExplanation, ChainStep, DroppedAxis, Explanation, OriginInfo
from shardwise.explanation.records import Layer

__all__ = ["from_dict", "to_dict"]


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
