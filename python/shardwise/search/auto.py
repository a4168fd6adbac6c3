"""``auto_shard``: cost-based sharding of a whole program (issue 8; Alpa's intra-operator ILP as
the hidet RFC describes it, ``shared/references/hidet-auto-parallel-rfc.md``, and MindSpore's
sharding propagation, ``bfs.py``).

0. Calls are inlined first (``spmd.partition.inline``, as XLA's ``CallInliner`` before its
   partitioner): each call site of ``jax.nn.relu``, a flax layer or an optax update gets its
   own strategies, and the module returned is the inlined one.
1. Each function argument and each top-level op of the function is a node; its strategies come
   from its factor rule (``strategies.py``), its costs from ``cost_model.py``. A
   ``stablehlo.while`` (``lax.scan``, ``fori_loop``, flax's ``nn.scan``) is searched inside: one
   node per carried tensor (its operand, result and block arguments share one sharding, Shardy's
   data-flow edge), whose strategies are the value's, and a node per op of its cond and body,
   whose costs and reshards count ``trip_count`` times (``ir/loops.py``; the cond's one more).
   A ``stablehlo.case`` (``lax.cond``, ``lax.switch``) likewise: a node per op of every branch,
   each counted once as if its branch ran (an upper bound), and a node per result. An
   ``sdy.manual_computation`` (``jax.shard_map``): a node per operand and per result (its in-
   or out-sharding's free dimensions, decided with the body value; the manual axes as the user
   wrote them) and a node per body op on its local types, with strategies over the free axes
   only (none when every axis is manual). Values the user
   already sharded are configured: an argument with a sharding has only the strategies it
   allows, an op whose result has a sharding keeps only strategies giving one it allows (a
   closed dimension as written, an open one its axes then any more: ``strategies.allows``;
   when none does, one strategy with the user's result shardings and replicated operands
   stands for it); fully closed ones are left as the user wrote them. Ops
   without a rule have one strategy: replicated operands and results.
2. Each producer -> consumer value is an edge whose matrix is the resharding seconds from the
   producer's result sharding to the consumer's operand sharding (``plan_reshard``); several
   values between the same two nodes add up. A function result with a user sharding adds
   the reshard to it to its producer's own cost.
3. Liveness: the program order (a loop's cond and body ops in place of the loop) gives
   arguments step 0 and the ``j``-th op step ``j + 1``; a node lives over
   ``[its step, last use + 1)`` (results returned by the function live to the end, a loop's
   carried values and the values its body yields back to the end of the loop) and uses its
   results' bytes per device; ``memory_budget`` bounds the total at every step.
4. ``solve`` (``ilp``, ``local``, ``auto``) or ``solve_bfs`` picks one strategy per node.
5. The chosen sharding of every decided value is written as a closed sharding (function
   argument shardings, op result shardings) on a copy of the module; ``shardwise.propagate``
   completes the rest (nested regions, ops without a rule), as Shardy's auto-partitioner hook
   runs after user-priority propagation.

Followers are not merged into their operands here: the solvers' own reductions
(``search/reduce.py``) fold single-strategy nodes and the ILP handles the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from shardwise.api import propagate
from shardwise.errors import InfeasibleBudget, ProgramError, SearchError
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.loops import UNKNOWN_TRIPS, trip_count
from shardwise.ir.rewrite import insert_before
from shardwise.ir.sdy import manual_axes
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.rules.from_ir import RuleCache
from shardwise.rules.rule import OpShardingRule
from shardwise.search.baselines import Plan, complete_plan, inferred_plans
from shardwise.search.bfs import solve_bfs
from shardwise.search.bound import bound_for
from shardwise.search.cost_model import (
    PS,
    DeviceModel,
    OpCost,
    ReshardCache,
    local_bytes,
    op_cost,
)
from shardwise.search.graph import StrategyGraph
from shardwise.search.local import Solution, check_time_limit
from shardwise.search.op_strategy import STRATEGY_ATTR, select_strategy
from shardwise.search.problem import AutoProblem, Carried, Edge, Node
from shardwise.search.report import Report, make_report
from shardwise.search.solve import solve
from shardwise.search.strategies import (
    DEFAULT_MAX_STRATEGIES,
    Strategy,
    allows,
    enumerate_strategies,
    free_mesh,
    is_closed,
    manual_boundary,
    replicated,
    value_strategies,
)
from shardwise.sharding import TensorSharding
from shardwise.spmd.partition.chlo_rules import chlo_rules
from shardwise.spmd.partition.coverage import replicated_dims
from shardwise.spmd.partition.inline import inline_calls

__all__ = [
    "AUTO_METHODS",
    "AutoProblem",
    "Edge",
    "Node",
    "apply_solution",
    "auto_shard",
    "build_problem",
    "parse_bytes",
    "resolve_mesh",
]

Progress = Callable[[str, int, int], None]
F64 = npt.NDArray[np.float64]


def resolve_mesh(module: Module, mesh: Mesh | Mapping[str, int] | str | None) -> tuple[str, Mesh]:
    """Puts ``mesh`` on ``module`` (in place) and returns ``(name, mesh)``: it redefines the
    module's only mesh (same name) or adds ``@mesh``; ``None`` keeps the module's only mesh.
    ``mesh`` is a ``Mesh``, a mapping axis -> size or text ``data=2,model=4``. Raises
    :class:`ProgramError` when the module has several meshes, or none and ``mesh`` is None."""
    meshes = module.meshes
    if len(meshes) > 1:
        raise ProgramError(f"auto_shard: expected a module with at most one sdy.mesh, got {sorted(meshes)}")
    if mesh is None:
        if not meshes:
            raise ProgramError("auto_shard: the module has no sdy.mesh; pass mesh= (e.g. {'data': 2, 'model': 4})")
        return next(iter(meshes.items()))
    m = Mesh.from_spec(mesh)
    name = next(iter(meshes)) if meshes else "mesh"
    if meshes:
        used = _axes_used(module)
        missing = sorted(used - set(m.axis_names))
        if missing:
            raise ProgramError(
                f"auto_shard: mesh {m} has no axis {', '.join(repr(a) for a in missing)}, which the module's shardings on "
                f"@{name} = {meshes[name]} use; give the new mesh those axis names, or a module without shardings"
            )
    module.add_mesh(name, m)
    return name, m


def _axes_used(module: Module) -> set[str]:
    """The mesh axis names any sharding of ``module`` refers to."""
    names: set[str] = set()

    def add(s: TensorSharding | None) -> None:
        if s is not None:
            names.update(a.name for d in s.dims for a in d.axes)
            names.update(a.name for a in (*s.replicated, *s.unreduced))

    for v in module.values():
        add(v.sharding)
    for op in module.walk():
        for s in op.operand_shardings or ():
            add(s)
    for f in module.funcs:
        for r in f.result_shardings:
            add(r)
    return names


def _main_func(module: Module) -> Func:
    funcs = [f for f in module.funcs if f.regions[0].blocks]
    for f in funcs:
        if f.sym_name == "main":
            return f
    if len(funcs) == 1:
        return funcs[0]
    raise ProgramError(
        f"auto_shard: expected a function @main (or exactly one function), got {[f.sym_name for f in funcs]}"
    )


def _dims(s: TensorSharding) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(str(a) for a in d.axes) for d in s.dims)


def _rank(v: Value) -> int:
    return len(v.type.shape) if isinstance(v.type, TensorType) else 0


def _computable(op: Op, strategies: list[Strategy]) -> list[Strategy]:
    """The strategies the partitioner computes as they are: none shards a dimension
    ``replicated_dims`` says must stay replicated around ``op`` (a dynamic_update_slice's
    updated dimension, a slice's sliced one, ...). The partitioner would reshard such a
    dimension to replicated and back (``spmd.partition.coverage``), bytes the strategy would not
    count; the search prices that fallback through a replicated strategy and its edges."""
    need = replicated_dims(op)
    if need is None:
        return strategies
    ops_need, res_need = need

    def fits(shardings: Sequence[TensorSharding], dims: Sequence[set[int]]) -> bool:
        return all(not sh.dims[d].axes for sh, ds in zip(shardings, dims) for d in ds if d < len(sh.dims))

    return [s for s in strategies if fits(s.operands, ops_need) and fits(s.results, res_need)]


def _op_strategies(
    op: Op, rule: OpShardingRule | None, mesh: Mesh, name: str, cap: int, axes: Mesh | None = None
) -> tuple[list[Strategy], bool]:
    """``op``'s strategies and whether they are the user's. ``axes``: the mesh of the axes it
    may use (inside a manual computation: the free ones; default ``mesh``)."""
    if STRATEGY_ATTR in op.attributes:  # shardwise.configure (MindSpore's op.shard): exactly that strategy
        return [select_strategy(op, rule, mesh, name)], True
    rep_ops = tuple(replicated(mesh, name, _rank(v)) for v in op.operands)
    rep_res = tuple(replicated(mesh, name, _rank(v)) for v in op.results)
    if rule is None or not op.results:
        base = [Strategy((), rep_ops, rep_res, (), 1)]
    else:
        found = enumerate_strategies(rule, mesh, mesh_name=name, max_strategies=cap, axes=axes)
        base = _computable(op, found) or [Strategy((), rep_ops, rep_res, (), 1)]
    user = [v.sharding for v in op.results]
    if all(u is None for u in user):
        return base, False
    keep = [s for s in base if all(u is None or allows(u, r) for r, u in zip(s.results, user))]
    if keep:
        return keep, is_closed(user)
    res = tuple(u if u is not None else r for u, r in zip(user, rep_res))
    return [Strategy((), rep_ops, res, (), 1)], True


_RETURNS = ("func.return", "stablehlo.return", "sdy.return")
MANUAL = "sdy.manual_computation"


def _searched_ops(ops: Sequence[Op]) -> Iterator[Op]:
    """The ops of ``ops`` that become nodes: all but returns, a while's cond and body ops, a
    case's branch ops and a manual computation's body ops instead of the op itself."""
    for op in ops:
        if op.name in _RETURNS:
            continue
        if (op.name == "stablehlo.while" and len(op.regions) == 2) or (
            op.name in ("stablehlo.case", MANUAL) and op.regions
        ):
            for r in op.regions:
                yield from _searched_ops(r.blocks[0].ops)
        else:
            yield op


def _value_node_strategies(
    v: Value, mesh: Mesh, mesh_name: str, cap: int, axes: Mesh | None = None
) -> tuple[list[Strategy], bool]:
    """The strategies of a data-flow edge's node (a while's carried value, a case's result):
    the value's own shardings, as operand and result alike; only the user's when it has one.
    ``axes``: the mesh of the axes it may use (inside a manual computation: the free ones;
    default ``mesh``)."""
    assert isinstance(v.type, TensorType)
    if v.sharding is not None:
        u = v.sharding
        ok = (
            []
            if is_closed([u])
            else [
                s.results[0]
                for s in value_strategies(v.type.shape, mesh, mesh_name=mesh_name, max_strategies=cap, axes=axes)
                if allows(u, s.results[0])
            ]
        )
        if ok:
            return [Strategy((), (r,), (r,), (), 1) for r in ok], False
        return [Strategy((), (u,), (u,), (), 1)], True
    return [
        Strategy((), s.results, s.results, (), 1)
        for s in value_strategies(v.type.shape, mesh, mesh_name=mesh_name, max_strategies=cap, axes=axes)
    ], False


def build_problem(
    module: Module,
    mesh_name: str,
    mesh: Mesh,
    device: DeviceModel,
    memory_budget: int | None,
    *,
    max_strategies: int = DEFAULT_MAX_STRATEGIES,
    carry: Sequence[tuple[int, int]] | None = None,
    progress: Progress | None = None,
) -> AutoProblem:
    """The strategy graph of ``module``'s main function (steps 1-3 of the module docstring).
    ``carry``: (argument, result) pairs of loop-carried state (step 2 of the module
    docstring; ``None``: from ``tf.aliasing_output``, :func:`carried_pairs`).
    ``progress(stage, done, total)`` is called as nodes and edges are built. Raises
    :class:`ProgramError` for a module without a function body, what ``rule_for`` raises,
    :class:`SearchError` for a carry pair out of range or of unequal types."""
    func = _main_func(module)
    pairs = carried_pairs(func) if carry is None else _check_carry(func, carry)
    rules = RuleCache(module)
    nodes: list[Node] = []
    where: dict[int, tuple[int, int]] = {}
    for i, a in enumerate(func.args):
        if not isinstance(a.type, TensorType):
            continue
        if a.sharding is not None:
            ok = (
                []
                if is_closed([a.sharding])
                else [
                    st
                    for st in value_strategies(a.type.shape, mesh, mesh_name=mesh_name, max_strategies=max_strategies)
                    if allows(a.sharding, st.results[0])
                ]
            )
            strats, conf = (ok, False) if ok else ([Strategy((), (), (a.sharding,), (), 1)], True)
        else:
            strats, conf = (
                value_strategies(a.type.shape, mesh, mesh_name=mesh_name, max_strategies=max_strategies),
                False,
            )
        where[id(a)] = (len(nodes), 0)
        nodes.append(Node(f"%arg{i}", None, (a,), None, strats, [], 0, conf))
    ops = [op for op in func.body.ops if op.name != "func.return"]
    total = sum(1 for _ in _searched_ops(ops))
    step = 0
    # Nodes that must stay live to a step no edge shows: a loop's carried values and the
    # values its body yields back live to the end of the loop.
    live_to: dict[int, int] = {}
    back: list[tuple[Value, int, int]] = []  # (yielded value, carry node, times): loop-back edges
    built = 0  # op nodes so far, for progress
    # Inside a manual computation: the mesh of its free axes (and the manual axes around it).
    free: Mesh | None = None
    manual_around: frozenset[str] = frozenset()

    def add_ops(block_ops: Sequence[Op], times: int) -> None:
        nonlocal step, built
        for op in block_ops:
            if op.name in _RETURNS:
                continue
            step += 1
            if op.name == "stablehlo.while" and len(op.regions) == 2:
                add_loop(op, times)
                continue
            if op.name == "stablehlo.case" and op.regions:
                add_case(op, times)
                continue
            if op.name == MANUAL and op.regions and op.operand_shardings is not None:
                add_manual(op, times)
                continue
            rule = rules.rule(op)
            strats, conf = _op_strategies(op, rule, mesh, mesh_name, max_strategies, free)
            if op.attributes.pop(STRATEGY_ATTR, None) is not None:
                # A configured op's strategy becomes its results' sharding on the searched module
                # (auto_shard's copy), as a user sharding; the attribute does not reach the output.
                for v, sh in zip(op.results, strats[0].results):
                    if isinstance(v.type, TensorType):
                        v.sharding = sh
            for r, v in enumerate(op.results):
                where[id(v)] = (len(nodes), r)
            nodes.append(Node(op.where(), op, tuple(op.results), rule, strats, [], step, conf, times=times))
            built += 1
            if progress:
                progress("strategies", built, total)

    def add_loop(op: Op, times: int) -> None:
        """One node per carried tensor (the while's result, its block arguments in cond and
        body and its operand: one data-flow edge, one sharding), then the cond ops (run
        trips + 1 times) and the body ops (trips times) as nodes of their own."""
        trips = trip_count(op)
        n = UNKNOWN_TRIPS if trips is None else trips
        cond, body_block = (r.blocks[0] for r in op.regions)
        carries: dict[int, int] = {}
        for i, v in enumerate(op.results):
            if not isinstance(v.type, TensorType):
                continue
            strats, conf = _value_node_strategies(v, mesh, mesh_name, max_strategies, free)
            carries[i] = len(nodes)
            for x in (v, cond.args[i], body_block.args[i]):
                where[id(x)] = (len(nodes), 0)
            nodes.append(
                Node(f"{op.where()} carry {i}", op, (v,), None, strats, [], step, conf, times=times, carry_index=i)
            )
        add_ops(cond.ops, times * (n + 1))
        add_ops(body_block.ops, times * n)
        ret = body_block.ops[-1]
        for i, c in carries.items():
            live_to[c] = step
            back.append((ret.operands[i], c, times * n))

    def add_case(op: Op, times: int) -> None:
        """The ops of every branch as nodes, each counted as if its branch ran (which one runs
        is known only at run time: an upper bound), then one node per tensor result (Shardy's
        data-flow edge: the result and what each branch returns share one sharding)."""
        nonlocal step
        for r in op.regions:
            add_ops(r.blocks[0].ops, times)
        step += 1
        for i, v in enumerate(op.results):
            if not isinstance(v.type, TensorType):
                continue
            node = len(nodes)
            where[id(v)] = (node, 0)
            strats, conf = _value_node_strategies(v, mesh, mesh_name, max_strategies, free)
            nodes.append(
                Node(f"{op.where()} result {i}", op, (v,), None, strats, [], step, conf, times=times, carry_index=i)
            )
            live_to[node] = step
            for r in op.regions:
                back.append((r.blocks[0].ops[-1].operands[i], node, times))

    def add_manual(op: Op, times: int) -> None:
        """An ``sdy.manual_computation`` (``jax.shard_map``): a node per operand (its in-sharding's
        free dimensions decided with the body argument), the body's ops on their local types
        with strategies over the free axes only, and a node per result (its out-sharding's free
        dimensions decided with the returned value). Shardy's data-flow edges of a manual
        computation: the global operand, in the in-sharding, is the body argument (its local
        block along the manual axes); what the body returns is the result in the out-sharding."""
        nonlocal step, free, manual_around
        outer_free, outer_manual = free, manual_around
        manual_around = outer_manual | set(manual_axes(op))
        free = free_mesh(mesh, manual_around)
        body = op.regions[0].blocks[0]
        assert op.operand_shardings is not None
        for i, (a, outer) in enumerate(zip(body.args, op.operand_shardings)):
            if not isinstance(a.type, TensorType) or outer is None:
                continue
            strats, conf = manual_boundary(
                outer, a.type.shape, manual_around, "in", mesh, mesh_name, max_strategies, free
            )
            where[id(a)] = (len(nodes), 0)
            nodes.append(
                Node(
                    f"{op.where()} operand {i}",
                    op,
                    (a,),
                    None,
                    strats,
                    [],
                    step,
                    conf,
                    times=times,
                    carry_index=i,
                    manual_side="in",
                )
            )
        add_ops(body.ops, times)
        step += 1
        ret = body.ops[-1]
        for j, (v, y) in enumerate(zip(op.results, ret.operands)):
            if not isinstance(v.type, TensorType) or not isinstance(y.type, TensorType) or v.sharding is None:
                continue
            strats, conf = manual_boundary(
                v.sharding, y.type.shape, manual_around, "out", mesh, mesh_name, max_strategies, free
            )
            node = len(nodes)
            where[id(v)] = (node, 0)
            nodes.append(
                Node(
                    f"{op.where()} result {j}",
                    op,
                    (v,),
                    None,
                    strats,
                    [],
                    step,
                    conf,
                    times=times,
                    carry_index=j,
                    manual_side="out",
                )
            )
            live_to[node] = step
            back.append((y, node, times))
        free, manual_around = outer_free, outer_manual

    add_ops(ops, 1)
    for nd in nodes:
        nd.costs = [
            _arg_cost(nd, s, mesh)
            if nd.op is None or nd.carry_index is not None
            else op_cost(nd.op, nd.rule, s, mesh, device)
            for s in nd.strategies
        ]
        nd.extra_seconds = [0.0] * len(nd.strategies)
        nd.extra_bytes = [0.0] * len(nd.strategies)
    reshards = ReshardCache(mesh, device.cost_model)
    last = [nd.step for nd in nodes]
    end = step + 1
    edges: list[Edge] = []
    for nd_i, nd in enumerate(nodes):
        if nd.op is None:
            continue
        if nd.carry_index is None:
            operands: Iterable[tuple[int, Value]] = enumerate(nd.op.operands)
        else:  # a while's carried value and a manual operand enter from the operand; a case or manual result has none
            enters = nd.op.name == "stablehlo.while" or nd.manual_side == "in"
            operands = [(0, nd.op.operands[nd.carry_index])] if enters else []
        for k, v in operands:
            src = where.get(id(v))
            if src is not None and isinstance(v.type, TensorType):
                edges.append(Edge(src[0], src[1], nd_i, k, v, nd.times))
                last[src[0]] = max(last[src[0]], nd.step)
    for (
        v,
        carry_node,
        times,
    ) in back:  # a body's yielded value (a branch's returned value) becomes the carried value (the result)
        src = where.get(id(v))
        if src is not None and isinstance(v.type, TensorType):
            edges.append(Edge(src[0], src[1], carry_node, 0, v, times))
            last[src[0]] = max(last[src[0]], live_to[carry_node])
    for carry_node, until in live_to.items():
        last[carry_node] = max(last[carry_node], until)
    ret = func.return_op
    carried: list[Carried] = []
    for k, v in enumerate(ret.operands):
        src = where.get(id(v))
        if src is None:
            continue
        last[src[0]] = end
        want = func.result_shardings[k] if k < len(func.result_shardings) else None
        if want is None and isinstance(v.type, TensorType):
            for i, r in pairs:
                arg = where.get(id(func.args[i])) if r == k else None
                if arg is not None and arg[0] != src[0]:
                    carried.append(Carried(arg[0], src[0], src[1], v))
        elif want is not None and isinstance(v.type, TensorType):
            prod = nodes[src[0]]
            for si, s in enumerate(prod.strategies):
                plan = reshards.plan(v.type.shape, v.type.element_type, s.results[src[1]], want)
                prod.extra_seconds[si] += plan.seconds
                prod.extra_bytes[si] += plan.bytes
    # Each edge's matrix is priced on its distinct shardings only (strategies share their
    # TensorSharding objects, ``strategies.interned``) and spread out with numpy.
    pair: dict[tuple[int, int], F64] = {}
    hides = [np.array([c.hide for c in nd.costs]) if device.overlap else None for nd in nodes]

    def priced(
        shape: Sequence[int], dtype: str, rows: Sequence[TensorSharding], cols: Sequence[TensorSharding], src_rows: bool
    ) -> F64:
        """Seconds to move a value from each row's sharding to each column's (``src_rows``)
        or from each column's to each row's, shape ``(len(rows), len(cols))``."""
        ru, ri = _distinct(rows)
        cu, ci = _distinct(cols)
        if src_rows:
            sec = np.array([[reshards.plan(shape, dtype, a, b).seconds for b in cu] for a in ru])
        else:
            sec = np.array([[reshards.plan(shape, dtype, b, a).seconds for b in cu] for a in ru])
        return sec[np.ix_(ri, ci)]

    def add(key: tuple[int, int], m: F64) -> None:
        acc = pair.get(key)
        pair[key] = m if acc is None else acc + m

    for n_done, e in enumerate(edges):
        na, nb = nodes[e.src], nodes[e.dst]
        t = e.value.type
        assert isinstance(t, TensorType)
        m = priced(
            t.shape,
            t.element_type,
            [sa.results[e.result] for sa in na.strategies],
            [sb.operands[e.operand] for sb in nb.strategies],
            True,
        )
        hide = hides[e.dst]
        if hide is not None:
            m = m - np.minimum(m, hide[None, :])
        add((e.src, e.dst), e.times * m)
        if progress:
            progress("edges", n_done + 1, len(edges))
    for c in carried:
        # The next step reads this result as argument c.arg: moving it there is paid here.
        t = c.value.type
        assert isinstance(t, TensorType)
        na, nb = nodes[c.arg], nodes[c.src]
        add(
            (c.arg, c.src),
            priced(
                t.shape,
                t.element_type,
                [sa.results[0] for sa in na.strategies],
                [sb.results[c.result] for sb in nb.strategies],
                False,
            ),
        )
    intervals = [[nd.step, last[i] + 1] for i, nd in enumerate(nodes)]
    graph = StrategyGraph.build(
        [[_ps(nd.times * c.seconds + x) for c, x in zip(nd.costs, nd.extra_seconds)] for nd in nodes],
        [[c.memory for c in nd.costs] for nd in nodes],
        intervals,
        [list(k) for k in pair],
        [np.rint(m * PS).astype(np.int64).ravel().tolist() for m in pair.values()],
        usage_limit=memory_budget,
        name=func.sym_name,
    )
    return AutoProblem(
        module, func, mesh, mesh_name, device, nodes, edges, graph, reshards, tuple(pairs), tuple(carried)
    )


def _distinct(shardings: Sequence[TensorSharding]) -> tuple[list[TensorSharding], npt.NDArray[np.intp]]:
    """The distinct shardings of ``shardings`` (first-seen order) and each one's index among them."""
    index: dict[TensorSharding, int] = {}
    at = np.array([index.setdefault(sh, len(index)) for sh in shardings], dtype=np.intp)
    return list(index), at


def carried_pairs(func: Func) -> list[tuple[int, int]]:
    """The (argument, result) pairs of ``func`` whose argument carries
    ``tf.aliasing_output = k`` (JAX's ``donate_argnums``: the result ``k`` is the argument's
    next value, as a training step's updated parameters and optimizer state are)."""
    out = []
    for i, attrs in enumerate(func.arg_attrs):
        text = attrs.get("tf.aliasing_output")
        if text is None:
            continue
        try:
            k = int(text.split(":")[0].strip())
        except ValueError:
            raise ProgramError(
                f"@{func.sym_name} argument {i}: expected tf.aliasing_output = <result index> : i32, got {text!r}"
            ) from None
        out.append((i, k))
    return _check_carry(func, out)


def _check_carry(func: Func, carry: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for pair in carry:
        if len(pair) != 2:
            raise SearchError(f"carry: expected (argument, result) pairs, got {pair!r}")
        i, k = pair
        if not (0 <= i < len(func.args)) or not (0 <= k < len(func.result_types)):
            raise SearchError(
                f"carry: pair ({i}, {k}) out of range for @{func.sym_name} with {len(func.args)} arguments and {len(func.result_types)} results"
            )
        if str(func.args[i].type) != str(func.result_types[k]):
            raise SearchError(
                f"carry: argument {i} is {func.args[i].type} but result {k} is {func.result_types[k]}; a carried value keeps its type"
            )
        out.append((int(i), int(k)))
    return out


def _ps(seconds: float) -> int:
    return int(round(seconds * PS))  # noqa: RUF046 (a NumPy float's round is a float before NumPy 2)


def _arg_cost(nd: Node, s: Strategy, mesh: Mesh) -> OpCost:
    return OpCost(0.0, 0.0, 0.0, 0.0, local_bytes(nd.values[0], s.results[0], mesh))


def apply_solution(problem: AutoProblem, assignment: tuple[int, ...]) -> None:
    """Writes the chosen shardings on ``problem.module`` (in place): every argument and every op
    result with a rule gets its strategy's closed sharding; configured values and ops without a
    rule are left as they are. Where a consumer's strategy wants an operand sharded otherwise
    than its producer gives it, an ``sdy.reshard`` to the wanted sharding is inserted before the
    consumer, so the partitioner moves exactly the planned bytes (``plan_reshard`` lowers it). Raises :class:`SearchError` for an assignment of the wrong length."""
    if len(assignment) != len(problem.nodes):
        raise SearchError(f"assignment: expected {len(problem.nodes)} strategy indices, got {len(assignment)}")
    for nd, x in zip(problem.nodes, assignment):
        if nd.configured or (nd.op is not None and nd.rule is None and nd.carry_index is None):
            continue
        s = nd.strategies[x]
        if nd.manual_side == "in":  # the manual computation's in-sharding (its body argument has none)
            assert nd.op is not None and nd.op.operand_shardings is not None and nd.carry_index is not None
            ins = list(nd.op.operand_shardings)
            ins[nd.carry_index] = s.operands[0]
            nd.op.operand_shardings = tuple(ins)
            continue
        for v, sh in zip(nd.values, s.results):
            if isinstance(v.type, TensorType):
                v.sharding = sh
    arg_node = {id(nd.values[0]): v for v, nd in enumerate(problem.nodes) if nd.op is None}
    func = problem.func
    for i, k in problem.carry:
        node = arg_node.get(id(func.args[i]))
        if node is not None and func.result_shardings[k] is None:
            func.result_shardings[k] = problem.nodes[node].strategies[assignment[node]].results[0]
    for e in problem.edges:
        src = problem.nodes[e.src].strategies[assignment[e.src]].results[e.result]
        dst = problem.nodes[e.dst]
        tgt = dst.strategies[assignment[e.dst]].operands[e.operand]
        if dst.rule is None or _dims(src) == _dims(tgt) or dst.op is None:
            continue
        reshard = Op("sdy.reshard", [e.value], [e.value.type], location=dst.op.location)
        reshard.results[0].sharding = tgt
        insert_before(dst.op, reshard)
        dst.op.operands[e.operand] = reshard.results[0]


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(value: int | str) -> int:
    """Bytes from an int or text such as ``16GiB``, ``512MB``, ``1e9`` (units B, kB, MB, GB,
    TB: powers of 1000; KiB, MiB, GiB, TiB: powers of 1024; case-insensitive). Raises
    :class:`SearchError` naming the value for anything else or a negative size."""
    if isinstance(value, bool):
        raise SearchError(f"memory budget: expected bytes (an int or text like 16GiB), got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        num = text.rstrip("kmgtib")
        unit = text[len(num) :]
        try:
            n = round(float(num) * _UNITS[unit])
        except (KeyError, ValueError, OverflowError):
            raise SearchError(f"memory budget: expected bytes like 16GiB, 512MB or 1000000, got {value!r}") from None
    else:
        raise SearchError(
            f"memory budget: expected bytes (an int or text like 16GiB), got {type(value).__name__} {value!r}"
        )
    if n < 0:
        raise SearchError(f"memory budget: expected bytes >= 0, got {value!r}")
    return n


#: The search methods of ``auto_shard``: ``solve``'s (``ilp``, ``local``, ``penalty``,
#: ``limited``, ``auto``) and ``bfs``.
AUTO_METHODS = ("ilp", "bfs", "local", "penalty", "limited", "auto")
#: Appended to ``Report.method`` when a Ctrl-C stopped the search (the plan is the best found
#: so far).
INTERRUPTED_SUFFIX = " (interrupted)"


#: The share of ``auto_shard``'s time limit its baselines' completions get (split evenly).
BASELINE_SHARE = 0.25


def _baselines(
    problem: AutoProblem, plans: Mapping[str, Plan], seconds: float
) -> tuple[Solution | None, dict[str, int | None]]:
    """The best completion of ``plans`` (each ``seconds / len(plans)`` long; fitting first, then
    cost), the search's warm start and the answer it must beat, and the cost (picoseconds) of
    each, ``None`` for one that does not fit or cannot be built on this mesh."""
    scores: dict[str, int | None] = {}
    best: Solution | None = None
    for name, plan in plans.items():
        try:
            done = complete_plan(problem, plan, time_limit=max(seconds / len(plans), 0.05))
        except SearchError:  # not divisible on this mesh, or beyond the strategy cap
            scores[name] = None
            continue
        if done.interrupted:
            break
        scores[name] = done.cost if done.feasible else None
        if best is None or (done.feasible, -done.cost) > (best.feasible, -best.cost):
            best = replace(done, method=f"{name} plan ({done.method.removeprefix('plan+')})")
    return best, scores


def prepare(
    module: Module,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    memory_budget: int | str | None = None,
    device: DeviceModel | None = None,
    *,
    carry: Sequence[tuple[int, int]] | None = None,
    max_strategies: int = DEFAULT_MAX_STRATEGIES,
    progress: Progress | None = None,
) -> AutoProblem:
    """The search problem of ``module`` (left unchanged): a copy with its calls inlined (step 0
    of the module docstring), ``mesh`` put on it (:func:`resolve_mesh`) and its strategy graph
    (:func:`build_problem`). Solve ``problem.graph`` and pass the answer to :func:`finish`.
    Arguments and errors as :func:`auto_shard`'s."""
    dev = device if device is not None else DeviceModel()
    budget = parse_bytes(memory_budget) if memory_budget is not None else dev.memory
    work = module.copy()
    # Each call site gets its own choices (jax.nn.relu, flax layers and optax updates are
    # private functions): the search sees the program as XLA's partitioner does, inlined.
    inline_calls(work, decided=False)
    name, m = resolve_mesh(work, mesh)
    with chlo_rules():  # elementwise CHLO ops are pointwise, as XLA's partitioner sees them
        return build_problem(work, name, m, dev, budget, max_strategies=max_strategies, carry=carry, progress=progress)


def finish(problem: AutoProblem, solution: Solution) -> tuple[Module, Report]:
    """Writes ``solution`` on ``problem.module`` (:func:`apply_solution`, in place: a problem is
    finished once), propagates the rest and returns the module with its :class:`Report`."""
    apply_solution(problem, solution.assignment)
    with chlo_rules():
        return propagate(problem.module), make_report(problem, solution)


def auto_shard(
    module: Module,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    memory_budget: int | str | None = None,
    method: str = "ilp",
    time_limit: float = 10.0,
    device: DeviceModel | None = None,
    *,
    carry: Sequence[tuple[int, int]] | None = None,
    baselines: Mapping[str, Plan] | None = None,
    allow_infeasible: bool = False,
    max_strategies: int = DEFAULT_MAX_STRATEGIES,
    progress: Progress | None = None,
    bound_time: float = 0.0,
) -> tuple[Module, Report]:
    """The cheapest sharding of ``module``'s main function found on ``mesh`` within
    ``memory_budget`` bytes per device (steps in the module docstring); ``module`` is left
    unchanged.

    ``mesh``: redefines the module's only mesh or adds ``@mesh`` (``None``: the module's own).
    ``memory_budget``: bytes (int or ``"16GiB"``), default ``device.memory`` (no limit).
    ``method``: ``ilp`` (HiGHS, optimal within ``time_limit`` seconds), ``local`` (Rust local
    search), ``penalty`` (memory as node penalties, relaxed problems by toulbar2), ``limited``
    (the whole problem, memory limit included, by toulbar2), ``auto``
    (``solve``'s choice) or ``bfs`` (MindSpore propagation from the configured ops and the
    values the user sharded; ``shardwise.configure``).
    ``device``: FLOP rate, link costs (default ``DeviceModel()``).
    ``carry``: (argument, result) pairs whose result is the argument's next value (a training
    step's parameters and optimizer state); the result is given the argument's sharding and
    the move to it is priced. Default: the pairs ``tf.aliasing_output`` names (JAX's
    ``donate_argnums``); ``()`` for none.
    ``baselines``: hand plans (name -> argument index -> dimension axes,
    :mod:`shardwise.search.baselines`) the answer must not be worse than: each is completed on
    the same graph (:func:`~shardwise.search.baselines.complete_plan`, a quarter of
    ``time_limit`` shared among them, the search the rest) and the cheapest plan that fits
    wins; ``Report.baselines`` lists their costs. Default: data parallel and FSDP as the
    program's donated arguments imply (:func:`~shardwise.search.baselines.inferred_plans`);
    ``{}`` for none. Not with ``bfs``, which answers from the configured ops alone.
    ``allow_infeasible``: return a plan over the budget (``Report.feasible`` false,
    ``Report.infeasibility`` says why) instead of raising :class:`InfeasibleBudget`.
    ``progress(stage, done, total)``: called while building (``strategies``, ``edges``) and
    before ``solving``.
    ``bound_time`` > 0: after the search, that many more seconds (outside ``time_limit``) go to
    a lower bound of the objective over every plan within the budget
    (:func:`shardwise.search.bound.bound_for`: HiGHS's dual bound where the ILP's model fits,
    else the Lagrangian dual), given as ``Report.lower_bound_ps``, so a user sees how far from
    optimal the plan can be.

    The ILP runs only when its model fits the memory guard and the time
    (:func:`shardwise.search.solve.solve`: else local search, with an
    ``FallbackWarning``). From the main thread a Ctrl-C stops the search with its best
    answer so far, which is applied; ``Report.method`` then ends in :data:`INTERRUPTED_SUFFIX`.

    Returns the propagated module (every value sharded) and a :class:`Report`. Raises
    :class:`InfeasibleBudget` when no plan found fits the budget (its message: the smallest
    peak found, a lower bound on any plan's peak, the nodes that dominate the peak; the plan
    is on the exception); :class:`SearchError` for an unknown method, a bad budget, time
    limit or carry pair; :class:`ProgramError` for a module without a usable function or mesh;
    what ``shardwise.propagate`` raises."""
    if method not in AUTO_METHODS:
        raise SearchError(f"method: expected one of {', '.join(AUTO_METHODS)}, got {method!r}")
    problem = prepare(
        module, mesh, memory_budget, device, carry=carry, max_strategies=max_strategies, progress=progress
    )
    if progress:
        progress("solving", 0, 1)
    if method == "bfs":
        conf = {i: int(problem.graph.node_costs(i).argmin()) for i, nd in enumerate(problem.nodes) if nd.configured}
        sol = solve_bfs(problem.graph, conf)
        scores: dict[str, int | None] = {}
    else:
        plans = inferred_plans(problem) if baselines is None else dict(baselines)
        share = BASELINE_SHARE * check_time_limit(time_limit) if plans else 0.0
        start, scores = _baselines(problem, plans, share)
        sol = solve(problem.graph, time_limit - share, method, initial=None if start is None else start.assignment)
        if sol.interrupted:  # the report's method says so (the CLI exits 130 on it)
            sol = replace(sol, method=sol.method + INTERRUPTED_SUFFIX)
        elif start is not None and (start.feasible, -start.cost) > (sol.feasible, -sol.cost):
            sol = start
    if progress:
        progress("solving", 1, 1)
    out, report = finish(problem, sol)
    report = replace(report, baselines=scores)
    if check_time_limit(bound_time) > 0 and not sol.interrupted:
        report = replace(report, lower_bound_ps=bound_for(problem.graph, sol, bound_time).bound)
    if not report.feasible and not allow_infeasible:
        raise InfeasibleBudget(report.infeasibility, out, report)
    return out, report
