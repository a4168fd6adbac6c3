"""Rules for the ops of a program IR module: ``OpInfo`` views of IR ops, and
``populate_rules`` (Shardy's ``sdy-populate-op-sharding-rules`` pass: every op that has a rule
gets a ``sdy.sharding_rule`` attribute, existing ones are kept)."""

from __future__ import annotations

from shardwise.ir.core import Module, Op, Value
from shardwise.ir.types import TensorType
from shardwise.rules.opinfo import BlockInfo, OpInfo, ValueInfo
from shardwise.rules.registry import rule_for
from shardwise.rules.rule import OpShardingRule

__all__ = ["op_infos", "populate_rules", "rules_for"]


class _Converter:
    """One ``OpInfo`` per IR op; values seen from their producer and from their users share a
    ``value_id``."""

    def __init__(self, module: Module) -> None:
        self.ids: dict[int, int] = {}
        self.infos: dict[int, OpInfo] = {}
        self.users: dict[int, set[str]] = {}
        self.used: dict[int, ValueInfo] = {}
        for op in module.walk():
            for v in op.operands:
                self.users.setdefault(id(v), set()).add(op.name)

    def _value(self, v: Value, defining: OpInfo | None) -> ValueInfo:
        vid = self.ids.setdefault(id(v), len(self.ids))
        users = tuple(sorted(self.users.get(id(v), ())))
        if isinstance(v.type, TensorType):
            return ValueInfo(v.type.shape, v.type.element_type, defining, vid, True, users)
        return ValueInfo((), str(v.type), defining, vid, False, users)

    def _operand(self, v: Value) -> ValueInfo:
        info = self.used.get(id(v))
        if info is None:
            owner = v.defining_op
            info = self._value(v, None if owner is None else self.infos.get(id(owner)))
            self.used[id(v)] = info
        return info

    def op(self, op: Op) -> OpInfo:
        regions = tuple(
            tuple(BlockInfo(tuple(self._operand(a) for a in b.args), tuple(self.op(o) for o in b.ops)) for b in r.blocks)
            for r in op.regions
        )
        info = OpInfo(op.name, tuple(self._operand(v) for v in op.operands), tuple(self._value(r, None) for r in op.results), dict(op.attributes), regions)
        self.infos[id(op)] = info
        return info


def op_infos(module: Module) -> dict[int, OpInfo]:
    """``id(op)`` -> ``OpInfo`` for every op of ``module`` (nested ones included)."""
    c = _Converter(module)
    for op in module.ops:
        c.op(op)
    return c.infos


def rules_for(module: Module, *, conservative: bool = False) -> dict[int, OpShardingRule | None]:
    """``id(op)`` -> the op's sharding rule (``None`` where Shardy has none), in walk order."""
    infos = op_infos(module)
    return {id(op): rule_for(infos[id(op)], conservative=conservative) for op in module.walk()}


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
