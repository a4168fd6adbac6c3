"""JAX ``PartitionSpec`` + mesh (``jax/_src/named_sharding.py``: ``named_sharding_to_sdy_sharding``).

``P('x', ('y', 'z'), None)``: one entry per dimension, None for unsharded, an axis name, or a
tuple of names major to minor; ``P.UNCONSTRAINED`` is an open dimension; dimensions past the
end of the spec are unsharded and closed; ``unreduced=`` maps to unreduced axes. The result of
``from_partition_spec`` prints exactly as JAX's ``NamedSharding._to_sdy_sharding(rank)``.
Needs jax only to build ``PartitionSpec`` objects (``to_partition_spec``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shardwise.convert import reject_sub_axes, require_layout_only
from shardwise.errors import ConversionError
from shardwise.mesh import Mesh

if TYPE_CHECKING:
    from shardwise.sharding import DimSharding, TensorSharding


def _jax_p() -> Any:
    try:
        from jax.sharding import PartitionSpec
    except ImportError as e:  # pragma: no cover - exercised without jax only
        raise ImportError("PartitionSpec conversion needs jax: pip install 'shardwise[jax]'") from e
    return PartitionSpec


def _is_unconstrained(entry: Any) -> bool:
    try:
        return entry is _jax_p().UNCONSTRAINED
    except ImportError:
        return False


def to_partition_spec(ts: TensorSharding, *, strict: bool = True) -> Any:
    """The ``PartitionSpec``. Raises ``ConversionError`` for sub-axes, open dims with axes, and
    (strict) priorities or explicitly replicated axes."""
    P = _jax_p()
    require_layout_only(ts, "a PartitionSpec", strict, allow_open_empty=True)
    reject_sub_axes(ts, "a PartitionSpec")
    entries: list[Any] = []
    for i, d in enumerate(ts.dims):
        names = tuple(a.name for a in d.axes)
        if d.is_open:
            if names:
                raise ConversionError(
                    f"dim {i} of {ts} is open with axes {d}; a PartitionSpec entry is either axes or UNCONSTRAINED"
                )
            entries.append(P.UNCONSTRAINED)
        else:
            entries.append(None if not names else names[0] if len(names) == 1 else names)
    if ts.unreduced:
        if ts.reduction != "sum":
            raise ConversionError(f"a PartitionSpec's unreduced axes are sums; {ts} is unreduced by {ts.reduction}")
        return P(*entries, unreduced=frozenset(a.name for a in ts.unreduced))
    return P(*entries)


def from_partition_spec(
    cls: type[TensorSharding],
    dim: type[DimSharding],
    spec: Any,
    mesh: Mesh,
    rank: int | None = None,
    *,
    mesh_name: str | None = "mesh",
) -> TensorSharding:
    """The sharding (a ``cls``, with ``dim`` dimensions) of ``spec`` on ``mesh`` for a rank-``rank`` tensor (default: the spec's
    length). Inlined in the mesh when ``mesh_name`` is None, as JAX does. Raises
    ``ConversionError`` for a spec longer than ``rank`` or an entry that is no axis name."""
    # A PartitionSpec with unreduced axes refuses iteration; its entries are `.partitions`.
    partitions: Sequence[Any] = tuple(getattr(spec, "partitions", spec))
    if rank is None:
        rank = len(partitions)
    if len(partitions) > rank:
        raise ConversionError(f"PartitionSpec {spec} has {len(partitions)} entries for a tensor of rank {rank}")
    dims = []
    for i, entry in enumerate(partitions):
        if entry is None:
            dims.append(dim())
        elif _is_unconstrained(entry):
            dims.append(dim((), closed=False))
        elif isinstance(entry, str):
            dims.append(dim([entry]))
        elif isinstance(entry, tuple) and all(isinstance(a, str) for a in entry):
            dims.append(dim(entry))
        else:
            raise ConversionError(
                f"PartitionSpec entry {i} must be None, an axis name or a tuple of names, got {entry!r}"
            )
    dims += [dim() for _ in range(rank - len(partitions))]
    unreduced = tuple(getattr(spec, "unreduced", ()) or ())
    if mesh_name is None:
        ts = cls(mesh, dims, unreduced=unreduced, inline=True)
    else:
        ts = cls(mesh, dims, unreduced=unreduced, mesh_name=mesh_name)
    ts.validate(user=True)
    return ts
