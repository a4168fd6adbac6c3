"""Rules for the ops of a program IR module: ``OpInfo`` views of IR ops, and
``populate_rules`` (Shardy's ``sdy-populate-op-sharding-rules`` pass: every op that has a rule
gets a ``sdy.sharding_rule`` attribute, existing ones are kept)."""

from __future__ import annotations

from shardwise import _native
from shardwise.ir.core import Module, Op, Value
from shardwise.ir.types import TensorType
from shardwise.rules.opinfo import BlockInfo, OpInfo, ValueInfo
from shardwise.rules.registry import is_user_op, rule_for, silently_without_rule
from shardwise.rules.rule import OpShardingRule

__all__ = ["CONTEXT_OPS", "RuleCache", "op_infos", "populate_rules", "rules_for"]


#: Ops whose rule reads more than the op itself (its name, attributes and value types): the
#: producers of its operands (``concatenate``, ``dynamic_update_slice``), its region
#: (``scatter``), or its results' users (custom calls). Their rules are never memoised.
CONTEXT_OPS = frozenset(_native.rule_registry().context_ops)


class _Converter:
    """``OpInfo`` views of IR ops, built on demand: values seen from their producer and from
    their users share a ``value_id``; an operand's ``defining_op`` is its producer's full view
    when that was built first, else a view of the producer whose own operands have no producer
    (rules read one producer deep)."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.ids: dict[int, int] = {}
        self.infos: dict[int, OpInfo] = {}
        self.used: dict[int, ValueInfo] = {}
        self._users: dict[int, set[str]] | None = None

    @property
    def users(self) -> dict[int, set[str]]:
        if self._users is None:
            self._users = {}
            for op in self.module.walk():
                for v in op.operands:
                    self._users.setdefault(id(v), set()).add(op.name)
        return self._users

    def _value(self, v: Value, defining: OpInfo | None) -> ValueInfo:
        vid = self.ids.setdefault(id(v), len(self.ids))
        users = tuple(sorted(self.users.get(id(v), ())))
        if isinstance(v.type, TensorType):
            return ValueInfo(v.type.shape, v.type.element_type, defining, vid, True, users)
        return ValueInfo((), str(v.type), defining, vid, False, users)

    def _operand(self, v: Value, deep: bool = True) -> ValueInfo:
        info = self.used.get(id(v))
        if info is None:
            owner = v.defining_op
            defining = None if owner is None else self.infos.get(id(owner))
            if defining is None and owner is not None and deep:
                defining = self.op(owner, deep=False)
            info = self._value(v, defining)
            if defining is not None or owner is None:
                self.used[id(v)] = info
        return info

    def op(self, op: Op, deep: bool = True) -> OpInfo:
        known = self.infos.get(id(op))
        if known is not None:
            return known
        regions = tuple(
            tuple(
                BlockInfo(tuple(self._operand(a) for a in b.args), tuple(self.op(o) for o in b.ops)) for b in r.blocks
            )
            for r in op.regions
        )
        operands = tuple(self._operand(v, deep) for v in op.operands)
        info = OpInfo(op.name, operands, tuple(self._value(r, None) for r in op.results), dict(op.attributes), regions)
        if deep:
            self.infos[id(op)] = info
        return info


def _plain_info(op: Op) -> OpInfo:
    """The view of an op whose rule reads only the op itself: no producers, users, ids or
    regions."""

    def value(v: Value) -> ValueInfo:
        t = v.type
        if isinstance(t, TensorType):
            return ValueInfo(t.shape, t.element_type, None, None, True)
        return ValueInfo((), str(t), None, None, False)

    return OpInfo(
        op.name, tuple(value(v) for v in op.operands), tuple(value(r) for r in op.results), dict(op.attributes)
    )


def op_infos(module: Module) -> dict[int, OpInfo]:
    """``id(op)`` -> ``OpInfo`` for every op of ``module`` (nested ones included)."""
    c = _Converter(module)
    for op in module.walk():
        c.op(op)
    return c.infos


class RuleCache:
    """The sharding rule of each op of ``module``, computed on first request.

    Rules are memoised per (op name, attributes, operand and result types) for ops whose rule
    reads nothing else (all but ``CONTEXT_OPS`` and ops with a rule registered by the user; no
    other builtin rule reads a region): a transformer step repeats a few dozen
    op signatures thousands of times. An op without a rule is never memoised, so each one
    still warns ``UnknownOpWarning``. The module must not change while the cache is used."""

    def __init__(self, module: Module, *, conservative: bool = False) -> None:
        self.module = module
        self.conservative = conservative
        self._converter: _Converter | None = None
        self._memo: dict[tuple[object, ...], OpShardingRule] = {}

    def rule(self, op: Op) -> OpShardingRule | None:
        """``op``'s rule (``None`` where Shardy has none); raises what ``rule_for`` raises."""
        name = op.name
        if name not in CONTEXT_OPS and not is_user_op(name):
            if silently_without_rule(name, op.attributes):  # constants, terminators, ...
                return None
            key = (
                name,
                tuple(op.attributes.items()),
                tuple([v.type for v in op.operands]),
                tuple([r.type for r in op.results]),
            )
            cached = self._memo.get(key)
            if cached is not None:
                return cached
            rule = rule_for(_plain_info(op), conservative=self.conservative)
            if rule is not None:
                self._memo[key] = rule
            return rule
        if self._converter is None:
            self._converter = _Converter(self.module)
        return rule_for(self._converter.op(op), conservative=self.conservative)


def rules_for(module: Module, *, conservative: bool = False) -> dict[int, OpShardingRule | None]:
    """``id(op)`` -> the op's sharding rule (``None`` where Shardy has none), in walk order
    (memoised as ``RuleCache`` says)."""
    cache = RuleCache(module, conservative=conservative)
    return {id(op): cache.rule(op) for op in module.walk()}


def populate_rules(module: Module, *, conservative: bool = False) -> int:
    """Sets ``sdy.sharding_rule`` on every op that has a rule and none yet, as Shardy's
    ``sdy-populate-op-sharding-rules`` does; returns how many ops got one. Raises what
    ``rule_for`` raises (``OpInfoError`` naming the op) and warns ``UnknownOpWarning``."""
    added = 0
    rules = rules_for(module, conservative=conservative)
    for op in module.walk():
        rule = rules[id(op)]
        if rule is not None and "sdy.sharding_rule" not in op.attributes:
            op.attributes["sdy.sharding_rule"] = str(rule)
            added += 1
    return added
