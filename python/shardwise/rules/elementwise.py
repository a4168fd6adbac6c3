"""Pointwise ops and their near relatives: every elementwise StableHLO op Shardy's registry
lists, ``sdy.sharding_constraint``, ``clamp``, ``select``, ``reverse`` and
``bitcast_convert`` (Shardy ``op_sharding_rule_registry.cc``)."""

from __future__ import annotations

from shardwise.rules._util import builtin, operand_shape, pointwise, result_shape
from shardwise.rules.attrs import attr_ints
from shardwise.rules.opinfo import OpInfo
from shardwise.rules.rule import FactorKind, OpShardingRule, RuleBuilder

__all__ = ["POINTWISE_OPS"]

#: Ops whose rule is Shardy's pointwise rule: factor ``d`` is dimension ``d`` of every operand
#: and result (including the collectives that keep shapes).
POINTWISE_OPS = (
    "sdy.sharding_constraint",
    "stablehlo.abs",
    "stablehlo.add",
    "stablehlo.all_reduce",
    "stablehlo.and",
    "stablehlo.atan2",
    "stablehlo.cbrt",
    "stablehlo.ceil",
    "stablehlo.count_leading_zeros",
    "stablehlo.collective_broadcast",
    "stablehlo.collective_permute",
    "stablehlo.compare",
    "stablehlo.complex",
    "stablehlo.convert",
    "stablehlo.cosine",
    "stablehlo.cross-replica-sum",
    "stablehlo.divide",
    "stablehlo.exponential",
    "stablehlo.exponential_minus_one",
    "stablehlo.floor",
    "stablehlo.imag",
    "stablehlo.is_finite",
    "stablehlo.log_plus_one",
    "stablehlo.log",
    "stablehlo.logistic",
    "stablehlo.maximum",
    "stablehlo.minimum",
    "stablehlo.multiply",
    "stablehlo.negate",
    "stablehlo.not",
    "stablehlo.or",
    "stablehlo.popcnt",
    "stablehlo.power",
    "stablehlo.real",
    "stablehlo.reduce_precision",
    "stablehlo.remainder",
    "stablehlo.round_nearest_even",
    "stablehlo.round_nearest_afz",
    "stablehlo.rsqrt",
    "stablehlo.shift_left",
    "stablehlo.shift_right_arithmetic",
    "stablehlo.shift_right_logical",
    "stablehlo.sign",
    "stablehlo.sine",
    "stablehlo.sqrt",
    "stablehlo.subtract",
    "stablehlo.tan",
    "stablehlo.tanh",
    "stablehlo.xor",
)


@builtin(*POINTWISE_OPS)
def _pointwise(op: OpInfo, conservative: bool) -> OpShardingRule | None:
    return pointwise(op)


@builtin("stablehlo.clamp")
def _clamp(op: OpInfo, conservative: bool) -> OpShardingRule:
    # Operands (min, operand, max); min and max may be scalars. Sized by `operand`.
    return RuleBuilder.for_op(op).add_pointwise(operand_shape(op, 1, "operand")).build()


@builtin("stablehlo.select")
def _select(op: OpInfo, conservative: bool) -> OpShardingRule:
    # A scalar predicate is skipped (rank 0); otherwise all three operands are pointwise.
    return RuleBuilder.for_op(op).add_pointwise(result_shape(op, 0)).build()


@builtin("stablehlo.reverse")
def _reverse(op: OpInfo, conservative: bool) -> OpShardingRule:
    dims = attr_ints(op, "dimensions")
    return (
        RuleBuilder.for_op(op)
        .add_pointwise(result_shape(op, 0), lambda d: FactorKind.PERMUTATION if d in dims else FactorKind.PASS_THROUGH)
        .build()
    )


@builtin("stablehlo.bitcast_convert")
def _bitcast_convert(op: OpInfo, conservative: bool) -> OpShardingRule:
    # The extra minor dimension of the narrower element type cannot be sharded.
    in_shape, out_shape = operand_shape(op, 0), result_shape(op, 0)
    b = RuleBuilder.for_op(op).add_pointwise(in_shape if len(in_shape) < len(out_shape) else out_shape)
    if len(in_shape) < len(out_shape):
        b.add_factor(-1, len(out_shape) - 1, out_shape[-1], FactorKind.NEED_REPLICATION)
    elif len(in_shape) > len(out_shape):
        b.add_factor(len(in_shape) - 1, -1, in_shape[-1], FactorKind.NEED_REPLICATION)
    return b.build()
