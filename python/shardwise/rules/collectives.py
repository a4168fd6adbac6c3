"""Collectives that change a dimension: ``all_gather``, ``all_to_all``, ``reduce_scatter``
(Shardy ``op_sharding_rule_registry.cc``). The shape-preserving collectives (``all_reduce``,
``collective_permute``, ``collective_broadcast``) are pointwise, in ``elementwise.py``."""

from __future__ import annotations

from shardwise.rules._util import builtin, operand_shape, require_dim, result_shape
from shardwise.rules.attrs import attr_int
from shardwise.rules.opinfo import OpInfo
from shardwise.rules.rule import FactorKind, OpShardingRule, RuleBuilder

NEED = FactorKind.NEED_REPLICATION


def _gather_or_scatter(op: OpInfo, dim_attr: str) -> OpShardingRule:
    """The changed dimension gets one need-replication factor in the operands and another in
    the results; the other dimensions are pointwise."""
    dim = attr_int(op, dim_attr)
    in_shape, out_shape = operand_shape(op, 0), result_shape(op, 0)
    require_dim(op, dim, in_shape, dim_attr)
    require_dim(op, dim, out_shape, dim_attr)
    return (
        RuleBuilder.for_op(op)
        .add_pointwise_if(in_shape, lambda d: d != dim)
        .add_factor_for_all_operands(dim, in_shape[dim], NEED)
        .add_factor_for_all_results(dim, out_shape[dim], NEED)
        .build()
    )


@builtin("stablehlo.all_gather")
def _all_gather(op: OpInfo, conservative: bool) -> OpShardingRule:
    return _gather_or_scatter(op, "all_gather_dim")


@builtin("stablehlo.reduce_scatter")
def _reduce_scatter(op: OpInfo, conservative: bool) -> OpShardingRule:
    return _gather_or_scatter(op, "scatter_dimension")


@builtin("stablehlo.all_to_all")
def _all_to_all(op: OpInfo, conservative: bool) -> OpShardingRule:
    split, concat = attr_int(op, "split_dimension"), attr_int(op, "concat_dimension")
    in_shape, out_shape = operand_shape(op, 0), result_shape(op, 0)
    for d, what in ((split, "split_dimension"), (concat, "concat_dimension")):
        require_dim(op, d, in_shape, what)
        require_dim(op, d, out_shape, what)
    b = (
        RuleBuilder.for_op(op)
        .add_pointwise_if(in_shape, lambda d: d != split and d != concat)
        .add_factor_for_all_operands(split, in_shape[split], NEED)
        .add_factor_for_all_results(split, out_shape[split], NEED)
    )
    if split != concat:
        b.add_factor_for_all_operands(concat, in_shape[concat], NEED)
        b.add_factor_for_all_results(concat, out_shape[concat], NEED)
    return b.build()
