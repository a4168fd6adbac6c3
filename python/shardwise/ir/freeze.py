"""Freezing: the program IR as flat arrays in Rust (``rust/src/graph.rs``), for the solver.

Ops are numbered in pre-order over the module's top-level ops (the ``builtin.module`` itself is
not an op of the graph); an op's results are numbered when the op is met, then the arguments
of the blocks of its regions. ``Frozen`` keeps the Python objects behind each index so results
can be written back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardwise import _native
from shardwise.errors import ProgramError
from shardwise.ir.core import Module, Op, Value

if TYPE_CHECKING:
    from shardwise.rules.rule import OpShardingRule

_NONE = 2**32 - 1
#: ``Frozen.op_rule`` of an op without a rule.
NO_RULE = _NONE


class Frozen:
    """A frozen module: ``graph`` (the Rust arrays) and the ``ops`` / ``values`` behind each index."""

    __slots__ = ("graph", "ops", "values", "op_rule", "_op_index", "_value_index")

    def __init__(self, graph: _native.FrozenGraph, ops: list[Op], values: list[Value], op_rule: list[int] | None = None) -> None:
        self.graph = graph
        self.ops = ops
        self.values = values
        #: Per op, the index of its rule among the graph's distinct rules (``NO_RULE``: none);
        #: empty when frozen without rules.
        self.op_rule = op_rule or []
        self._op_index = {id(op): i for i, op in enumerate(ops)}
        self._value_index = {id(v): i for i, v in enumerate(values)}

    def op_index(self, op: Op) -> int:
        return self._op_index[id(op)]

    def value_index(self, v: Value) -> int:
        return self._value_index[id(v)]


def freeze(module: Module, *, rules: bool = True, conservative: bool = False) -> Frozen:
    """The module's ops and values as flat arrays (CSR operand/result/user lists, shapes) and,
    with ``rules``, each op's sharding rule (``shardwise.rules``; ``conservative`` picks
    Shardy's conservative variants), identical rules stored once.

    Raises ``ProgramError`` when an op uses a value that is not defined before it in pre-order,
    and what ``rule_for`` raises."""
    names: dict[str, int] = {}
    op_name: list[int] = []
    op_parent: list[int] = []
    operand_counts: list[int] = []
    operands: list[int] = []
    result_counts: list[int] = []
    results: list[int] = []
    ranks: list[int] = []
    dims: list[int] = []
    block_owner: list[int] = []
    ops: list[Op] = []
    values: list[Value] = []
    index: dict[int, int] = {}

    def add_value(v: Value, owner: int) -> int:
        index[id(v)] = len(values)
        values.append(v)
        shape = v.type.shape
        ranks.append(len(shape))
        dims.extend(shape)
        block_owner.append(owner)
        return len(values) - 1

    def visit(op: Op, parent: int) -> None:
        i = len(ops)
        ops.append(op)
        op_name.append(names.setdefault(op.name, len(names)))
        op_parent.append(parent)
        for v in op.operands:
            try:
                operands.append(index[id(v)])
            except KeyError:
                raise ProgramError(f"{op.where()}: uses {v} before it is defined") from None
        operand_counts.append(len(op.operands))
        results.extend(add_value(r, _NONE) for r in op.results)
        result_counts.append(len(op.results))
        for region in op.regions:
            for block in region.blocks:
                for a in block.args:
                    add_value(a, i)
                for inner in block.ops:
                    visit(inner, i)

    for op in module.ops:
        visit(op, _NONE)
    # A recursive closure refers to itself (and to the lists it fills): without this, the
    # cycle waits for the cyclic collector.
    del visit, add_value
    rule_wires: list[Any] = []
    op_rule: list[int] = []
    if rules:
        from shardwise.rules.from_ir import RuleCache

        distinct: dict[Any, int] = {}
        # Memoised rules are shared objects: one wire each. The rule is kept with its index
        # so that its id is not reused by a later rule while the map lives.
        by_object: dict[int, tuple[OpShardingRule, int]] = {}
        cache = RuleCache(module, conservative=conservative)
        for op in ops:  # pre-order, as ``rules_for`` asks them
            rule = cache.rule(op)
            if rule is None:
                op_rule.append(_NONE)
                continue
            seen = by_object.get(id(rule))
            if seen is None:
                w = rule._wire()
                known = distinct.setdefault(repr(w), len(rule_wires))
                if known == len(rule_wires):
                    rule_wires.append(w)
                by_object[id(rule)] = (rule, known)
            else:
                known = seen[1]
            op_rule.append(known)
    graph = _native.FrozenGraph(
        list(names), op_name, op_parent, operand_counts, operands, result_counts, results, ranks, dims, block_owner, rule_wires, op_rule
    )
    return Frozen(graph, ops, values, op_rule)
