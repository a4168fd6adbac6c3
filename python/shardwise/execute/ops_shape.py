"""Shape ops: broadcast_in_dim, reshape (row-major), transpose, concatenate, slice, reverse,
pad (negative and interior padding), iota (StableHLO spec)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardwise.errors import ProgramError
from shardwise.execute.attrs import parse_array, parse_int
from shardwise.execute.ops_elementwise import convert
from shardwise.execute.registry import register
from shardwise.ir.core import Op

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


@register("stablehlo.broadcast_in_dim")
def _broadcast_in_dim(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp, x = it.xp, args[0]
    dims = parse_array(op.attributes["broadcast_dimensions"])
    shape = op.results[0].shape
    if len(dims) != x.ndim:
        raise ProgramError(f"{op.where()}: broadcast_dimensions {dims} for an operand of rank {x.ndim}")
    expanded = [1] * len(shape)
    for d, size in zip(dims, x.shape):
        expanded[d] = size
    # Dimensions must keep their order; transpose first when broadcast_dimensions is unsorted.
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x = xp.permute_dims(x, tuple(order))
    return [xp.broadcast_to(xp.reshape(x, tuple(expanded)), shape)]


@register("stablehlo.reshape", "stablehlo.dynamic_reshape")
def _reshape(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return [it.xp.reshape(args[0], op.results[0].shape)]


@register("stablehlo.transpose")
def _transpose(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return [it.xp.permute_dims(args[0], parse_array(op.attributes["permutation"]))]


@register("stablehlo.concatenate")
def _concatenate(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return [it.xp.concat(args, axis=parse_int(op.attributes["dimension"]))]


@register("stablehlo.slice")
def _slice(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    start = parse_array(op.attributes["start_indices"])
    limit = parse_array(op.attributes["limit_indices"])
    strides = parse_array(op.attributes["strides"]) if "strides" in op.attributes else (1,) * len(start)
    return [args[0][tuple(slice(a, b, s) for a, b, s in zip(start, limit, strides))]]


@register("stablehlo.reverse")
def _reverse(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    dims = parse_array(op.attributes["dimensions"])
    return [it.xp.flip(args[0], axis=dims) if dims else args[0]]


def pad(xp: Any, x: Any, value: Any, low: tuple[int, ...], high: tuple[int, ...], interior: tuple[int, ...]) -> Any:
    """StableHLO ``pad``: ``interior[d]`` copies of ``value`` between neighbours, then ``low`` /
    ``high`` on each side; negative ``low`` / ``high`` remove elements."""
    # Interior padding first: place x on a strided grid filled with value.
    if any(interior):
        shape = tuple(max(0, (n - 1) * (i + 1) + 1) for n, i in zip(x.shape, interior))
        grid = _filled(xp, shape, value)
        grid[tuple(slice(None, None, i + 1) for i in interior)] = x
        x = grid
    # Crop negative edges.
    crop = tuple(slice(max(0, -lo), n - max(0, -hi)) for n, lo, hi in zip(x.shape, low, high))
    x = x[crop]
    if all(lo <= 0 for lo in low) and all(hi <= 0 for hi in high):
        return x
    shape = tuple(n + max(0, lo) + max(0, hi) for n, lo, hi in zip(x.shape, low, high))
    out = _filled(xp, shape, value)
    out[tuple(slice(max(0, lo), max(0, lo) + n) for n, lo in zip(x.shape, low))] = x
    return out


def _filled(xp: Any, shape: tuple[int, ...], value: Any) -> Any:
    """A new (writable) array of ``shape`` filled with the 0-d array ``value``."""
    return xp.asarray(xp.broadcast_to(value, shape), copy=True)


@register("stablehlo.pad")
def _pad(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    x, value = args
    low = parse_array(op.attributes["edge_padding_low"])
    high = parse_array(op.attributes["edge_padding_high"])
    interior = parse_array(op.attributes["interior_padding"])
    if any(i < 0 for i in interior):
        raise ProgramError(f"{op.where()}: interior_padding must be >= 0, got {interior}")
    return [pad(it.xp, x, it.xp.reshape(value, ()), low, high, interior)]


@register("stablehlo.iota")
def _iota(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp = it.xp
    dim = parse_int(op.attributes["iota_dimension"])
    shape = op.results[0].shape
    dtype = it.result_dtype(op)
    line = xp.arange(shape[dim], dtype=xp.int64)
    view = [1] * len(shape)
    view[dim] = shape[dim]
    return [xp.broadcast_to(convert(xp, xp.reshape(line, tuple(view)), dtype), shape)]
