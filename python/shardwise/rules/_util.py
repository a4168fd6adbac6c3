"""Helpers shared by the rule families: the builtin rule table and shape access."""

from __future__ import annotations

from collections.abc import Callable

from shardwise.rules.exceptions import OpInfoError
from shardwise.rules.opinfo import DYNAMIC, OpInfo, ValueInfo
from shardwise.rules.rule import DYNAMIC_SIZE, OpShardingRule, RuleBuilder

#: A rule function: ``fn(op, conservative)`` gives the op's rule, or None for no rule.
RuleFunction = Callable[[OpInfo, bool], OpShardingRule | None]

#: Op name -> the builtin rule (Shardy's registry), filled by the family modules.
BUILTIN: dict[str, RuleFunction] = {}


def builtin(*names: str) -> Callable[[RuleFunction], RuleFunction]:
    """Registers the decorated function as the builtin rule of the ops ``names``."""

    def register(fn: RuleFunction) -> RuleFunction:
        for n in names:
            if n in BUILTIN:
                raise RuntimeError(f"two builtin rules for {n}")
            BUILTIN[n] = fn
        return fn

    return register


def shape_of(v: ValueInfo) -> tuple[int, ...]:
    """A value's shape as Shardy sees it: ``()`` for non-tensors, dynamic sizes as
    ``DYNAMIC_SIZE`` (MLIR's ``kDynamic``)."""
    if not v.is_tensor:
        return ()
    return tuple(DYNAMIC_SIZE if d == DYNAMIC else d for d in v.shape)


def operand(op: OpInfo, i: int, what: str = "") -> ValueInfo:
    if i >= len(op.operands):
        raise OpInfoError(
            f"{op.name}: expected at least {i + 1} operands{' (' + what + ')' if what else ''}, got {len(op.operands)}"
        )
    return op.operands[i]


def result(op: OpInfo, i: int, what: str = "") -> ValueInfo:
    if i >= len(op.results):
        raise OpInfoError(
            f"{op.name}: expected at least {i + 1} results{' (' + what + ')' if what else ''}, got {len(op.results)}"
        )
    return op.results[i]


def operand_shape(op: OpInfo, i: int, what: str = "") -> tuple[int, ...]:
    return shape_of(operand(op, i, what))


def result_shape(op: OpInfo, i: int, what: str = "") -> tuple[int, ...]:
    return shape_of(result(op, i, what))


def require_rank(op: OpInfo, shape: tuple[int, ...], at_least: int, what: str) -> None:
    if len(shape) < at_least:
        raise OpInfoError(f"{op.name}: expected {what} of rank >= {at_least}, got shape {shape}")


def require_dim(op: OpInfo, dim: int, shape: tuple[int, ...], what: str) -> None:
    if not 0 <= dim < len(shape):
        raise OpInfoError(f"{op.name}: expected {what} in [0, {len(shape)}) for shape {shape}, got {dim}")


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
