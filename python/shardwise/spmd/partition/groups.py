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

from collections.abc import Sequence

from shardwise.errors import MeshError
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef

__all__ = ["axis_size", "coords", "digit", "index_over", "group_of", "groups", "position", "check_device_ids", "ceil_div"]


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for ``a >= 0``, ``b >= 1``."""
    return -(-a // b)


def check_device_ids(mesh: Mesh) -> None:
    """``MeshError`` unless the mesh's device ids are a permutation of ``0..size-1``."""
    ids = list(mesh.devices)
    if sorted(ids) != list(range(len(ids))):
        raise MeshError(f"mesh {mesh} has device ids {ids}; partitioning needs the ids 0..{len(ids) - 1} (one rank per device)")


def axis_size(mesh: Mesh, ref: AxisRef) -> int:
    """Size of a full axis or of a sub-axis."""
    return ref.full_size(mesh) if ref.size is None else ref.size


def position(mesh: Mesh, device: int) -> int:
    """Index of ``device`` in ``mesh.devices``."""
    return list(mesh.devices).index(device)


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
    i = mesh.axis_names.index(ref.name)
    full = mesh.axes[i].size
    pre, size = (ref.pre_size, ref.size) if ref.pre_size is not None and ref.size is not None else (1, full)
    return (c[i] // (full // (pre * size))) % size


def index_over(mesh: Mesh, device: int, refs: Sequence[AxisRef]) -> int:
    """Mixed-radix index of ``device`` over ``refs`` (major to minor)."""
    c = coords(mesh, device)
    index = 0
    for r in refs:
        index = index * axis_size(mesh, r) + digit(mesh, c, r)
    return index


def _key(mesh: Mesh, c: Sequence[int], refs: Sequence[AxisRef]) -> tuple[int, ...]:
    key = list(c)
    for r in refs:
        i = mesh.axis_names.index(r.name)
        full = mesh.axes[i].size
        pre, size = (r.pre_size, r.size) if r.pre_size is not None and r.size is not None else (1, full)
        key[i] -= digit(mesh, c, r) * (full // (pre * size))
    return tuple(key)


def groups(mesh: Mesh, refs: Sequence[AxisRef]) -> list[list[int]]:
    """Every communicator group over ``refs``: the devices that differ only along ``refs``,
    each group ordered by ``index_over`` (the order collectives concatenate in), groups ordered
    by their first device's position. With no ``refs`` every device is its own group."""
    by_key: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for d in mesh.devices:
        c = coords(mesh, d)
        by_key.setdefault(_key(mesh, c, refs), []).append((index_over(mesh, d, refs), d))
    out = [[d for _, d in sorted(members)] for members in by_key.values()]
    return sorted(out, key=lambda g: position(mesh, min(g, key=lambda d: position(mesh, d))))


def group_of(mesh: Mesh, device: int, refs: Sequence[AxisRef]) -> list[int]:
    """The group over ``refs`` containing ``device``."""
    for g in groups(mesh, refs):
        if device in g:
            return g
    raise MeshError(f"device {device} is not in mesh {mesh}")
