"""hidet ``TensorShardSpec`` (``../shared/references/hidet-auto-parallel-rfc.md``, "Tensor
Sharding Specification"): ``mesh_axis_per_dim: List[Set[int]]``, for each tensor dimension the
set of mesh axis indices it is sharded on. A set has no order, so a dimension's axes are taken
major to minor in mesh order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from shardwise.convert import reject_sub_axes, require_layout_only
from shardwise.errors import ConversionError
from shardwise.mesh import Mesh

if TYPE_CHECKING:
    from shardwise.sharding import TensorSharding


def to_mesh_axis_per_dim(ts: TensorSharding, mesh: Mesh, *, strict: bool = True) -> list[set[int]]:
    """``[{0}, {1}]`` for ``[{"x"}, {"y"}]`` on ``x, y``. Raises ``ConversionError`` for sub-axes,
    unreduced axes, a dimension whose axes are not in mesh order, and (strict) propagation-only
    information."""
    require_layout_only(ts, "a hidet TensorShardSpec", strict)
    reject_sub_axes(ts, "a hidet TensorShardSpec")
    if ts.unreduced:
        raise ConversionError(f"a hidet TensorShardSpec cannot express the unreduced axes of {ts}")
    names = mesh.axis_names
    out = []
    for i, d in enumerate(ts.dims):
        idx = [names.index(a.name) for a in d.axes]
        if idx != sorted(idx):
            raise ConversionError(
                f"dim {i} of {ts} is sharded on {d} against mesh order {list(names)}; "
                "hidet's axis sets are taken in mesh order"
            )
        out.append(set(idx))
    return out


def from_mesh_axis_per_dim(
    cls: type[TensorSharding],
    mesh_axis_per_dim: Sequence[Iterable[int]],
    mesh: Mesh,
    *,
    mesh_name: str | None = "mesh",
) -> TensorSharding:
    """The sharding (a ``cls``) of a hidet spec on ``mesh``; raises ``ConversionError`` for an index outside
    the mesh (``InvalidShardingError`` for an axis used twice)."""
    names = mesh.axis_names
    dims = []
    for i, axes in enumerate(mesh_axis_per_dim):
        idx = sorted(axes)
        bad = [k for k in idx if not 0 <= k < len(names)]
        if bad:
            raise ConversionError(f"dim {i}: mesh axis indices {bad} are outside mesh {mesh} with {len(names)} axes")
        dims.append([names[k] for k in idx])
    if mesh_name is None:
        return cls(mesh, dims, inline=True)
    return cls(mesh, dims, mesh_name=mesh_name)
