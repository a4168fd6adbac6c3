"""Exact graph reductions before the ILP (Alpa, Zheng et al. OSDI 2022 §4.2, merges trivial
nodes; the dominance rule is the usual one for discrete labelling problems):

* dominated strategies removed: ``t`` dominates ``s`` on node ``v`` when its node cost and its
  usage (ignored for an empty interval) are no larger and, on every incident edge, its row of
  the cost matrix is elementwise no larger; any solution using ``s`` stays as good with ``t``.
* single-strategy nodes folded: their cost becomes a constant, their row of each incident
  edge's matrix is added to the neighbour's node costs, their usage to a fixed base usage.
* parallel edges merged: matrices of edges joining the same two nodes are summed.

Repeated until nothing changes. :class:`Reduced` maps a solution back to the original indices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shardwise.search.graph import StrategyGraph

F = npt.NDArray[np.int64]


@dataclass
class Reduced:
    """``keep[v]``: the original strategy indices still allowed on node ``v`` (length 1: fixed).
    ``node_cost[v]`` / ``node_usage[v]``: their costs (folded neighbours included) and usages.
    ``edges``: ``{(a, b): matrix}`` with ``a < b``, both nodes free, over kept strategies.
    ``constant``: the folded cost. ``base_usage``: usage of fixed nodes, as ``(interval, bytes)``."""

    keep: list[list[int]]
    node_cost: list[F]
    node_usage: list[F]
    edges: dict[tuple[int, int], F]
    constant: int
    removed_strategies: int

    def free_nodes(self) -> list[int]:
        return [v for v, k in enumerate(self.keep) if len(k) > 1]

    def expand(self, choice: dict[int, int]) -> list[int]:
        """Original strategy per node from ``choice`` (free node → index into ``keep[v]``)."""
        return [k[choice.get(v, 0)] if len(k) > 1 else k[0] for v, k in enumerate(self.keep)]


def reduce_graph(g: StrategyGraph) -> Reduced:
    """Applies the reductions of the module docstring; exact (the optimum is unchanged)."""
    n = g.num_nodes
    keep = [list(range(g.k(v))) for v in range(n)]
    cost = [g.node_costs(v).copy() for v in range(n)]
    usage = [g.node_usages(v).copy() for v in range(n)]
    live = [bool(g.intervals[v, 0] < g.intervals[v, 1]) for v in range(n)]
    edges: dict[tuple[int, int], F] = {}
    for e in range(g.num_edges):
        a, b = int(g.edges[e, 0]), int(g.edges[e, 1])
        m = g.edge_matrix(e)
        if a == b:  # a self-edge only ever uses its diagonal
            cost[a] = cost[a] + np.diag(m)
            continue
        if a > b:
            a, b, m = b, a, m.T
        edges[(a, b)] = edges[(a, b)] + m if (a, b) in edges else m.copy()
    constant = 0
    removed = 0
    adj: list[set[int]] = [set() for _ in range(n)]
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)

    def mat(v: int, w: int) -> F:  # rows: strategies of v
        return edges[(v, w)] if v < w else edges[(w, v)].T

    dirty = set(range(n))
    while dirty:
        v = dirty.pop()
        k = len(keep[v])
        if k > 1:
            cols = [cost[v][:, None]]
            if live[v]:
                cols.append(usage[v][:, None])
            cols += [mat(v, w) for w in sorted(adj[v])]
            feats = np.concatenate(cols, axis=1)
            alive = np.ones(k, dtype=bool)
            for s in range(k):
                if not alive[s]:
                    continue
                le = np.all(feats <= feats[s], axis=1) & alive
                le[s] = False
                # t dominates s; among equal rows keep the lowest index.
                eq = np.all(feats == feats[s], axis=1)
                dominated_by_other = le & ~(eq & (np.arange(k) > s))
                if dominated_by_other.any():
                    alive[s] = False
            if not alive.all():
                idx = np.nonzero(alive)[0]
                removed += k - idx.size
                keep[v] = [keep[v][i] for i in idx]
                cost[v], usage[v] = cost[v][idx], usage[v][idx]
                for w in adj[v]:
                    if v < w:
                        edges[(v, w)] = edges[(v, w)][idx, :]
                    else:
                        edges[(w, v)] = edges[(w, v)][:, idx]
                    dirty.add(w)
        if len(keep[v]) == 1:
            constant += int(cost[v][0])
            cost[v] = cost[v][:1] * 0
            for w in list(adj[v]):
                cost[w] = cost[w] + mat(v, w)[0]
                del edges[(min(v, w), max(v, w))]
                adj[w].discard(v)
                dirty.add(w)
            adj[v].clear()
    return Reduced(keep, cost, usage, edges, constant, removed)
