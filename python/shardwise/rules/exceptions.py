"""Warnings and errors of the operation sharding rule registry.

``UnknownOpWarning`` (a ``UserWarning``): the registry has no rule for an op or a custom-call
target, and Shardy has none either (``rule_for`` then returns ``None``, as Shardy leaves such
ops without a rule and warns).

``OpInfoError`` (a ``ShardwiseError``, hence a ``ValueError``): an ``OpInfo`` cannot be read,
for example an attribute the rule needs is missing or its text is malformed, or the operand
and result shapes do not fit the op.

``InvalidRuleError`` (a subclass of ``InvalidShardingError``): a rule breaks an invariant, or
cannot be built for an op; ``.rule`` names the broken invariant (the identifiers are listed in
``rust/src/rule.rs``, ``rust/src/rule/builder.rs`` and ``rust/src/rule/einsum.rs``).
"""

from __future__ import annotations

from shardwise.errors import InvalidRuleError, OpInfoError

__all__ = ["InvalidRuleError", "OpInfoError", "UnknownOpWarning"]


class UnknownOpWarning(UserWarning):
    """An op (or custom-call target) unknown to the sharding rule registry: no rule is made."""
