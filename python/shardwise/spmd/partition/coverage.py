"""Which dimensions of an op the local rewrite computes exactly when they are sharded.

After ``sdy-insert-explicit-reshards`` every op's operands and results agree with one factor
sharding of the op (Shardy's ``OpShardingRule``), so an op whose factors are all
*pass-through*, *reduction* (followed by an all-reduce) or *size-preserving* computes its local
block by running on local blocks with only its types changed. Ops that read positions or sizes
along a dimension (slice, pad, concatenate, dynamic_slice, reverse, reduce_window, sort along
its dimension, convolution windows, gather, scatter, ...) and ops Shardy gives no rule (custom
calls, unknown ops) are not: ``replicated_dims`` names, per operand and per result, the
dimensions that must be replicated around such an op (the partitioner reshards them to
replicated before and back after it, the fallback the issue's "Partitioner" section asks for).
"""

from __future__ import annotations

from collections.abc import Sequence

from shardwise.execute.attrs import parse_array, parse_conv_dims, parse_int, parse_struct
from shardwise.execute.regions import body_kind
from shardwise.ir.core import Op
from shardwise.ir.types import TensorType
from shardwise.spmd.partition.chlo_rules import CHLO_POINTWISE

__all__ = ["LOCAL_OPS", "SPLIT_UPDATE_KINDS", "contracted_dims", "grouped_feature_dims", "replicated_dims"]

#: Scatter combiners under which the updates may be split between ranks (``replicated_dims``).
SPLIT_UPDATE_KINDS = ("add", "max", "min", "and", "or")

_ELEMENTWISE = {
    "abs", "add", "and", "atan2", "bitcast_convert", "cbrt", "ceil", "clamp", "compare", "complex", "convert",
    "cosine", "count_leading_zeros", "divide", "exponential", "exponential_minus_one", "floor", "imag",
    "is_finite", "log", "log_plus_one", "logistic", "maximum", "minimum", "multiply", "negate", "not", "or",
    "popcnt", "power", "real", "reduce_precision", "remainder", "round_nearest_afz", "round_nearest_even",
    "rsqrt", "select", "shift_left", "shift_right_arithmetic", "shift_right_logical", "sign", "sine", "sqrt",
    "subtract", "tan", "tanh", "xor",
}  # fmt: skip

LOCAL_OPS = frozenset(
    {f"stablehlo.{n}" for n in _ELEMENTWISE}
    | set(CHLO_POINTWISE)
    | {
        "stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.transpose", "stablehlo.dot",
        "stablehlo.dot_general", "stablehlo.iota", "stablehlo.constant", "stablehlo.while", "stablehlo.case",
        "stablehlo.if", "stablehlo.optimization_barrier", "stablehlo.return", "stablehlo.partition_id",
        "stablehlo.replica_id", "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter",
        "stablehlo.all_to_all", "stablehlo.collective_permute", "func.return", "sdy.constant", "sdy.reshard",
        "sdy.sharding_constraint", "sdy.manual_computation", "sdy.return", "sdy.all_gather", "sdy.all_slice",
        "sdy.all_to_all", "sdy.collective_permute", "sdy.all_reduce", "sdy.reduce_scatter", "sdy.sharding_group",
    }
)  # fmt: skip
"""Ops rewritten exactly on any sharding their factor rule allows (types and shape attributes
change; iota and splat constants are specialised to the rank's block). The elementwise CHLO
ops are among them: the partitioner gives them the pointwise rule (``chlo_rules``)."""


def _rank(v: object) -> int:
    t = getattr(v, "type", None)
    return t.rank if isinstance(t, TensorType) else 0


def _all(op: Op) -> tuple[list[set[int]], list[set[int]]]:
    return [set(range(_rank(v))) for v in op.operands], [set(range(_rank(v))) for v in op.results]


def _same_dims(op: Op, dims: set[int], operands: int = 1) -> tuple[list[set[int]], list[set[int]]]:
    """``dims`` of the first ``operands`` operands and of every result (ops whose operand and
    result dimensions correspond one to one); other operands (scalars) untouched."""
    return [set(dims) if i < operands else set() for i in range(len(op.operands))], [set(dims) for _ in op.results]


def replicated_dims(op: Op) -> tuple[list[set[int]], list[set[int]]] | None:
    """Per operand and per result, the dimensions that must not be sharded for the local
    rewrite of ``op`` to be exact, or ``None`` when any sharding its rule allows is fine.
    Ops not known here (custom calls, scatter, grouped convolutions, ...) need everything
    replicated."""
    name = op.name
    if name in LOCAL_OPS:
        return None
    if name == "stablehlo.reduce":
        n = len(op.operands) // 2
        if n == 1 and body_kind(op.regions[0]) is not None:
            return None
        dims = set(parse_array(op.attributes["dimensions"]))
        return [dims if i < n else set() for i in range(len(op.operands))], [set() for _ in op.results]
    if name == "stablehlo.slice":
        shape = op.operands[0].type.shape
        start, limit = parse_array(op.attributes["start_indices"]), parse_array(op.attributes["limit_indices"])
        strides = parse_array(op.attributes["strides"]) if "strides" in op.attributes else (1,) * len(shape)
        dims = {i for i in range(len(shape)) if (start[i], limit[i], strides[i]) != (0, shape[i], 1)}
        return _same_dims(op, dims)
    if name == "stablehlo.pad":
        lo, hi = parse_array(op.attributes["edge_padding_low"]), parse_array(op.attributes["edge_padding_high"])
        inner = parse_array(op.attributes["interior_padding"])
        return _same_dims(op, {i for i in range(len(lo)) if (lo[i], hi[i], inner[i]) != (0, 0, 0)})
    if name == "stablehlo.concatenate":
        return _same_dims(op, {parse_int(op.attributes["dimension"])}, len(op.operands))
    if name == "stablehlo.reverse":
        return _same_dims(op, set(parse_array(op.attributes["dimensions"])))
    if name == "stablehlo.dynamic_slice":
        shape, sizes = op.operands[0].type.shape, parse_array(op.attributes["slice_sizes"])
        return _same_dims(op, {i for i in range(len(shape)) if sizes[i] != shape[i]})
    if name == "stablehlo.dynamic_update_slice":
        shape, upd = op.operands[0].type.shape, op.operands[1].type.shape
        dims = {i for i in range(len(shape)) if upd[i] != shape[i]}
        return [dims, dims] + [set() for _ in op.operands[2:]], [dims]
    if name == "chlo.top_k" and len(op.operands) == 1 and _rank(op.operands[0]) >= 1:
        # Computed on local blocks of its leading (batch) dimensions (``chlo_rules``); the
        # dimension it ranks stays whole.
        return _same_dims(op, {_rank(op.operands[0]) - 1})
    if name == "stablehlo.sort":
        return _same_dims(
            op,
            {parse_int(op.attributes.get("dimension", "-1 : i64")) % max(_rank(op.operands[0]), 1)},
            len(op.operands),
        )
    if name == "stablehlo.reduce_window" and len(op.operands) == 2 and body_kind(op.regions[0]) is not None:
        rank = _rank(op.operands[0])
        ones = (1,) * rank
        window = parse_array(op.attributes["window_dimensions"])
        strides = parse_array(op.attributes["window_strides"]) if "window_strides" in op.attributes else ones
        base = parse_array(op.attributes["base_dilations"]) if "base_dilations" in op.attributes else ones
        wdil = parse_array(op.attributes["window_dilations"]) if "window_dilations" in op.attributes else ones
        padded = _padding_rows(op.attributes.get("padding"), rank)
        dims = {i for i in range(rank) if (window[i], strides[i], base[i], wdil[i], padded[i]) != (1, 1, 1, 1, False)}
        return [dims, set()], [dims]
    if name == "stablehlo.select_and_scatter" and len(op.operands) == 3:
        # Dimensions without a window (size 1, stride 1, no padding) are batch dimensions of
        # the operand, the source and the result alike.
        rank = _rank(op.operands[0])
        ones = (1,) * rank
        window = parse_array(op.attributes["window_dimensions"]) if "window_dimensions" in op.attributes else ones
        strides = parse_array(op.attributes["window_strides"]) if "window_strides" in op.attributes else ones
        padded = _padding_rows(op.attributes.get("padding"), rank)
        dims = {i for i in range(rank) if (window[i], strides[i], padded[i]) != (1, 1, False)}
        return [dims, dims, set()], [dims]
    if name == "stablehlo.gather" and len(op.operands) == 2:
        # Batch dimensions (the operand's batching dims, the indices' dims but the index
        # vector, the result's non-offset dims) are computed on local blocks, and so are the
        # offset dimensions taken whole (slice size = operand size: Shardy's pass-through
        # factor; the partitioner shrinks their slice size to the local one); the gathered
        # operand dimensions, the index vector and the other offset dims stay whole.
        dn = parse_struct(op.attributes["dimension_numbers"], "gather")
        shape = op.operands[0].type.shape
        batching = set(dn.get("operand_batching_dims", []))
        ivd = dn.get("index_vector_dim", 0)  # the default (0) is not printed
        sizes = parse_array(op.attributes["slice_sizes"])
        passing = _offset_pass_through(
            shape,
            [sizes[d] for d in range(len(shape))],
            dn.get("offset_dims", []),
            set(dn.get("collapsed_slice_dims", [])) | batching,
        )
        # Collapsed dimensions the indices address (index-parallel: a row-sharded embedding
        # table): each rank gathers its own rows, zeros the others and the rule's reduction
        # factor all-reduces them (``local_step.shift_indices`` / ``mask_gather``).
        indexed = set(dn.get("collapsed_slice_dims", [])) & set(dn.get("start_index_map", []))
        return (
            [
                set(range(len(shape))) - batching - set(passing) - indexed,
                {ivd} if ivd < _rank(op.operands[1]) else set(),
            ],
            [set(dn.get("offset_dims", [])) - set(passing.values())],
        )
    if name == "stablehlo.scatter" and len(op.operands) == 3:
        # One input, indices, one update tensor. The input dimensions that the update window
        # covers whole (window size = input size: Shardy's pass-through factor) are computed
        # on local blocks, with the updates' window dimension and the result's sharded alike;
        # so are the explicit batching dimensions (input, indices, updates). Everything else
        # (scattered input dimensions, the index vector, implicit batch dims, which combine
        # updates from every rank) stays whole.
        dn = parse_struct(op.attributes["scatter_dimension_numbers"], "scatter")
        shape = op.operands[0].type.shape
        upd = op.operands[2].type.shape
        in_batching = list(dn.get("input_batching_dims", []))
        idx_batching = list(dn.get("scatter_indices_batching_dims", []))
        win = list(dn.get("update_window_dims", []))
        skipped = set(dn.get("inserted_window_dims", [])) | set(in_batching)
        passing = _offset_pass_through(shape, _window_sizes(shape, upd, win, skipped), win, skipped)
        ivd = dn.get("index_vector_dim", 0)  # the default (0) is not printed
        idx_rank = _rank(op.operands[1])
        idx_scatter = [d for d in range(idx_rank) if d != ivd]
        upd_scatter = [d for d in range(len(upd)) if d not in win]
        ok_upd = set(passing.values()) | {upd_scatter[idx_scatter.index(d)] for d in idx_batching if d in idx_scatter}
        ok_idx = set(idx_batching)
        if body_kind(op.regions[0]) in SPLIT_UPDATE_KINDS:
            # Implicit batch dimensions (the updates' own, e.g. the tokens of an embedding
            # gradient): each rank scatters its updates, the rule's reduction factor
            # all-reduces the results, and for a sum only the first rank keeps the input
            # (``local_step.split_updates``; max, min, and, or are idempotent).
            implicit = [d for d in idx_scatter if d not in idx_batching]
            ok_upd |= {upd_scatter[idx_scatter.index(d)] for d in implicit}
            ok_idx |= set(implicit)
        # Inserted dimensions the indices address: each rank applies the updates that fall in
        # its rows (indices shifted; the others are out of bounds and skipped).
        indexed = set(dn.get("inserted_window_dims", [])) & set(dn.get("scatter_dims_to_operand_dims", []))
        in_dims = set(range(len(shape))) - set(passing) - set(in_batching) - indexed
        return [in_dims, set(range(idx_rank)) - ok_idx, set(range(len(upd))) - ok_upd], [set(in_dims)]
    if name == "stablehlo.convolution" and len(op.operands) == 2:
        feature_groups = parse_int(op.attributes.get("feature_group_count", "1"))
        batch_groups = parse_int(op.attributes.get("batch_group_count", "1"))
        if feature_groups > 1 and batch_groups == 1:
            # Grouped (depthwise) convolution: the feature-group factor (input feature, kernel
            # output feature, output feature) is computed on local blocks with
            # ``feature_group_count`` divided by its shard count (``local_step``; the global
            # step keeps it whole where the count does not divide the groups, ``GROUPED``);
            # windows and the per-group input feature stay whole.
            d = parse_conv_dims(op.attributes["dimension_numbers"])
            return ([set(d.lhs_spatial), {*d.rhs_spatial, d.rhs_in}], [set(d.out_spatial)])
        if batch_groups > 1 and feature_groups == 1:
            # Batch-grouped convolution (the kernel gradient of a grouped one): the batch-group
            # factor (input batch, kernel output feature, output feature) likewise, with
            # ``batch_group_count`` divided by its shard count.
            d = parse_conv_dims(op.attributes["dimension_numbers"])
            return ([{*d.lhs_spatial, d.lhs_feature}, {*d.rhs_spatial, d.rhs_in}], [set(d.out_spatial)])
        if feature_groups == 1 and batch_groups == 1:
            # Batch and output-feature dimensions are computed on local blocks as they are;
            # windows (spatial dims) stay whole. The contracted input feature is listed too:
            # the partitioner lets it stay sharded (a partial sum, all-reduced after the op as
            # the rule's reduction factor) unless its shards are padded (``CONTRACTED``).
            d = parse_conv_dims(op.attributes["dimension_numbers"])
            return (
                [{*d.lhs_spatial, d.lhs_feature}, {*d.rhs_spatial, d.rhs_in}],
                [set(d.out_spatial)],
            )
    return _all(op)


def _offset_pass_through(
    shape: tuple[int, ...], sizes: Sequence[int], offset_dims: Sequence[int], skipped: set[int]
) -> dict[int, int]:
    """Operand dimension -> slices (result or updates) dimension, for the offset dimensions
    taken whole: offset dims map in order to the operand dims that are neither collapsed nor
    batching (``skipped``), as in Shardy's ``addGatherScatterFactors``."""
    out: dict[int, int] = {}
    free = [d for d in range(len(shape)) if d not in skipped]
    for operand_dim, slices_dim in zip(free, sorted(offset_dims)):
        if sizes[operand_dim] == shape[operand_dim]:
            out[operand_dim] = slices_dim
    return out


def _window_sizes(shape: tuple[int, ...], upd: tuple[int, ...], window: Sequence[int], skipped: set[int]) -> list[int]:
    """Per input dimension of a scatter, the size of the update window along it (1 for
    inserted and batching dimensions)."""
    sizes = [1] * len(shape)
    free = [d for d in range(len(shape)) if d not in skipped]
    for operand_dim, upd_dim in zip(free, sorted(window)):
        sizes[operand_dim] = upd[upd_dim]
    return sizes


def grouped_feature_dims(op: Op) -> tuple[int, int, int, int] | None:
    """For a convolution with feature groups (or batch groups), but not both: the group count,
    and the lhs dimension the groups split (input feature, or input batch), the output feature
    dim of the kernel and of the result, which may be sharded when their shard count divides
    the groups; else ``None``."""
    if op.name != "stablehlo.convolution" or len(op.operands) != 2:
        return None
    feature_groups = parse_int(op.attributes.get("feature_group_count", "1"))
    batch_groups = parse_int(op.attributes.get("batch_group_count", "1"))
    if (feature_groups > 1) == (batch_groups > 1):
        return None
    d = parse_conv_dims(op.attributes["dimension_numbers"])
    if feature_groups > 1:
        return feature_groups, d.lhs_feature, d.rhs_out, d.out_feature
    return batch_groups, d.lhs_batch, d.rhs_out, d.out_feature


def contracted_dims(op: Op) -> tuple[int, int] | None:
    """For a convolution without feature groups, its contracted (input feature) dimension of
    the input and of the kernel, which may stay sharded when not padded (a partial sum: the
    rule's reduction factor); else ``None``. With feature groups the input feature dimension
    also holds the groups, so it is left to ``grouped_feature_dims``."""
    if op.name != "stablehlo.convolution" or len(op.operands) != 2:
        return None
    if parse_int(op.attributes.get("feature_group_count", "1")) != 1:
        return None
    d = parse_conv_dims(op.attributes["dimension_numbers"])
    return d.lhs_feature, d.rhs_in


def _padding_rows(text: str | None, rank: int) -> list[bool]:
    """Per dimension, whether a ``padding`` attribute (``dense<[[lo, hi], ...]>``) pads it."""
    if text is None:
        return [False] * rank
    from shardwise.execute.attrs import parse_dense

    arr = parse_dense(text).reshape(-1, 2) if "dense<0>" not in text.replace(" ", "") else None
    if arr is None or arr.size == 0:
        return [False] * rank
    return [bool(arr[i].any()) for i in range(rank)]
