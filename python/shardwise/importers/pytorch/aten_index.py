"""Indexing: ``embedding`` (rows of a table), ``index.Tensor`` (advanced indexing by leading
index tensors, broadcast together) and ``gather`` (``torch.gather`` along one dim), all as
``stablehlo.gather`` with the dimension numbers JAX emits for ``w[ids]``, and ``index_put``
(``x[ids] = v``, or ``+=`` with ``accumulate``: what the backward of ``embedding`` emits) as
``stablehlo.scatter`` with the numbers JAX emits for ``x.at[ids].set/add``, and ``scatter`` /
``scatter_add`` (``torch.scatter`` along one dim; what the backward of ``cross_entropy`` emits)
(StableHLO spec).
Negative indices count from the end, as in PyTorch (``select`` before the gather, as JAX does
for ``x[i]``); indices past the end are clamped by ``gather`` where PyTorch raises."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardwise.errors import ProgramError
from shardwise.importers.pytorch.lowering import Lowering
from shardwise.importers.pytorch.registry import aten
from shardwise.ir.core import Block, Op, Region, Value, tensor_type
from shardwise.ir.types import TensorType


def _wrapped(lo: Lowering, idx: Value, n: int) -> Value:
    """``idx`` with negative entries counted from the end of a dimension of size ``n``."""
    t = tensor_type(idx)
    negative = lo.compare("LT", idx, lo.const(0, t.element_type, t.shape))
    shifted = lo.b.add(idx, lo.const(n, t.element_type, t.shape))
    return lo.b.op("stablehlo.select", [negative, shifted, idx], [t]).result


def _start_indices(lo: Lowering, x: Value, indices: Sequence[Value]) -> Value:
    """The index tensors (one shape ``S``, over the first dims of ``x``) as one ``S x k``
    tensor of i64 start indices, negative ones counted from the end."""
    t = tensor_type(x)
    shape = tensor_type(indices[0]).shape
    parts = [lo.b.reshape(lo.convert(_wrapped(lo, i, t.shape[d]), "i64"), (*shape, 1)) for d, i in enumerate(indices)]
    return parts[0] if len(parts) == 1 else lo.b.concatenate(parts, len(shape))


def _gather(lo: Lowering, x: Value, indices: Sequence[Value], out: TensorType) -> Value:
    """``x[indices[0], ..., indices[k-1]]`` for index tensors of one shape ``S`` over the first
    ``k`` dims of ``x``: the result has shape ``S + x.shape[k:]``."""
    t = tensor_type(x)
    k = len(indices)
    shape = tensor_type(indices[0]).shape
    parts = [lo.b.reshape(lo.convert(_wrapped(lo, i, t.shape[d]), "i64"), (*shape, 1)) for d, i in enumerate(indices)]
    start = parts[0] if k == 1 else lo.b.concatenate(parts, len(shape))
    r = len(shape)
    dims = ", ".join(str(d) for d in range(k))
    offset = ", ".join(str(r + j) for j in range(t.rank - k))
    attrs = {
        "dimension_numbers": f"#stablehlo.gather<offset_dims = [{offset}], collapsed_slice_dims = [{dims}], "
        f"start_index_map = [{dims}], index_vector_dim = {r}>"
        if offset
        else f"#stablehlo.gather<collapsed_slice_dims = [{dims}], start_index_map = [{dims}], index_vector_dim = {r}>",
        "indices_are_sorted": "false",
        "slice_sizes": "array<i64: " + ", ".join(str(s) for s in [1] * k + list(t.shape[k:])) + ">",
    }
    return lo.b.op("stablehlo.gather", [x, start], [out], attrs).result


@aten("embedding.default")
def _embedding(lo: Lowering, node: Any) -> Value:
    return _gather(lo, lo.value(node.args[0]), [lo.value(node.args[1])], lo.result_type(node))


@aten("index.Tensor")
def _index(lo: Lowering, node: Any) -> Value:
    x = lo.value(node.args[0])
    given = list(node.args[1])
    while given and given[-1] is None:
        given.pop()
    if not given or any(i is None for i in given):
        raise ProgramError(
            f"aten.index.Tensor (FX node {node.name}): expected index tensors on the leading dims only, got {given}"
        )
    out = lo.result_type(node)
    shape = out.shape[: out.rank - (tensor_type(x).rank - len(given))]
    indices = [lo.broadcast(lo.value(i), shape) for i in given]
    return _gather(lo, x, indices, out)


@aten("gather.default")
def _torch_gather(lo: Lowering, node: Any) -> Value:
    # out[i0, .., id, ..] = x[i0, .., index[i0, .., id, ..], ..]: every dim indexed by an iota
    # of the index's shape except ``dim``, indexed by ``index``.
    x, index = lo.value(node.args[0]), lo.value(node.args[2])
    t = tensor_type(x)
    dim = int(node.args[1]) % t.rank
    return _gather(lo, x, _iota_indices(lo, index, dim, t.rank), lo.result_type(node))


@aten("index_put.default")
def _index_put(lo: Lowering, node: Any) -> Value:
    x = lo.value(node.args[0])
    t = tensor_type(x)
    given = list(node.args[1])
    accumulate = bool(node.args[3]) if len(node.args) > 3 else bool(node.kwargs.get("accumulate", False))
    if not given or any(i is None for i in given):
        raise ProgramError(
            f"aten.index_put (FX node {node.name}): expected index tensors on the leading dims only, got {given}"
        )
    k = len(given)
    shapes = [tensor_type(lo.value(i)).shape for i in given]
    shape = max(shapes, key=len)
    indices = [lo.broadcast(lo.value(i), shape) for i in given]
    start = _start_indices(lo, x, indices)
    r = len(shape)
    updates = lo.operand(node.args[2], TensorType((*shape, *t.shape[k:]), t.element_type))
    window = ", ".join(str(r + j) for j in range(t.rank - k))
    dims = ", ".join(str(d) for d in range(k))
    numbers = (f"update_window_dims = [{window}], " if window else "") + (
        f"inserted_window_dims = [{dims}], scatter_dims_to_operand_dims = [{dims}], index_vector_dim = {r}"
    )
    return _scatter(lo, x, start, updates, numbers, accumulate)


def _scatter(lo: Lowering, x: Value, start: Value, updates: Value, numbers: str, accumulate: bool) -> Value:
    """``stablehlo.scatter`` of ``updates`` into ``x`` at ``start`` (dimension numbers
    ``numbers``), adding (``accumulate``) or replacing."""
    t = tensor_type(x)
    scalar = TensorType((), t.element_type)
    block = Block([scalar, scalar])
    combined = block.append(Op("stablehlo.add", block.args, [scalar])).result if accumulate else block.args[1]
    block.append(Op("stablehlo.return", [combined], []))
    attrs = {
        "indices_are_sorted": "false",
        "scatter_dimension_numbers": f"#stablehlo.scatter<{numbers}>",
        "unique_indices": "false",
    }
    return lo.b.op("stablehlo.scatter", [x, start, updates], [t], attrs, [Region([block])]).result


def _iota_indices(lo: Lowering, index: Value, dim: int, rank: int) -> list[Value]:
    """For ``torch.gather`` / ``torch.scatter`` along ``dim``: ``index`` for that dim, an iota
    of ``index``'s shape for every other."""
    it = tensor_type(index)
    return [
        index
        if d == dim
        else lo.b.op(
            "stablehlo.iota", [], [TensorType(it.shape, it.element_type)], {"iota_dimension": f"{d} : i64"}
        ).result
        for d in range(rank)
    ]


@aten("scatter.value", "scatter.src", "scatter_add.default")
def _torch_scatter(lo: Lowering, node: Any) -> Value:
    # out = x, then out[i0, .., index[i0, .., id, ..], ..] = src[i0, .., id, ..] (or += for scatter_add).
    x, index = lo.value(node.args[0]), lo.value(node.args[2])
    t, it = tensor_type(x), tensor_type(index)
    dim = int(node.args[1]) % t.rank
    if node.kwargs.get("reduce") is not None:
        raise ProgramError(f"{node.target} (FX node {node.name}): expected no reduce, got {node.kwargs['reduce']!r}")
    src = node.args[3]
    updates = (
        lo.operand(src, TensorType(it.shape, t.element_type))
        if isinstance(src, (bool, int, float))
        else lo.b.slice(lo.convert(lo.value(src), t.element_type), [0] * it.rank, list(it.shape))
    )
    start = _start_indices(lo, x, _iota_indices(lo, index, dim, t.rank))
    dims = ", ".join(str(d) for d in range(t.rank))
    numbers = f"inserted_window_dims = [{dims}], scatter_dims_to_operand_dims = [{dims}], index_vector_dim = {it.rank}"
    return _scatter(lo, x, start, updates, numbers, str(node.target) == "aten.scatter_add.default")
