"""MindSpore's sharding propagation on a strategy graph (MindSpore r1.7 design note "Sharding
Propagation", ``shared/references/mindspore-sharding-propagation.md``): start from the
user-configured nodes, visit neighbours breadth first in both directions (producers and
consumers), and give each newly reached node the strategy that costs least against its
already decided neighbours: a zero-communication strategy (every edge to a decided neighbour
costs 0) when there is one, the cheapest by its own cost among those; otherwise the cheapest by
edge costs plus its own cost. Configured nodes keep their strategy.

Without configured nodes (or for a component none reaches) the search starts from the
undecided node with the largest cheapest own cost (the heaviest op), given that cheapest
strategy. The memory budget is not enforced by the walk; the returned ``Solution`` says
whether the result fits (``feasible``). Time: ``O(Σ edges · k_a · k_b)``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping

import numpy as np

from shardwise.errors import SearchError
from shardwise.search.graph import StrategyGraph, evaluate
from shardwise.search.local import Solution

__all__ = ["solve_bfs"]


def _adjacency(graph: StrategyGraph) -> list[list[tuple[int, int, bool]]]:
    """Per node: (edge, neighbour, node is the edge's first end)."""
    adj: list[list[tuple[int, int, bool]]] = [[] for _ in range(graph.num_nodes)]
    for e, (a, b) in enumerate(graph.edges.tolist()):
        adj[a].append((e, b, True))
        adj[b].append((e, a, False))
    return adj


def _choose(graph: StrategyGraph, adj: list[list[tuple[int, int, bool]]], x: list[int], v: int) -> int:
    comm = np.zeros(graph.k(v), dtype=np.float64)
    for e, u, first in adj[v]:
        if x[u] < 0:
            continue
        m = graph.edge_matrix(e)
        comm += m[:, x[u]] if first else m[x[u], :]
    own = graph.node_costs(v).astype(np.float64)
    free = np.nonzero(comm == 0)[0]
    if free.size:
        return int(free[np.argmin(own[free])])
    return int(np.argmin(comm + own))


def solve_bfs(graph: StrategyGraph, configured: Mapping[int, int] | None = None) -> Solution:
    """A strategy per node by breadth-first propagation from ``configured`` (node -> strategy
    index; those never change). Raises :class:`SearchError` for a configured node or strategy
    out of range."""
    start = time.perf_counter()
    n = graph.num_nodes
    x = [-1] * n
    queue: deque[int] = deque()
    for v, s in sorted((configured or {}).items()):
        if not 0 <= v < n:
            raise SearchError(f"configured node {v}: out of range for {n} nodes")
        if not 0 <= s < graph.k(v):
            raise SearchError(f"configured node {v}: strategy {s} out of range (the node has {graph.k(v)})")
        x[v] = s
        queue.append(v)
    adj = _adjacency(graph)
    while True:
        while queue:
            u = queue.popleft()
            for _, w, _ in adj[u]:
                if x[w] < 0:
                    x[w] = _choose(graph, adj, x, w)
                    queue.append(w)
        rest = [v for v in range(n) if x[v] < 0]
        if not rest:
            break
        seed = max(rest, key=lambda v: (int(graph.node_costs(v).min()), -v))
        x[seed] = int(np.argmin(graph.node_costs(seed)))
        queue.append(seed)
    score = evaluate(graph, x)
    return Solution(tuple(x), score.cost, score.peak_usage, score.feasible, "bfs", False, time.perf_counter() - start)
