"""Memory as a soft constraint: node-specific usage penalties, each relaxed problem solved
exactly (or to a good bound) as a cost function network by toulbar2 (:mod:`.wcsp`).

The approach of the IOPDDL 2025 winners (Staudt & Blacher, "Soft Constraints, Strong
Solutions: Optimizing Intra-Operator Parallelism for Distributed Deep Learning"): drop the
usage limit and charge each node ``v`` a penalty ``w_v`` per unit of usage instead, so that the
problem is an unconstrained pairwise cost function network

    minimise  Σ_v (c_vs + w_v · (u_vs − min_s u_vs)) + Σ_(a,b) C_ab[s_a, s_b].

The penalties start from memory prices found by the Lagrangian cycles of the local search
(:func:`shardwise.search.local.lagrange_prices`, run for :data:`PRICE_SHARE` of the time while
the toulbar2 workers build their networks): ``w_v = Σ λ_t`` over ``v``'s liveness range, with
``λ`` the average of the cycles' prices once a descent optimum fitted the limit. From zero, the
relaxed optimum of the shared instance S started 26 times over the limit and took about 140 of
its 240 s to come near it.

After each solve (this module's rule, tuned on the shared IOPDDL instances) only nodes live
where the usage went over the limit have their penalties raised:

* over the limit: each node live at a time point over it gets ``w_v += η · λ₀ · min(o_v, 1)``
  (``o_v``: the largest overflow along its liveness range, as a share of the limit); the other
  penalties decay by :data:`DECAY`; the step ``η`` (from :data:`ETA0`) grows 1.5× while the
  peak is more than 5% over and holds while it is over by less (unless the relaxed optimum is
  the previous one again, or its overflow fell by less than a fifth, :data:`STALL`: on M the
  same optimum 1.1% over came back four rounds running); such a stalled round also multiplies
  the hot nodes' penalties by ``1 + b`` (:data:`STALL_BOOST`, growing 1.5× per stalled round in
  a row), since ``λ₀`` can be far below penalties that start from Lagrangian prices;
* within the limit: all penalties decay, by ``DECAY ** (2 ** j)`` on the ``j``-th fitting solve
  in a row (so that an overshoot is undone quickly), and ``η`` shrinks 0.7×.

``λ₀`` is the median exchange rate (cost per usage unit between a node's cheapest and its
least-usage strategy). Each relaxed optimum at most 30% over the limit, closer to it than
every earlier one of its trajectory (:data:`REPAIR_WITHIN`), or any while no feasible
assignment off the forbidden entries is known (on the validation instance L a first repair
that landed on them, at 9e19, once stopped every later repair of optima 36-41 % over) is
repaired into the limit and polished by the feasible local search
(:func:`shardwise.search.local.solve_local`, ``lagrange_share=0``); the best feasible
assignment is returned.

Merging (:mod:`shardwise.search.merge`): the pool of relaxed optima and repaired assignments
spans a sub-instance (each node restricted to the strategies some pooled assignment gives it)
whose optimum, usage limit included, the ILP finds. The relaxed optima that break the limit
supply cheap strategies, the repaired ones feasible ones, and the ILP combines them. When the
sub-instance has at most :data:`MERGE_MAX_TERMS` strategies plus edge-matrix entries and at
most :data:`MERGE_MAX_ROWS` memory-row entries, it is merged whole every :data:`MERGE_EVERY`
rounds and once at the end (each whole merge only with at least the time the last one took,
and the rounds keep back 1.5 times that for the last one: HiGHS can overrun its limit); else
the last :data:`WINDOWS_SHARE` of the time goes to merging windows of :data:`WINDOW_TERMS`
around the incumbent.

The trajectories' first rounds (from a queue they share) solve the relaxed problem at the
start prices times each of :data:`START_SCALES`, without a hint; each of these relaxed optima
is repaired and pooled, and each trajectory goes on from the scale of its own cheapest repair.
Once all are in, the merging trajectory makes the start merges (:meth:`_Shared.merge_starts`):
the best assignment merged with each start's relaxed optimum and repair in turn. A whole merge
that stalls ends the whole merges; each later merge takes only what was pooled since the last
one, with the best assignment (:meth:`_Shared._relink`).

At :data:`RESTART_SHARE` of its time each trajectory starts again from fresh prices (a new
price search with another seed), without a hint: the pool keeps the first basin's assignments,
and the merges combine the two basins. The merging trajectory also descends from the best
assignment (:class:`shardwise.search.neighbourhood.Descent`: every node may keep its strategy,
take its least-usage one or one of the ``m`` cheapest with its neighbours fixed, and the ILP
solves that neighbourhood exactly; rounds of at most :data:`NEIGHBOURHOOD_SECONDS`, ``m``
doubling while they are proven fast), merging the pool after each round. It makes a descent
slot (rounds, each with its merge, for up to one round's time while the descent has rounds to
make; one round per slot grew ``m`` by one step per penalty round, and L's ``m = 8`` came 65 s
after the restart) when the descent has a round to make at the best assignment (each new best
starts it again, at the largest ``m`` solved fast; one cheaper by less than
:data:`shardwise.search.neighbourhood.MIN_GAIN` keeps its ``m``), that assignment is as old as the last slot
took (at first two slices) unless the descent or a merge of the slot found it, and the
descent has taken no longer than the penalty rounds of the same half (before or since the
restart): so the descent takes at most about half of the merging trajectory's time, does not
start from assignments the rounds are still improving on (on the shared instance K, where the
rounds find a better assignment every few seconds, a trajectory that descended whenever it
could lost its second basin to rounds of 46-62 s whose answers were beaten before they ended,
and ended at +0.53 % and +2.73 % against −1.39 and −2.48 % before), and does not hold off the
restart (counted over the whole search, the first half's rounds paid for a descent that ran on
N until 166 of 180 s, and the second basin was lost: +4.20 %). Repairs and merges end in local
optima of single-node moves that this neighbourhood still improves: on the validation instance
N, rounds from a 90 s answer 1.16 % over the record brought it to +0.30 % in 63 s. After the
trajectories come the last whole merge, then the descent from the best assignment while it
has rounds to make, then windows when the pool is too large to merge whole (on L, windows
found nothing in the last 26 s while the descent waited behind them), and the time left goes
to polishing the best assignment by the feasible local search (:func:`_polish`). Each round,
repair, merge, descent round and new best is logged at
DEBUG level (logger ``shardwise.search.penalty``; HiGHS's runs: ``shardwise.search.ilp``).

Several trajectories (``trajectories=N``) run this loop side by side on threads, each with its
own toulbar2 worker, seed, first step and slice (toulbar2's CPU seconds per relaxed problem,
:data:`SLICE_SECONDS`: long slices give closer optima, short ones more rounds), feeding one pool
and one best assignment; the first one also makes the merges between rounds. Each relaxed
problem is searched from the trajectory's previous relaxed optimum (toulbar2's value heuristic;
on one relaxed problem of S, 8 s from an earlier 8 s answer reached 1.8258e9 against 1.8646e9
from nothing). A slice in which toulbar2 finds no assignment at all is solved again with twice the
time, which that trajectory keeps. A trajectory whose worker fails (toulbar2 crashed) ends,
and the others go on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from shardwise.errors import SearchError
from shardwise.search.graph import StrategyGraph, evaluate, usage_profile
from shardwise.search.ilp import FORBIDDEN_COST, ModelTooLarge
from shardwise.search.local import (
    OnThread,
    Solution,
    check_time_limit,
    interruptible,
    lagrange_prices,
    offer_incumbent,
    on_stop,
    solve_local,
)
from shardwise.search.merge import Merger, merged_terms
from shardwise.search.neighbourhood import Descent
from shardwise.search.wcsp import RelaxedSolver, WorkerStopped
from shardwise.search.wcsp import available as available  # noqa: PLC0414 (re-exported)

F64 = npt.NDArray[np.float64]

#: The search's trajectory: each round, repair, merge and new best, at DEBUG level, with the
#: seconds since the search began (``bench_iopddl.py --log DIR`` writes it for each instance).
log = logging.getLogger("shardwise.search.penalty")

#: First penalty step, as a share of the exchange rate ``λ₀``.
ETA0 = 0.05
#: Share of the time limit for the Lagrangian price search that sets the first penalties, and
#: its cap in seconds (on S, 15 s of it brought the first relaxed optimum from 26x the limit
#: to 1.11x).
PRICE_SHARE = 0.06
PRICE_SECONDS = 20.0
#: An over-limit round whose overflow is more than this share of the previous round's counts
#: as stalled, and grows the step like a large overflow. In a run of S with hints and without
#: this rule, the two trajectories sat 1.9% and 2.1% over the limit for the last 120 of their
#: 240 s.
STALL = 0.8
#: While a round is stalled, the hot nodes' penalties are also multiplied by ``1 + b``, ``b``
#: starting at this share and growing 1.5x per stalled round in a row (at most 1). The additive
#: step ``η · λ₀ · o_v`` alone is too small near the limit when the first (Lagrangian) penalties
#: are far above ``λ₀``: on S (``λ₀`` = 0.48, hot penalties about 4.9) a trajectory 3.1% over
#: raised its hot penalties by 0.2% in ten rounds and stayed over for its last 120 s.
STALL_BOOST = 0.05
#: Per-solve decay of penalties that are not raised.
DECAY = 0.97
#: toulbar2's CPU seconds per relaxed problem, by trajectory (the ``i``-th trajectory takes entry
#: ``i mod len``). Measured on the shared IOPDDL instances with two trajectories (README): 3 s
#: slices (more, rougher rounds) did better on K and U, 8 s slices on M.
SLICE_SECONDS = (8, 3)
#: A relaxed optimum is repaired and polished when at most this share over the limit (or
#: closer to it than every earlier one of its trajectory: on L, trajectories spent their first
#: 90 s between 86 % and 724 % over, so that only their first optimum was ever repaired, and the
#: merges had one feasible assignment to build on; the answer was 20 % over the record).
REPAIR_WITHIN = 0.3
#: Rounds between merges of the pool (module docstring).
MERGE_EVERY = 4
#: Largest sub-instance (strategies + edge-matrix entries, before the ILP's reductions) merged
#: whole. Pools of S span 80-102k terms (two assignments already 80k), which HiGHS solved to
#: optimality in 1-3 s; U's pool of 144 assignments (148k) took 64 s without proving optimality
#: (MERGE_SECONDS then caps it). At 30k, S and U were only ever merged by windows.
MERGE_MAX_TERMS = 200_000
#: Largest bound on the memory rows' entries (:func:`shardwise.search.merge.merged_row_entries`)
#: of a sub-instance merged whole. HiGHS's presolve ignores its time limit: with every usage row,
#: a whole merge of K (82M) took 232 s for a 30 s limit. Merges now start from the rows near the
#: incumbent's peaks (``solve_ilp(lazy_rows=True)``): a pool of K of 85.6M took 21.7 s for a
#: 20 s limit and 61.8 s for 60 s; one of S of 35.3M 6.0 s (9.4 s with every row).
MERGE_MAX_ROWS = 100_000_000
#: Size of one window when the pool is too large to merge whole.
WINDOW_TERMS = 30_000
#: Time limit of one whole merge, and of one window, seconds.
MERGE_SECONDS = 30.0
WINDOW_SECONDS = 15.0
#: Share of the time left that the last windows may take (the rest: HiGHS's overrun). At 0.8,
#: U once ended 2.8 s past the search's deadline (300.8 s of its contest's 300, DGVNS slices
#: with hints).
WINDOW_MARGIN = 0.7
#: The last merge is abandoned (left to end in the background, its answer unused) once it has
#: run this many times its limit, plus a second: HiGHS overran merge limits by up to 35 % in the
#: traced runs, and one last merge of K, given 16.3 s, had not ended after 45 s (no HiGHS run
#: had returned: its presolve or the model's set-up ignores the limit), so the search ran past
#: its deadline and its polish never ran.
LAST_MERGE_OVERRUN = 1.4
#: Time limit of one round of the neighbourhood descent, seconds (from 90 s answers, rounds of
#: ``m = 1`` took about 3 s on N and 11-33 s on K, of ``m = 2`` 8-21 s on N). A round between the
#: penalty rounds that runs out of it without solving its neighbourhood ends the descent there
#: (:attr:`_Shared.descent_slow`): on K one given 60 s took 87.9 s (HiGHS overran) and the
#: merging trajectory made nothing else in its second half. A round at a grown ``m`` that does
#: so only caps ``m`` (:attr:`shardwise.search.neighbourhood.Descent.ceiling`). Also the full
#: round against which :class:`~shardwise.search.neighbourhood.Descent` judges a round fast.
NEIGHBOURHOOD_SECONDS = 30.0
#: Seconds before the deadline at which the last polish (:func:`_polish`) ends.
POLISH_MARGIN = 0.5
#: Share of the time limit kept for windows at the end when the pool is merged by windows.
WINDOWS_SHARE = 0.1
#: Share of its time after which each trajectory starts again from fresh Lagrangian prices
#: (:func:`lagrange_prices` with a new seed, :data:`PRICE_SHARE` of the time), no hint and its
#: first step, keeping the pool: a second basin for the merges to combine with the first. On
#: S, whole merges of the pools of two independent runs (each +1.7 to +3.1 % alone) gave
#: −0.59 to +0.99 %, and one run that restarted at half time had a pool whose whole merge gave
#: −1.16 % (its first half alone: +3.6 %).
RESTART_SHARE = 0.5
#: Scales of the first penalties that the trajectories' first rounds try, one relaxed problem
#: each, from a queue they share (:meth:`_Shared.next_scale`): the start prices at 1, 2, 1/2,
#: √2 and 1/√2 times. Each of these relaxed optima is repaired and pooled, and each trajectory
#: then goes on from the scale of its own cheapest repaired assignment. The start prices come
#: from a short price search, and on the validation instance N the basin of the first relaxed
#: optimum set the result (+0.4 to +4.8 % over the record from the same code): scaled prices
#: land in other basins, in no order of the scale (of one start, ×2 gave 2.15e11 and ×1
#: 2.28e11; of another, ×1.41 gave 3.00e11 and ×2 2.14e11), and the start merges
#: (:meth:`_Shared.merge_starts`) combine them. Offline, the five relaxed optima and repairs
#: of two price starts, merged one start at a time with the incumbent, gave 2.048e11 and
#: 2.043e11 (+1.0 and +0.75 %); the first whole merges of traced runs before were 2.03 to
#: 2.45e11.
START_SCALES = (1.0, 2.0, 0.5, 2.0**0.5, 2.0**-0.5)


class _Profile:
    """Usage over the distinct interval starts (where every peak occurs)."""

    def __init__(self, graph: StrategyGraph) -> None:
        self.graph = graph
        _, self.start, self.end = graph.time_points()
        self.live = np.nonzero(self.start < self.end)[0]

    def overflow(self, assignment: list[int]) -> F64:
        """(usage − limit) / limit at each time point (:func:`usage_profile`); shape ``(p,)``."""
        limit = self.graph.usage_limit
        assert limit is not None
        return (np.array(usage_profile(self.graph, assignment), dtype=np.float64) - limit) / limit

    def node_overflow(self, over: F64) -> F64:
        """Largest overflow along each node's liveness range (−1 for dead nodes)."""
        worst = np.full(self.graph.num_nodes, -1.0)
        for v in self.live:
            worst[v] = over[self.start[v] : self.end[v]].max()
        return worst


def _unconstrained(graph: StrategyGraph, deadline: float, seed: int) -> Solution:
    """Without a usage limit: one toulbar2 solve for most of the time (exact when it finishes),
    then local search from its answer for the rest."""
    begin = time.perf_counter()
    x: list[int] | None = None
    try:
        with RelaxedSolver(graph, deadline) as solver:
            seconds = max(int((deadline - time.perf_counter() - solver.build_seconds) * 0.9), 1)
            x = solver.solve(np.zeros(graph.num_nodes), seconds, seed)
    except WorkerStopped:  # the network not built by the deadline (or a stop request)
        pass
    rest = max(deadline - time.perf_counter(), 0.0)
    sol = solve_local(graph, rest, initial=x, seed=seed, lagrange_share=0.0)
    return Solution(
        sol.assignment, sol.cost, sol.peak_usage, sol.feasible, "penalty", seconds=time.perf_counter() - begin
    )


class _Shared:
    """What the trajectories share: the pool, the best feasible assignment, and the merges."""

    def __init__(
        self, graph: StrategyGraph, time_limit: float, seed: int, stopped: threading.Event | None = None
    ) -> None:
        self.graph = graph
        #: Set when a stop is requested (:func:`shardwise.search.local.request_stop`).
        self.stopped = stopped if stopped is not None else threading.Event()
        self.time_limit = time_limit
        self.pool: list[list[int]] = []
        self.best: Solution | None = None
        #: When the best assignment was found (``time.perf_counter()``).
        self.best_at = time.perf_counter()
        self.lock = threading.Lock()
        self.merger = Merger(graph, MERGE_MAX_TERMS, seed, WINDOW_TERMS, MERGE_MAX_ROWS)
        self.merged_at = -1  # pool size at the last whole merge
        self.merge_seconds = 0.0  # wall time of the last whole merge
        #: The last whole merge ran out of its full :data:`MERGE_SECONDS` without improving the
        #: best: the pools only grow, so no more whole merges are made (nor kept time for).
        self.merge_stalled = False
        self.descent = Descent(graph, full_seconds=NEIGHBOURHOOD_SECONDS)
        #: A descent round between the penalty rounds ran out of time without solving its
        #: neighbourhood: from then on the descent runs only after the last merges.
        self.descent_slow = False
        #: A last descent round ran past its limit and was left in the background.
        self.descent_abandoned = False
        self.begin = time.perf_counter()
        self.scales = deque(START_SCALES)
        #: Per start scale tried: (repaired cost, relaxed optimum, repaired assignment).
        self.starts: list[tuple[float, list[int], list[int]]] = []
        self.starts_merged = False

    def next_scale(self) -> float | None:
        """The next scale of the first penalties to try (:data:`START_SCALES`), or ``None`` once
        every one has been taken."""
        with self.lock:
            return self.scales.popleft() if self.scales else None

    def record_start(self, cost: float, relaxed: list[int], repaired: list[int]) -> None:
        """Keeps one start scale's relaxed optimum and its repair (``cost``: the repair's cost,
        infinite when it does not fit) for :meth:`merge_starts`."""
        with self.lock:
            self.starts.append((cost, relaxed, repaired))

    def merge_starts(self, left: float) -> bool:
        """Once every start scale has been tried (:data:`START_SCALES`), and only once: merges
        the best assignment with each start's relaxed optimum and repair in turn, cheapest
        repair first, each merge's answer the next one's incumbent, within ``left`` seconds
        (at most :data:`MERGE_SECONDS` each). Path relinking (Glover, Laguna & Martí 2000) with
        the merge as the path: each merge spans the strategies of three assignments, which the
        ILP solves in seconds, where one merge of the whole pool of these starts' different
        basins does not (on N, a whole merge of 22 ran out of its 30 s; offline the pairs took
        1.3-3.4 s each). Whether it merged (now)."""
        with self.lock:
            if self.starts_merged or len(self.starts) < len(START_SCALES):
                return False
            self.starts_merged = True
            starts = sorted(self.starts, key=lambda r: r[0])
        end = time.perf_counter() + left
        for _, relaxed, repaired in starts:
            best = self.best
            left = end - time.perf_counter()
            if best is None or left < 2.0 or self.stopped.is_set():
                break
            t0 = time.perf_counter()
            try:
                m = self.merger.improve([relaxed, repaired], best.assignment, min(MERGE_SECONDS, left))
            except ModelTooLarge:
                break
            log.debug(
                "%.1f s: start merge (%s terms): %.1f s, %.6g%s",
                self.at(),
                self._terms([relaxed, repaired], best),
                time.perf_counter() - t0,
                m.cost if m.feasible else float("inf"),
                " (optimal)" if m.optimal else "",
            )
            if m.feasible and m.cost < best.cost:
                self.offer(list(m.assignment), m)
        return True

    def _terms(self, pool: Sequence[Sequence[int]], best: Solution) -> str:
        """For the trace log: :func:`shardwise.search.merge.merged_terms` of ``pool`` with the
        best assignment (the size of a merge's sub-instance), or ``"-"`` when DEBUG is off."""
        if not log.isEnabledFor(logging.DEBUG):
            return "-"
        return str(merged_terms(self.graph, list(pool) + [list(best.assignment)]))

    def at(self) -> float:
        """Seconds since the search began (for the trace log)."""
        return time.perf_counter() - self.begin

    def offer(self, x: list[int], sol: Solution | None = None) -> None:
        """Adds ``x`` to the pool, and ``sol`` (its feasible score) as the best if it is."""
        with self.lock:
            self.pool.append(x)
            if sol is not None and sol.feasible and (self.best is None or sol.cost < self.best.cost):
                log.debug("%.1f s: best %.6g by %s (pool %d)", self.at(), sol.cost, sol.method, len(self.pool))
                self.best, self.best_at = sol, time.perf_counter()
                offer_incumbent(self.graph, Solution(sol.assignment, sol.cost, sol.peak_usage, True, "penalty"))

    def usable(self) -> bool:
        """Whether the best assignment so far is one a user can take: it exists and avoids the
        forbidden entries (cost below :data:`shardwise.search.ilp.FORBIDDEN_COST`). Until then
        every relaxed optimum is repaired, however far over the limit."""
        best = self.best
        return best is not None and best.cost < FORBIDDEN_COST

    def snapshot(self) -> tuple[list[list[int]], Solution | None]:
        """A copy of the pool, and the best assignment so far."""
        with self.lock:
            return list(self.pool), self.best

    def merge(self, left: float, windows: bool, last: bool = False) -> bool:
        """One merge (whole, or a window if ``windows``) within ``left`` seconds; whether it
        was whole (or none was made). A whole merge takes at most :data:`MERGE_SECONDS` unless
        it is the ``last``, which takes all of ``left`` (and is abandoned past
        :data:`LAST_MERGE_OVERRUN` times that)."""
        pool, best = self.snapshot()
        if best is None or left < 2.0 or self.stopped.is_set():
            return True
        whole = self.merger.whole(pool + [list(best.assignment)])
        if whole and self.merge_stalled:
            return self._relink(pool, best, left, last)
        if (whole and (len(pool) == self.merged_at or left < self.merge_seconds)) or not (whole or windows):
            return True
        t0 = time.perf_counter()
        limit = left if whole and last else min(MERGE_SECONDS if whole else WINDOW_SECONDS, left)
        try:
            if last:
                got = _bounded(
                    lambda: self.merger.improve(pool, best.assignment, limit, whole), LAST_MERGE_OVERRUN * limit + 1.0
                )
                if got is None:
                    log.debug(
                        "%.1f s: last merge of %d abandoned, still running %.1f s into its %.1f s",
                        self.at(),
                        len(pool),
                        time.perf_counter() - t0,
                        limit,
                    )
                    self.merged_at, self.merge_stalled = len(pool), True
                    return True
                m = got
            else:
                m = self.merger.improve(pool, best.assignment, limit, whole)
        except ModelTooLarge:  # the memory available fell below what the sub-instance needs
            log.debug("%.1f s: merge of %d refused (too large)", self.at(), len(pool))
            return True
        log.debug(
            "%.1f s: %s merge of %d (%s terms): %.1f s of %.1f, %.6g%s",
            self.at(),
            "whole" if whole else "window",
            len(pool),
            self._terms(pool, best) if whole else "-",
            time.perf_counter() - t0,
            limit,
            m.cost if m.feasible else float("inf"),
            " (optimal)" if m.optimal else "",
        )
        if whole:
            self.merged_at, self.merge_seconds = len(pool), time.perf_counter() - t0
            # Only a merge given its full MERGE_SECONDS counts: one the clock cut short says little.
            self.merge_stalled = limit >= MERGE_SECONDS and not m.optimal and not (m.feasible and m.cost < best.cost)
        if m.feasible and m.cost < best.cost:
            self.offer(list(m.assignment), m)
        return whole

    def _relink(self, pool: list[list[int]], best: Solution, left: float, last: bool) -> bool:
        """Once whole merges have stalled (:attr:`merge_stalled`): merges the best assignment
        with the assignments pooled since the last merge only, within ``left`` seconds (at most
        :data:`MERGE_SECONDS` unless ``last``); True. The whole pool spans the strategies of
        every basin the search has visited, which made the whole merge too hard for HiGHS (on
        N, with the start scales of :data:`START_SCALES`, whole merges of 22 and 33 ran out of
        their 30 s, and no whole merge was made after them); the assignments of one stretch of
        rounds, with the incumbent, span a sub-instance like the start merges'
        (:meth:`merge_starts`)."""
        fresh = pool[max(self.merged_at, 0) :]
        if not fresh:
            return True
        t0 = time.perf_counter()
        limit = left if last else min(MERGE_SECONDS, left)

        def run() -> Solution:
            return self.merger.improve(fresh, best.assignment, limit)

        try:
            m = _bounded(run, LAST_MERGE_OVERRUN * limit + 1.0) if last else run()
        except ModelTooLarge:
            m = None
        self.merged_at = len(pool)
        if m is None:  # too large, or left running past its bound
            return True
        log.debug(
            "%.1f s: relinking merge of %d new (%s terms): %.1f s of %.1f, %.6g%s",
            self.at(),
            len(fresh),
            self._terms(fresh, best),
            time.perf_counter() - t0,
            limit,
            m.cost if m.feasible else float("inf"),
            " (optimal)" if m.optimal else "",
        )
        if m.feasible and m.cost < best.cost:
            self.offer(list(m.assignment), m)
            self.merged_at += 1  # its own answer is nothing new to relink
        return True

    def descend(self, left: float, last: bool = False) -> bool:
        """One round of the neighbourhood descent (:class:`shardwise.search.neighbourhood.Descent`)
        from the best assignment, within ``left`` seconds (at most :data:`NEIGHBOURHOOD_SECONDS`;
        the ``last`` ones, after the last merges, are abandoned, as the last merge, past
        :data:`LAST_MERGE_OVERRUN` times their limit); whether one ran (false when there is no
        usable best assignment, too little time, the descent is done at the best assignment, or
        it is :attr:`descent_slow` and this round is not one of the last)."""
        best = self.best
        if (
            best is None
            or not self.usable()
            or left < 2.0
            or self.stopped.is_set()
            or self.descent_abandoned
            or (self.descent_slow and not last)
        ):
            return False
        limit = min(NEIGHBOURHOOD_SECONDS, left)
        t0 = time.perf_counter()
        try:
            if last:
                got = _bounded(
                    lambda: self.descent.step(best.assignment, limit) or best, LAST_MERGE_OVERRUN * limit + 1.0
                )
                if got is None:
                    log.debug(
                        "%.1f s: last descent round abandoned, still running %.1f s into its %.1f s",
                        self.at(),
                        time.perf_counter() - t0,
                        limit,
                    )
                    self.descent_abandoned = True
                    return False
                sol: Solution | None = None if got is best else got
            else:
                sol = self.descent.step(best.assignment, limit)
        except ModelTooLarge:  # the memory available fell since the descent looked
            return False
        if sol is None:
            return False
        # Only a round given the full NEIGHBOURHOOD_SECONDS counts: one the clock cut short says little,
        # and one at a grown m only caps m (Descent.ceiling).
        self.descent_slow = self.descent_slow or not (
            last or sol.optimal or limit < NEIGHBOURHOOD_SECONDS or self.descent.grown
        )
        log.debug(
            "%.1f s: neighbourhood round (m = %d): %.1f s of %.1f, %.6g%s",
            self.at(),
            self.descent.round_m,
            time.perf_counter() - t0,
            limit,
            sol.cost if sol.feasible else float("inf"),
            " (optimal)" if sol.optimal else "",
        )
        if sol.feasible and sol.cost < best.cost:
            self.offer(list(sol.assignment), sol)
        return True

    def reserve(self) -> float:
        """Time kept back from the penalty rounds for the last merges."""
        pool, best = self.snapshot()
        if best is None:
            return 0.0
        whole = self.merger.whole(pool + [list(best.assignment)])
        if whole:
            return 0.0 if self.merge_stalled else 1.5 * max(self.merge_seconds, 2.5) + 2.0
        return WINDOWS_SHARE * self.time_limit


def _trajectory(
    shared: _Shared,
    prof: _Profile,
    deadline: float,
    seed: int,
    eta0: float,
    slice_seconds: int,
    merging: bool,
    start: Future[F64],
) -> None:
    """One penalty loop (module docstring) with its own toulbar2 worker, feeding ``shared``;
    ``merging``: this loop also makes the merges between rounds; ``start``: the first
    penalties (awaited once the worker has built its network)."""
    graph = shared.graph
    begin = time.perf_counter()
    eta, fits, it, seconds, boost = eta0, 0, 0, slice_seconds, 0.0
    prev: list[int] | None = None
    last_peak, lowest_peak = -1.0, float("inf")
    try:
        solver_ = RelaxedSolver(graph, deadline)
    except WorkerStopped:  # the network not built by the deadline (or a stop request)
        return
    with solver_ as solver:
        lam0 = solver.exchange_rate
        # A solve's set-up costs about as much as building the network did (the worker
        # process's start, a one-off of most of a second, does not come back).
        build = solver.build_seconds
        w = start.result().copy()
        base = w.copy()  # the start prices, which the first rounds scale (START_SCALES)
        # The first rounds' relaxed optima, one per scale taken: (repaired cost, peak, scale, x).
        tried: list[tuple[float, float, float, list[int]]] = []
        scale: float | None = None  # a scale taken whose round found nothing, to try again
        restart_at = begin + RESTART_SHARE * (deadline - begin)
        restarted = False
        # Seconds the descent rounds (with their merges) and the penalty rounds have taken in
        # this half (before or since the restart): the descent takes at most as long as the
        # rounds. Counted over the whole search, the first half's rounds paid for a descent that
        # held off the restart: on N, until 166 of 180 s, and the merging trajectory's second
        # basin was lost (+4.20 %).
        descent_spent = rounds_spent = 0.0
        # A descent slot starts from a best at least this old (the last slot's length; at first
        # two slices) unless the descent or a merge of the slot found that best: while the
        # rounds keep finding better assignments, a slot would start from one soon beaten.
        stale, own_since = 2.0 * slice_seconds, float("inf")
        while not shared.stopped.is_set():
            left = deadline - time.perf_counter()
            keep = shared.reserve()
            if left < build + 1.0 + keep:
                log.debug("%.1f s: trajectory %d ends, %.1f s left (reserve %.1f s)", shared.at(), seed, left, keep)
                break
            t0 = time.perf_counter()
            if t0 >= restart_at and not restarted:
                log.debug("%.1f s: trajectory %d restarts from fresh prices", shared.at(), seed)
                restarted, seed = True, seed + 1_000_003
                w = _start_penalties(graph, min(PRICE_SHARE * shared.time_limit, PRICE_SECONDS), seed)
                base, tried = w.copy(), []
                prev, eta, fits, boost, last_peak, lowest_peak = None, eta0, 0, 0.0, -1.0, float("inf")
                descent_spent = rounds_spent = 0.0
                continue
            if merging and shared.merge_starts(left - build - 1.0 - keep):
                rounds_spent += time.perf_counter() - t0
                continue
            # The merging trajectory makes descent rounds from the best assignment, each followed
            # by a merge of the pool, for up to one round's time (NEIGHBOURHOOD_SECONDS) while
            # the descent has rounds to make there, when it has taken no longer than the
            # penalty rounds.
            if (
                merging
                and descent_spent <= rounds_spent
                and (t0 - shared.best_at >= stale or shared.best_at >= own_since)
                and _descent_slot(shared, t0 + NEIGHBOURHOOD_SECONDS, deadline - build - 1.0)
            ):
                stale, own_since = time.perf_counter() - t0, t0
                descent_spent += time.perf_counter() - t0
                continue
            scale = scale if scale is not None else shared.next_scale()
            if scale is None and tried:
                # Every scale taken: go on from this trajectory's cheapest repaired one.
                cost, last_peak, chosen, prev = min(tried, key=lambda r: r[0])
                w, tried = base * chosen, []
                log.debug(
                    "%.1f s: trajectory %d goes on from the start prices x%.3g (repaired %.6g)",
                    shared.at(),
                    seed,
                    chosen,
                    cost,
                )
            it += 1
            x = solver.solve(
                w if scale is None else base * scale,
                min(seconds, int(left - build - keep)),
                seed + it,
                hint=prev if scale is None else None,
            )
            log.debug(
                "%.1f s: trajectory %d round %d (%d s slice, reserve %.1f s%s)%s",
                shared.at(),
                seed,
                it,
                min(seconds, int(left - build - keep)),
                keep,
                "" if scale is None else f", start prices x{scale:.3g}",
                "" if x is not None else ": nothing found",
            )
            if solver.interrupted:  # deadline or stop request: its answer (if any) is the last
                if x is not None:
                    shared.offer(x)
                break
            if x is None:  # nothing found in the slice: the same penalties again, with twice the time
                seconds *= 2
                continue
            shared.offer(x)
            over = prof.overflow(x)
            peak = float(over.max()) if over.size else -1.0
            if log.isEnabledFor(logging.DEBUG):
                hot_now = prof.node_overflow(over) > 0
                log.debug(
                    "%.1f s: trajectory %d relaxed optimum %.6g, peak %+.2f %% over the limit at point %d; "
                    "%d hot nodes, mean penalty %.4g (others %.4g)",
                    shared.at(),
                    seed,
                    evaluate(graph, x).cost,
                    100.0 * peak,
                    int(np.argmax(over)) if over.size else -1,
                    int(hot_now.sum()),
                    float(w[hot_now].mean()) if hot_now.any() else 0.0,
                    float(w[~hot_now].mean()) if (~hot_now).any() else 0.0,
                )
            if scale is not None:  # a first round: always repaired, pooled, and no penalty step
                left = deadline - time.perf_counter()
                p = (
                    solve_local(
                        graph, min(max(0.5, 0.3 * slice_seconds), left), initial=x, lagrange_share=0.0, seed=seed + it
                    )
                    if left > 0.05
                    else None
                )
                if p is not None:
                    shared.offer(list(p.assignment), p)
                cost = p.cost if p is not None and p.feasible else float("inf")
                tried.append((cost, peak, scale, x))
                shared.record_start(cost, x, list(p.assignment) if p is not None else x)
                lowest_peak, scale = min(lowest_peak, peak), None
                if merging and it % MERGE_EVERY == 0:
                    shared.merge(deadline - time.perf_counter() - build - 1.0 - shared.reserve(), windows=False)
                rounds_spent += time.perf_counter() - t0
                continue
            stalled = peak > 0 and (x == prev or 0 < last_peak * STALL < peak)
            prev, last_peak = x, peak
            left = deadline - time.perf_counter()
            closest = peak < lowest_peak
            lowest_peak = min(lowest_peak, peak)
            if (peak <= REPAIR_WITHIN or closest or not shared.usable()) and left > 0.05:
                p = solve_local(
                    graph, min(max(0.5, 0.3 * slice_seconds), left), initial=x, lagrange_share=0.0, seed=seed + it
                )
                shared.offer(list(p.assignment), p)
            if merging and it % MERGE_EVERY == 0:
                shared.merge(deadline - time.perf_counter() - build - 1.0 - shared.reserve(), windows=False)
            rounds_spent += time.perf_counter() - t0
            if peak > 0:
                worst = prof.node_overflow(over)
                hot = worst > 0
                w[hot] += eta * lam0 * np.minimum(worst[hot], 1.0)
                boost = min(max(STALL_BOOST, 1.5 * boost), 1.0) if stalled else 0.0
                w[hot] *= 1.0 + boost
                w[~hot] *= DECAY
                eta *= 1.5 if peak > 0.05 or stalled else 1.0
                fits = 0
            else:
                w *= DECAY ** (2 ** min(fits, 5))
                fits += 1
                eta *= 0.7


def _descent_slot(shared: _Shared, end: float, deadline: float) -> bool:
    """Descent rounds (:meth:`_Shared.descend`), each followed by a merge of the pool, until
    ``end`` or until the descent has no round to make; ``deadline``: the time by which the
    rounds and merges (and the reserve for the last merges) must be done. Whether a round ran.
    One round per slot grew ``m`` by one step per penalty round: on L, ``m = 8`` came 65 s after
    the restart."""
    ran = False
    while shared.descend(min(end, deadline - shared.reserve()) - time.perf_counter()):
        ran = True
        shared.merge(deadline - time.perf_counter() - shared.reserve(), windows=False)
    return ran


#: Methods that improve on the penalty rounds' answers, named in ``Solution.method`` after
#: ``penalty+``.
_FINISHERS = ("merge", "neighbourhood", "polish", "merge+polish", "neighbourhood+polish")


def _bounded(run: Callable[[], Solution], seconds: float) -> Solution | None:
    """``run()`` on a daemon thread of its own (:class:`OnThread`): its answer, or ``None`` when
    it has not ended within ``seconds`` (it is then left to finish in the background). Its
    exception is raised here."""
    merge = OnThread(run, "shardwise-last-merge")
    return merge.result() if merge.done.wait(seconds) else None


def _polish(shared: _Shared, deadline: float, threads: int, seed: int) -> None:
    """The time the last merges left (a merge proven optimal early, one skipped, or the margin
    kept for HiGHS's overrun): the best assignment polished by the feasible local search on
    ``threads`` seeds side by side until :data:`POLISH_MARGIN` before ``deadline``. In a traced
    run of K, 25 of the 180 s were left after the last merge; of S, 21 of 240. With the time the
    last merges left, it took K's best from +2.4 % to +0.9 % over the record (50 s) and from
    +3.9 % to +1.9 % (15 s); on S it found at most 5e4 of 1.56e9 after a merge. An improvement
    is offered with the method ``polish`` (``merge+polish`` or ``neighbourhood+polish`` when a
    merge or the neighbourhood descent found the assignment polished)."""
    left = deadline - time.perf_counter() - POLISH_MARGIN
    best = shared.best
    if best is None or left < 1.0 or shared.stopped.is_set():
        return
    with ThreadPoolExecutor(max_workers=threads) as pool:
        runs = list(
            pool.map(
                lambda s: solve_local(shared.graph, left, initial=best.assignment, lagrange_share=0.0, seed=s),
                range(seed + 11, seed + 11 + threads),
            )
        )
    origin = best.method + "+polish" if best.method in ("merge", "neighbourhood") else "polish"
    for p in sorted(runs, key=lambda r: r.cost):
        if p.feasible and p.cost < best.cost:
            shared.offer(list(p.assignment), replace(p, method=origin))
    log.debug("%.1f s: polished for %.1f s: %.6g", shared.at(), left, shared.best.cost if shared.best else float("inf"))


def _start_penalties(graph: StrategyGraph, seconds: float, seed: int) -> F64:
    """First penalties: the node prices of :func:`lagrange_prices` after ``seconds`` (zero
    without a usage limit)."""
    found = lagrange_prices(graph, seconds, seed=seed)
    return np.zeros(graph.num_nodes) if found is None else found[0]


def solve_penalty(
    graph: StrategyGraph,
    time_limit: float = 10.0,
    *,
    seed: int = 0,
    slice_seconds: int | Sequence[int] = SLICE_SECONDS,
    trajectories: int = 1,
) -> Solution:
    """Best feasible assignment the penalty loop of the module docstring finds within
    ``time_limit`` seconds (wall clock). ``slice_seconds``: toulbar2's CPU-time limit per
    relaxed problem (whole seconds), one for all trajectories or one per trajectory (taken in
    turn, :data:`SLICE_SECONDS`); a slice in which toulbar2 finds no assignment is retried with
    twice the time, which that trajectory then keeps. ``trajectories``: penalty loops run side
    by side (threads, each with its own toulbar2 worker process), the ``i``-th with seed
    ``seed + 7919 i`` and first step ``ETA0 · 3**i``, all feeding one pool and one best
    assignment. The first penalties are Lagrangian memory prices from :data:`PRICE_SHARE` of
    the time (at most :data:`PRICE_SECONDS`), searched while the workers start.
    ``Solution.feasible`` is false when no repaired assignment fit (the least-usage assignment
    is then returned). Without a usage limit: one toulbar2 solve (exact
    when it finishes in time), polished by local search. The time limit bounds the toulbar2
    workers too (their start and network construction included: a worker still busy at the
    deadline is interrupted, :class:`shardwise.search.wcsp.RelaxedSolver`); from the main
    thread a Ctrl-C stops the loops, the workers and the merges within about a second with the
    best assignment so far (``Solution.interrupted``). Raises :class:`SearchError` when
    ``pytoulbar2`` is missing, for a bad time limit, a trajectory count below 1 or a slice that
    is not a whole number of seconds >= 1, and when every trajectory's worker failed before
    any feasible assignment was found (the first failure). toulbar2's slices are whole CPU seconds, so a limit
    of a few seconds may be overrun by about one."""
    t = check_time_limit(time_limit)
    if isinstance(trajectories, bool) or not isinstance(trajectories, int) or trajectories < 1:
        raise SearchError(f"trajectories: expected an integer >= 1, got {trajectories!r}")
    slices = list(slice_seconds) if isinstance(slice_seconds, Sequence) else [slice_seconds]
    if not slices or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in slices):
        raise SearchError(
            f"slice_seconds: expected whole seconds >= 1 (one, or one per trajectory), got {slice_seconds!r}"
        )
    return interruptible(lambda: _solve_penalty(graph, t, seed, slices, trajectories), graph, t)


def _solve_penalty(graph: StrategyGraph, t: float, seed: int, slices: list[int], trajectories: int) -> Solution:
    """:func:`solve_penalty` once its arguments are checked."""
    with on_stop(lambda: None) as stopped:
        return _penalty_loops(graph, t, seed, slices, trajectories, stopped)


def _penalty_loops(
    graph: StrategyGraph, t: float, seed: int, slices: list[int], trajectories: int, stopped: threading.Event
) -> Solution:
    begin = time.perf_counter()
    deadline = begin + t
    if graph.usage_limit is None:
        return _unconstrained(graph, deadline, seed)
    prof = _Profile(graph)
    shared = _Shared(graph, t, seed, stopped)
    runs = [(seed + 7919 * i, ETA0 * 3**i, slices[i % len(slices)], i == 0) for i in range(trajectories)]
    # The price search (Rust, the GIL released) runs while the trajectories' workers build.
    with ThreadPoolExecutor(max_workers=trajectories + 1) as pool:
        start = pool.submit(_start_penalties, graph, min(PRICE_SHARE * t, PRICE_SECONDS), seed)
        futures = [pool.submit(_trajectory, shared, prof, deadline, s, e, c, m, start) for s, e, c, m in runs]
        # A trajectory whose worker failed (toulbar2 crashed) ends; the others go on.
        failed = [e for f in futures if isinstance(e := f.exception(), SearchError)]
        for f in futures:
            if not isinstance(f.exception(), SearchError):
                f.result()
    if failed and shared.best is None:
        raise failed[0]
    # HiGHS ran windows up to 17% over their limit (S: 17.6 s for 15 s, the whole search then 3.9 s
    # over the contest limit), hence the margin.
    log.debug("%.1f s: trajectories done, %.1f s left for the last merges", shared.at(), deadline - time.perf_counter())
    # The last whole merge, the descent while it has rounds to make, then windows (when the pool
    # is too large to merge whole) for the rest: on L, windows found nothing in the last 26 s
    # while the descent never ran.
    shared.merge(WINDOW_MARGIN * (deadline - time.perf_counter()) - 1.0, windows=False, last=True)
    while shared.descend(WINDOW_MARGIN * (deadline - time.perf_counter()) - 1.0, last=True):
        pass
    while not stopped.is_set() and not shared.merge(
        WINDOW_MARGIN * (deadline - time.perf_counter()) - 1.0, windows=True, last=True
    ):
        pass
    _polish(shared, deadline, trajectories, seed)
    seconds = time.perf_counter() - begin
    log.debug("%.1f s: penalty search ends (%.1f s past its deadline)", shared.at(), time.perf_counter() - deadline)
    best = shared.best
    if best is None:
        least = [int(np.argmin(graph.node_usages(v))) for v in range(graph.num_nodes)]
        sc = evaluate(graph, least)
        return Solution(tuple(least), sc.cost, sc.peak_usage, sc.feasible, "penalty", seconds=seconds)
    method = "penalty+" + best.method if best.method in _FINISHERS else "penalty"
    return Solution(best.assignment, best.cost, best.peak_usage, True, method, seconds=seconds)
