"""Operation sharding rules: Shardy's ``#sdy.op_sharding_rule`` and its registry.

``OpShardingRule`` holds a rule (factors with sizes, the factors of every operand and result
dimension, factor kinds, blocked factors, the custom flag) and prints Shardy's text;
``RuleBuilder`` builds rules like Shardy's ``OpShardingRuleBuilder``; ``rule_for(op)`` gives
the rule Shardy's registry gives an op described by ``OpInfo``; ``register_rule`` and
``register_op_rule`` add users' rules.

The builtin rules are the core's (``rust/src/rules/``: one op family per file, each
mirroring its part of Shardy's ``op_sharding_rule_registry.cc``).
"""

from shardwise.rules.exceptions import InvalidRuleError, OpInfoError, UnknownOpWarning
from shardwise.rules.opinfo import DYNAMIC, BlockInfo, OpInfo, ValueInfo
from shardwise.rules.registry import (
    NO_RULE_OPS,
    TERMINATOR_OPS,
    RuleFunction,
    builtin_custom_call_targets,
    builtin_op_names,
    register_op_rule,
    register_rule,
    rule_for,
    unregister_op_rule,
    unregister_rule,
)
from shardwise.rules.rule import DYNAMIC_SIZE, NULL_DIM, FactorKind, OpShardingRule, RuleBuilder

__all__ = [
    "DYNAMIC",
    "DYNAMIC_SIZE",
    "NO_RULE_OPS",
    "NULL_DIM",
    "TERMINATOR_OPS",
    "BlockInfo",
    "FactorKind",
    "InvalidRuleError",
    "OpInfo",
    "OpInfoError",
    "OpShardingRule",
    "RuleBuilder",
    "RuleFunction",
    "UnknownOpWarning",
    "ValueInfo",
    "builtin_custom_call_targets",
    "builtin_op_names",
    "register_op_rule",
    "register_rule",
    "rule_for",
    "unregister_op_rule",
    "unregister_rule",
]
