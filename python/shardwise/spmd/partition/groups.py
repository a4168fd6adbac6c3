"""Device coordinates, blocks and communicator groups on a mesh.

A device's coordinates are its position in ``Mesh.devices`` written in the mixed radix of the
mesh axes (major to minor, as Shardy's ``MeshAttr``). A (sub-)axis ``"x":(pre)size`` of an axis
of size ``n`` is the digit ``(coord_x // (n // (pre*size))) % size``; a list of axes indexes a
device by the mixed radix of those digits in list order (major to minor), which is the order
Shardy's collectives concatenate and split blocks in (``shardy/dialect/sdy/ir/ops.td``).

Ranks of the per-device programs are device ids (``rank r`` runs on device ``r``), so meshes
must use the ids ``0..N-1`` (any order, as ``device_ids`` allow).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from shardwise.errors import MeshError
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef

__all__ = [
    "axis_size",
    "ceil_div",
    "check_device_ids",
    "coords",
    "digit",
    "group_of",
    "groups",
    "index_over",
    "position",
]


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for ``a >= 0``, ``b >= 1``."""
    return -(-a // b)


class _Layout:
    """A mesh's axes as mixed-radix digits, made once per mesh (``_layout``): per axis name its
    index, size and stride (devices between neighbours along it), and the device ids in mesh
    order. Lookups are O(1) per axis, so group computations are linear in devices times the
    axes they name, not in all the mesh's axes (issue 25: 6,000 size-1 axes took > 150 s)."""

    __slots__ = ("_positions", "axes", "ids")

    def __init__(self, mesh: Mesh) -> None:
        self.axes: dict[str, tuple[int, int, int]] = {}
        stride = 1
        for i in range(len(mesh.axes) - 1, -1, -1):
            a = mesh.axes[i]
            self.axes[a.name] = (i, a.size, stride)
            stride *= a.size
        self.ids: tuple[int, ...] = mesh.device_ids
        self._positions: dict[int, int] | None = None

    def position(self, device: int) -> int:
        if not self.ids:
            return device
        if self._positions is None:
            self._positions = {d: p for p, d in enumerate(self.ids)}
        return self._positions[device]

    def device(self, position: int) -> int:
        return self.ids[position] if self.ids else position

    def digit_of(self, ref: AxisRef) -> tuple[int, int, int]:
        """(stride of the axis, divisor inside the axis, size) of ``ref``: its digit at mesh
        position ``p`` is ``(p // stride // divisor) % size``."""
        _, full, stride = self.axes[ref.name]
        pre, size = (ref.pre_size, ref.size) if ref.pre_size is not None and ref.size is not None else (1, full)
        return stride, full // (pre * size), size


@functools.lru_cache(maxsize=64)
def _layout(mesh: Mesh) -> _Layout:
    return _Layout(mesh)


def check_device_ids(mesh: Mesh) -> None:
    """``MeshError`` unless the mesh's device ids are a permutation of ``0..size-1``."""
    ids = mesh.device_ids
    if ids and sorted(ids) != list(range(len(ids))):
        shown = ", ".join(map(str, ids[:16])) + (", ..." if len(ids) > 16 else "")
        raise MeshError(
            f"mesh {mesh} has device ids [{shown}]; partitioning needs the ids 0..{len(ids) - 1} (one rank per device)"
        )


def axis_size(mesh: Mesh, ref: AxisRef) -> int:
    """Size of a full axis or of a sub-axis."""
    return _layout(mesh).axes[ref.name][1] if ref.size is None else ref.size


def position(mesh: Mesh, device: int) -> int:
    """Index of ``device`` in ``mesh.devices``."""
    return _layout(mesh).position(device)


def coords(mesh: Mesh, device: int) -> tuple[int, ...]:
    """Coordinates of ``device`` along each mesh axis."""
    pos = position(mesh, device)
    out = []
    for a in reversed(mesh.axes):
        out.append(pos % a.size)
        pos //= a.size
    return tuple(out[::-1])


def digit(mesh: Mesh, c: Sequence[int], ref: AxisRef) -> int:
    """The coordinate along (sub-)axis ``ref`` of the device at coordinates ``c``."""
    i, full, _ = _layout(mesh).axes[ref.name]
    pre, size = (ref.pre_size, ref.size) if ref.pre_size is not None and ref.size is not None else (1, full)
    return (c[i] // (full // (pre * size))) % size


def index_over(mesh: Mesh, device: int, refs: Sequence[AxisRef]) -> int:
    """Mixed-radix index of ``device`` over ``refs`` (major to minor)."""
    layout = _layout(mesh)
    pos = layout.position(device)
    index = 0
    for r in refs:
        stride, div, size = layout.digit_of(r)
        index = index * size + (pos // stride // div) % size
    return index


def groups(mesh: Mesh, refs: Sequence[AxisRef]) -> list[list[int]]:
    """Every communicator group over ``refs``: the devices that differ only along ``refs``,
    each group ordered by ``index_over`` (the order collectives concatenate in), groups ordered
    by their first device's position. With no ``refs`` every device is its own group.

    Linear in devices times ``len(refs)``: a device's group key is its mesh position with its
    digits along ``refs`` set to 0 (the position of the group's first device). Made once per
    mesh and axes (the partitioner asks again for every collective on every rank)."""
    return [list(g) for g in _groups(mesh, tuple(refs))]


@functools.lru_cache(maxsize=1024)
def _groups(mesh: Mesh, refs: tuple[AxisRef, ...]) -> tuple[tuple[int, ...], ...]:
    layout = _layout(mesh)
    n = mesh.size
    pos = np.arange(n, dtype=np.int64)
    key = pos.copy()
    index = np.zeros(n, dtype=np.int64)
    for r in refs:
        stride, div, size = layout.digit_of(r)
        d = (pos // stride // div) % size
        key -= d * stride * div
        index = index * size + d
    order = np.lexsort((index, key))
    ids = np.asarray(layout.ids, dtype=np.int64) if layout.ids else pos
    members = ids[order].tolist()
    k = key[order]
    cuts = (np.flatnonzero(k[1:] != k[:-1]) + 1).tolist()
    return tuple(tuple(members[a:b]) for a, b in zip([0, *cuts], [*cuts, n]))


def group_of(mesh: Mesh, device: int, refs: Sequence[AxisRef]) -> list[int]:
    """The group over ``refs`` containing ``device``, ordered by ``index_over``."""
    layout = _layout(mesh)
    try:
        p = layout.position(device)
    except (KeyError, IndexError):
        raise MeshError(f"device {device} is not in mesh {mesh}") from None
    if not 0 <= p < mesh.size:
        raise MeshError(f"device {device} is not in mesh {mesh}")
    base = p
    sizes: list[tuple[int, int]] = []
    for r in refs:
        stride, div, size = layout.digit_of(r)
        base -= ((p // stride // div) % size) * stride * div
        sizes.append((stride * div, size))
    out = [base]
    for step, size in sizes:  # major to minor: each ref multiplies the list, minor varying fastest
        out = [q + j * step for q in out for j in range(size)]
    return [layout.device(q) for q in out]
