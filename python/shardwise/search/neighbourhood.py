"""Very large neighbourhood search by the ILP: every node may keep its incumbent strategy, take
its least-usage strategy or one of the ``m`` strategies cheapest with its neighbours as they are,
and the ILP finds the best assignment of that sub-instance, usage limit included.

A single-node move sees one of these strategies at a time, with every other node fixed; the
neighbourhood holds all their combinations (up to ``(m + 2) ** n`` assignments), so that nodes
coupled by their edges, or only by the usage limit (one node frees memory that another needs at
the same time point), change together. Its optimum is exact, by the ILP over the restricted
instance (:func:`shardwise.search.merge.solve_restricted`, which contracts forbidden components
where that makes the model smaller). Ahuja, Ergun, Orlin & Punnen, "A survey of very large-scale
neighborhood search techniques", Discrete Applied Mathematics 123 (2002).

:class:`Descent` repeats it from each new incumbent: the same ``m`` while it improves, ``m + 1``
once a neighbourhood is proven to hold nothing better, and from :data:`LAST_M` on ``2 m`` while
such a proof takes at most :data:`GROW_SHARE` of a full round's time: on the validation instance
L the large neighbourhoods are cheap (``m = 40``, 6M terms, solved in 33 s) and hold what the
small ones do not. On the validation instance N of issue 27
(40,958 nodes), from a penalty-search answer 1.16 % over the record, four rounds of ``m = 1``
(146-149k terms, about 3 s each) and then ``m = 2`` (245k, 8-17 s each), all solved to
optimality, ended 0.30 % over the record after 63 s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from shardwise.search.graph import StrategyGraph, evaluate
from shardwise.search.ilp import ModelTooLarge
from shardwise.search.local import Solution, check_time_limit
from shardwise.search.merge import solve_restricted

F64 = npt.NDArray[np.float64]

#: First ``m`` of :class:`Descent` ...
FIRST_M = 1
#: ... and its last: a round at this ``m`` that proves its neighbourhood holds nothing better
#: ends the descent. From answers of 90 s runs of the penalty search: on N, rounds of ``m = 1``
#: (146-149k terms) took about 3 s each and found 0.39 % in four rounds, then ``m = 2`` (245k)
#: 8-17 s each and 0.47 % more (``m = 2`` from the start: 15-21 s per round; ``m = 3``, 361k,
#: 49-52 s for another 0.3 %); on K, ``m = 1`` took 11-33 s and ``m = 2`` 30-35 s per round,
#: and ``m = 3`` (598k) was not solved in 60 s; on S, ``m`` up to 3 found nothing (4-8 s per
#: round) and ``m = 4`` 0.03 % in 51 s.
LAST_M = 2
#: A round at ``m >= LAST_M`` that proves its neighbourhood holds nothing better within this
#: share of a full round's time (:attr:`Descent.full_seconds`) doubles ``m`` instead of ending
#: the descent: where large neighbourhoods are cheap to solve, they find what small ones cannot.
#: On the validation instance L (28,526 nodes, up to 1,060 strategies), from an answer 22 % over
#: the record, ``m`` = 2, 3 and 4 each took 2-3 s and found nothing, while ``m = 10`` (2.5M
#: terms) took 10 s to +4.6 %, ``m = 20`` 22 s to +0.69 % and ``m = 40`` 33 s to −0.16 %, each
#: proven optimal. At a third (rounds up to 10 s of 30 grow), L's descent inside the penalty
#: search stopped at ``m = 4`` to 8; K's rounds (11-35 s at ``m`` = 1 and 2) do not grow.
GROW_SHARE = 1 / 2
#: A round at a grown ``m`` takes at most this many times as long as the round that let ``m``
#: grow, plus a second: doubling ``m`` took L's rounds from 3 to 7 s and from 7 to 15-20 s, but
#: S's from 4 s (``m = 2``) to more than 30 s (``m = 4``, which found nothing), and that round
#: held the merging trajectory for its whole 30 s.
GROW_TIME = 4.0
#: A round that lowers the cost by less than this share counts as one that found nothing (on N,
#: rounds of ``m = 2`` went on finding 1e-8 of the cost each, 8 s apiece).
MIN_GAIN = 1e-4


def local_costs(graph: StrategyGraph, assignment: Sequence[int]) -> F64:
    """Each strategy's node cost plus the costs of its node's edges with the other ends at
    their strategies in ``assignment`` (a self-edge: its diagonal entry); shape ``(Σ k_v,)``,
    indexed like ``graph.cost`` (float64: forbidden entries, 10^18, may add up past int64)."""
    x = np.asarray(assignment, dtype=np.int64)
    out = graph.cost.astype(np.float64)
    if graph.num_edges == 0:
        return out
    ks = graph.offsets[1:] - graph.offsets[:-1]
    a, b = graph.edges[:, 0], graph.edges[:, 1]
    loop = a == b
    pair, selfs = np.nonzero(~loop)[0], np.nonzero(loop)[0]
    ka, kb = ks[a], ks[b]
    off = graph.edge_offsets[:-1]
    # End a: row i of each edge's matrix at column x[b].
    e, i = _entries(pair, ka)
    np.add.at(out, graph.offsets[a[e]] + i, graph.edge_cost[off[e] + i * kb[e] + x[b[e]]])
    # End b: column j at row x[a].
    e, j = _entries(pair, kb)
    np.add.at(out, graph.offsets[b[e]] + j, graph.edge_cost[off[e] + x[a[e]] * kb[e] + j])
    # A self-edge: its diagonal.
    e, i = _entries(selfs, ka)
    np.add.at(out, graph.offsets[a[e]] + i, graph.edge_cost[off[e] + i * kb[e] + i])
    return out


def _entries(
    edges: npt.NDArray[np.intp], k: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
    """For edges ``edges`` with ``k[e]`` strategies at the end in question: one pair
    ``(edge, strategy index)`` per strategy, edge by edge, as two flat arrays."""
    e = np.repeat(edges, k[edges])
    return e, np.arange(e.size) - np.repeat(np.cumsum(k[edges]) - k[edges], k[edges])


def candidates(graph: StrategyGraph, assignment: Sequence[int], m: int) -> list[list[int]]:
    """The neighbourhood (module docstring): for each node, sorted, its strategy in
    ``assignment``, its least-usage strategy (ties: least node cost) and its ``m`` strategies of
    least :func:`local_costs` (ties: lowest index). Raises :class:`ValueError` for ``m < 0`` or
    an assignment of the wrong length."""
    n = graph.num_nodes
    if m < 0:
        raise ValueError(f"m: expected an integer >= 0, got {m}")
    if len(assignment) != n:
        raise ValueError(f"assignment: expected {n} strategies (one per node), got {len(assignment)}")
    ks = graph.offsets[1:] - graph.offsets[:-1]
    node = np.repeat(np.arange(n), ks)
    local = local_costs(graph, assignment)
    # By node, then local cost, then index.
    order = np.lexsort((np.arange(node.size), local, node))
    rank = np.arange(node.size) - graph.offsets[node]
    best = order[rank < m] - graph.offsets[node[order[rank < m]]]
    owner = node[order[rank < m]]
    least = np.lexsort((graph.cost, graph.usage, node))
    least_of = least[rank == 0] - graph.offsets[:-1]
    allowed: list[set[int]] = [{int(s), int(t)} for s, t in zip(assignment, least_of)]
    for v, s in zip(owner.tolist(), best.tolist()):
        allowed[v].add(s)
    return [sorted(a) for a in allowed]


def improve(
    graph: StrategyGraph,
    incumbent: Sequence[int],
    time_limit: float,
    m: int = FIRST_M,
    *,
    threads: int = 1,
) -> Solution:
    """Best assignment of the neighbourhood :func:`candidates` ``(graph, incumbent, m)`` within
    ``time_limit`` seconds (the neighbourhood's construction included), warm-started from
    ``incumbent`` (a feasible assignment), so never worse than it; ``method`` ``"neighbourhood"``,
    ``optimal`` when the neighbourhood was solved to optimality (not ``graph``). Raises
    :class:`SearchError` for a bad time limit, :class:`ValueError` as :func:`candidates`, and
    :class:`shardwise.search.ilp.ModelTooLarge` when the sub-instance's model would not fit."""
    begin = time.perf_counter()
    t = check_time_limit(time_limit)
    allowed = candidates(graph, incumbent, m)
    sol = solve_restricted(graph, allowed, incumbent, t, threads, begin)
    return Solution(
        sol.assignment,
        sol.cost,
        sol.peak_usage,
        sol.feasible,
        "neighbourhood",
        optimal=sol.optimal,
        seconds=time.perf_counter() - begin,
    )


class Descent:
    """Repeated :func:`improve` (module docstring): ``m`` starts at :data:`FIRST_M`, stays while
    a round improves (by at least :data:`MIN_GAIN` of the cost), grows by one once a round
    proves its neighbourhood holds nothing better (or only that little better), and goes back
    to :attr:`resume` (at first :data:`FIRST_M`: the largest ``m`` solved fast so far) when
    the incumbent changes from outside (a caller's other assignment; one cheaper by less than
    :data:`MIN_GAIN`, or as cheap, keeps ``m``). From :data:`LAST_M` on,
    a round that proves nothing better within :data:`GROW_SHARE` of :attr:`full_seconds` (of
    its own time limit without it) doubles ``m`` (never to :attr:`ceiling` or beyond, nor past
    the largest strategy count, where the neighbourhood already holds every strategy); any
    other round that proves nothing better, a round that ran out of time without improving, or
    one whose model would not fit ends the descent (:attr:`done`) until the incumbent changes
    (for good when the model at :data:`FIRST_M` would not fit: :attr:`too_large`). A grown
    ``m`` whose round ran out of time or would not fit becomes the :attr:`ceiling`; rounds at a
    grown ``m`` take at most :data:`GROW_TIME` times as long as the round that let it grow. A
    round the caller gave less than its own limit (:attr:`full_seconds`, or that of a grown
    ``m``) and that ran out of time without improving changes nothing: the next call makes it
    again."""

    def __init__(self, graph: StrategyGraph, threads: int = 1, full_seconds: float | None = None) -> None:
        self.graph = graph
        self.threads = threads
        #: A full round's time limit, seconds: a round is fast when proven within
        #: :data:`GROW_SHARE` of it (``None``: of the round's own limit). A round the clock cuts
        #: short, near a deadline, says little about the next ``m``.
        self.full_seconds = full_seconds
        self.m = FIRST_M
        self.done = False
        #: A neighbourhood at :data:`FIRST_M` was too large for the ILP: the descent stays done.
        self.too_large = False
        #: The ``m`` of the last round made (for traces).
        self.round_m = FIRST_M
        #: The smallest grown ``m`` (above :data:`LAST_M`) whose round ran out of time without
        #: improving or whose model would not fit; ``m`` grows only below it.
        self.ceiling: int | None = None
        #: The ``m`` a new incumbent starts at: the largest whose round was proven fast (within
        #: :data:`GROW_SHARE` of :attr:`full_seconds`), halved by a round at or below it that
        #: was not.
        self.resume = FIRST_M
        #: Time limit of rounds at a grown ``m`` (:data:`GROW_TIME`), seconds.
        self._grown_limit = float("inf")
        #: Largest strategy count of a node: at ``m`` one below it, every strategy of every
        #: node is in the neighbourhood.
        self._kmax = int(np.max(graph.offsets[1:] - graph.offsets[:-1], initial=1))
        self._at: tuple[int, ...] | None = None
        self._cost = 0

    def step(self, incumbent: Sequence[int], time_limit: float) -> Solution | None:
        """One round from ``incumbent`` (feasible) within ``time_limit`` seconds: its answer, or
        ``None`` when the descent is :attr:`done` at this incumbent or the model would not fit."""
        x = tuple(int(s) for s in incumbent)
        if x != self._at:
            cost = evaluate(self.graph, x).cost
            # A new incumbent less than MIN_GAIN cheaper keeps m, as a round's own gain that
            # small does: on L, merges whose gains did not show in six digits sent m back to 2
            # four times in 20 s, and the descent never grew past it (+2.58 %).
            if self._at is None or not self._cost - MIN_GAIN * abs(self._cost) <= cost <= self._cost:
                self.m = self.resume
            self._at, self._cost, self.done = x, cost, False
        if self.done or self.too_large:
            return None
        self.round_m = self.m
        # The round's own limit: a full round's, or at a grown m the GROW_TIME one. Given less
        # (the caller's clock: a slot's end, the deadline), a round that proves nothing says
        # nothing about this m: on N, an m = 1 round given 5.5 s of a slot ran out before it
        # proved anything and ended the descent at that incumbent; from 113 s to the end
        # (177 s) it made no round, and the last 37 s went to the polish alone.
        own = self._grown_limit if self.m > LAST_M else float("inf")
        if self.full_seconds is not None:
            own = min(own, self.full_seconds)
        cut = time_limit < own
        time_limit = min(time_limit, own)
        begin = time.perf_counter()
        try:
            sol = improve(self.graph, x, time_limit, self.m, threads=self.threads)
        except ModelTooLarge:
            # Neighbourhoods of other incumbents are about as large: at FIRST_M, none is tried
            # again (on the shared instance U, m = 2 already needs 18.3M nonzeros).
            self.done, self.too_large = True, self.m == FIRST_M
            self._cap()
            self._slow()
            return None
        full = time_limit if self.full_seconds is None else self.full_seconds
        seconds = time.perf_counter() - begin
        fast = sol.optimal and seconds <= GROW_SHARE * full
        if fast:
            self.resume = max(self.resume, self.m)
        elif not cut:
            self._slow()
        before = self._cost
        if sol.feasible and sol.cost < before:
            self._at, self._cost = sol.assignment, sol.cost
        if sol.feasible and sol.cost < before - MIN_GAIN * abs(before):
            pass  # the same m again, from the new incumbent
        elif cut and not sol.optimal:
            pass  # the clock cut it short: the same m again when there is time
        elif sol.optimal and self.m < LAST_M:
            self.m += 1
        elif fast and self._grown() > self.m:
            self.m, self._grown_limit = self._grown(), GROW_TIME * seconds + 1.0
        else:
            self.done = True
            if not sol.optimal:
                self._cap()
        return sol

    @property
    def grown(self) -> bool:
        """Whether the last round's ``m`` was a grown one (above :data:`LAST_M`)."""
        return self.round_m > LAST_M

    def _grown(self) -> int:
        """The ``m`` after the current one once it grows: twice it, below :attr:`ceiling`, at
        most one below the largest strategy count."""
        m = min(2 * self.m, self._kmax - 1)
        return m if self.ceiling is None else min(m, self.ceiling - 1)

    def _slow(self) -> None:
        """The current round was not proven fast: at or below :attr:`resume`, it halves it."""
        if self.m <= self.resume:
            self.resume = max(FIRST_M, self.m // 2)

    def _cap(self) -> None:
        """The current ``m``, if grown, becomes the :attr:`ceiling`."""
        if self.m > LAST_M:
            self.ceiling = self.m if self.ceiling is None else min(self.ceiling, self.m)
