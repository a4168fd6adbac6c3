"""Solution merging: the exact optimum over the strategies a pool of assignments uses.

The "merge" step of Construct, Merge, Solve & Adapt (Blum, Pinacho, López-Ibáñez & Lozano,
"Construct, Merge, Solve & Adapt: a new general algorithm for combinatorial optimization",
Computers & Operations Research 68, 2016): restrict each node to the strategies that some
assignment of the pool chooses for it, and solve that sub-instance, usage limit included, by
the ILP (:func:`shardwise.search.ilp.solve_ilp`). Pools mix low-cost assignments that break the
usage limit (relaxed optima of the penalty search) with feasible ones, so the sub-instance holds
combinations that no single assignment of the pool has; the answer is never worse than the best
feasible assignment of the pool, given as the warm start.

A pool that spans too large a sub-instance for one ILP is merged a window at a time
(:class:`Merger`): a connected set of nodes grown breadth first from a node where the pool
disagrees with the incumbent, until the window's share of the sub-instance reaches a size the
ILP solves in seconds; every node outside it keeps the incumbent's strategy (a large
neighbourhood search whose neighbourhoods are solved exactly, Shaw 1998).
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from shardwise.search.contract import contract, has_forbidden, solve_contracted
from shardwise.search.graph import StrategyGraph, evaluate
from shardwise.search.ilp import solve_ilp
from shardwise.search.local import Solution, check_time_limit


def restrict(graph: StrategyGraph, allowed: Sequence[Sequence[int]]) -> StrategyGraph:
    """The sub-instance of ``graph`` where node ``v`` keeps only strategies ``allowed[v]`` (in
    that order; strategy ``i`` of the result is ``allowed[v][i]`` of ``graph``). Same nodes,
    edges, intervals and usage limit. Raises :class:`ValueError` when ``allowed`` does not give
    one non-empty list of valid strategy indices per node."""
    n = graph.num_nodes
    if len(allowed) != n:
        raise ValueError(f"allowed: expected one strategy list per node ({n}), got {len(allowed)}")
    ks = np.array([len(a) for a in allowed], dtype=np.int64)
    if n and int(ks.min()) < 1:
        raise ValueError(f"allowed: node {int(np.argmin(ks))} keeps no strategy")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ks, out=offsets[1:])
    local = np.concatenate([np.asarray(a, dtype=np.int64) for a in allowed]) if n else np.zeros(0, dtype=np.int64)
    node_of = np.repeat(np.arange(n), ks)
    orig_k = graph.offsets[1:] - graph.offsets[:-1]
    if local.size and (int(local.min()) < 0 or bool(np.any(local >= orig_k[node_of]))):
        bad = int(np.nonzero((local < 0) | (local >= orig_k[node_of]))[0][0])
        raise ValueError(f"allowed: node {int(node_of[bad])} has no strategy {int(local[bad])}")
    flat = graph.offsets[node_of] + local
    parts = []
    eoff = np.zeros(graph.num_edges + 1, dtype=np.int64)
    for e in range(graph.num_edges):
        a, b = (int(x) for x in graph.edges[e])
        m = graph.edge_matrix(e)
        sub = m[np.ix_(allowed[a], allowed[b])].reshape(-1)
        parts.append(sub)
        eoff[e + 1] = eoff[e] + sub.size
    return StrategyGraph(
        offsets=offsets,
        cost=graph.cost[flat],
        usage=graph.usage[flat],
        intervals=graph.intervals,
        edges=graph.edges,
        edge_offsets=eoff,
        edge_cost=np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64),
        usage_limit=graph.usage_limit,
        name=graph.name,
    )


def merged_terms(graph: StrategyGraph, pool: Sequence[Sequence[int]]) -> int:
    """Strategies plus edge-matrix entries of the sub-instance ``pool`` spans (before the
    ILP's reductions); 0 for an empty pool."""
    return _terms(graph, _distinct(pool)) if pool else 0


def merged_row_entries(graph: StrategyGraph, pool: Sequence[Sequence[int]]) -> int:
    """Σ over nodes with more than one pooled strategy of (their pooled strategies × the time
    points they are live at): a bound on the memory rows' entries of the ILP over ``pool``'s
    sub-instance (0 for an empty pool). HiGHS's presolve, which its time limit does not stop,
    grows with it: on K, 82M (170k terms) took 15 s of presolve for a 6 s limit."""
    return _row_entries(graph, _distinct(pool)) if pool else 0


def _terms(graph: StrategyGraph, ks: npt.NDArray[np.int64]) -> int:
    """:func:`merged_terms` from the pool's distinct strategies per node ``ks``."""
    return int(ks.sum() + np.dot(ks[graph.edges[:, 0]], ks[graph.edges[:, 1]]))


def _row_entries(graph: StrategyGraph, ks: npt.NDArray[np.int64]) -> int:
    """:func:`merged_row_entries` from the pool's distinct strategies per node ``ks``."""
    _, first, last = graph.time_points()
    many = ks > 1
    return int(np.dot(ks[many], np.maximum(last - first, 0)[many]))


def _distinct(pool: Sequence[Sequence[int]]) -> npt.NDArray[np.int64]:
    """Number of distinct strategies the (non-empty) pool gives each node; shape ``(n,)``."""
    xs = np.sort(np.asarray(pool, dtype=np.int64), axis=0)
    ks: npt.NDArray[np.int64] = 1 + np.count_nonzero(np.diff(xs, axis=0), axis=0)
    return ks


def solve_merged(
    graph: StrategyGraph,
    pool: Sequence[Sequence[int]],
    time_limit: float,
    *,
    threads: int = 1,
    warm: Sequence[int] | None = None,
) -> Solution:
    """The best assignment of ``graph`` using, on each node, only strategies that some
    assignment of ``pool`` chooses there: the ILP over :func:`restrict`, warm-started from
    ``warm`` (a feasible member of ``pool``) or else the pool's best feasible assignment (so never
    worse than it) and starting from the usage rows near that assignment's peaks
    (``solve_ilp(lazy_rows=True)``), within ``time_limit`` seconds counted from the call
    (scoring the pool and building the sub-instance included).
    ``Solution.optimal`` says the sub-instance was solved to optimality (not ``graph``).
    Raises :class:`SearchError` for a bad time limit and :class:`ValueError` for an empty pool,
    an assignment of the wrong length or a warm start outside the pool's strategies."""
    begin = time.perf_counter()
    t = check_time_limit(time_limit)
    if not pool:
        raise ValueError("pool: expected at least one assignment, got none")
    n = graph.num_nodes
    for i, x in enumerate(pool):
        if len(x) != n:
            raise ValueError(f"pool[{i}]: expected {n} strategies (one per node), got {len(x)}")
    allowed = [sorted({int(x[v]) for x in pool}) for v in range(n)]
    if warm is not None and (len(warm) != n or any(int(s) not in a for s, a in zip(warm, allowed))):
        raise ValueError(f"warm: expected an assignment of {n} strategies that the pool gives each node")
    if warm is None:
        scores = [evaluate(graph, x) for x in pool]
        feasible = [i for i, s in enumerate(scores) if s.feasible]
        warm = pool[min(feasible, key=lambda i: scores[i].cost)] if feasible else None
    return solve_restricted(graph, allowed, warm, t, threads, begin)


def solve_restricted(
    graph: StrategyGraph,
    allowed: Sequence[Sequence[int]],
    warm: Sequence[int] | None,
    time_limit: float,
    threads: int = 1,
    begin: float | None = None,
) -> Solution:
    """The ILP over :func:`restrict` ``(graph, allowed)`` (over its contraction,
    :mod:`.contract`, when it has forbidden components and that is smaller), warm-started from
    ``warm`` (an assignment of ``graph`` inside ``allowed``); the answer in ``graph``'s strategy
    indices, ``optimal`` when the restricted instance was solved to optimality. ``time_limit``
    counts from ``begin`` (default: the call). Raises as :func:`restrict` and
    :func:`shardwise.search.ilp.solve_ilp`."""
    begin = time.perf_counter() if begin is None else begin
    sub = restrict(graph, allowed)
    index = [{s: i for i, s in enumerate(a)} for a in allowed]
    initial = None if warm is None else [index[v][int(s)] for v, s in enumerate(warm)]
    sol = None
    if has_forbidden(sub):
        # Forbidden components contracted (exact; :mod:`.contract`) when that makes the model smaller.
        con = contract(sub)
        if con.components and con.terms() < sub.cost.size + sub.edge_cost.size:
            left = max(time_limit - (time.perf_counter() - begin), 0.01)
            sol = solve_contracted(sub, left, initial=initial, threads=threads, con=con, repair_share=0.0)
    if sol is None:
        left = max(time_limit - (time.perf_counter() - begin), 0.01)
        sol = solve_ilp(sub, left, initial=initial, threads=threads, lazy_rows=True)
    assignment = [allowed[v][s] for v, s in enumerate(sol.assignment)]
    sc = evaluate(graph, assignment)
    return Solution(
        tuple(assignment),
        sc.cost,
        sc.peak_usage,
        sc.feasible,
        "merge",
        optimal=sol.optimal,
        seconds=time.perf_counter() - begin,
    )


class Merger:
    """Merges pools of assignments of one graph (module docstring): the whole sub-instance when
    it has at most ``max_terms`` strategies plus edge-matrix entries and at most ``max_rows``
    memory-row entries (:func:`merged_row_entries`; default: no bound), else one window of
    about ``window_terms`` (default: ``max_terms``) per call."""

    def __init__(
        self,
        graph: StrategyGraph,
        max_terms: int,
        seed: int = 0,
        window_terms: int | None = None,
        max_rows: int | None = None,
    ) -> None:
        self.graph = graph
        self.max_terms = max_terms
        self.max_rows = max_rows
        self.window_terms = max_terms if window_terms is None else window_terms
        self.rng = random.Random(seed)
        self.adj: list[list[int]] = [[] for _ in range(graph.num_nodes)]
        for a, b in graph.edges.tolist():
            if a != b:
                self.adj[a].append(b)
                self.adj[b].append(a)

    def whole(self, pool: Sequence[Sequence[int]]) -> bool:
        """Whether ``pool``'s sub-instance is merged in one ILP."""
        if not pool:
            return True
        ks = _distinct(pool)
        return _terms(self.graph, ks) <= self.max_terms and (
            self.max_rows is None or _row_entries(self.graph, ks) <= self.max_rows
        )

    def window(self, pool: Sequence[Sequence[int]], incumbent: Sequence[int]) -> set[int]:
        """Nodes of one window: breadth first from a random node where some assignment of
        ``pool`` differs from ``incumbent``, over nodes with more than one pooled strategy,
        until the window's strategies plus the entries of the edges inside it reach
        ``window_terms`` (empty when the pool agrees with the incumbent everywhere)."""
        ks = _distinct(list(pool) + [list(incumbent)])
        seeds = np.nonzero(ks > 1)[0]
        if seeds.size == 0:
            return set()
        first = int(seeds[self.rng.randrange(seeds.size)])
        nodes, queue, terms = {first}, deque([first]), int(ks[first])
        while queue and terms < self.window_terms:
            v = queue.popleft()
            for w in self.adj[v]:
                if w not in nodes and ks[w] > 1:
                    nodes.add(w)
                    queue.append(w)
                    terms += int(ks[w]) + sum(int(ks[w] * ks[u]) for u in self.adj[w] if u in nodes)
        return nodes

    def improve(
        self, pool: Sequence[Sequence[int]], incumbent: Sequence[int], time_limit: float, whole: bool | None = None
    ) -> Solution:
        """The merged optimum (whole, or over one window with the rest fixed to the feasible
        ``incumbent``) within ``time_limit`` seconds; never worse than ``incumbent``.
        ``whole``: :meth:`whole` of the pool plus the incumbent, if the caller has it."""
        everything = list(pool) + [list(incumbent)]
        if self.whole(everything) if whole is None else whole:
            return solve_merged(self.graph, everything, time_limit, warm=incumbent)
        nodes = self.window(pool, incumbent)
        allowed = [
            sorted({int(x[v]) for x in everything}) if v in nodes else [int(incumbent[v])]
            for v in range(self.graph.num_nodes)
        ]
        sol = solve_restricted(self.graph, allowed, incumbent, time_limit)
        return Solution(
            sol.assignment, sol.cost, sol.peak_usage, sol.feasible, "merge", optimal=False, seconds=sol.seconds
        )
