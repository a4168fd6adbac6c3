"""Views and data movement: ``permute``, ``view``/``reshape``, ``expand``, ``unsqueeze``,
``squeeze``, ``select``, ``slice``, ``cat``, ``split``, copies, and ``as_strided`` where it reads a
dense input's elements in storage order (a relayout such as convnext's after its mean). Each result's shape is the one
``torch.export`` recorded (``Lowering.result_type``); the StableHLO ops are ``transpose``,
``reshape``, ``broadcast_in_dim``, ``slice`` and ``concatenate`` (StableHLO spec)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from shardwise.errors import ProgramError
from shardwise.importers.pytorch.lowering import Lowering
from shardwise.importers.pytorch.registry import aten
from shardwise.ir.core import Value, tensor_type


@aten("permute.default")
def _permute(lo: Lowering, node: Any) -> Value:
    x = lo.value(node.args[0])
    rank = tensor_type(x).rank
    return lo.b.transpose(x, [int(d) % rank for d in node.args[1]])


@aten("t.default")
def _t(lo: Lowering, node: Any) -> Value:
    x = lo.value(node.args[0])
    return x if tensor_type(x).rank < 2 else lo.b.transpose(x, [1, 0])


@aten("transpose.int")
def _transpose(lo: Lowering, node: Any) -> Value:
    x = lo.value(node.args[0])
    rank = tensor_type(x).rank
    a, c = int(node.args[1]) % rank, int(node.args[2]) % rank
    perm = list(range(rank))
    perm[a], perm[c] = perm[c], perm[a]
    return lo.b.transpose(x, perm)


@aten(
    "view.default",
    "_unsafe_view.default",
    "reshape.default",
    "unsqueeze.default",
    "squeeze.dims",
    "squeeze.dim",
    "squeeze.default",
    "flatten.using_ints",
)
def _reshape(lo: Lowering, node: Any) -> Value:
    return lo.keep(lo.value(node.args[0]), lo.result_type(node).shape)


def _storage_order(shape: Sequence[int], strides: Sequence[int]) -> list[int] | None:
    """The dims of a tensor in the order its storage holds them (outermost first) when it is
    dense (no gaps, no overlap; size-1 dims count as anywhere), else ``None``."""
    order = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: -strides[d])
    step = 1
    for d in reversed(order):
        if strides[d] != step:
            return None
        step *= shape[d]
    return order + [d for d in range(len(shape)) if shape[d] == 1]


@aten("as_strided.default")
def _as_strided(lo: Lowering, node: Any) -> Value:
    # as_strided reads the input's storage: translated when the input is dense (its layout as
    # torch.export recorded it) and the view reads all of it, in storage order, from its start
    # (contiguous strides on the view's dims): the input's dims in storage order, reshaped.
    src = node.args[0].meta["val"]
    size, stride = [int(v) for v in node.args[1]], [int(v) for v in node.args[2]]
    offset = node.args[3] if len(node.args) > 3 and node.args[3] is not None else src.storage_offset()
    order = _storage_order(list(src.shape), list(src.stride()))
    in_order = [d for d in range(len(size)) if size[d] != 1] + [d for d in range(len(size)) if size[d] == 1]
    reads_all = _storage_order(size, stride) == in_order and math.prod(size) == src.numel()
    if order is None or not reads_all or int(offset) != src.storage_offset():
        raise ProgramError(
            f"aten.as_strided (FX node {node.name}): expected a view of all of a dense input in storage order,"
            f" got size {size}, stride {stride}, offset {offset} of a {list(src.shape)} input with strides"
            f" {list(src.stride())}"
        )
    x = lo.value(node.args[0])
    if order != list(range(len(order))):
        x = lo.b.transpose(x, order)
    return lo.keep(x, lo.result_type(node).shape)


@aten("expand.default")
def _expand(lo: Lowering, node: Any) -> Value:
    return lo.broadcast(lo.value(node.args[0]), lo.result_type(node).shape)


@aten("clone.default", "alias.default", "contiguous.default", "detach.default", "lift_fresh_copy.default")
def _identity(lo: Lowering, node: Any) -> Value:
    return lo.value(node.args[0])


@aten("_to_copy.default")
def _to_copy(lo: Lowering, node: Any) -> Value:
    return lo.convert(lo.value(node.args[0]), lo.result_type(node).element_type)


@aten("select.int")
def _select(lo: Lowering, node: Any) -> Value:
    x = lo.value(node.args[0])
    t = tensor_type(x)
    dim = int(node.args[1]) % t.rank
    index = int(node.args[2]) % t.shape[dim]
    start = [0] * t.rank
    limit = list(t.shape)
    start[dim], limit[dim] = index, index + 1
    return lo.keep(lo.b.slice(x, start, limit), lo.result_type(node).shape)


@aten("slice.Tensor")
def _slice(lo: Lowering, node: Any) -> Value:
    x = lo.value(node.args[0])
    t = tensor_type(x)
    args = list(node.args) + [None] * (5 - len(node.args))
    dim = int(args[1] if args[1] is not None else node.kwargs.get("dim", 0)) % t.rank
    n = t.shape[dim]
    start, end, step = args[2], args[3], args[4] if args[4] is not None else 1
    # PyTorch's slice clamps its bounds to the dimension (end may be sys.maxsize).
    lo_i = 0 if start is None else (int(start) + n if int(start) < 0 else int(start))
    hi_i = n if end is None else (int(end) + n if int(end) < 0 else int(end))
    lo_i, hi_i = min(max(lo_i, 0), n), min(max(hi_i, 0), n)
    hi_i = max(hi_i, lo_i)
    begin, limit, strides = [0] * t.rank, list(t.shape), [1] * t.rank
    begin[dim], limit[dim], strides[dim] = lo_i, hi_i, int(step)
    return lo.b.slice(x, begin, limit, strides)


@aten("cat.default")
def _cat(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    dim = int(node.args[1]) if len(node.args) > 1 else int(node.kwargs.get("dim", 0))
    parts = [lo.convert(lo.value(a), out.element_type) for a in node.args[0]]
    parts = [p for p in parts if tensor_type(p).rank == out.rank]  # torch.cat skips 1-D empty tensors
    return lo.b.concatenate(parts, dim % out.rank)


@aten("split_with_sizes.default", "split.Tensor")
def _split(lo: Lowering, node: Any) -> tuple[Value, ...]:
    x = lo.value(node.args[0])
    t = tensor_type(x)
    dim = int(node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)) % t.rank
    n = t.shape[dim]
    arg = node.args[1]
    sizes = (
        [int(s) for s in arg]
        if isinstance(arg, (list, tuple))
        else [min(int(arg), n - i) for i in range(0, n, int(arg))]
    )
    out, begin = [], 0
    for s in sizes:
        start, limit = [0] * t.rank, list(t.shape)
        start[dim], limit[dim] = begin, begin + s
        out.append(lo.b.slice(x, start, limit))
        begin += s
    return tuple(out)


@aten("_assert_tensor_metadata.default", "_assert_scalar.default")
def _assertion(lo: Lowering, node: Any) -> None:
    # A check export leaves on a tensor's dtype or a scalar; no value (nothing uses it).
    return None
