"""The strategy graph of a whole program for ``auto_shard`` (``search/auto.py``): steps 1-3 of
its method.

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
   only (none when every axis is manual). Values the user already sharded are configured:
   an argument with a sharding has only the strategies it allows, an op whose result has a
   sharding keeps only strategies giving one it allows (a closed dimension as written, an
   open one its axes then any more: ``strategies.allows``; when none does, one strategy with
   the user's result shardings and replicated operands stands for it); fully closed ones are
   left as the user wrote them. Ops without a rule have one strategy: replicated operands and
   results.
2. Each producer -> consumer value is an edge whose matrix is the resharding seconds from the
   producer's result sharding to the consumer's operand sharding (``plan_reshard``); several
   values between the same two nodes add up. A function result with a user sharding adds
   the reshard to it to its producer's own cost.
3. Liveness: the program order (a loop's cond and body ops in place of the loop) gives
   arguments step 0 and the ``j``-th op step ``j + 1``; a node lives over
   ``[its step, last use + 1)`` (results returned by the function live to the end, a loop's
   carried values and the values its body yields back to the end of the loop) and uses its
   results' bytes per device; ``memory_budget`` bounds the total at every step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from shardwise.errors import ProgramError, SearchError
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.loops import UNKNOWN_TRIPS, trip_count
from shardwise.ir.sdy import manual_axes
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.rules.from_ir import RuleCache
from shardwise.rules.rule import OpShardingRule
from shardwise.search.cost_model import (
    PS,
    DeviceModel,
    OpCost,
    ReshardCache,
    local_bytes,
    op_cost,
)
from shardwise.search.graph import StrategyGraph
from shardwise.search.op_strategy import STRATEGY_ATTR, select_strategy
from shardwise.search.problem import AutoProblem, Carried, Edge, Node
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
from shardwise.spmd.partition.coverage import replicated_dims

__all__ = ["F64", "MANUAL", "Progress", "build_problem", "carried_pairs", "sharding_dims"]

Progress = Callable[[str, int, int], None]
F64 = npt.NDArray[np.float64]


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


def sharding_dims(s: TensorSharding) -> tuple[tuple[str, ...], ...]:
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
