"""``dot_general`` and ``dot`` (Shardy ``op_sharding_rule_registry.cc``): batching dimensions,
then lhs and rhs non-contracting dimensions (all pass-through, in result order), then
contracting dimensions (reduction)."""

from __future__ import annotations

from shardwise.rules._util import builtin, operand_shape
from shardwise.rules.attrs import attr_struct, struct_list
from shardwise.rules.exceptions import OpInfoError
from shardwise.rules.opinfo import OpInfo
from shardwise.rules.rule import FactorKind, OpShardingRule, RuleBuilder


@builtin("stablehlo.dot_general")
def _dot_general(op: OpInfo, conservative: bool) -> OpShardingRule:
    nums = attr_struct(op, "dot_dimension_numbers", "dot")
    lhs_batch = struct_list(nums, "lhs_batching_dimensions")
    rhs_batch = struct_list(nums, "rhs_batching_dimensions")
    lhs_contract = struct_list(nums, "lhs_contracting_dimensions")
    rhs_contract = struct_list(nums, "rhs_contracting_dimensions")
    if len(lhs_batch) != len(rhs_batch) or len(lhs_contract) != len(rhs_contract):
        raise OpInfoError(f"{op.name}: expected as many lhs as rhs batching and contracting dimensions, got {nums}")
    lhs, rhs = operand_shape(op, 0, "lhs"), operand_shape(op, 1, "rhs")
    for d in lhs_batch + lhs_contract:
        if not 0 <= d < len(lhs):
            raise OpInfoError(f"{op.name}: lhs dimension {d} out of range for shape {lhs}")
    b = RuleBuilder.for_op(op)
    out = 0
    for ld, rd in zip(lhs_batch, rhs_batch):
        b.add_factor([ld, rd], out, lhs[ld])
        out += 1
    for i, size in enumerate(lhs):
        if i not in lhs_contract and i not in lhs_batch:
            b.add_factor([i, -1], out, size)
            out += 1
    for i, size in enumerate(rhs):
        if i not in rhs_contract and i not in rhs_batch:
            b.add_factor([-1, i], out, size)
            out += 1
    for ld, rd in zip(lhs_contract, rhs_contract):
        b.add_factor([ld, rd], -1, lhs[ld], FactorKind.REDUCTION)
    return b.build()


@builtin("stablehlo.dot")
def _dot(op: OpInfo, conservative: bool) -> OpShardingRule:
    lhs, rhs = operand_shape(op, 0, "lhs"), operand_shape(op, 1, "rhs")
    if not rhs:
        raise OpInfoError(f"{op.name}: expected a rhs of rank 1 or 2, got shape {rhs}")
    lhs_matrix, rhs_matrix = len(lhs) == 2, len(rhs) == 2
    b = RuleBuilder.for_op(op)
    if lhs_matrix:
        b.add_factor([0, -1], 0, lhs[0])
    if rhs_matrix:
        b.add_factor([-1, 1], 1 if lhs_matrix else 0, rhs[1])
    b.add_factor([1 if lhs_matrix else 0, 0], -1, rhs[0], FactorKind.REDUCTION)
    return b.build()
