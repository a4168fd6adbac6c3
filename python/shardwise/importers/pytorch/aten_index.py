"""Indexing: ``embedding`` (rows of a table), ``index.Tensor`` (advanced indexing by leading
index tensors, broadcast together) and ``gather`` (``torch.gather`` along one dim), all as
``stablehlo.gather`` with the dimension numbers JAX emits for ``w[ids]`` (StableHLO spec).
Negative indices count from the end, as in PyTorch (``select`` before the gather, as JAX does
for ``x[i]``); indices past the end are clamped by ``gather`` where PyTorch raises."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardwise.errors import ProgramError
from shardwise.importers.pytorch.lowering import Lowering
from shardwise.importers.pytorch.registry import aten
from shardwise.ir.core import Value, tensor_type
from shardwise.ir.types import TensorType


def _wrapped(lo: Lowering, idx: Value, n: int) -> Value:
    """``idx`` with negative entries counted from the end of a dimension of size ``n``."""
    t = tensor_type(idx)
    negative = lo.compare("LT", idx, lo.const(0, t.element_type, t.shape))
    shifted = lo.b.add(idx, lo.const(n, t.element_type, t.shape))
    return lo.b.op("stablehlo.select", [negative, shifted, idx], [t]).result


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
    t, it = tensor_type(x), tensor_type(index)
    dim = int(node.args[1]) % t.rank
    indices = [
        index
        if d == dim
        else lo.b.op(
            "stablehlo.iota", [], [TensorType(it.shape, it.element_type)], {"iota_dimension": f"{d} : i64"}
        ).result
        for d in range(t.rank)
    ]
    return _gather(lo, x, indices, lo.result_type(node))
