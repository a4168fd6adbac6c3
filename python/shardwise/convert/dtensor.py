"""PyTorch DTensor placements, as plain tuples (no torch dependency): one per mesh axis,
``("shard", dim)``, ``("replicate",)`` or ``("partial", op)`` with ``op`` in sum/max/min.
Objects with DTensor's ``is_shard()`` / ``is_replicate()`` / ``is_partial()`` methods are
accepted too. A tensor dimension sharded by several mesh axes is split by them in mesh order
(the first mesh axis outermost), as DTensor does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shardwise.convert import reject_sub_axes, require_layout_only
from shardwise.errors import ConversionError
from shardwise.mesh import Mesh

if TYPE_CHECKING:
    from shardwise.sharding import TensorSharding

Placement = tuple[Any, ...]


def to_placements(ts: TensorSharding, mesh: Mesh, *, strict: bool = True) -> tuple[Placement, ...]:
    """``(("shard", 0), ("replicate",))`` for ``[{"x"}, {}]`` on ``x, y``. Raises
    ``ConversionError`` for sub-axes, a dimension whose axes are against mesh order, and
    (strict) propagation-only information."""
    require_layout_only(ts, "DTensor placements", strict)
    reject_sub_axes(ts, "DTensor placements")
    names = mesh.axis_names
    out: list[Placement] = [("replicate",)] * len(names)
    for i, d in enumerate(ts.dims):
        idx = [names.index(a.name) for a in d.axes]
        if idx != sorted(idx):
            raise ConversionError(
                f"dim {i} of {ts} is sharded on {d} against mesh order {list(names)}; "
                "DTensor shards a dimension by mesh axes in mesh order"
            )
        for k in idx:
            out[k] = ("shard", i)
    for a in ts.unreduced:
        out[names.index(a.name)] = ("partial", ts.reduction)
    return tuple(out)


def _placement(p: Any, i: int) -> Placement:
    if isinstance(p, tuple) and p:
        return p
    if hasattr(p, "is_shard") and p.is_shard():
        return ("shard", p.dim)
    if hasattr(p, "is_replicate") and p.is_replicate():
        return ("replicate",)
    if hasattr(p, "is_partial") and p.is_partial():
        return ("partial", str(getattr(p, "reduce_op", "sum")))
    raise ConversionError(f"placement {i} must be ('shard', d), ('replicate',) or ('partial', op), got {p!r}")


def from_placements(
    cls: type[TensorSharding], placements: Sequence[Any], mesh: Mesh, rank: int, *, mesh_name: str | None = "mesh"
) -> TensorSharding:
    """The sharding (a ``cls``) of DTensor placements (one per mesh axis) for a rank-``rank`` tensor.
    Raises ``ConversionError`` for a wrong count, an unknown placement, a dim out of range, or
    partial placements with different reduce ops."""
    names = mesh.axis_names
    if len(placements) != len(names):
        raise ConversionError(f"expected {len(names)} placements (one per axis of {mesh}), got {len(placements)}")
    dims: list[list[str]] = [[] for _ in range(rank)]
    unreduced: list[str] = []
    ops = set()
    for k, raw in enumerate(placements):
        kind, *args = _placement(raw, k)
        if kind == "shard":
            d = int(args[0]) if args else -1
            d = d + rank if d < 0 else d
            if not 0 <= d < rank:
                raise ConversionError(f"placement {k} shards dim {args[0] if args else None} of a rank-{rank} tensor")
            dims[d].append(names[k])
        elif kind == "partial":
            op = str(args[0]) if args else "sum"
            if op not in ("sum", "max", "min"):
                raise ConversionError(f"placement {k}: partial reduce op {op!r} is not sum, max or min")
            ops.add(op)
            unreduced.append(names[k])
        elif kind != "replicate":
            raise ConversionError(f"placement {k}: unknown kind {kind!r}")
    if len(ops) > 1:
        raise ConversionError(f"partial placements mix reduce ops {sorted(ops)}")
    reduction = ops.pop() if ops else "sum"
    if mesh_name is None:
        return cls(mesh, dims, unreduced=unreduced, reduction=reduction, inline=True)
    return cls(mesh, dims, unreduced=unreduced, reduction=reduction, mesh_name=mesh_name)
