"""An exact numpy simulation of sharded tensors and Shardy's collectives, device by device.

A sharded tensor is a dict ``device id -> local buffer``: the padded shard of
``TensorSharding.local_shape`` holding the block ``TensorSharding.device_ranges`` of the global
array (padding is filled with ``fill``, NaN for floats by default, so that padding which leaks
into real data is caught). A partial (unreduced) tensor holds, on each device, one addend of the
value: the global array is the reduction of the buffers over the unreduced axes.

Each collective works only on the buffers and on the axes it names, with Shardy's semantics
(``shardy/dialect/sdy/ir/ops.td``): all-gather concatenates the group's shards in axis order
(major to minor), all-slice keeps the device's part, all-to-all splits along one dimension and
concatenates along another, collective-permute sends each shard to the device that needs it,
all-reduce reduces over the group, reduce-scatter is all-reduce then all-slice. A dimension
whose shard count changes must keep its blocks nested (same padded length) unless one side is
unsharded; otherwise ``ShardwiseError`` is raised (the planner never emits such a step).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from shardwise.errors import ShardwiseError
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef, TensorSharding
from shardwise.spmd.redistribute import ReshardPlan, ReshardStep

Array = npt.NDArray[Any]
Shards = dict[int, Array]

_REDUCE: dict[str, Callable[[Array, Array], Array]] = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _coords(mesh: Mesh, position: int) -> list[int]:
    out = []
    for a in reversed(mesh.axes):
        out.append(position % a.size)
        position //= a.size
    return out[::-1]


def _sub_coord(mesh: Mesh, coords: Sequence[int], ref: AxisRef) -> int:
    """The device's coordinate along ``ref`` (a full axis or a sub-axis ``(pre)size``)."""
    i = mesh.axis_names.index(ref.name)
    full = mesh.axes[i].size
    pre, size = (ref.pre_size, ref.size) if ref.pre_size is not None and ref.size is not None else (1, full)
    return (coords[i] // (full // (pre * size))) % size


def _index(mesh: Mesh, coords: Sequence[int], refs: Iterable[AxisRef]) -> tuple[int, int]:
    """Mixed-radix index of the device over ``refs`` (major to minor) and their product."""
    index, count = 0, 1
    for r in refs:
        size = r.full_size(mesh) if r.size is None else r.size
        index, count = index * size + _sub_coord(mesh, coords, r), count * size
    return index, count


def _group_key(mesh: Mesh, coords: Sequence[int], refs: Sequence[AxisRef]) -> tuple[int, ...]:
    """The device's coordinates with the parts along ``refs`` zeroed: equal for one group."""
    key = list(coords)
    for r in refs:
        i = mesh.axis_names.index(r.name)
        full = mesh.axes[i].size
        pre, size = (r.pre_size, r.size) if r.pre_size is not None and r.size is not None else (1, full)
        key[i] -= _sub_coord(mesh, coords, r) * (full // (pre * size))
    return tuple(key)


def _groups(mesh: Mesh, refs: Sequence[AxisRef]) -> dict[int, list[int]]:
    """Device id -> the devices of its group over ``refs``, ordered by index over ``refs``."""
    by_key: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for pos, dev in enumerate(mesh.devices):
        c = _coords(mesh, pos)
        by_key.setdefault(_group_key(mesh, c, refs), []).append((_index(mesh, c, refs)[0], dev))
    out = {}
    for members in by_key.values():
        ordered = [d for _, d in sorted(members)]
        for d in ordered:
            out[d] = ordered
    return out


def _fill_for(dtype: np.dtype[Any]) -> Any:
    return (
        np.nan if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else 0
    )


def _shard_count(mesh: Mesh, t: TensorSharding, d: int) -> int:
    return _index(mesh, [0] * len(mesh.axes), t.dims[d].axes)[1]


def _check_split(
    mesh: Mesh, major: Sequence[AxisRef], minor: Sequence[AxisRef], whole: Sequence[AxisRef], what: str
) -> None:
    """Checks that on every device the index over ``whole`` is the index over ``major`` then
    ``minor`` (``whole`` is ``major`` followed by ``minor``, up to splitting or merging
    sub-axes); raises ``ShardwiseError`` otherwise."""
    for pos in range(mesh.size):
        c = _coords(mesh, pos)
        (i, _), (j, n), (k, _) = _index(mesh, c, major), _index(mesh, c, minor), _index(mesh, c, whole)
        if i * n + j != k:
            raise ShardwiseError(f"{what}: {list(whole)} is not {list(major)} followed by {list(minor)}")


def _resize(buf: Array, axis: int, length: int, fill: Any) -> Array:
    """Truncates or pads ``buf`` along ``axis`` to ``length``."""
    have = buf.shape[axis]
    if have >= length:
        return np.take(buf, np.arange(length), axis=axis)
    pad = [(0, 0)] * buf.ndim
    pad[axis] = (0, length - have)
    return np.pad(buf, pad, constant_values=fill)


def _check_change(shape: Sequence[int], d: int, old: int, new: int) -> None:
    size = shape[d]

    def padded(c: int) -> int:
        return c * -(-size // c)

    if old != new and old != 1 and new != 1 and padded(old) != padded(new):
        raise ShardwiseError(
            f"dim {d} of size {size}: changing from {old} to {new} shards does not keep blocks nested "
            f"(padded lengths {padded(old)} and {padded(new)})"
        )


def shard(array: Array, sharding: TensorSharding, mesh: Mesh, *, fill: Any = None, seed: int = 0) -> Shards:
    """The per-device buffers of ``array`` under ``sharding``. With unreduced axes (sum only),
    each device of an unreduced group holds a random integer-valued addend and the group's sum
    is the block (replicas of one block hold equal addends)."""
    fill = _fill_for(array.dtype) if fill is None else fill
    local = sharding.local_shape(array.shape, meshes=mesh)
    rng = np.random.default_rng(seed)
    out: Shards = {}
    addends: dict[tuple[Any, ...], Array] = {}
    if sharding.unreduced and sharding.reduction != "sum":
        raise ShardwiseError(f"shard() makes partial values for sum only, got reduction {sharding.reduction}")
    for pos, dev in enumerate(mesh.devices):
        ranges = sharding.device_ranges(array.shape, dev, meshes=mesh)
        block = array[tuple(slice(a, b) for a, b in ranges)]
        if sharding.unreduced:
            c = _coords(mesh, pos)
            idx, count = _index(mesh, c, sharding.unreduced)
            key = (tuple(ranges), idx)
            if key not in addends:
                parts = [rng.integers(-8, 8, size=block.shape).astype(array.dtype) for _ in range(count - 1)]
                rest = block - sum(parts, np.zeros_like(block))
                for i, p in enumerate([rest, *parts]):
                    addends[(tuple(ranges), i)] = p
            block = addends[key]
        buf = np.full(local, fill, dtype=array.dtype)
        buf[tuple(slice(0, s) for s in block.shape)] = block
        out[dev] = buf
    return out


def unshard(shards: Shards, sharding: TensorSharding, mesh: Mesh, shape: Sequence[int]) -> Array:
    """The global array: unreduced groups reduced, blocks placed by ``device_ranges``. Raises
    ``ShardwiseError`` if a buffer has the wrong shape or replicas of one block disagree."""
    local = tuple(sharding.local_shape(shape, meshes=mesh))
    reduced = all_reduce(shards, mesh, sharding.unreduced, sharding.reduction) if sharding.unreduced else shards
    out: Array | None = None
    for dev, buf in reduced.items():
        if buf.shape != local:
            raise ShardwiseError(f"device {dev} holds a buffer of shape {buf.shape}, expected {local} for {sharding}")
        if out is None:
            out = np.zeros(tuple(shape), dtype=buf.dtype)
            seen = np.zeros(tuple(shape), dtype=bool)
        ranges = sharding.device_ranges(shape, dev, meshes=mesh)
        idx = tuple(slice(a, b) for a, b in ranges)
        block = buf[tuple(slice(0, b - a) for a, b in ranges)]
        if seen[idx].any() and not np.array_equal(out[idx], block, equal_nan=True):
            raise ShardwiseError(f"replicas of block {ranges} disagree (device {dev})")
        out[idx], seen[idx] = block, True
    assert out is not None
    return out


def all_gather(
    shards: Shards,
    mesh: Mesh,
    shape: Sequence[int],
    before: TensorSharding,
    after: TensorSharding,
    dim_axes: Sequence[Sequence[AxisRef]],
    fill: Any,
) -> Shards:
    """Per dimension ``d``, concatenates the shards of the group over ``dim_axes[d]`` (the
    minor-most axes of ``d`` under ``before``; ``after`` is what remains) in axis order."""
    cur = dict(shards)
    zero = [0] * len(mesh.axes)
    for d, axes in enumerate(dim_axes):
        axes = list(axes)
        if not axes:
            continue
        _check_split(mesh, after.dims[d].axes, axes, before.dims[d].axes, f"all_gather dim {d}")
        old, new = _index(mesh, zero, before.dims[d].axes)[1], _index(mesh, zero, after.dims[d].axes)[1]
        _check_change(shape, d, old, new)
        groups = _groups(mesh, axes)
        length = shape[d] if new == 1 else -(-shape[d] // new)
        cur = {dev: _resize(np.concatenate([cur[m] for m in groups[dev]], axis=d), d, length, fill) for dev in cur}
    return cur


def all_slice(
    shards: Shards,
    mesh: Mesh,
    shape: Sequence[int],
    before: TensorSharding,
    after: TensorSharding,
    dim_axes: Sequence[Sequence[AxisRef]],
    fill: Any,
) -> Shards:
    """Per dimension ``d``, each device keeps its part along the axes ``dim_axes[d]``
    (appended minor-most: ``after`` is ``before`` followed by them)."""
    cur = dict(shards)
    for d, axes in enumerate(dim_axes):
        axes = list(axes)
        if not axes:
            continue
        _check_split(mesh, before.dims[d].axes, axes, after.dims[d].axes, f"all_slice dim {d}")
        old_refs = list(before.dims[d].axes)
        old = _index(mesh, [0] * len(mesh.axes), old_refs)[1]
        n = _index(mesh, [0] * len(mesh.axes), axes)[1]
        _check_change(shape, d, old, old * n)
        chunk = -(-shape[d] // (old * n))
        nxt = {}
        for pos, dev in enumerate(mesh.devices):
            j = _index(mesh, _coords(mesh, pos), axes)[0]
            buf = _resize(cur[dev], d, n * chunk, fill)
            nxt[dev] = np.take(buf, np.arange(j * chunk, (j + 1) * chunk), axis=d)
        cur = nxt
    return cur


def all_to_all(
    shards: Shards,
    mesh: Mesh,
    shape: Sequence[int],
    before: TensorSharding,
    after: TensorSharding,
    src_dim: int,
    tgt_dim: int,
    axes: Sequence[AxisRef],
    fill: Any,
) -> Shards:
    """Moves ``axes`` (the minor-most axes of ``src_dim``) to the minor end of ``tgt_dim``:
    each device splits its buffer along ``tgt_dim`` into one piece per group member and
    concatenates the pieces it receives along ``src_dim``."""
    axes = list(axes)
    _check_split(mesh, after.dims[src_dim].axes, axes, before.dims[src_dim].axes, f"all_to_all source dim {src_dim}")
    _check_split(mesh, before.dims[tgt_dim].axes, axes, after.dims[tgt_dim].axes, f"all_to_all target dim {tgt_dim}")
    zero = [0] * len(mesh.axes)
    n = _index(mesh, zero, axes)[1]
    cs, ct = _shard_count(mesh, before, src_dim), _shard_count(mesh, before, tgt_dim)
    _check_change(shape, src_dim, cs, cs // n)
    _check_change(shape, tgt_dim, ct, ct * n)
    t_chunk = -(-shape[tgt_dim] // (ct * n))
    s_len = shape[src_dim] if cs // n == 1 else -(-shape[src_dim] // (cs // n))
    pieces = {dev: np.split(_resize(buf, tgt_dim, n * t_chunk, fill), n, axis=tgt_dim) for dev, buf in shards.items()}
    groups = _groups(mesh, axes)
    out = {}
    for pos, dev in enumerate(mesh.devices):
        j = _index(mesh, _coords(mesh, pos), axes)[0]
        received = [pieces[m][j] for m in groups[dev]]
        out[dev] = _resize(np.concatenate(received, axis=src_dim), src_dim, s_len, fill)
    return out


def collective_permute(
    shards: Shards, mesh: Mesh, shape: Sequence[int], before: TensorSharding, after: TensorSharding
) -> Shards:
    """Each device receives the shard it holds under ``after`` from a device that holds it
    under ``before`` with the same unreduced coordinates (per-dimension shard counts must
    agree)."""
    for d in range(len(shape)):
        if _shard_count(mesh, before, d) != _shard_count(mesh, after, d):
            raise ShardwiseError(f"collective_permute changes the shard count of dim {d}: {before} -> {after}")
    holder: dict[Any, int] = {}
    for pos, dev in enumerate(mesh.devices):
        key = (
            tuple(before.device_ranges(shape, dev, meshes=mesh)),
            _index(mesh, _coords(mesh, pos), before.unreduced)[0],
        )
        holder.setdefault(key, dev)
    out = {}
    for pos, dev in enumerate(mesh.devices):
        key = (
            tuple(after.device_ranges(shape, dev, meshes=mesh)),
            _index(mesh, _coords(mesh, pos), after.unreduced)[0],
        )
        if key not in holder:
            raise ShardwiseError(f"collective_permute: no device holds the block {key[0]} that device {dev} needs")
        out[dev] = shards[holder[key]].copy()
    return out


def all_reduce(shards: Shards, mesh: Mesh, axes: Sequence[AxisRef], reduction: str = "sum") -> Shards:
    """Reduces each group over ``axes`` with ``reduction`` (sum, max or min)."""
    op = _REDUCE[reduction]
    groups = _groups(mesh, list(axes))
    out = {}
    for dev in shards:
        acc = shards[groups[dev][0]].copy()
        for m in groups[dev][1:]:
            acc = op(acc, shards[m])
        out[dev] = acc
    return out


def apply_step(
    shards: Shards, mesh: Mesh, shape: Sequence[int], before: TensorSharding, step: ReshardStep, *, fill: Any = None
) -> Shards:
    """The buffers after ``step``, from the buffers under ``before``."""
    if fill is None:
        fill = _fill_for(next(iter(shards.values())).dtype)
    if step.kind == "all_gather":
        return all_gather(shards, mesh, shape, before, step.out, step.dim_axes, fill)
    if step.kind == "all_slice":
        return all_slice(shards, mesh, shape, before, step.out, step.dim_axes, fill)
    if step.kind == "all_to_all":
        assert step.src_dim is not None and step.tgt_dim is not None
        return all_to_all(shards, mesh, shape, before, step.out, step.src_dim, step.tgt_dim, step.axes, fill)
    if step.kind == "collective_permute":
        return collective_permute(shards, mesh, shape, before, step.out)
    if step.kind == "all_reduce":
        return all_reduce(shards, mesh, step.axes, step.reduction or "sum")
    if step.kind == "reduce_scatter":
        axes = [a for d in step.dim_axes for a in d]
        reduced = all_reduce(shards, mesh, axes, step.reduction or "sum")
        return all_slice(reduced, mesh, shape, before, step.out, step.dim_axes, fill)
    raise ShardwiseError(f"unknown collective {step.kind!r}")


def run_plan(
    shards: Shards, mesh: Mesh, shape: Sequence[int], src: TensorSharding, plan: ReshardPlan, *, fill: Any = None
) -> Shards:
    """Applies every step of ``plan`` to the buffers of a tensor sharded as ``src``."""
    before = src
    for step in plan.steps:
        shards = apply_step(shards, mesh, shape, before, step, fill=fill)
        before = step.out
    return shards


__all__ = [
    "all_gather",
    "all_reduce",
    "all_slice",
    "all_to_all",
    "apply_step",
    "collective_permute",
    "run_plan",
    "shard",
    "unshard",
]
