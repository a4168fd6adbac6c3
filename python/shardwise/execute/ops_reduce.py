"""reduce, reduce_window and select_and_scatter with any elementwise body (StableHLO spec).
Bodies that are one add/mul/max/min/and/or use the namespace's reductions; other bodies (e.g.
the variadic argmax body) are folded pairwise, evaluated on whole arrays."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from shardwise.errors import ProgramError
from shardwise.execute._util import accumulate, astype, is_bool, upcast
from shardwise.execute.attrs import parse_array, parse_dense
from shardwise.execute.comm import reduce_arrays
from shardwise.execute.ops_index import scatter_flat
from shardwise.execute.ops_shape import pad
from shardwise.execute.regions import apply_body, body_kind, combine_fn, tree_fold
from shardwise.execute.registry import register
from shardwise.ir.core import Op

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


def _fast_reduce(xp: Any, x: Any, kind: str, axes: tuple[int, ...]) -> Any:
    if kind == "add":
        return (
            xp.any(x, axis=axes)
            if is_bool(xp, x)
            else xp.sum(accumulate(xp, x), axis=axes, dtype=accumulate(xp, x).dtype)
        )
    if kind == "mul":
        return xp.all(x, axis=axes) if is_bool(xp, x) else xp.prod(upcast(xp, x), axis=axes, dtype=upcast(xp, x).dtype)
    if kind == "max":
        return xp.any(x, axis=axes) if is_bool(xp, x) else xp.max(x, axis=axes)
    if kind == "min":
        return xp.all(x, axis=axes) if is_bool(xp, x) else xp.min(x, axis=axes)
    if kind == "and":
        if is_bool(xp, x):
            return xp.all(x, axis=axes)
    elif kind == "or" and is_bool(xp, x):
        return xp.any(x, axis=axes)
    return None


def _combine_two(xp: Any, kind: str, a: Any, b: Any) -> Any:
    return reduce_arrays(xp, [a, b], kind)


@register("stablehlo.reduce")
def _reduce(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp = it.xp
    n = len(args) // 2
    inputs, inits = args[:n], [xp.reshape(a, ()) for a in args[n:]]
    axes = parse_array(op.attributes["dimensions"])
    body = op.regions[0]
    kind = body_kind(body) if n == 1 else None
    if kind is not None:
        r = _fast_reduce(xp, inputs[0], kind, axes)
        if r is not None:
            r = astype(xp, r, inputs[0].dtype)
            return [astype(xp, _combine_two(xp, kind, astype(xp, inits[0], r.dtype), r), inputs[0].dtype)]
    # General body: move reduced axes to the front, fold pairwise over them.
    keep = [d for d in range(inputs[0].ndim) if d not in axes]
    out_shape = tuple(inputs[0].shape[d] for d in keep)
    k = 1
    for d in axes:
        k *= inputs[0].shape[d]
    flat = [xp.reshape(xp.permute_dims(x, (*axes, *keep)), (k, *out_shape)) for x in inputs]
    start = [xp.broadcast_to(i, out_shape) for i in inits]
    if k == 0:
        return start
    combine = combine_fn(it, op, body, n)
    folded = tree_fold([[f[j, ...] for f in flat] for j in range(k)], combine)
    return combine(start, folded)


def _windows(
    op: Op, rank: int
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], list[tuple[int, int]]]:
    a = op.attributes
    dims = parse_array(a["window_dimensions"])
    strides = parse_array(a["window_strides"]) if "window_strides" in a else (1,) * rank
    base = parse_array(a["base_dilations"]) if "base_dilations" in a else (1,) * rank
    wdil = parse_array(a["window_dilations"]) if "window_dilations" in a else (1,) * rank
    padding = (
        [(int(lo), int(hi)) for lo, hi in parse_dense(a["padding"]).reshape(-1, 2).tolist()]
        if "padding" in a
        else [(0, 0)] * rank
    )
    return dims, strides, base, wdil, padding


def _window_slices(
    shape: tuple[int, ...], dims: tuple[int, ...], strides: tuple[int, ...], wdil: tuple[int, ...]
) -> tuple[list[int], list[tuple[tuple[int, ...], tuple[slice, ...]]]]:
    out = [
        max(0, (n - (w - 1) * d - 1) // s + 1) if n >= (w - 1) * d + 1 else 0
        for n, w, s, d in zip(shape, dims, strides, wdil)
    ]
    slices = []
    for pos in itertools.product(*(range(w) for w in dims)):
        slices.append(
            (pos, tuple(slice(p * d, p * d + (o - 1) * s + 1, s) for p, d, o, s in zip(pos, wdil, out, strides)))
        )
    return out, slices


@register("stablehlo.reduce_window")
def _reduce_window(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp = it.xp
    n = len(args) // 2
    inputs, inits = args[:n], [xp.reshape(a, ()) for a in args[n:]]
    rank = inputs[0].ndim
    dims, strides, base, wdil, padding = _windows(op, rank)
    padded = [
        pad(xp, x, init, tuple(lo for lo, _ in padding), tuple(hi for _, hi in padding), tuple(b - 1 for b in base))
        for x, init in zip(inputs, inits)
    ]
    out_shape, slices = _window_slices(tuple(padded[0].shape), dims, strides, wdil)
    body = op.regions[0]
    kind = body_kind(body) if n == 1 else None
    parts = [[p[s] for p in padded] for _, s in slices]
    start = [xp.broadcast_to(i, tuple(out_shape)) for i in inits]
    if 0 in out_shape or not parts:
        return start
    if kind is not None:
        stacked = xp.stack([p[0] for p in parts], axis=0)
        r = _fast_reduce(xp, stacked, kind, (0,))
        if r is not None:
            return [astype(xp, _combine_two(xp, kind, astype(xp, inits[0], r.dtype), r), inputs[0].dtype)]
    combine = combine_fn(it, op, body, n)
    return combine(start, tree_fold(parts, combine))


@register("stablehlo.select_and_scatter")
def _select_and_scatter(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """For each window, the element chosen by the ``select`` body (scanning the window in
    row-major order, keeping the current choice while ``select(current, candidate)`` holds)
    receives the matching ``source`` element, combined with the ``scatter`` body into a result
    initialised to ``init_value``."""
    xp = it.xp
    operand, source, init = args
    rank = operand.ndim
    dims, strides, _, _, padding = _windows(op, rank)
    if any(lo or hi for lo, hi in padding):
        raise ProgramError(f"{op.where()}: select_and_scatter with padding {padding} is not supported")
    out_shape, slices = _window_slices(tuple(operand.shape), dims, strides, (1,) * rank)
    if tuple(out_shape) != tuple(source.shape):
        raise ProgramError(
            f"{op.where()}: source shape {tuple(source.shape)} does not match the {tuple(out_shape)} windows"
        )
    count = 1
    for d in operand.shape:
        count *= int(d)
    index = xp.reshape(xp.arange(count, dtype=xp.int64), operand.shape)
    select_region, scatter_region = op.regions
    sel_val = sel_idx = None
    for _, s in slices:
        cand, cidx = operand[s], index[s]
        if sel_val is None:
            sel_val, sel_idx = cand, cidx
            continue
        keep = apply_body(it, op, select_region, [sel_val, cand])[0]
        sel_val = xp.where(keep, sel_val, cand)
        sel_idx = xp.where(keep, sel_idx, cidx)
    result = xp.reshape(xp.broadcast_to(xp.reshape(init, ()), operand.shape), (-1,))
    result = xp.asarray(result, copy=True)
    if sel_idx is not None:
        result = scatter_flat(it, op, scatter_region, result, xp.reshape(sel_idx, (-1,)), xp.reshape(source, (-1,)))
    return [xp.reshape(result, operand.shape)]
