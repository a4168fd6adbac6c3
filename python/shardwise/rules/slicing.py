"""Ops that cut, pad or join tensors along dimensions: ``concatenate``, ``pad``, ``slice``,
``dynamic_slice``, ``dynamic_update_slice`` (Shardy ``op_sharding_rule_registry.cc``)."""

from __future__ import annotations

from shardwise.rules._util import builtin, operand_shape, require_dim, result_shape
from shardwise.rules.attrs import attr_int
from shardwise.rules.exceptions import OpInfoError
from shardwise.rules.opinfo import OpInfo, ValueInfo
from shardwise.rules.rule import FactorKind, OpShardingRule, RuleBuilder

#: Ops Shardy treats as constants (``sdy.constant`` and ops with MLIR's ``ConstantLike`` trait).
CONSTANT_OPS = frozenset(
    {"sdy.constant", "stablehlo.constant", "arith.constant", "mhlo.constant", "chlo.constant", "tosa.const"}
)


def _is_slice(v: ValueInfo) -> bool:
    return v.defining_op is not None and v.defining_op.name == "stablehlo.slice"


def _before_slice(v: ValueInfo) -> ValueInfo:
    """The sliced tensor when ``v`` is the result of a ``slice``, else ``v``."""
    if _is_slice(v) and v.defining_op is not None and v.defining_op.operands:
        return v.defining_op.operands[0]
    return v


@builtin("stablehlo.concatenate")
def _concatenate(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Pointwise; the concatenated dimension is a permutation factor when the operands are all
    slices, or all the same tensor or slices of it with at least one slice, else
    need-replication. Conservative: no factor for it (each tensor gets its own size-1
    factor)."""
    dim = attr_int(op, "dimension")
    out = result_shape(op, 0)
    require_dim(op, dim, out, "dimension")
    if not op.operands:
        raise OpInfoError(f"{op.name}: expected at least one operand, got none")

    def kind(d: int) -> FactorKind:
        if d != dim:
            return FactorKind.PASS_THROUGH
        if all(_is_slice(v) for v in op.operands):
            return FactorKind.PERMUTATION
        same = _before_slice(op.operands[0])
        if all(_before_slice(v).same_value(same) for v in op.operands) and any(_is_slice(v) for v in op.operands):
            return FactorKind.PERMUTATION
        return FactorKind.NEED_REPLICATION

    return RuleBuilder.for_op(op).add_pointwise_if(out, lambda d: not conservative or d != dim, kind).build()


@builtin("stablehlo.pad")
def _pad(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Pointwise sized by the operand; padded dimensions are permutation factors, blocked when
    conservative."""
    return (
        RuleBuilder.for_op(op)
        .add_pointwise_with_diff_type_for_mismatch(
            operand_shape(op, 0), result_shape(op, 0), FactorKind.PERMUTATION, conservative
        )
        .build()
    )


@builtin("stablehlo.slice")
def _slice(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Pointwise sized by the operand; sliced dimensions are permutation factors (static start
    indices let the data shift), blocked when conservative."""
    return (
        RuleBuilder.for_op(op)
        .add_pointwise_with_diff_type_for_mismatch(
            operand_shape(op, 0), result_shape(op, 0), FactorKind.PERMUTATION, conservative
        )
        .build()
    )


@builtin("stablehlo.dynamic_slice")
def _dynamic_slice(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Pointwise sized by the operand; sliced dimensions need replication and are blocked."""
    return (
        RuleBuilder.for_op(op)
        .add_pointwise_with_diff_type_for_mismatch(
            operand_shape(op, 0), result_shape(op, 0), FactorKind.NEED_REPLICATION, True
        )
        .build()
    )


@builtin("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Unsliced dimensions are pointwise. A sliced dimension gets a pass-through factor for the
    operand and result, and a factor of its own for the update, need-replication unless every
    start index is a constant."""
    shape, update = operand_shape(op, 0, "operand"), operand_shape(op, 1, "update")
    if len(shape) != len(update):
        raise OpInfoError(f"{op.name}: expected operand and update of equal rank, got {shape} and {update}")
    constant = all(v.defining_op is not None and v.defining_op.name in CONSTANT_OPS for v in op.operands[2:])
    b = RuleBuilder.for_op(op)
    dims = [-1] * len(op.operands)
    for d, (size, usize) in enumerate(zip(shape, update)):
        if size == usize:
            b.add_factor_for_all(d, size)
        else:
            dims[0], dims[1] = d, -1
            b.add_factor(dims, d, size)
            dims[0], dims[1] = -1, d
            b.add_factor(dims, -1, usize, FactorKind.PASS_THROUGH if constant else FactorKind.NEED_REPLICATION)
    return b.build()
