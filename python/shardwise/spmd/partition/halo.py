"""Windowed dimensions that stay sharded: halo exchange (XLA's ``ExchangeHalo`` in
``spmd/spmd_partitioner_util.cc``, used by its convolution, reduce-window, pad and slice
handlers).

A *window* reads, for output element ``j`` of one dimension, the input elements
``j*stride - lo + w*dilation`` for ``w`` in ``0..size-1`` (``lo``: low padding; negative: input
skipped). A convolution's spatial dimensions, a ``reduce_window``'s dimensions, a ``pad``'s
dimensions without interior padding (size 1: output ``j`` is input ``j - lo``) and a
``slice``'s dimensions (size 1, ``lo = -start``) are windows.

The input dimension (``N`` elements) is split into ``n`` even blocks of ``B = N/n`` and the
output (``M``) by the same axes into blocks of ``C = ceil(M/n)`` (the last one padded when ``n``
does not divide ``M``). The rank at index ``i`` computes outputs ``[i*C, i*C + C)``, which read
the input range ``[a_i, a_i + E)`` with ``a_i = i*C*stride - lo`` and
``E = (C-1)*stride + (size-1)*dilation + 1``: ``L_i = i*B - a_i`` elements before its block and
``R_i = a_i + E - (i+1)*B`` after it. With ``left`` the largest ``L_i`` but the first rank's
and ``right`` the largest ``R_i`` but the last rank's (what neighbours must send), each at most
one block, every rank sends its last ``left`` elements to the next rank and its first ``right``
to the previous one (one collective-permute each, the same shapes on every rank); the first
rank puts ``L_0`` padding values before its block instead, the last ``R_(n-1)`` after it. Each
rank reads its ``E`` elements of that extended block from where they start; the op then runs without
padding on that dimension (a pad becomes that slice, a slice starts at 0). Its result is its
block of the global result. A strided slice or a pooling window with stride = size reads no
neighbour: no communication.
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

__all__ = ["HALO_OPS", "Halo", "Window", "halos", "padding_without", "windows"]

#: The ops whose windows may stay sharded.
HALO_OPS = frozenset({"stablehlo.slice", "stablehlo.pad", "stablehlo.reduce_window", "stablehlo.convolution"})


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
    """A window kept sharded on ``axes`` (``shards`` blocks of ``block`` input and ``out_block``
    output elements): ``left`` / ``right`` elements come from the previous / next block, and
    each rank reads ``length`` elements of its extended block from ``start(i)`` (module
    docstring)."""

    window: Window
    axes: tuple[AxisRef, ...]
    shards: int
    block: int
    out_block: int
    left: int
    right: int

    @property
    def length(self) -> int:
        w = self.window
        return (self.out_block - 1) * w.stride + (w.size - 1) * w.dilation + 1

    def need_before(self, i: int) -> int:
        """``L_i``: input elements before block ``i`` that its outputs read (negative: its own
        first elements not read)."""
        return i * self.block - (i * self.out_block * self.window.stride - self.window.lo)

    def need_after(self, i: int) -> int:
        """``R_i``: input elements after block ``i`` that its outputs read."""
        return self.length - self.need_before(i) - self.block

    def before(self, i: int) -> int:
        """Elements put before block ``i``: ``left`` from the previous rank, or for the first
        rank the padding values it reads."""
        return max(0, self.need_before(0)) if i == 0 else self.left

    def after(self, i: int) -> int:
        """Elements put after block ``i``: ``right`` from the next rank, or for the last rank
        the padding values it reads."""
        return max(0, self.need_after(i)) if i == self.shards - 1 else self.right

    def start(self, i: int) -> int:
        """Where rank ``i``'s window starts in its extended block."""
        return self.before(i) - self.need_before(i)


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
        return [
            Window(k, k, 1, strides[k], 1, -start[k])
            for k in range(t.rank)
            if (start[k], limit[k], strides[k]) != (0, t.shape[k], 1)
        ]
    if op.name == "stablehlo.pad":
        lo, hi = parse_array(attrs["edge_padding_low"]), parse_array(attrs["edge_padding_high"])
        inner = parse_array(attrs["interior_padding"])
        return [Window(k, k, 1, 1, 1, lo[k]) for k in range(t.rank) if (lo[k], hi[k]) != (0, 0) and inner[k] == 0]
    if op.name == "stablehlo.reduce_window" and len(op.operands) == 2:
        ones = (1,) * t.rank
        size = parse_array(attrs["window_dimensions"])
        strides = parse_array(attrs["window_strides"]) if "window_strides" in attrs else ones
        base = parse_array(attrs["base_dilations"]) if "base_dilations" in attrs else ones
        dil = parse_array(attrs["window_dilations"]) if "window_dilations" in attrs else ones
        pad = _pairs(attrs.get("padding"), t.rank)
        if any(b != 1 for b in base):
            return []
        return [
            Window(k, k, size[k], strides[k], dil[k], pad[k][0])
            for k in range(t.rank)
            if (size[k], strides[k], dil[k], pad[k]) != (1, 1, 1, (0, 0))
        ]
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
        return [
            Window(d.lhs_spatial[i], d.out_spatial[i], kt.shape[d.rhs_spatial[i]], strides[i], rhs_dil[i], pad[i][0])
            for i in range(ns)
        ]
    return []


def halos(
    mesh: Mesh, op: Op, it: TensorType, operand: TensorSharding | None, rt: TensorType, result: TensorSharding | None
) -> dict[int, Halo]:
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
        if big % n:
            continue  # padded input blocks: their padding is not the op's padding value
        block, out_block = big // n, -(-small // n)
        h = Halo(w, axes, n, block, out_block, 0, 0)
        left = max([0] + [h.need_before(i) for i in range(1, n)])
        right = max([0] + [h.need_after(i) for i in range(n - 1)])
        if left > block or right > block:
            continue  # a halo beyond the neighbour's block
        out[w.operand_dim] = Halo(w, axes, n, block, out_block, left, right)
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
