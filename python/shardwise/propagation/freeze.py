"""Freezing: the program IR as flat arrays in Rust (``rust/src/graph.rs``), for the solver.

Ops are numbered in pre-order over the module's top-level ops (the ``builtin.module`` itself is
not an op of the graph); an op's results are numbered when the op is met, then the arguments
of the blocks of its regions. ``Frozen`` keeps the Python objects behind each index so results
can be written back.

It is the bridge from the IR to the Rust solver and reads each op's sharding rule, so it sits
above both ``shardwise.ir`` and ``shardwise.rules``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardwise import _native
from shardwise.errors import ProgramError
from shardwise.ir.core import Module, Op, Value
from shardwise.ir.types import TensorType
from shardwise.rules.from_ir import CONTEXT_OPS, RuleCache
from shardwise.rules.registry import silently_without_rule, user_op_names

if TYPE_CHECKING:
    from shardwise.rules.rule import OpShardingRule

_NONE = 2**32 - 1
#: ``Frozen.op_rule`` of an op without a rule.
NO_RULE = _NONE


#: Index lookups a ``Frozen`` answers by searching its lists before it builds maps for them.
_SEARCHED_LOOKUPS = 8


class Frozen:
    """A frozen module: ``graph`` (the Rust arrays), the ``ops`` / ``values`` behind each index,
    and ``walk`` (what the Rust walk collected on the way: ``_native.ProgramWalk``)."""

    __slots__ = ("graph", "ops", "values", "walk", "_op_rule", "_op_index", "_value_index", "_lookups")

    def __init__(
        self, graph: _native.FrozenGraph, ops: list[Op], values: list[Value], walk: _native.ProgramWalk
    ) -> None:
        self.graph = graph
        self.ops = ops
        self.values = values
        self.walk = walk
        self._op_rule: list[int] | None = None
        # Maps from object to index, built at the first lookup past ``_SEARCHED_LOOKUPS``: a
        # propagation asks for a few (its functions), and a search of the list (in C, by
        # identity: IR objects define no equality) costs less than a map of every op.
        self._op_index: dict[int, int] | None = None
        self._value_index: dict[int, int] | None = None
        self._lookups = 0

    @property
    def op_rule(self) -> list[int]:
        """Per op, the index of its rule among the graph's distinct rules (``NO_RULE``: none;
        every op when frozen without rules)."""
        if self._op_rule is None:
            self._op_rule = self.graph.op_rules
        return self._op_rule

    def op_index(self, op: Op) -> int:
        """``op``'s index; ``KeyError`` when it is not an op of the frozen module."""
        if self._op_index is None:
            self._lookups += 1
            if self._lookups <= _SEARCHED_LOOKUPS:
                return _search(self.ops, op)
            self._op_index = {id(o): i for i, o in enumerate(self.ops)}
        return self._op_index[id(op)]

    def value_index(self, v: Value) -> int:
        """``v``'s index; ``KeyError`` when it is not a value of the frozen module."""
        if self._value_index is None:
            self._lookups += 1
            if self._lookups <= _SEARCHED_LOOKUPS:
                return _search(self.values, v)
            self._value_index = {id(x): i for i, x in enumerate(self.values)}
        return self._value_index[id(v)]


def _search(items: list[Any], item: object) -> int:
    try:
        return items.index(item)
    except ValueError:
        raise KeyError(id(item)) from None


def freeze(module: Module, *, rules: bool = True, conservative: bool = False) -> Frozen:
    """The module's ops and values as flat arrays (CSR operand/result/user lists, shapes) and,
    with ``rules``, each op's sharding rule (``shardwise.rules``; ``conservative`` picks
    Shardy's conservative variants), identical rules stored once.

    Raises ``ProgramError`` when an op uses a value that is not defined before it in pre-order,
    ``RecursionError`` for regions nested more than 2048 deep, and what ``rule_for`` raises."""
    # The walk, the numbering and the signature classes run in Rust (``rust/src/py/walk.rs``):
    # ops of one class (name, attributes, operand and result types) share one rule, except
    # those whose rule reads more than the op (``CONTEXT_OPS``, ops with a user's rule).
    walk, ops, values, undefined = _native.walk_program(module.ops, set(CONTEXT_OPS) | user_op_names(), TensorType)
    if undefined is not None:
        op = ops[undefined[0]]
        raise ProgramError(f"{op.where()}: uses {op.operands[undefined[1]]} before it is defined")
    rule_cores: list[_native.Rule] = []
    class_rule: list[int] = []
    if rules:
        distinct: dict[_native.Rule, int] = {}
        # Memoised rules are shared objects: one core each. The rule is kept with its index
        # so that its id is not reused by a later rule while the map lives.
        by_object: dict[int, tuple[OpShardingRule, int]] = {}
        cache = RuleCache(module, conservative=conservative)
        members: dict[int, list[int]] | None = None
        for c, rep in enumerate(walk.class_reps):  # in pre-order of first ops, as ``rules_for`` asks them
            op = ops[rep]
            rule = cache.rule(op)
            if rule is None:
                if not silently_without_rule(op.name, op.attributes):
                    # Unknown to the registry: each op of the class asked (each warns). The
                    # classes' members are listed once, not searched for class by class.
                    if members is None:
                        members = {}
                        for i, k in enumerate(walk.op_classes):
                            members.setdefault(k, []).append(i)
                    for i in members[c]:
                        if i > rep:
                            cache.rule(ops[i])
                class_rule.append(_NONE)
                continue
            seen = by_object.get(id(rule))
            if seen is None:
                core = rule._native_rule()
                known = distinct.setdefault(core, len(rule_cores))
                if known == len(rule_cores):
                    rule_cores.append(core)
                by_object[id(rule)] = (rule, known)
            else:
                known = seen[1]
            class_rule.append(known)
    graph = _native.FrozenGraph.from_walk(walk, rule_cores, class_rule)
    return Frozen(graph, ops, values, walk)
