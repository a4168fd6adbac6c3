"""One entry point over the solvers: ``method="local"`` (Rust local search), ``"ilp"`` (HiGHS,
warm-started by a short local search), ``"penalty"`` (memory as node penalties, each relaxed
problem solved by toulbar2: :mod:`shardwise.search.penalty`), ``"limited"`` (the whole problem,
usage limit included, solved by toulbar2: :mod:`shardwise.search.limited`), ``"contracted"``
(the ILP over the graph with its forbidden components contracted:
:mod:`shardwise.search.contract`), or ``"auto"``: the
ILP when the reduced model is small enough to solve in the time (at most
:data:`AUTO_ILP_MAX_TERMS` edge-matrix entries plus strategies); else the contracted ILP when
the graph has forbidden components and its contracted model has at most
:data:`CONTRACTED_MAX_TERMS` terms (warm-started by local search, as the ILP; local search from
its answer for any time it leaves without proving it optimal);
else, for a graph with a usage
limit, ``pytoulbar2`` installed and at most :data:`LIMITED_MAX_NODES` nodes, the limited
toulbar2 solve beside the rest of this list on the remaining threads (one thread: the limited
solve for :data:`LIMITED_SHARE` of the time, then local search warm-started from its answer);
else, with a usage limit, ``pytoulbar2`` and time for about :data:`PENALTY_MIN_ROUNDS` penalty
rounds, the penalty search
(``threads >= 2``: :data:`PENALTY_TRAJECTORIES` penalty loops side by side sharing one pool for
merging, plus a local-search portfolio on any further threads, all for the whole time; one
thread: the penalty loop for half the time, then local search warm-started from its answer),
the best feasible answer winning; else local search for the whole time limit.

With ``threads=N > 1`` local search runs as a portfolio: ``N`` independent runs with seeds
``seed, seed+1, ...`` on their own threads (the Rust search releases the GIL), and the best
feasible answer wins (ties: the lowest seed), so it is never worse than the portfolio's own
``seed`` run. Runs stop at the time limit, so two threads sharing fewer than two free cores
each get less search than one thread alone would.

Limits (issue 25). The ILP runs only when its model fits (:func:`shardwise.search.ilp.check_model`:
the memory guard, HiGHS's index limit, and set-up time within half the time left, all estimated
before anything is built); the limited toulbar2 solve only when its network fits the memory
guard (:func:`shardwise.search.limited.check_limited`). ``auto`` then picks the next method of
its list; an explicit ``method="ilp"`` or ``"limited"`` runs local search for the whole time
instead, with a :class:`FallbackWarning` and ``Solution.note`` naming the model's size (a
fallback rather than an error, as ``shardwise auto`` asks for the ILP by default). From the main thread, a
Ctrl-C stops every method within about a second with the best answer found so far
(``Solution.interrupted``), and a search still running a second past its time limit is
stopped the same way (:func:`shardwise.search.local.interruptible`)."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace

from shardwise.errors import SearchError
from shardwise.search.contract import (
    CONTRACTED_MAX_TERMS,
    Contraction,
    contract,
    has_forbidden,
    solve_contracted,
)
from shardwise.search.graph import StrategyGraph
from shardwise.search.ilp import (
    ModelTooLarge,
    NoFeasibleSolution,
    check_model,
    estimate_model,
    solve_ilp,
)
from shardwise.search.limited import check_limited, solve_limited
from shardwise.search.local import (
    Solution,
    check_time_limit,
    interruptible,
    solve_local,
)
from shardwise.search.penalty import available as penalty_available
from shardwise.search.penalty import solve_penalty

METHODS = ("auto", "contracted", "ilp", "limited", "local", "penalty")
#: ``auto`` runs the penalty search only with time for this many of its rounds (one relaxed
#: solve, its set-up and a polish) ...
PENALTY_MIN_ROUNDS = 5
#: ... estimated at this many seconds per strategy + edge-matrix entry: measured on the shared
#: IOPDDL instances on this 2-core machine kind (A: 6.2M strategies + entries, first round done
#: at 19.7 s).
PENALTY_ROUND_SECONDS_PER_TERM = 3.3e-6
#: Penalty trajectories ``auto`` runs side by side (one per thread, at most this many; threads
#: beyond them run local search).
PENALTY_TRAJECTORIES = 2
#: Model size (strategies + edge-matrix entries) up to which ``auto`` uses the ILP.
AUTO_ILP_MAX_TERMS = 500_000
#: Nodes up to which ``auto`` runs the limited toulbar2 solve (:mod:`.limited`): on the shared
#: IOPDDL instance V (816 nodes) it found 1,619,078 in 120 s against 1,666,201 for the penalty
#: search with merging in 300 s.
LIMITED_MAX_NODES = 2_000
#: With one thread, the share of the time the limited solve gets before local search.
LIMITED_SHARE = 0.7
#: The ILP's warm start: local search for this share of the time, at most this many seconds.
#: On the flax MoE step of ``test_auto_real`` (309 nodes, 2x4, 40 % budget) HiGHS proves nothing
#: in 8 s, and local search alone finds 60.5e6 in 0.3 s and 40.6e6 (15 % under the best textbook
#: plan) from 0.9 s on: with 0.2 of the test's 4.5 s, a loaded CI machine ended at 60.5e6.
ILP_WARM_SHARE = 0.3
ILP_WARM_SECONDS = 5.0


class FallbackWarning(UserWarning):
    """``method="ilp"`` or ``"limited"`` ran local search instead: its model would not fit the
    memory guard or the time (the message names its size)."""


def ilp_refusal(graph: StrategyGraph, time_limit: float) -> str | None:
    """Why the ILP of ``graph`` cannot run in ``time_limit`` seconds (the one-line message of
    :class:`shardwise.search.ilp.ModelTooLarge`), or ``None`` when it fits; estimated from the
    graph's arrays, nothing built."""
    try:
        check_model(estimate_model(graph), time_limit)
    except ModelTooLarge as e:
        return str(e)
    return None


def solve(
    graph: StrategyGraph,
    time_limit: float = 10.0,
    method: str = "auto",
    *,
    seed: int = 0,
    threads: int = 1,
    initial: Sequence[int] | None = None,
) -> Solution:
    """Best assignment of ``graph`` within ``time_limit`` seconds by ``method`` (see module),
    local search on ``threads`` threads, capped at the CPU count (each thread searches for the
    whole time, so more threads than cores only share them). An ILP whose model would not fit
    runs as local search instead, as does a limited solve whose network would not (module
    docstring; an explicit method: with a :class:`FallbackWarning`; ``Solution.note`` says
    why). ``initial``: a warm start (one strategy index per node) for the local searches
    (``local``, and the ILP's own warm start); the other methods start from their own. From
    the main thread, a Ctrl-C
    returns the best answer so far with ``Solution.interrupted`` set. Raises
    :class:`SearchError` for an unknown method, a bad time limit or a thread count below 1."""
    if method not in METHODS:
        raise SearchError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise SearchError(f"threads: expected an integer >= 1, got {threads!r}")
    threads = min(threads, max(1, os.cpu_count() or 1))
    t = check_time_limit(time_limit)
    start = time.perf_counter()
    note = ""
    terms = int(graph.cost.size + graph.edge_cost.size)
    if method == "ilp" or (method == "auto" and terms <= AUTO_ILP_MAX_TERMS):
        refusal = ilp_refusal(graph, t - min(t * ILP_WARM_SHARE, ILP_WARM_SECONDS))
        if refusal is None:
            method = "ilp"
        elif method == "ilp":
            note = f"{refusal}; local search ran instead"
            warnings.warn(note, FallbackWarning, stacklevel=2)
            method = "local"
        else:
            note = f"auto: not the ILP: {refusal}"
    if method == "limited":
        try:
            check_limited(graph)
        except ModelTooLarge as e:
            note = f"{e}; local search ran instead"
            warnings.warn(note, FallbackWarning, stacklevel=2)
            method = "local"
    con = None
    if method in ("auto", "contracted"):
        con = contract(graph) if method == "contracted" or has_forbidden(graph) else None
        if con is not None and con.components > 0 and (method == "contracted" or con.terms() <= CONTRACTED_MAX_TERMS):
            method = "contracted"
        elif method == "contracted":
            note = "no forbidden component to contract; local search ran instead"
            warnings.warn(note, FallbackWarning, stacklevel=2)
            method = "local"
    chosen = method
    # What looking at the contraction took counts in the limit.
    left = max(t - (time.perf_counter() - start), 0.01)
    if chosen == "contracted":
        assert con is not None
        sol = interruptible(lambda: _contracted(graph, left, seed, threads, con, initial), graph, left)
        return replace(sol, note=note) if note and not sol.note else sol
    sol = interruptible(lambda: _solve(graph, left, chosen, seed, threads, terms, initial), graph, left)
    return replace(sol, note=note) if note and not sol.note else sol


def _solve(
    graph: StrategyGraph,
    t: float,
    method: str,
    seed: int,
    threads: int,
    terms: int,
    initial: Sequence[int] | None = None,
) -> Solution:
    """:func:`solve` once the method is known (``auto``: not the ILP)."""
    start = time.perf_counter()
    if method == "auto":
        if (
            graph.usage_limit is not None
            and penalty_available()
            and graph.num_nodes <= LIMITED_MAX_NODES
            and _limited_fits(graph)
        ):
            return _with_limited(graph, t, seed, threads)
        elif (
            graph.usage_limit is not None
            and penalty_available()
            and t >= PENALTY_MIN_ROUNDS * PENALTY_ROUND_SECONDS_PER_TERM * terms
        ):
            return _hybrid(graph, t, seed, threads)
        else:
            method = "local"
    if method == "local":
        return _portfolio(graph, t, seed, threads, initial)
    if method == "penalty":
        return solve_penalty(graph, t, seed=seed)
    if method == "limited":
        return solve_limited(graph, t, seed=seed)
    warm = _portfolio(graph, min(t * ILP_WARM_SHARE, ILP_WARM_SECONDS), seed, threads, initial)
    rest = max(t - (time.perf_counter() - start), 0.01)
    try:
        sol = solve_ilp(graph, rest, initial=warm.assignment if warm.feasible else None)
    except NoFeasibleSolution:
        # Nothing fits the usage limit: the local search's least-overflow answer, marked
        # infeasible, as every other method answers.
        return Solution(warm.assignment, warm.cost, warm.peak_usage, False, "ilp", False, time.perf_counter() - start)
    except ModelTooLarge as e:  # the memory available fell since solve() looked
        return replace(warm, seconds=time.perf_counter() - start, note=f"{e}; the local search's answer is kept")
    if warm.feasible and not sol.optimal and (not sol.feasible or warm.cost < sol.cost):
        # HiGHS stopped at the time limit with a worse incumbent than its own warm start had.
        return replace(
            warm,
            seconds=time.perf_counter() - start,
            note="the ILP stopped at the time limit above its warm start; the local search's answer is kept",
        )
    return Solution(
        sol.assignment,
        sol.cost,
        sol.peak_usage,
        sol.feasible,
        "ilp",
        sol.optimal,
        time.perf_counter() - start,
        note=sol.note,
    )


def _contracted(
    graph: StrategyGraph, t: float, seed: int, threads: int, con: Contraction, initial: Sequence[int] | None
) -> Solution:
    """The contracted ILP (module docstring), warm-started by the local-search portfolio for
    :data:`ILP_WARM_SHARE` of the time (at most :data:`ILP_WARM_SECONDS`); when it ends early
    without proving its answer optimal, local search from the best answer for the time left."""
    start = time.perf_counter()
    warm = _portfolio(graph, min(t * ILP_WARM_SHARE, ILP_WARM_SECONDS), seed, threads, initial)
    rest = max(t - (time.perf_counter() - start), 0.01)
    try:
        # The first model without usage rows: the portfolio's answer is no guide to the rows
        # that bind. On D (its answer 3.8 times the optimum) its 3 time points near the limit
        # made a first model that took 32 s, and the second (403 rows) ran out of the time:
        # +276 %. Without usage rows the first model takes about 3 s on A, C and D, and the
        # 400 rows its answer breaks most are those that bind (the second model, done 8 to
        # 43 s into the ILP, is optimal).
        sol = solve_contracted(
            graph,
            rest,
            initial=warm.assignment if warm.feasible else None,
            con=con,
            threads=threads,
            rows_from_warm=False,
        )
    except SearchError:
        sol = warm
    best = _best([sol, warm])
    left = t - (time.perf_counter() - start)
    if not best.optimal and left > 1.0:
        polish = _portfolio(graph, left, seed, threads, best.assignment if best.feasible else initial)
        best = _best([best, polish])
    return replace(best, seconds=time.perf_counter() - start)


def _limited_fits(graph: StrategyGraph) -> bool:
    try:
        check_limited(graph)
    except ModelTooLarge:
        return False
    return True


def _best(runs: list[Solution]) -> Solution:
    """Feasible first, then least cost; ties: the earliest."""
    return min(runs, key=lambda r: (not r.feasible, r.cost))


def _hybrid(graph: StrategyGraph, time_limit: float, seed: int, threads: int) -> Solution:
    """The penalty search and local search (module docstring); the best answer."""
    start = time.perf_counter()
    if threads == 1:
        pen = solve_penalty(graph, time_limit * 0.5, seed=seed)
        rest = max(time_limit - (time.perf_counter() - start), 0.0)
        loc = solve_local(graph, rest, seed=seed, initial=pen.assignment if pen.feasible else None)
        return _best([loc, pen])
    trajectories = min(threads, PENALTY_TRAJECTORIES)
    if threads == trajectories:
        return solve_penalty(graph, time_limit, seed=seed, trajectories=trajectories)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=threads - trajectories) as pool:
        futures = [
            pool.submit(solve_local, graph, time_limit, seed=s) for s in range(seed, seed + threads - trajectories)
        ]
        pen = solve_penalty(
            graph, max(time_limit - (time.perf_counter() - start), 0.0), seed=seed, trajectories=trajectories
        )
        runs = [f.result() for f in futures]
    return _best(runs + [pen])


def _with_limited(graph: StrategyGraph, time_limit: float, seed: int, threads: int) -> Solution:
    """The limited toulbar2 solve and the rest (module docstring); the best answer."""
    start = time.perf_counter()
    if threads == 1:
        lim = solve_limited(graph, time_limit * LIMITED_SHARE, seed=seed)
        rest = max(time_limit - (time.perf_counter() - start), 0.0)
        loc = solve_local(graph, rest, seed=seed, initial=lim.assignment if lim.feasible else None)
        return _best([lim, loc])
    from concurrent.futures import ThreadPoolExecutor

    terms = int(graph.cost.size + graph.edge_cost.size)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The limited solve waits on its worker process; the others use the remaining threads.
        limited = pool.submit(solve_limited, graph, time_limit, seed=seed)
        if time_limit >= PENALTY_MIN_ROUNDS * PENALTY_ROUND_SECONDS_PER_TERM * terms:
            other = _hybrid(graph, time_limit, seed, threads - 1)
        else:
            other = _portfolio(graph, time_limit, seed, threads - 1)
        return _best([limited.result(), other])


def _portfolio(
    graph: StrategyGraph, time_limit: float, seed: int, threads: int, initial: Sequence[int] | None = None
) -> Solution:
    """Local search with seeds ``seed .. seed+threads-1`` in parallel (each from ``initial``
    when given); the best answer (feasible first, then least cost, then lowest seed)."""
    if threads == 1:
        return solve_local(graph, time_limit, seed=seed, initial=initial)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=threads) as pool:
        runs = list(
            pool.map(lambda s: solve_local(graph, time_limit, seed=s, initial=initial), range(seed, seed + threads))
        )
    return _best(runs)
