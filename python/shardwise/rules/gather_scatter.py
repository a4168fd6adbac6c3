"""``gather`` and ``scatter`` (Shardy ``op_sharding_rule_registry.cc``,
``addGatherScatterFactors``; the scatter's reduction from ``getCommonSupportedReductionOp`` in
``shardy/dialect/sdy/ir/utils.cc``).

Walking the slices (gather result, scatter updates) dimension by dimension: an offset
dimension maps to the next input dimension that is neither collapsed nor batching: one
factor when unsliced; when sliced, for scatter two need-replication factors, for gather of a
size-1 slice a reduction factor (input) and a need-replication factor (slices), else one
blocked need-replication factor. Any other slices dimension is a batch dimension shared
with the indices (and with the input when it is an explicit batching dimension); for scatter
an implicit one is a reduction factor when the update computation is a supported reduction,
else need-replication. Then each collapsed (inserted) input dimension gets a factor (gather:
reduction, need-replication when of size 1; scatter: pass-through), and the index vector
dimension a need-replication factor."""

from __future__ import annotations

from collections.abc import Callable

from shardwise.rules._util import builtin, operand_shape, result_shape
from shardwise.rules.attrs import attr_struct, struct_int, struct_list
from shardwise.rules.exceptions import OpInfoError
from shardwise.rules.opinfo import OpInfo, ValueInfo
from shardwise.rules.rule import FactorKind, OpShardingRule, RuleBuilder

AddFactor = Callable[[int, int, int, int, FactorKind, bool], None]

_REDUCTIONS = frozenset({"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum"})
_LOGICAL = frozenset({"stablehlo.and", "stablehlo.or"})


def _add_factors(
    op: OpInfo,
    input_shape: tuple[int, ...],
    slices_shape: tuple[int, ...],
    indices_shape: tuple[int, ...],
    index_vector_dim: int,
    offset_dims: tuple[int, ...],
    collapsed_dims: tuple[int, ...],
    input_batching_dims: tuple[int, ...],
    indices_batching_dims: tuple[int, ...],
    add: AddFactor,
    scatter_reduces: bool | None,
) -> None:
    """``scatter_reduces`` is None for gather, else whether the scatter's update computation
    is a supported reduction."""
    is_scatter = scatter_reduces is not None
    if index_vector_dim < 0:
        raise OpInfoError(f"{op.name}: expected index_vector_dim >= 0, got {index_vector_dim}")
    if len(input_batching_dims) != len(indices_batching_dims):
        raise OpInfoError(
            f"{op.name}: expected as many input as indices batching dimensions, got {input_batching_dims} and {indices_batching_dims}"
        )
    input_dim = 0
    batch_pos = 0
    for slices_dim, slices_size in enumerate(slices_shape):
        if slices_dim in offset_dims:
            while input_dim in collapsed_dims or input_dim in input_batching_dims:
                input_dim += 1
            if input_dim >= len(input_shape):
                raise OpInfoError(
                    f"{op.name}: offset dimension {slices_dim} has no input dimension left in {input_shape}"
                )
            input_size = input_shape[input_dim]
            if input_size == slices_size:
                add(input_dim, -1, slices_dim, input_size, FactorKind.PASS_THROUGH, False)
            elif is_scatter:
                add(input_dim, -1, -1, input_size, FactorKind.NEED_REPLICATION, False)
                add(-1, -1, slices_dim, slices_size, FactorKind.NEED_REPLICATION, False)
            elif slices_size == 1:
                add(input_dim, -1, -1, input_size, FactorKind.REDUCTION, False)
                add(-1, -1, slices_dim, slices_size, FactorKind.NEED_REPLICATION, False)
            else:
                add(input_dim, -1, slices_dim, input_size, FactorKind.NEED_REPLICATION, True)
            input_dim += 1
        else:
            indices_dim = batch_pos if batch_pos < index_vector_dim else batch_pos + 1
            if indices_dim >= len(indices_shape):
                raise OpInfoError(
                    f"{op.name}: batch dimension {slices_dim} has no indices dimension in {indices_shape}"
                )
            explicit = indices_dim in indices_batching_dims
            input_batch = input_batching_dims[indices_batching_dims.index(indices_dim)] if explicit else -1
            kind = FactorKind.PASS_THROUGH
            if is_scatter and not explicit:
                kind = FactorKind.REDUCTION if scatter_reduces else FactorKind.NEED_REPLICATION
            add(input_batch, indices_dim, slices_dim, slices_size, kind, False)
            batch_pos += 1
    for d in collapsed_dims:
        if not 0 <= d < len(input_shape):
            raise OpInfoError(f"{op.name}: collapsed dimension {d} out of range for input shape {input_shape}")
        size = input_shape[d]
        if is_scatter:
            kind = FactorKind.PASS_THROUGH
        else:
            kind = FactorKind.NEED_REPLICATION if size == 1 else FactorKind.REDUCTION
        add(d, -1, -1, size, kind, False)
    if index_vector_dim < len(indices_shape):
        add(-1, index_vector_dim, -1, indices_shape[index_vector_dim], FactorKind.NEED_REPLICATION, False)


@builtin("stablehlo.gather")
def _gather(op: OpInfo, conservative: bool) -> OpShardingRule:
    nums = attr_struct(op, "dimension_numbers", "gather")
    b = RuleBuilder.for_op(op)

    def add(input_dim: int, indices_dim: int, slices_dim: int, size: int, kind: FactorKind, blocked: bool) -> None:
        b.add_factor([input_dim, indices_dim], slices_dim, size, kind, blocked)

    _add_factors(
        op,
        operand_shape(op, 0, "operand"),
        result_shape(op, 0),
        operand_shape(op, 1, "start_indices"),
        struct_int(op, "dimension_numbers", nums, "index_vector_dim", 0),
        struct_list(nums, "offset_dims"),
        struct_list(nums, "collapsed_slice_dims"),
        struct_list(nums, "operand_batching_dims"),
        struct_list(nums, "start_indices_batching_dims"),
        add,
        None,
    )
    return b.build()


def _is_block_argument(v: ValueInfo, args: tuple[ValueInfo, ...], index: int) -> bool:
    return index < len(args) and v.same_value(args[index])


def scatter_reduction(op: OpInfo) -> str | None:
    """The op name of the reduction a scatter's update computation applies to every input
    (``stablehlo.add``, ``multiply``, ``maximum``, ``minimum``; ``and``/``or`` on ``i1``), or
    None when it is anything else: each returned value must be that op applied to the block
    arguments of its input and its update, in either order."""
    n = len(op.results)
    if not op.regions or not op.regions[0]:
        return None
    block = op.regions[0][0]
    if len(block.arguments) != 2 * n or not block.operations:
        return None
    ret = block.operations[-1]
    if ret.name != "stablehlo.return" or len(ret.operands) != n:
        return None
    reduction: str | None = None
    for i, value in enumerate(ret.operands):
        cur = value.defining_op
        if cur is None or len(cur.operands) != 2 or not value.is_tensor:
            return None
        logical = value.element_type == "i1" and cur.name in _LOGICAL
        if not logical and cur.name not in _REDUCTIONS:
            return None
        if reduction is None:
            reduction = cur.name
        elif reduction != cur.name:
            return None
        lhs, rhs = cur.operands
        args = block.arguments
        if not (
            (_is_block_argument(lhs, args, i) and _is_block_argument(rhs, args, i + n))
            or (_is_block_argument(lhs, args, i + n) and _is_block_argument(rhs, args, i))
        ):
            return None
    return reduction


@builtin("stablehlo.scatter")
def _scatter(op: OpInfo, conservative: bool) -> OpShardingRule:
    nums = attr_struct(op, "scatter_dimension_numbers", "scatter")
    n = len(op.results)
    if n == 0 or len(op.operands) != 2 * n + 1:
        raise OpInfoError(
            f"{op.name}: expected N inputs, the indices and N updates for N results, got {len(op.operands)} operands, {n} results"
        )
    b = RuleBuilder.for_op(op)

    def add(input_dim: int, indices_dim: int, slices_dim: int, size: int, kind: FactorKind, blocked: bool) -> None:
        b.add_factor([input_dim] * n + [indices_dim] + [slices_dim] * n, [input_dim] * n, size, kind, blocked)

    _add_factors(
        op,
        operand_shape(op, 0, "input"),
        operand_shape(op, n + 1, "update"),
        operand_shape(op, n, "scatter_indices"),
        struct_int(op, "scatter_dimension_numbers", nums, "index_vector_dim", 0),
        struct_list(nums, "update_window_dims"),
        struct_list(nums, "inserted_window_dims"),
        struct_list(nums, "input_batching_dims"),
        struct_list(nums, "scatter_indices_batching_dims"),
        add,
        scatter_reduction(op) is not None,
    )
    return b.build()
