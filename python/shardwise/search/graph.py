"""The strategy graph: the problem every search solves.

Each node ``v`` has ``k(v)`` strategies with a cost and a memory usage, and a liveness interval
``[start, end)`` (half-open, in abstract time steps) during which the chosen strategy's usage
counts; each edge ``(a, b)`` has a ``k(a) × k(b)`` cost matrix (row-major: strategy of ``a`` ×
strategy of ``b``). The objective and the memory rule are those of the ASPLOS 2025 IOPDDL contest
(github.com/asplos-contest/2025 ``IOPDDL.md``; google/iopddl ``iopddl.cc`` ``Evaluate``):

    cost(x)  = Σ_v node_cost[v][x_v] + Σ_(a,b) edge_cost[(a,b)][x_a, x_b]
    usage_t  = Σ_{v : start_v <= t < end_v} usage[v][x_v]   must be <= usage_limit for every t

Costs and usages are integers (int64 each; sums are exact Python ints). For the sharding search
(``shardwise.search.auto``) costs are integer picoseconds and usages bytes per device.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shardwise.errors import SearchError

I64 = npt.NDArray[np.int64]
_I64_MAX = 2**63 - 1


def _int64(name: str, values: Sequence[int] | I64) -> I64:
    try:
        arr = np.asarray(values, dtype=np.int64)
    except OverflowError:
        raise SearchError(f"{name}: expected int64 values, got one outside [-2**63, 2**63)") from None
    except (TypeError, ValueError) as e:
        raise SearchError(f"{name}: expected integers, got {e}") from None
    return arr.reshape(-1)


@dataclass(frozen=True, eq=False)
class StrategyGraph:
    """A strategy graph in flat int64 arrays (see the module docstring).

    ``offsets``: shape ``(n + 1,)``; strategy ``s`` of node ``v`` is at ``offsets[v] + s``.
    ``cost``, ``usage``: shape ``(offsets[n],)``. ``intervals``: shape ``(n, 2)``.
    ``edges``: shape ``(m, 2)`` node pairs. ``edge_offsets``: shape ``(m + 1,)``; the matrix of
    edge ``e`` is ``edge_cost[edge_offsets[e]:edge_offsets[e + 1]]``. ``usage_limit``: bytes (or
    the instance's unit) or ``None`` for no limit. Build with :meth:`build`, which validates.
    """

    offsets: I64
    cost: I64
    usage: I64
    intervals: I64
    edges: I64
    edge_offsets: I64
    edge_cost: I64
    usage_limit: int | None
    name: str = ""

    @staticmethod
    def build(
        node_costs: Sequence[Sequence[int]],
        node_usages: Sequence[Sequence[int]],
        intervals: Sequence[Sequence[int]],
        edges: Sequence[Sequence[int]],
        edge_costs: Sequence[Sequence[int]],
        usage_limit: int | None = None,
        name: str = "",
    ) -> StrategyGraph:
        """A graph from nested per-node / per-edge lists (the contest's JSON layout).

        Raises :class:`~shardwise.errors.SearchError` naming the node or edge when a node has no
        strategy, costs and usages differ in length, an interval is not ``0 <= start <= end``, an
        edge names a missing node or is not a pair, or its matrix is not ``k(a) * k(b)`` long.
        """
        n = len(node_costs)
        if len(node_usages) != n or len(intervals) != n:
            raise SearchError(
                f"expected one cost list, usage list and interval per node; got {n} cost lists, "
                f"{len(node_usages)} usage lists and {len(intervals)} intervals"
            )
        ks = [len(c) for c in node_costs]
        for v, (c, u) in enumerate(zip(node_costs, node_usages)):
            if not c:
                raise SearchError(f"node {v}: expected at least one strategy, got none")
            if len(u) != len(c):
                raise SearchError(f"node {v}: expected {len(c)} usages (one per strategy), got {len(u)}")
        for v, iv in enumerate(intervals):
            if len(iv) != 2 or not 0 <= iv[0] <= iv[1]:
                raise SearchError(f"node {v}: expected an interval [start, end) with 0 <= start <= end, got {list(iv)}")
        if len(edge_costs) != len(edges):
            raise SearchError(f"expected one cost matrix per edge ({len(edges)}), got {len(edge_costs)}")
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(ks, out=offsets[1:])
        for e, pair in enumerate(edges):
            if len(pair) != 2:
                raise SearchError(f"edge {e}: expected a pair of nodes, got {list(pair)}")
            a, b = pair
            if not (0 <= a < n and 0 <= b < n):
                raise SearchError(f"edge {e}: node pair ({a}, {b}) out of range for {n} nodes")
            if len(edge_costs[e]) != ks[a] * ks[b]:
                raise SearchError(
                    f"edge {e} ({a}, {b}): expected {ks[a] * ks[b]} costs ({ks[a]} x {ks[b]}), got {len(edge_costs[e])}"
                )
        eoff = np.zeros(len(edges) + 1, dtype=np.int64)
        np.cumsum([len(m) for m in edge_costs], out=eoff[1:])
        flat = [x for m in edge_costs for x in m]
        usage = _int64("usages", [x for u in node_usages for x in u])
        if usage.size and int(usage.min()) < 0:
            raise SearchError(f"usages: expected values >= 0, got {int(usage.min())}")
        if usage_limit is not None and not 0 <= usage_limit <= _I64_MAX:
            raise SearchError(f"usage_limit: expected an int64 >= 0, got {usage_limit}")
        return StrategyGraph(
            offsets=offsets,
            cost=_int64("costs", [x for c in node_costs for x in c]),
            usage=usage,
            intervals=_int64("intervals", [x for iv in intervals for x in iv]).reshape(n, 2),
            edges=_int64("edges", [x for p in edges for x in p]).reshape(len(edges), 2),
            edge_offsets=eoff,
            edge_cost=_int64("edge costs", flat),
            usage_limit=usage_limit,
            name=name,
        )

    @property
    def num_nodes(self) -> int:
        return int(self.intervals.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edges.shape[0])

    def k(self, v: int) -> int:
        """Number of strategies of node ``v``."""
        return int(self.offsets[v + 1] - self.offsets[v])

    def node_costs(self, v: int) -> I64:
        return self.cost[self.offsets[v] : self.offsets[v + 1]]

    def node_usages(self, v: int) -> I64:
        return self.usage[self.offsets[v] : self.offsets[v + 1]]

    def time_points(self) -> tuple[int, I64, I64]:
        """The distinct starts of non-empty intervals (every usage peak is at one of them) as
        points ``0 .. p-1``: ``(p, first, last)``, node ``v`` live at points
        ``first[v] .. last[v]-1`` (none when its interval is empty); shapes ``(n,)``."""
        iv = self.intervals
        times = np.unique(iv[iv[:, 0] < iv[:, 1], 0])
        return len(times), np.searchsorted(times, iv[:, 0]), np.searchsorted(times, iv[:, 1])

    def edge_matrix(self, e: int) -> I64:
        """The cost matrix of edge ``e``, shape ``(k(a), k(b))``."""
        a, b = (int(x) for x in self.edges[e])
        return self.edge_cost[self.edge_offsets[e] : self.edge_offsets[e + 1]].reshape(self.k(a), self.k(b))


@dataclass(frozen=True)
class Score:
    """The exact contest score of an assignment: ``cost`` (Σ node + Σ edge costs, a Python int),
    ``peak_usage`` (the largest total usage over all time points) and ``feasible``
    (``peak_usage <= usage_limit``)."""

    cost: int
    peak_usage: int
    feasible: bool


def evaluate(graph: StrategyGraph, assignment: Sequence[int]) -> Score:
    """Scores ``assignment`` (one strategy index per node) exactly as the contest's ``Evaluate``
    (google/iopddl ``iopddl.cc``), in unbounded Python integers.

    Raises :class:`~shardwise.errors.SearchError` if the length is not the number of nodes or an
    index is out of range for its node.
    """
    n = graph.num_nodes
    if len(assignment) != n:
        raise SearchError(f"assignment: expected {n} strategy indices (one per node), got {len(assignment)}")
    x = np.asarray(assignment, dtype=np.int64).reshape(-1)
    ks = np.diff(graph.offsets)
    bad = np.nonzero((x < 0) | (x >= ks))[0]
    if bad.size:
        v = int(bad[0])
        raise SearchError(f"node {v}: strategy {int(x[v])} out of range (the node has {int(ks[v])})")
    flat = graph.offsets[:-1] + x
    total = sum(int(c) for c in graph.cost[flat])
    if graph.num_edges:
        a, b = graph.edges[:, 0], graph.edges[:, 1]
        idx = graph.edge_offsets[:-1] + x[a] * ks[b] + x[b]
        total += sum(int(c) for c in graph.edge_cost[idx])
    starts, ends = graph.intervals[:, 0], graph.intervals[:, 1]
    live = starts < ends
    peak = 0
    if live.any():
        times = np.concatenate([starts[live], ends[live]])
        deltas = [int(u) for u in graph.usage[flat][live]]
        order = np.lexsort((np.concatenate([np.ones(int(live.sum())), -np.ones(int(live.sum()))]), times))
        cur = 0
        signed = deltas + [-d for d in deltas]
        for i in order:
            cur += signed[int(i)]
            peak = max(peak, cur)
    feasible = graph.usage_limit is None or peak <= graph.usage_limit
    return Score(cost=total, peak_usage=peak, feasible=feasible)


def point_sums(npoints: int, first: I64, last: I64, values: I64) -> list[int]:
    """Σ of ``values[i]`` over the entries live at each time point ``0 .. npoints-1`` (entry
    ``i`` at points ``first[i] .. last[i]-1``, :meth:`StrategyGraph.time_points`), exact
    (Python ints); length ``npoints``."""
    delta = [0] * (npoints + 1)
    for f, l_, val in zip(first.tolist(), last.tolist(), values.tolist(), strict=True):
        delta[f] += val
        delta[l_] -= val
    return list(itertools.accumulate(delta[:-1]))


def usage_profile(graph: StrategyGraph, assignment: Sequence[int]) -> list[int]:
    """Usage of ``assignment`` at each of ``graph``'s time points
    (:meth:`StrategyGraph.time_points`), exact (Python ints); length ``p``."""
    npoints, first, last = graph.time_points()
    live = np.nonzero(first < last)[0]
    use = graph.usage[graph.offsets[live] + np.asarray(assignment, dtype=np.int64)[live]]
    return point_sums(npoints, first[live], last[live], use)


def restrict(graph: StrategyGraph, keep: Mapping[int, Sequence[int]]) -> tuple[StrategyGraph, list[I64]]:
    """``graph`` with node ``v`` limited to the strategies ``keep[v]`` (indices into its
    own; nodes not in ``keep`` keep all). Returns the new graph and, per node, the original
    index of each of its strategies (to map an assignment back: ``kept[v][x_v]``). Costs,
    usages, intervals and the usage limit are the original's, so an assignment scores the same
    in both. Raises :class:`SearchError` for an empty or out-of-range list."""
    n = graph.num_nodes
    kept: list[I64] = []
    for v in range(n):
        k = graph.k(v)
        if v in keep:
            idx = np.asarray(list(keep[v]), dtype=np.int64)
            if idx.size == 0 or int(idx.min()) < 0 or int(idx.max()) >= k:
                raise SearchError(f"node {v}: expected strategy indices in [0, {k}), got {list(keep[v])}")
        else:
            idx = np.arange(k, dtype=np.int64)
        kept.append(idx)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(i) for i in kept], out=offsets[1:])
    flat = np.concatenate([graph.offsets[v] + kept[v] for v in range(n)]) if n else np.zeros(0, dtype=np.int64)
    mats = []
    for e, (a, b) in enumerate(graph.edges.tolist()):
        mats.append(graph.edge_matrix(e)[np.ix_(kept[a], kept[b])].reshape(-1))
    eoff = np.zeros(graph.num_edges + 1, dtype=np.int64)
    np.cumsum([m.size for m in mats], out=eoff[1:])
    sub = StrategyGraph(
        offsets=offsets,
        cost=graph.cost[flat],
        usage=graph.usage[flat],
        intervals=graph.intervals.copy(),
        edges=graph.edges.copy(),
        edge_offsets=eoff,
        edge_cost=np.concatenate(mats) if mats else np.zeros(0, dtype=np.int64),
        usage_limit=graph.usage_limit,
        name=graph.name,
    )
    return sub, kept


def peak_lower_bound(graph: StrategyGraph) -> int:
    """A lower bound on every assignment's peak usage: the largest, over the time points, of
    the sum of each live node's smallest usage (exact per point; the nodes' choices are only
    coupled across points, which the bound ignores)."""
    npoints, first, last = graph.time_points()
    live = np.nonzero(first < last)[0]
    mins = np.array([int(graph.node_usages(int(v)).min()) for v in live], dtype=np.int64)
    return max(point_sums(npoints, first[live], last[live], mins), default=0)
