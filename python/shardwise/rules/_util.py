"""Helpers for rule functions written in Python (users' rules, the partitioner's CHLO rules):
the rule function type, shapes as Shardy sees them, and Shardy's pointwise rule."""

from __future__ import annotations

from collections.abc import Callable

from shardwise.rules.opinfo import DYNAMIC, OpInfo, ValueInfo
from shardwise.rules.rule import DYNAMIC_SIZE, OpShardingRule, RuleBuilder

#: A rule function: ``fn(op, conservative)`` gives the op's rule, or None for no rule.
RuleFunction = Callable[[OpInfo, bool], OpShardingRule | None]


def shape_of(v: ValueInfo) -> tuple[int, ...]:
    """A value's shape as Shardy sees it: ``()`` for non-tensors, dynamic sizes as
    ``DYNAMIC_SIZE`` (MLIR's ``kDynamic``)."""
    if not v.is_tensor:
        return ()
    return tuple(DYNAMIC_SIZE if d == DYNAMIC else d for d in v.shape)


def pointwise(op: OpInfo) -> OpShardingRule | None:
    """Shardy's ``buildPointwise``: no rule when the first result is not a tensor (or there is
    no result); otherwise factor ``d`` is dimension ``d`` of every value, sized by the first
    result."""
    if not op.results or not op.results[0].is_tensor:
        return None
    return RuleBuilder.pointwise(
        [v.rank if v.is_tensor else 0 for v in op.operands],
        [v.rank if v.is_tensor else 0 for v in op.results],
        shape_of(op.results[0]),
    )
