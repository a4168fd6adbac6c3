"""The search problem of one function (``auto.build_problem`` builds it): its nodes (function
arguments, its ops and the ops and carried values of its while loops, with their strategies
and costs), the value edges between them,
loop-carried results, and the strategy graph every solver reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from shardwise.ir.core import Func, Module, Op, Value
from shardwise.mesh import Mesh
from shardwise.rules.rule import OpShardingRule
from shardwise.search.cost_model import DeviceModel, OpCost, ReshardCache
from shardwise.search.graph import StrategyGraph
from shardwise.search.strategies import Strategy

__all__ = ["AutoProblem", "Carried", "Edge", "Node"]


@dataclass
class Node:
    """A node of the search: a function argument (``op`` is ``None``, ``values`` its one value)
    or an op (``values`` its results). ``strategies`` / ``costs`` align; ``configured``: the
    user sharded it (its strategies are restricted, and the result never overrides the user);
    ``step``: its program-order step; ``label``: ``%argN`` or ``op.name`` with its location
    (``... carry i`` for a loop-carried value)."""

    label: str
    op: Op | None
    values: tuple[Value, ...]
    rule: OpShardingRule | None
    strategies: list[Strategy]
    costs: list[OpCost]
    step: int
    configured: bool = False
    extra_seconds: list[float] = field(default_factory=list)
    extra_bytes: list[float] = field(default_factory=list)
    #: How many times the op runs per call of the function: the product of the trip counts of
    #: the loops around it (``ir.loops.times``); its costs count that many times.
    times: int = 1
    #: For a data-flow edge of ``op``: which one. A ``stablehlo.while``'s carried value (its
    #: result, the block arguments of cond and body and its operand, one sharding), a
    #: ``stablehlo.case``'s result (and what each branch returns) or an operand or result of an
    #: ``sdy.manual_computation`` (``manual_side``); ``None`` otherwise.
    carry_index: int | None = None
    #: For an ``sdy.manual_computation``'s boundary: ``"in"`` (operand ``carry_index``: its
    #: strategies' operand is the global in-sharding, their result the body argument's
    #: sharding over the free axes) or ``"out"`` (result ``carry_index``: operand the returned
    #: value's sharding over the free axes, result the global out-sharding); ``None`` otherwise.
    manual_side: str | None = None


@dataclass(frozen=True)
class Edge:
    """Value ``value`` from result ``result`` of node ``src`` to operand ``operand`` of node
    ``dst``, moved ``times`` times per call (the consumer's count; a loop body's yielded value
    going back to its carried value: the body's)."""

    src: int
    result: int
    dst: int
    operand: int
    value: Value
    times: int = 1


@dataclass(frozen=True)
class Carried:
    """A loop-carried result: result ``result`` of node ``src`` (``value``) is read back as the
    argument of node ``arg`` by the next step."""

    arg: int
    src: int
    result: int
    value: Value


@dataclass
class AutoProblem:
    """The search problem of one function: ``nodes``, value ``edges``, the strategy ``graph``
    (one graph edge per node pair; node ``i`` of the graph is ``nodes[i]``), the mesh it is
    on and the reshard plans computed (``reshards``)."""

    module: Module
    func: Func
    mesh: Mesh
    mesh_name: str
    device: DeviceModel
    nodes: list[Node]
    edges: list[Edge]
    graph: StrategyGraph
    reshards: ReshardCache
    carry: tuple[tuple[int, int], ...] = ()
    carried: tuple[Carried, ...] = ()
