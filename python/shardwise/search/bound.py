"""Lower bounds of a strategy graph's optimum, so that a user sees how far from optimal an answer
can be: no assignment within the usage limit costs less than :attr:`LowerBound.bound`.

The bound is the Lagrangian dual of the usage limit (a price per time point; Fisher, Mgmt. Sci.
1981) and of the edges (spanning forests solved exactly by dynamic programming, dual
decomposition; Komodakis, Paragios & Tziritas, ICCV 2007), raised by a deflected, projected
subgradient ascent with Polyak's steps towards the answer's cost, in Rust
(``rust/src/search/bound.rs``, which gives the details; the GIL is released while it runs). Every
round's value is a valid bound; the best is kept. Its limit, over all prices, is the bound of the
linear relaxation (local polytope plus usage rows). Next to an answer, :func:`bound_for` also
uses the ILP where its model fits: the cost of an answer it proves optimal, else HiGHS's dual
bound. Measurements on the IOPDDL instances: ``docs/search.md``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

from shardwise import _native
from shardwise.errors import SearchError
from shardwise.search.contract import (
    CONTRACTED_MAX_TERMS,
    contract,
    has_forbidden,
    solve_contracted,
)
from shardwise.search.graph import StrategyGraph
from shardwise.search.ilp import (
    FORBIDDEN_COST,
    ModelTooLarge,
    check_model,
    estimate_model,
    solve_ilp,
)
from shardwise.search.local import (
    OnThread,
    Solution,
    check_time_limit,
    clear_stop,
    native_graph,
    request_stop,
    wait_for,
)


@dataclass(frozen=True)
class LowerBound:
    """A lower bound of a strategy graph's optimum within its usage limit.

    ``bound``: no assignment within the limit costs less (the graph's cost units). ``method``:
    ``"lagrangian"`` (the dual of ``rust/src/search/bound.rs``), ``"ilp"`` (HiGHS's dual bound)
    or ``"optimal"`` (the cost of an answer the ILP proved optimal). ``unpriced``: the bound the
    dual reached with the memory prices at zero (a bound of the problem without its usage
    limit; equal to ``bound`` without one; ``None`` for the ILP's). ``forests``: spanning forests
    the edges were split into; ``rounds``: subgradient rounds; ``seconds``: wall clock.
    ``interrupted``: a Ctrl-C stopped it (the bound is the best so far, still valid)."""

    bound: int
    method: str
    unpriced: int | None = None
    forests: int = 0
    rounds: int = 0
    seconds: float = 0.0
    interrupted: bool = False

    def gap(self, cost: int) -> float | None:
        """How far above this bound ``cost`` is, as a share of ``cost`` (0.0: proven optimal;
        0.25: the optimum is at most 25 % cheaper); ``None`` for a cost <= 0."""
        if cost <= 0:
            return None
        return max(cost - self.bound, 0) / cost


def lower_bound(
    graph: StrategyGraph, time_limit: float = 10.0, *, target: int | None = None, max_rounds: int | None = None
) -> LowerBound:
    """The best Lagrangian lower bound of ``graph``'s optimum found within ``time_limit`` seconds
    (at least one round) or ``max_rounds`` rounds (then deterministic). ``target``: the cost of a
    known answer (e.g. ``Solution.cost``), which the ascent's Polyak steps aim at; without one,
    half as much again as the best bound so far. From the main thread a Ctrl-C returns the best bound
    so far (``interrupted=True``). Raises :class:`SearchError` for a bad time limit, round count
    or graph."""
    t = check_time_limit(time_limit)
    if max_rounds is not None and max_rounds < 1:
        raise SearchError(f"max_rounds: expected a number of rounds >= 1, got {max_rounds!r}")
    start = time.perf_counter()

    def run() -> _native.LowerBound:
        try:
            left = max(t - (time.perf_counter() - start), 0.0)
            return _native.search_bound(native_graph(graph), left, target, max_rounds)
        except _native.InvalidShardingError as e:
            raise SearchError(str(e)) from None

    job = OnThread(run, "shardwise-bound")
    interrupted = False
    try:
        wait_for(job.done)
    except KeyboardInterrupt:
        # The ascent stops at its next round and hands back its best bound.
        interrupted = True
        request_stop()
        try:
            wait_for(job.done)
        finally:
            clear_stop()
    r = job.result()
    return LowerBound(
        int(r.bound),
        "lagrangian",
        int(r.unpriced),
        int(r.forests),
        int(r.rounds),
        time.perf_counter() - start,
        interrupted,
    )


def bound_for(graph: StrategyGraph, solution: Solution, time_limit: float = 10.0) -> LowerBound:
    """A lower bound next to ``solution``, an answer for ``graph``, within ``time_limit`` seconds:

    * an answer the ILP proved optimal: HiGHS's dual bound (``Solution.lower_bound``; its
      ``"optimal"`` allows a relative gap of 10^-4), ``method="optimal"`` when it equals the
      cost, else ``"ilp"``; no time spent;
    * else, where the ILP's model fits (:func:`shardwise.search.ilp.check_model`), the ILP warm
      started from ``solution`` for half the time, or else, where the graph has forbidden
      components and its contracted model has at most
      :data:`~shardwise.search.contract.CONTRACTED_MAX_TERMS` terms, the contracted ILP
      (:mod:`shardwise.search.contract`, exact) the same way: ``"optimal"`` or ``"ilp"`` as above
      if it proves optimality, else its dual bound competes with
    * the Lagrangian bound (:func:`lower_bound`) with ``solution.cost`` as the target (unless
      the answer is over the limit or on a forbidden entry, cost >= 10^18) for the time left;
      the larger bound is returned, with its method.

    From the main thread, a stop request left standing by a search that
    :func:`~shardwise.search.local.interruptible` abandoned is lifted first. Raises as
    :func:`lower_bound`."""
    start = time.perf_counter()
    t = check_time_limit(time_limit)
    cost = int(solution.cost)
    if threading.current_thread() is threading.main_thread():
        # A stop left standing by a search that :func:`interruptible` abandoned (it overran
        # its limit and goes on in the background, asked to stop) would end every part of the
        # bound at once: after a K run abandoned that way, its bound took 0.8 s of 30 and
        # was 99.85 % below the answer. Lifted, as a new search lifts it.
        clear_stop()

    def proven(sol: Solution) -> LowerBound:
        lb = cost if sol.lower_bound is None else min(int(sol.lower_bound), cost)
        return LowerBound(lb, "optimal" if lb == cost else "ilp", seconds=time.perf_counter() - start)

    if solution.optimal and solution.feasible:
        return proven(solution)
    best: LowerBound | None = None
    warm = solution.assignment if solution.feasible else None
    try:
        check_model(estimate_model(graph), t / 2)
    except ModelTooLarge:
        # The ILP over the contracted graph (exact, so its dual bound bounds the whole instance)
        # where the graph has forbidden components and that model is small.
        con = contract(graph) if has_forbidden(graph) else None
        run = con is not None and con.components > 0 and con.terms() <= CONTRACTED_MAX_TERMS
        try:
            ilp = solve_contracted(graph, t / 2, initial=warm, con=con, repair_share=0.0) if run else None
        except SearchError:
            ilp = None
    else:
        try:
            ilp = solve_ilp(graph, t / 2, initial=warm)
        except SearchError:  # nothing feasible found in time: no bound either
            ilp = None
    if ilp is not None:
        if ilp.optimal and ilp.feasible and ilp.cost <= cost:
            return proven(ilp)
        if ilp.lower_bound is not None:
            best = LowerBound(int(ilp.lower_bound), "ilp")
    # An answer over the limit or on a forbidden entry is no target: the steps would overshoot.
    usable = solution.feasible and cost < FORBIDDEN_COST
    lag = lower_bound(graph, max(t - (time.perf_counter() - start), 0.0), target=cost if usable else None)
    if best is not None and best.bound > lag.bound:
        return replace(best, seconds=time.perf_counter() - start, interrupted=lag.interrupted)
    return replace(lag, seconds=time.perf_counter() - start)
