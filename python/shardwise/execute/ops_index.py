"""Indexing ops: dynamic_slice, dynamic_update_slice, gather and scatter (with update body),
following the index arithmetic of the StableHLO specification (including
``operand_batching_dims`` / ``input_batching_dims``). Gather clamps start indices into the
operand; scatter skips updates whose window falls outside the operand (spec)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shardwise.errors import ProgramError
from shardwise.execute._util import astype, to_int
from shardwise.execute.attrs import parse_array, parse_struct
from shardwise.execute.regions import apply_body
from shardwise.execute.registry import register
from shardwise.ir.core import Op, Region

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


def _starts(args: Sequence[Any], shape: Sequence[int], sizes: Sequence[int]) -> list[int]:
    return [min(max(to_int(a), 0), int(n) - int(s)) for a, n, s in zip(args, shape, sizes)]


@register("stablehlo.dynamic_slice")
def _dynamic_slice(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    x = args[0]
    sizes = parse_array(op.attributes["slice_sizes"])
    starts = _starts(args[1:], x.shape, sizes)
    return [x[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]]


@register("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    x, update = args[0], args[1]
    starts = _starts(args[2:], x.shape, update.shape)
    out = it.xp.asarray(x, copy=True)
    out[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
    return [out]


def _grid(xp: Any, shape: Sequence[int]) -> list[Any]:
    """One int64 index array per dimension, each broadcastable to ``shape``."""
    out = []
    for d, n in enumerate(shape):
        view = [1] * len(shape)
        view[d] = n
        out.append(xp.reshape(xp.arange(n, dtype=xp.int64), tuple(view)))
    return out


def _index_vectors(xp: Any, indices: Any, ivd: int) -> tuple[Any, list[int]]:
    """``indices`` with the index vector dimension moved last (added when ``ivd == rank``), and
    the list of the other (batch) dimensions of ``indices``, in order."""
    if ivd == indices.ndim:
        indices = xp.reshape(indices, (*indices.shape, 1))
    batch = [d for d in range(indices.ndim) if d != ivd]
    return astype(xp, xp.permute_dims(indices, (*batch, ivd)), xp.int64), batch


def _index_rows(xp: Any, vecs: Any, idx: list[Any], rank: int) -> Any:
    """``vecs[idx..., :]`` (one index vector per position of the broadcast ``idx`` arrays) with
    ``xp.take`` on the flattened batch dimensions; shape: broadcast of ``idx`` (rank ``rank``)
    plus the index vector length."""
    k = vecs.shape[-1]
    if not idx:
        return xp.reshape(vecs, (*(1,) * rank, k))
    batch = tuple(vecs.shape[:-1])
    flat = _flat_index(xp, idx, batch)
    shape = tuple(flat.shape)
    rows = xp.take(xp.reshape(vecs, (-1, k)), xp.reshape(flat, (-1,)), axis=0)
    return xp.reshape(rows, (*shape, k))


def _flat_index(xp: Any, idx: list[Any], shape: Sequence[int]) -> Any:
    flat = xp.zeros((), dtype=xp.int64)
    for i, n in zip(idx, shape):
        flat = flat * n + i
    return flat


@register("stablehlo.gather")
def _gather(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp = it.xp
    operand, indices = args
    dn = parse_struct(op.attributes["dimension_numbers"], "gather")
    sizes = parse_array(op.attributes["slice_sizes"])
    offset_dims = dn.get("offset_dims", [])
    collapsed = dn.get("collapsed_slice_dims", [])
    obatch = dn.get("operand_batching_dims", [])
    ibatch = dn.get("start_indices_batching_dims", [])
    start_map = dn.get("start_index_map", [])
    ivd = dn.get("index_vector_dim", 0)  # StableHLO prints the default, 0, as nothing
    out_shape = op.results[0].shape
    vecs, idx_batch = _index_vectors(xp, indices, ivd)
    grid = _grid(xp, out_shape)
    batch_dims = [d for d in range(len(out_shape)) if d not in offset_dims]
    start = _index_rows(xp, vecs, [grid[d] for d in batch_dims], len(out_shape))
    full: list[Any] = [xp.zeros((), dtype=xp.int64) for _ in range(operand.ndim)]
    for k, od in enumerate(start_map):
        full[od] = xp.clip(start[..., k], 0, operand.shape[od] - sizes[od])
    for od, sd in zip(obatch, ibatch):
        full[od] = grid[batch_dims[idx_batch.index(sd)]]
    offset_operand = [d for d in range(operand.ndim) if d not in collapsed and d not in obatch]
    if len(offset_operand) != len(offset_dims):
        raise ProgramError(
            f"{op.where()}: {len(offset_dims)} offset_dims for {len(offset_operand)} uncollapsed operand dims"
        )
    for od, out_d in zip(offset_operand, offset_dims):
        full[od] = full[od] + grid[out_d]
    flat = xp.broadcast_to(_flat_index(xp, full, operand.shape), out_shape)
    return [xp.reshape(xp.take(xp.reshape(operand, (-1,)), xp.reshape(flat, (-1,))), out_shape)]


def scatter_flat(
    it: Interpreter, op: Op, body: Region, base: Any | list[Any], idx: Any, updates: Any | list[Any]
) -> Any:
    """Applies ``base[idx[j]] = body(base[idx[j]], updates[j])`` for every ``j`` in order, on
    flat (1-d) arrays. Duplicate indices are applied in rounds (the k-th occurrence of each index
    in round k), so each round is one vectorized body evaluation. ``base`` / ``updates`` may be
    lists (variadic scatter); the return value has the same form as ``base``."""
    xp = it.xp
    many = isinstance(base, list)
    bases = [xp.asarray(b, copy=True) for b in (base if many else [base])]
    upds = updates if isinstance(updates, list) else [updates]
    n = idx.shape[0]
    if n:
        order = xp.argsort(idx, stable=True)
        sidx = xp.take(idx, order)
        first = xp.concat([xp.ones((1,), dtype=xp.bool), sidx[1:] != sidx[:-1]])
        pos = xp.arange(n, dtype=xp.int64)
        group = xp.cumulative_sum(astype(xp, first, xp.int64)) - 1
        group_start = pos[first]
        rank = pos - xp.take(group_start, group)
        rounds = int(xp.max(rank)) + 1
        for r in range(rounds):
            sel = order[rank == r]
            where = xp.take(idx, sel)
            cur = [xp.take(b, where) for b in bases]
            new = apply_body(it, op, body, [*cur, *(xp.take(u, sel) for u in upds)])
            for b, v in zip(bases, new):
                b[where] = astype(xp, v, b.dtype)
    return bases if many else bases[0]


@register("stablehlo.scatter")
def _scatter(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp = it.xp
    n = (len(args) - 1) // 2
    inputs, indices, updates = args[:n], args[n], args[n + 1 :]
    dn = parse_struct(op.attributes["scatter_dimension_numbers"], "scatter")
    window_dims = dn.get("update_window_dims", [])
    inserted = dn.get("inserted_window_dims", [])
    ibatch = dn.get("input_batching_dims", [])
    sbatch = dn.get("scatter_indices_batching_dims", [])
    to_operand = dn.get("scatter_dims_to_operand_dims", [])
    ivd = dn.get("index_vector_dim", 0)  # StableHLO prints the default, 0, as nothing
    shape = tuple(inputs[0].shape)
    ushape = tuple(updates[0].shape)
    vecs, idx_batch = _index_vectors(xp, indices, ivd)
    grid = _grid(xp, ushape)
    scatter_dims = [d for d in range(len(ushape)) if d not in window_dims]
    start = _index_rows(xp, vecs, [grid[d] for d in scatter_dims], len(ushape))
    full: list[Any] = [xp.zeros((), dtype=xp.int64) for _ in shape]
    for k, od in enumerate(to_operand):
        full[od] = start[..., k]
    for od, sd in zip(ibatch, sbatch):
        full[od] = grid[scatter_dims[idx_batch.index(sd)]]
    window_operand = [d for d in range(len(shape)) if d not in inserted and d not in ibatch]
    if len(window_operand) != len(window_dims):
        raise ProgramError(
            f"{op.where()}: {len(window_dims)} update_window_dims for {len(window_operand)} operand window dims"
        )
    for od, ud in zip(window_operand, window_dims):
        full[od] = full[od] + grid[ud]
    # An update whose full window does not fit is skipped entirely (spec: the window start
    # must keep the whole update window inside the operand).
    valid = xp.ones((), dtype=xp.bool)
    for od in range(len(shape)):
        valid = valid & (full[od] >= 0) & (full[od] < shape[od])
    valid = _whole_windows(xp, valid, ushape, window_dims)
    flat = xp.reshape(xp.broadcast_to(_flat_index(xp, full, shape), ushape), (-1,))
    mask = xp.reshape(xp.broadcast_to(valid, ushape), (-1,))
    idx = flat[mask]
    upd = [xp.reshape(u, (-1,))[mask] for u in updates]
    results = scatter_flat(it, op, op.regions[0], [xp.reshape(x, (-1,)) for x in inputs], idx, upd)
    return [xp.reshape(r, shape) for r in results]


def _whole_windows(xp: Any, valid: Any, ushape: tuple[int, ...], window_dims: list[int]) -> Any:
    """Per spec, an update is applied only if its whole window lies inside the operand: reduce
    the element validity over the window dims so every element of a window shares it."""
    v = xp.broadcast_to(valid, ushape)
    if window_dims:
        v = xp.all(v, axis=tuple(window_dims), keepdims=True)
    return v
