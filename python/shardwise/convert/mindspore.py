"""MindSpore sharding strategies and tensor layouts (``../shared/references/
mindspore-sharding-propagation.md``: "Sharding Strategy", "Tensor Layout").

A *strategy* gives the number of shards per tensor dimension, e.g. ``(2, 1)``. A *layout* is a
device matrix and a tensor map: entry ``k`` of the map sends a dimension to device-matrix
dimension ``len(device_matrix) - 1 - k`` (counted from the right), ``-1`` leaves it unsplit, a
tuple splits it by several device-matrix dimensions (major first). The layout of a sharding is
computed in ``rust/src/convert/mindspore.rs``: its device matrix is the mesh with every axis
split into the pieces the sharding uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shardwise import _native
from shardwise.convert import require_layout_only
from shardwise.errors import ConversionError
from shardwise.mesh import Mesh

if TYPE_CHECKING:
    from shardwise.sharding import TensorSharding

TensorMapEntry = Any  # int (-1 or an index) or tuple of ints


def to_layout(
    ts: TensorSharding, mesh: Mesh, *, strict: bool = True
) -> tuple[tuple[int, ...], tuple[TensorMapEntry, ...]]:
    """``(device_matrix, tensor_map)``, e.g. ``[{"x"}, {}]`` on ``x=2, y=4`` gives
    ``((2, 4), (1, -1))``. Raises ``ConversionError`` for unreduced axes, an explicit device
    order, and (strict) propagation-only information."""
    require_layout_only(ts, "a MindSpore tensor layout", strict)
    dm, tm = _native.to_mindspore_layout(ts._native_sharding(), mesh._core)
    entries: list[TensorMapEntry] = [-1 if not e else e[0] if len(e) == 1 else tuple(e) for e in tm]
    return tuple(dm), tuple(entries)


def _entry(e: TensorMapEntry, dim: int) -> list[int]:
    if isinstance(e, bool):
        raise ConversionError(f"tensor map entry of dim {dim} must be an int or a tuple of ints, got {e!r}")
    if isinstance(e, int):
        return [] if e == -1 else [e]
    if isinstance(e, (tuple, list)) and all(isinstance(x, int) and not isinstance(x, bool) for x in e):
        return [x for x in e if x != -1]
    raise ConversionError(f"tensor map entry of dim {dim} must be an int or a tuple of ints, got {e!r}")


def from_layout(
    cls: type[TensorSharding],
    device_matrix: Sequence[int],
    tensor_map: Sequence[TensorMapEntry],
    mesh: Mesh | None = None,
    *,
    mesh_name: str | None = "mesh",
) -> TensorSharding:
    """The sharding (a ``cls``) of a layout. On ``mesh`` when given (the device matrix must split its axes
    in order); otherwise on a mesh with one axis per device-matrix dimension, named ``d<k>`` with
    ``k`` the tensor-map index. Raises ``ConversionError``."""
    entries = [_entry(e, i) for i, e in enumerate(tensor_map)]
    sizes = list(device_matrix)
    if any(isinstance(s, bool) or not isinstance(s, int) or not -(2**63) <= s < 2**63 for s in sizes):
        raise ConversionError(f"device matrix {_shown(sizes)} must hold ints that fit in 64 bits")
    if any(not -(2**63) <= x < 2**63 for e in entries for x in e):
        raise ConversionError(f"tensor map {_shown(list(tensor_map))} must hold ints that fit in 64 bits")
    core, m = _native.from_mindspore_layout(sizes, entries, None if mesh is None else mesh._core, None, mesh_name)
    return cls._from_core(core, mesh if mesh is not None else Mesh._from_core(m))


def _shown(values: list[Any]) -> str:
    text = str(values)
    return text if len(text) <= 200 else text[:197] + "..."


def to_strategy(ts: TensorSharding, mesh: Mesh) -> tuple[int, ...]:
    """Shards per dimension: the product of each dimension's axis sizes."""
    return tuple(math.prod(a.full_size(mesh) for a in d.axes) for d in ts.dims)


def from_strategy(
    cls: type[TensorSharding], strategy: Sequence[int], device_num: int, *, mesh_name: str | None = "mesh"
) -> TensorSharding:
    """The layout (a ``cls``) MindSpore derives from a strategy on ``device_num`` devices: device matrix
    ``[device_num / prod(strategy)] + strategy`` (the repeat dimension, major, only when > 1),
    dimension ``i`` mapped to device-matrix dimension ``len(strategy) - 1 - i``.

    Raises ``ConversionError`` when a count is < 1 or their product does not divide ``device_num``.
    """
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in strategy):
        raise ConversionError(f"strategy {tuple(strategy)} must be positive ints")
    total = math.prod(strategy)
    if isinstance(device_num, bool) or not isinstance(device_num, int):
        raise ConversionError(f"device_num must be an int, got {device_num!r}")
    if device_num < 1 or device_num % total or device_num >= 2**63:
        raise ConversionError(
            f"strategy {tuple(strategy)} splits into {total} shards, which does not divide {device_num} devices (at most 2**63 - 1)"
        )
    repeat = device_num // total
    n = len(strategy)
    device_matrix = ([repeat] if repeat > 1 else []) + list(strategy)
    tensor_map = [n - 1 - i if s > 1 else -1 for i, s in enumerate(strategy)]
    return from_layout(cls, device_matrix, tensor_map, mesh_name=mesh_name)
