"""The sharding rule registry: ``rule_for(op)`` gives exactly the rule Shardy's registry
creates for ``op`` (``shardy/dialect/sdy/transforms/propagation/op_sharding_rule_registry.cc``,
``getOrCreateShardingRule`` / ``createOpShardingRule``, as bundled in jaxlib 0.10.2), or
``None`` where Shardy creates none; plus the rules users register for their own ops and
custom-call targets.

Lookup order for an op:

1. an ``sdy.sharding_rule`` attribute already on the op (an ``#sdy.op_sharding_rule``) is
   kept as it is (Shardy never recomputes an existing rule; users' custom rules arrive this
   way from JAX);
2. a rule registered with ``register_rule`` for the op's custom-call target;
3. a rule function registered with ``register_op_rule`` for the op's name;
4. the builtin rule of the op (for ``stablehlo.custom_call``: of its target), computed by
   the core (``rust/src/rules/``, one op family per file);
5. ``None`` for ops Shardy deliberately leaves without a rule (constants, iota, control flow,
   function calls, sdy's own structural ops, tokens and I/O) and for terminators;
6. ``None`` and an ``UnknownOpWarning`` for anything else, as Shardy warns.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

from shardwise import _native
from shardwise.rules._util import RuleFunction
from shardwise.rules.exceptions import OpInfoError, UnknownOpWarning
from shardwise.rules.opinfo import OpInfo
from shardwise.rules.rule import OpShardingRule

__all__ = [
    "NO_RULE_OPS",
    "TERMINATOR_OPS",
    "RuleFunction",
    "builtin_custom_call_targets",
    "builtin_op_names",
    "has_user_rule",
    "has_user_rules",
    "register_op_rule",
    "register_rule",
    "rule_for",
    "silently_without_rule",
    "unregister_op_rule",
    "unregister_rule",
    "user_op_names",
]

#: The builtin registry's name lists (``rust/src/rules/``).
_REGISTRY = _native.rule_registry()

#: Ops Shardy's registry deliberately gives no rule, without a warning: they are handled
#: elsewhere (control flow, calls, data-flow edges, manual computations) or need no
#: propagation (constants, iota, tokens, I/O).
NO_RULE_OPS = frozenset(_REGISTRY.no_rule_ops)

#: Block terminators: no rule and no warning.
TERMINATOR_OPS = frozenset(_REGISTRY.terminator_ops)

#: Op names with a builtin rule (``stablehlo.custom_call`` included).
_BUILTIN_OPS = frozenset(_REGISTRY.builtin_ops)

_CUSTOM_CALL = "stablehlo.custom_call"
_USER_TARGETS: dict[str, RuleFunction] = {}
_USER_OPS: dict[str, RuleFunction] = {}


def _check_result(r: object, who: str) -> OpShardingRule | None:
    if r is not None and not isinstance(r, OpShardingRule):
        raise TypeError(f"{who} must return an OpShardingRule or None, got {type(r).__name__} {r!r}")
    return r


def silently_without_rule(name: str, attributes: Mapping[str, str]) -> bool:
    """``rule_for`` gives an op named ``name`` with ``attributes`` no rule, and no warning,
    whatever its operands and results: an op of ``NO_RULE_OPS`` or a terminator that has no
    builtin rule, no rule registered by the user and no ``sdy.sharding_rule`` attribute."""
    if name not in NO_RULE_OPS and name not in TERMINATOR_OPS:
        return False
    if name in _BUILTIN_OPS or name in _USER_OPS:
        return False
    existing = attributes.get("sdy.sharding_rule")
    return existing is None or not existing.lstrip().startswith("#sdy.op_sharding_rule")


def rule_for(op: OpInfo, *, conservative: bool = False) -> OpShardingRule | None:
    """The sharding rule of ``op``, or ``None`` when there is none (see the module docstring
    for the lookup order). ``conservative`` selects Shardy's conservative-propagation variants
    (concatenate, convolution, pad, slice, reduce_window, select_and_scatter), which block or
    drop the factors whose sharding would need communication.

    Raises ``OpInfoError`` when an attribute the rule needs is missing or malformed or the
    shapes do not fit the op, ``ShardingParseError`` / ``InvalidRuleError`` for a malformed
    existing ``sdy.sharding_rule`` attribute, and warns ``UnknownOpWarning`` for an op or
    custom-call target that neither the registry nor the user knows."""
    if not isinstance(op, OpInfo):
        raise TypeError(f"rule_for expects an OpInfo, got {type(op).__name__}")
    existing = op.attributes.get("sdy.sharding_rule")
    if existing is not None and existing.lstrip().startswith("#sdy.op_sharding_rule"):
        return OpShardingRule.parse(existing)
    target: str | None = None
    if op.name == _CUSTOM_CALL:
        target = _native.custom_call_target(op.name, list(op.attributes.items()))
        user_target = _USER_TARGETS.get(target)
        if user_target is not None:
            return _check_result(user_target(op, conservative), f"the rule registered for custom call @{target}")
    user = _USER_OPS.get(op.name)
    if user is not None:
        return _check_result(user(op, conservative), f"the rule registered for {op.name}")
    builtin = _native.builtin_rule(op, conservative)
    if builtin.rule is not None:
        return OpShardingRule._from_core(builtin.rule)
    if builtin.status == "unknown":
        if target is not None:
            message = (
                f"custom call @{target} has no sharding rule in shardwise's registry (nor in Shardy's); "
                "it gets none (register one with shardwise.rules.register_rule)"
            )
        else:
            message = (
                f"op {op.name!r} has no sharding rule in shardwise's registry (nor in Shardy's); it gets none "
                "(register one with shardwise.rules.register_op_rule)"
            )
        warnings.warn(message, UnknownOpWarning, stacklevel=2)
    return None


def builtin_op_names() -> frozenset[str]:
    """The op names with a builtin rule (``stablehlo.custom_call`` included: its targets are
    ``builtin_custom_call_targets()``)."""
    return _BUILTIN_OPS


def builtin_custom_call_targets() -> frozenset[str]:
    """The ``stablehlo.custom_call`` targets with a builtin rule."""
    return frozenset(_REGISTRY.custom_call_targets)


def register_rule(
    target: str,
    rule: str | RuleFunction,
    *,
    reduction_factors: Sequence[str] = (),
    need_replication_factors: Sequence[str] = (),
    permutation_factors: Sequence[str] = (),
    blocked_propagation_factors: Sequence[str] = (),
    factor_sizes: Mapping[str, int] | None = None,
    **sizes: int,
) -> None:
    """Registers the rule of ``stablehlo.custom_call`` ops with call target ``target``
    (replacing an earlier registration, and taking precedence over a builtin rule for the
    same target).

    ``rule`` is either JAX's einsum-like notation (``jax._src.
    custom_partitioning_sharding_rule.str_to_sdy_sharding_rule``): ``"i j, j k -> i k"``,
    compound dimensions ``(i j)``, a leading ``...`` for batching dimensions; with factor
    kinds by name and the sizes of factors that only appear in compound dimensions
    (``factor_sizes={"i": 2}`` or, as in JAX, ``i=2``). The rule is bound to each op's shapes
    and printed as a custom rule (``, custom``), as JAX and Shardy print it. Or ``rule`` is a
    function ``fn(op, conservative) -> OpShardingRule | None``.

    The notation is checked now: ``ShardingParseError`` for malformed text,
    ``InvalidRuleError`` for inconsistent names or sizes."""
    if not isinstance(target, str) or not target:
        raise TypeError(f"target must be a non-empty custom-call target name, got {target!r}")
    all_sizes = dict(factor_sizes or {})
    for k, v in sizes.items():
        if k in all_sizes:
            raise TypeError(f"size of factor {k!r} given twice")
        all_sizes[k] = v
    for k, v in all_sizes.items():
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"factor sizes must be ints, got {k}={v!r}")
    if callable(rule):
        if (
            reduction_factors
            or need_replication_factors
            or permutation_factors
            or blocked_propagation_factors
            or all_sizes
        ):
            raise TypeError("factor kinds and sizes only apply to a rule given in the einsum-like notation")
        _USER_TARGETS[target] = rule
        return
    if not isinstance(rule, str):
        raise TypeError(f"rule must be a str in the einsum-like notation or a function, got {type(rule).__name__}")
    kinds = {
        "reduction": tuple(reduction_factors),
        "need_replication": tuple(need_replication_factors),
        "permutation": tuple(permutation_factors),
        "blocked": tuple(blocked_propagation_factors),
    }
    for name, names in kinds.items():
        if isinstance(names, str) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"{name} factors must be a sequence of factor names, got {names!r}")
    size_list = sorted(all_sizes.items())
    _native.einsum_check(
        rule,
        list(kinds["reduction"]),
        list(kinds["need_replication"]),
        list(kinds["permutation"]),
        list(kinds["blocked"]),
        size_list,
    )

    def einsum_rule(op: OpInfo, conservative: bool) -> OpShardingRule:
        for v in op.operands + op.results:
            if not v.is_tensor:
                raise OpInfoError(
                    f"custom call @{target}: the einsum-like rule {rule!r} needs tensor operands and results, got {v!r}"
                )
        return OpShardingRule.from_einsum(
            rule,
            [v.shape for v in op.operands],
            [v.shape for v in op.results],
            reduction_factors=kinds["reduction"],
            need_replication_factors=kinds["need_replication"],
            permutation_factors=kinds["permutation"],
            blocked_propagation_factors=kinds["blocked"],
            factor_sizes=all_sizes,
        )

    _USER_TARGETS[target] = einsum_rule


def register_op_rule(op_name: str, fn: RuleFunction) -> None:
    """Registers ``fn(op, conservative) -> OpShardingRule | None`` as the rule of every op
    named ``op_name`` (e.g. ``"mydialect.my_op"``), replacing an earlier registration and
    taking precedence over the builtin rule. ``shardwise.rules.RuleBuilder.for_op(op)`` builds
    rules the way Shardy's builder does."""
    if not isinstance(op_name, str) or "." not in op_name:
        raise TypeError(f"op_name must be a dialect-qualified op name such as 'mydialect.op', got {op_name!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    _USER_OPS[op_name] = fn


def unregister_rule(target: str) -> bool:
    """Removes the rule registered for custom-call ``target``; whether there was one."""
    return _USER_TARGETS.pop(target, None) is not None


def unregister_op_rule(op_name: str) -> bool:
    """Removes the rule function registered for ``op_name``; whether there was one."""
    return _USER_OPS.pop(op_name, None) is not None


def user_op_names() -> set[str]:
    """The op names a rule function is registered for (``register_op_rule``)."""
    return set(_USER_OPS)


def has_user_rule(op_name: str, attributes: dict[str, str]) -> bool:
    """A rule the user registered applies to an op named ``op_name`` with ``attributes``
    (``register_op_rule`` for the name, or ``register_rule`` for a custom call's target)."""
    if op_name in _USER_OPS:
        return True
    if op_name == _CUSTOM_CALL and _USER_TARGETS:
        return _native.custom_call_target(op_name, list(attributes.items())) in _USER_TARGETS
    return False


def has_user_rules() -> bool:
    """A rule is registered by the user (``register_rule`` or ``register_op_rule``)."""
    return bool(_USER_OPS or _USER_TARGETS)


def is_user_op(op_name: str) -> bool:
    """A rule function is registered for ``op_name`` (``register_op_rule``)."""
    return op_name in _USER_OPS
