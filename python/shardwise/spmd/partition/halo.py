"""Windowed dimensions that stay sharded: halo exchange (XLA's ``ExchangeHalo`` in
``spmd/spmd_partitioner_util.cc``, used by its convolution, reduce-window and slice handlers).

A *window* reads, for output element ``j`` of one dimension, the input elements
``j*stride - lo + w*dilation`` for ``w`` in ``0..size-1`` (``lo``: low padding; negative: input
skipped). A convolution's spatial dimensions, a ``reduce_window``'s dimensions and a
``slice``'s dimensions (size 1, dilation 1, ``lo = -start``) are windows.

When the input dimension (``N`` elements) and the output dimension (``M``) are both split into
``n`` even shards by the same axes, and ``N/n == (M/n) * stride``, every rank needs the same
neighbourhood of its own block: ``left = lo`` elements before it and
``right = (size-1)*dilation + 1 - stride - lo`` after it (negative: that many of its own are
not read). When both are at most one block, the rank gets its left halo from the rank before it
along the axes and its right halo from the rank after it (one collective-permute each; the first
and last ranks take the padding value instead), concatenates them to its block and runs the op
without padding on that dimension. Its result is then exactly its block of the global result.
A strided slice or a pooling window with stride = size reads no neighbour: no communication.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardwise.execute.attrs import parse_array, parse_conv_dims, parse_dense
from shardwise.ir.core import Op
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef, TensorSharding
from shardwise.spmd.partition.emit import _dense_i64
from shardwise.spmd.partition.groups import axis_size

__all__ = ["Halo", "Window", "halos", "padding_without", "windows"]


@dataclass(frozen=True)
class Window:
    """One windowed dimension of an op: the operand and result dimension it maps, and the
    window's size, stride, dilation and low padding (elements)."""

    operand_dim: int
    result_dim: int
    size: int
    stride: int
    dilation: int
    lo: int


@dataclass(frozen=True)
class Halo:
    """A window kept sharded on ``axes`` (``shards`` of them): the rank's block needs ``left``
    elements of the block before it and ``right`` of the block after it (negative: that many of
    its own first / last elements are not read)."""

    window: Window
    axes: tuple[AxisRef, ...]
    shards: int
    left: int
    right: int


def _pairs(text: str | None, rank: int) -> list[tuple[int, int]]:
    if text is None:
        return [(0, 0)] * rank
    arr = parse_dense(text).reshape(-1, 2)
    if arr.size == 0:
        return [(0, 0)] * rank
    if arr.shape[0] == 1 and rank > 1:  # a splat
        return [(int(arr[0, 0]), int(arr[0, 1]))] * rank
    return [(int(a), int(b)) for a, b in arr.tolist()]


def windows(op: Op, operand: TensorType) -> list[Window]:
    """The windowed dimensions of a ``slice``, a single-input ``reduce_window`` (no base
    dilation) or a convolution (no input dilation) that are not the identity, for the global
    ``operand`` type; ``[]`` for other ops or when a dimension is not a window."""
    attrs = op.attributes
    t = operand
    if op.name == "stablehlo.slice":
        start, limit = parse_array(attrs["start_indices"]), parse_array(attrs["limit_indices"])
        strides = parse_array(attrs["strides"]) if "strides" in attrs else (1,) * t.rank
        return [Window(k, k, 1, strides[k], 1, -start[k]) for k in range(t.rank) if (start[k], limit[k], strides[k]) != (0, t.shape[k], 1)]
    if op.name == "stablehlo.reduce_window" and len(op.operands) == 2:
        ones = (1,) * t.rank
        size = parse_array(attrs["window_dimensions"])
        strides = parse_array(attrs["window_strides"]) if "window_strides" in attrs else ones
        base = parse_array(attrs["base_dilations"]) if "base_dilations" in attrs else ones
        dil = parse_array(attrs["window_dilations"]) if "window_dilations" in attrs else ones
        pad = _pairs(attrs.get("padding"), t.rank)
        if any(b != 1 for b in base):
            return []
        return [Window(k, k, size[k], strides[k], dil[k], pad[k][0]) for k in range(t.rank) if (size[k], strides[k], dil[k], pad[k]) != (1, 1, 1, (0, 0))]
    if op.name == "stablehlo.convolution" and len(op.operands) == 2:
        d = parse_conv_dims(attrs["dimension_numbers"])
        ns = len(d.lhs_spatial)
        ones = (1,) * ns
        strides = parse_array(attrs["window_strides"]) if "window_strides" in attrs else ones
        lhs_dil = parse_array(attrs["lhs_dilation"]) if "lhs_dilation" in attrs else ones
        rhs_dil = parse_array(attrs["rhs_dilation"]) if "rhs_dilation" in attrs else ones
        pad = _pairs(attrs.get("padding"), ns)
        if any(x != 1 for x in lhs_dil):
            return []
        kt = op.operands[1].type
        assert isinstance(kt, TensorType)
        return [Window(d.lhs_spatial[i], d.out_spatial[i], kt.shape[d.rhs_spatial[i]], strides[i], rhs_dil[i], pad[i][0]) for i in range(ns)]
    return []


def halos(mesh: Mesh, op: Op, it: TensorType, operand: TensorSharding | None, rt: TensorType, result: TensorSharding | None) -> dict[int, Halo]:
    """Operand dimension -> ``Halo`` for each window of ``op`` that may stay sharded with its
    first operand (global type ``it``) sharded as ``operand`` and its result (``rt``) as
    ``result`` (module docstring: the same axes on both, even shards,
    ``N/n == (M/n) * stride``, halos of at most one block)."""
    if operand is None or result is None:
        return {}
    out: dict[int, Halo] = {}
    for w in windows(op, it):
        if w.operand_dim >= len(operand.dims) or w.result_dim >= len(result.dims):
            continue
        axes = tuple(operand.dims[w.operand_dim].axes)
        if not axes or axes != tuple(result.dims[w.result_dim].axes):
            continue
        n = 1
        for a in axes:
            n *= axis_size(mesh, a)
        big, small = it.shape[w.operand_dim], rt.shape[w.result_dim]
        if big % n or small % n or big // n != (small // n) * w.stride:
            continue
        block = big // n
        left = w.lo
        right = (w.size - 1) * w.dilation + 1 - w.stride - w.lo
        if max(left, right) > block or min(left, right) <= -block or left + right <= -block:
            continue  # a halo beyond the neighbour's block, or nothing of its own left
        out[w.operand_dim] = Halo(w, axes, n, left, right)
    return out


def padding_without(op: Op, rank: int, dims: set[int]) -> str:
    """``op``'s ``padding`` attribute (a reduce_window's, rows per operand dimension, or a
    convolution's, rows per spatial dimension) with the rows of operand dimensions ``dims``
    set to ``[0, 0]`` (``rank``: the operand's rank)."""
    if op.name == "stablehlo.convolution":
        spatial = parse_conv_dims(op.attributes["dimension_numbers"]).lhs_spatial
        rows = [list(p) for p in _pairs(op.attributes.get("padding"), len(spatial))]
        for i, d in enumerate(spatial):
            if d in dims:
                rows[i] = [0, 0]
    else:
        rows = [list(p) for p in _pairs(op.attributes.get("padding"), rank)]
        for d in dims:
            rows[d] = [0, 0]
    return _dense_i64(rows)
