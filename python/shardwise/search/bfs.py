"""MindSpore's sharding propagation on a strategy graph (MindSpore r1.7 design note "Sharding
Propagation", ``shared/references/mindspore-sharding-propagation.md``).

The note's section "Sharding Propagation" runs in three steps: (1) the non-configured operators
get their possible strategies, (2) every edge its redistribution costs (both are the strategy
graph: node strategies from the factor rules, edge matrices from ``plan_reshard``, section
"Tensor Redistribution": bytes each device transmits, here their seconds), and (3) "Start from
the configured operators, and propagate the Sharding Strategies to non-configured operators
using BFS, with the goal of minimizing the communication cost along each edge". Step 3 here:

* **Frontier.** The configured nodes are decided first and never change. Every undecided
  neighbour of a decided node, producers and consumers alike, is on a priority queue keyed by
  its *redistribution cost*: ``p(v) = min_s comm_v(s)`` with
  ``comm_v(s) = Σ_{decided neighbour u} edge_cost(u, v)[x_u, s]`` (the note's "determines the
  next operator's Sharding Strategy, such that the communication cost in Tensor Redistribution
  is minimized": the node that can follow its decided neighbours most cheaply goes first; ties
  in breadth-first order). Since ``comm_v`` only grows as neighbours are decided, a popped
  entry whose key is stale is pushed back with its current key (a lazy priority queue).
* **Choice.** The popped node ``v`` takes, among its *fitting* strategies, one with
  ``comm_v(s) == 0`` (no redistribution: the note's figure (d)) when one exists, the cheapest by
  its own cost ``node_cost_v(s)``; otherwise the cheapest by ``comm_v(s) + node_cost_v(s)``.
  Ties go to the strategy with the smaller memory usage, then to the lower index. So a
  parameter (a function argument: no own cost) reached from its consumer takes exactly the
  sharding its consumer wants, not the replicated one that slicing also serves for free.
* **Memory budget** (``graph.usage_limit``, liveness as in ``graph.evaluate``): the usage at
  each time point is tracked as the decided nodes' chosen usage plus every undecided node's
  smallest usage (a lower bound on what it will add). A strategy *fits* when this estimate,
  with ``v``'s smallest usage replaced by the strategy's, stays within the limit at every time
  point where ``v`` is live. When no strategy fits, those with the smallest usage are the
  candidates (the least overshoot), chosen among by the same rule.

Without configured nodes (or for a component none reaches) the walk starts from the undecided
node with the largest cheapest own cost (the heaviest op), given its cheapest fitting
strategy. The returned ``Solution`` says whether the result fits (``feasible``: the walk is
greedy and can still exceed a tight budget). Time: ``O(Σ edges · k_a · k_b + n · k · p)`` for
``p`` time points, plus ``O(log)`` per queue operation.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from shardwise.errors import SearchError
from shardwise.search.graph import StrategyGraph, evaluate
from shardwise.search.local import Solution

__all__ = ["solve_bfs"]

F64 = npt.NDArray[np.float64]


def _adjacency(graph: StrategyGraph) -> list[list[tuple[int, int, bool]]]:
    """Per node: (edge, neighbour, node is the edge's first end)."""
    adj: list[list[tuple[int, int, bool]]] = [[] for _ in range(graph.num_nodes)]
    for e, (a, b) in enumerate(graph.edges.tolist()):
        adj[a].append((e, b, True))
        adj[b].append((e, a, False))
    return adj


class _Walk:
    """The state of the propagation: decided strategies, per undecided node its
    redistribution cost against the decided neighbours, and the usage estimate per time point."""

    def __init__(self, graph: StrategyGraph) -> None:
        self.graph = graph
        self.n = graph.num_nodes
        self.adj = _adjacency(graph)
        self.x = [-1] * self.n
        self.comm: list[F64] = [np.zeros(graph.k(v), dtype=np.float64) for v in range(self.n)]
        npoints, first, last = graph.time_points()
        self.first, self.last = first.tolist(), last.tolist()
        self.min_use = [int(graph.node_usages(v).min()) for v in range(self.n)]
        est = [0] * (npoints + 1)
        for v in range(self.n):
            if self.first[v] < self.last[v]:
                est[self.first[v]] += self.min_use[v]
                est[self.last[v]] -= self.min_use[v]
        self.est = np.cumsum(np.asarray(est[:-1], dtype=np.float64)) if npoints else np.zeros(0, dtype=np.float64)
        self.limit = graph.usage_limit

    def fitting(self, v: int) -> npt.NDArray[np.intp]:
        """Indices of the strategies of ``v`` that keep the usage estimate within the limit
        at all of ``v``'s live time points; if none does, those with the smallest usage."""
        use = self.graph.node_usages(v).astype(np.float64)
        ks = np.arange(use.size)
        if self.limit is None or self.first[v] >= self.last[v]:
            return ks
        peak = float(self.est[self.first[v] : self.last[v]].max()) - self.min_use[v]
        ok = ks[peak + use <= self.limit]
        return ok if ok.size else ks[use == use.min()]

    def choose(self, v: int, cands: npt.NDArray[np.intp]) -> int:
        """The strategy of ``v`` among ``cands``: zero redistribution cost first (cheapest own
        cost), else the cheapest edge + own cost; ties to smaller usage, then lower index."""
        comm = self.comm[v][cands]
        own = self.graph.node_costs(v).astype(np.float64)[cands]
        use = self.graph.node_usages(v).astype(np.float64)[cands]
        free = comm == 0
        if free.any():
            keys = np.where(free, own, np.inf)
        else:
            keys = comm + own
        best = np.nonzero(keys == keys.min())[0]
        return int(cands[best[np.argmin(use[best])]])

    def decide(self, v: int, s: int) -> list[int]:
        """Fixes ``x[v] = s``; updates the usage estimate and the redistribution costs of the
        undecided neighbours, which it returns."""
        self.x[v] = s
        if self.first[v] < self.last[v]:
            self.est[self.first[v] : self.last[v]] += float(self.graph.node_usages(v)[s]) - self.min_use[v]
        out = []
        for e, w, first in self.adj[v]:
            if self.x[w] >= 0:
                continue
            m = self.graph.edge_matrix(e)
            self.comm[w] += m[s, :] if first else m[:, s]
            out.append(w)
        return out


def solve_bfs(graph: StrategyGraph, configured: Mapping[int, int] | None = None) -> Solution:
    """A strategy per node by MindSpore's propagation from ``configured`` (node -> strategy
    index; those never change), rules in the module docstring. Raises :class:`SearchError`
    for a configured node or strategy out of range."""
    start = time.perf_counter()
    n = graph.num_nodes
    walk = _Walk(graph)
    heap: list[tuple[float, int, int]] = []
    seq = 0

    def push(ws: list[int]) -> None:
        nonlocal seq
        for w in ws:
            heapq.heappush(heap, (float(walk.comm[w].min()), seq, w))
            seq += 1

    conf = sorted((configured or {}).items())
    for v, s in conf:
        if not 0 <= v < n:
            raise SearchError(f"configured node {v}: out of range for {n} nodes")
        if not 0 <= s < graph.k(v):
            raise SearchError(f"configured node {v}: strategy {s} out of range (the node has {graph.k(v)})")
    for v, s in conf:
        walk.x[v] = s  # all configured nodes are decided before any neighbour is priced
    for v, s in conf:
        walk.x[v] = -1
        push(walk.decide(v, s))
    while True:
        while heap:
            key, _, v = heapq.heappop(heap)
            if walk.x[v] >= 0:
                continue
            now = float(walk.comm[v].min())
            if now > key:  # stale: more neighbours were decided since it was pushed
                heapq.heappush(heap, (now, seq, v))
                seq += 1
                continue
            push(walk.decide(v, walk.choose(v, walk.fitting(v))))
        rest = [v for v in range(n) if walk.x[v] < 0]
        if not rest:
            break
        seed = max(rest, key=lambda v: (int(graph.node_costs(v).min()), -v))
        push(walk.decide(seed, walk.choose(seed, walk.fitting(seed))))
    score = evaluate(graph, walk.x)
    return Solution(
        tuple(walk.x), score.cost, score.peak_usage, score.feasible, "bfs", False, time.perf_counter() - start
    )
