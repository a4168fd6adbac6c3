"""Rich tables of an ``Explanation``: a summary, the chain of each axis, the dropped axes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from shardwise.explanation.model import Explanation

__all__ = ["render"]


def _t(x: object) -> Text:
    # Plain text: shardings and locations contain brackets rich would read as markup.
    return Text("" if x is None else str(x))


def _short_op(name: object) -> object:
    """``stablehlo.dot_general`` -> ``dot_general`` (other dialects keep their prefix)."""
    return name.removeprefix("stablehlo.") if isinstance(name, str) else name


def _short_loc(loc: object) -> object:
    """``loc("f.py":97:11)`` -> ``"f.py":97:11`` (``-`` for stdin dropped)."""
    if not isinstance(loc, str):
        return loc
    inner = loc.removeprefix("loc(").removesuffix(")")
    return inner.removeprefix('"-":')


def render(e: Explanation) -> RenderableType:
    """The tables of ``e``."""
    summary = Table(title=Text(f"why {e.value} is sharded {e.sharding or '(no sharding)'}"), show_header=True)
    for col in ("axis", "dim", "from user sharding", "at", "decided by", "hops"):
        summary.add_column(col)
    for a in e.axes:
        o = a.origin
        summary.add_row(
            _t(a.axis),
            _t(a.dim),
            _t(None if o is None else f"{o.name} ({o.where})"),
            _t(None if o is None else o.location),
            _t(a.decided_by if a.decided_by is not None else "user sharding" if o is not None else None),
            _t(len(a.chain)),
        )
    if not e.axes:
        summary.add_row(_t("(none)"), _t(""), _t(""), _t(""), _t(""), _t(""))
    parts: list[RenderableType] = [
        Text(
            f"{e.value}: {e.type}"
            + (f" = {e.defined_by}" if e.defined_by else "")
            + (f" at {e.location}" if e.location else "")
        ),
        summary,
    ]
    for a in e.axes:
        if not a.chain:
            continue
        layers = {str(c.layer) for c in a.chain}
        one_layer = len(layers) == 1
        title = f"axis {a.axis}: path from {a.origin.name if a.origin else 'unknown origin'}"
        t = Table(title=Text(title + (f" (all in {layers.pop()})" if one_layer else "")))
        for col in ("step", "op", "location", "factor", "from", "to", *(() if one_layer else ("layer",))):
            t.add_column(col, overflow="fold")
        for c in a.chain:
            row = [
                _t(c.step),
                _t(_short_op(c.op)),
                _t(_short_loc(c.location)),
                _t(c.factor_name),
                _t(f"{c.source} {c.source_value or ''}".strip()),
                _t(f"{c.target} {c.target_value or ''}".strip()),
            ]
            t.add_row(*row, *(() if one_layer else (_t(c.layer),)))
        parts.append(t)
    if e.dropped:
        t = Table(title=Text(f"axes {e.value} did not take"))
        for col in ("axes", "op", "location", "factor", "from", "reason", "conflicts with", "layer"):
            t.add_column(col)
        for d in e.dropped:
            with_ = None
            if d.with_tensor is not None:
                with_ = f"{d.with_tensor} {d.with_value or ''}".strip()
                if d.with_axis is not None:
                    with_ += f" axis {d.with_axis}"
                if d.with_factor is not None and d.with_factor != d.factor:
                    with_ += f" (factor {d.with_factor})"
            t.add_row(
                _t(", ".join(d.axes)),
                _t(d.op),
                _t(d.location),
                _t(d.factor_name),
                _t(f"{d.source} {d.source_value or ''}".strip()),
                _t(f"{d.reason}: {d.description}"),
                _t(with_),
                _t(d.layer),
            )
        parts.append(t)
    return Group(*parts)
