"""The whole problem, usage limit included, as one cost function network solved by toulbar2.

The network of :mod:`shardwise.search.wcsp` (one variable per free node of the exact
reductions, unary node costs, binary edge costs) without penalties, plus the usage limit as one
linear constraint per time point over the free nodes live there
(:meth:`shardwise.search.wcsp.Network.solve_limited`). toulbar2 propagates each as a knapsack
constraint (Montalbano, de Givry & Katsirelos, "Multiple-choice knapsack constraint in graphical
models", CPAIOR 2022) inside its anytime hybrid best-first search (Allouche, de Givry,
Katsirelos, Schiex & Zytnicki, "Anytime hybrid best-first search with tree decomposition for
weighted CSP", CP 2015): it returns the optimum when it proves it in time, else the best
assignment found, which meets the limit by construction.

Unlike the penalty search (:mod:`shardwise.search.penalty`), nothing is relaxed, so the answer
can use strategies no relaxed optimum takes. It suits graphs of up to a few thousand nodes;
``solve(method="auto")`` runs it beside the penalty search up to
:data:`shardwise.search.solve.LIMITED_MAX_NODES` nodes.
"""

from __future__ import annotations

import time

import numpy as np

from shardwise.errors import SearchError
from shardwise.search import ilp
from shardwise.search.graph import StrategyGraph, evaluate
from shardwise.search.ilp import ModelSize, ModelTooLarge, usage_entries
from shardwise.search.local import (
    Solution,
    check_time_limit,
    interruptible,
    offer_incumbent,
)
from shardwise.search.wcsp import RelaxedSolver, WorkerStopped

#: Wall-clock seconds kept back from toulbar2's time for reading its answer and scoring it.
MARGIN_SECONDS = 2.0
#: Peak bytes of the worker's network (Python lists, then toulbar2's copy): a fixed part, per
#: edge-matrix entry and per usage-constraint term (upper bound: :func:`usage_entries`).
#: Measured with the worker's peak RSS: V (1.6M entries, 91k terms) 220 MB, B with intervals
#: lengthened (0.24M entries, at most 2.3M terms) 392 MB; instance A's 305M terms took the
#: worker to 14.6 GB before a MemoryError (224 s of a 30 s limit, before the limits held).
BYTES_FIXED = 100 << 20
BYTES_PER_ENTRY = 120
BYTES_PER_TERM = 200
#: Seconds before the time limit at which a worker still building or solving is interrupted
#: (it then answers with its best assignment, or is killed: :class:`RelaxedSolver`).
HARD_MARGIN_SECONDS = 0.5


def network_size(graph: StrategyGraph) -> tuple[ModelSize, int]:
    """An upper bound on the size of the whole problem's network (strategies, edge-matrix
    entries, usage-constraint terms as ``nonzeros`` less the entries) and the bytes the worker
    takes to hold it (:data:`BYTES_PER_ENTRY`, :data:`BYTES_PER_TERM`); from the graph's
    arrays alone."""
    per_point, binding = usage_entries(graph)
    terms = int(per_point[binding].sum())
    entries = int(graph.edge_cost.size)
    size = ModelSize(
        columns=int(graph.cost.size),
        rows=int(binding.sum()),
        nonzeros=entries + terms,
        terms=int(graph.cost.size) + entries,
    )
    return size, BYTES_FIXED + BYTES_PER_ENTRY * entries + BYTES_PER_TERM * terms


def check_limited(graph: StrategyGraph) -> None:
    """Raises :class:`ModelTooLarge` (one line naming the size) when the whole problem's
    network (:func:`network_size`) would take more than the memory guard
    (:func:`shardwise.search.ilp.memory_guard`)."""
    size, need = network_size(graph)
    guard = ilp.memory_guard()
    if need > guard:
        terms = size.nonzeros - int(graph.edge_cost.size)
        raise ModelTooLarge(
            f"toulbar2 network of {graph.edge_cost.size:,} edge entries and {terms:,} usage-constraint terms needs "
            f"about {need / 2**30:.1f} GiB, the memory guard allows {guard / 2**30:.1f} GiB; use method 'local' or 'penalty'",
            size,
            guard,
        )


def solve_limited(graph: StrategyGraph, time_limit: float = 10.0, *, seed: int = 0) -> Solution:
    """Best assignment toulbar2 finds for the whole problem (module docstring) within
    ``time_limit`` seconds (wall clock; the worker's start and the network's construction
    included). ``Solution.feasible`` is false when it found none in time, or the limit cannot
    be met (the least-usage assignment is then returned); ``Solution.optimal`` is not set (a
    finished search is not told apart from a timed-out one). A worker still busy
    :data:`HARD_MARGIN_SECONDS` before the limit (a large network's construction) is
    interrupted; from the main thread a Ctrl-C stops it within about a second
    (``Solution.interrupted``; toulbar2's best so far, when it had one). Raises
    :class:`ModelTooLarge` (nothing started) when the network would not fit the memory guard
    (:func:`check_limited`), :class:`SearchError` when ``pytoulbar2`` is missing or for a bad
    time limit."""
    t = check_time_limit(time_limit)
    check_limited(graph)
    return interruptible(lambda: _solve_limited(graph, t, seed), graph, t)


def _solve_limited(graph: StrategyGraph, t: float, seed: int) -> Solution:
    begin = time.perf_counter()
    result: list[int] | None = None
    try:
        with RelaxedSolver(graph, begin + max(t - HARD_MARGIN_SECONDS, 0.0)) as solver:
            left = t - (time.perf_counter() - begin) - MARGIN_SECONDS
            if left >= 1.0:
                result = solver.solve_limited(left, seed)
    except WorkerStopped:  # the network not built in time (or a stop request)
        pass
    seconds = time.perf_counter() - begin
    if result is None:
        least = [int(np.argmin(graph.node_usages(v))) for v in range(graph.num_nodes)]
        sc = evaluate(graph, least)
        return Solution(tuple(least), sc.cost, sc.peak_usage, False, "limited", seconds=seconds)
    sc = evaluate(graph, result)
    if not sc.feasible:
        raise SearchError(f"toulbar2's answer uses {sc.peak_usage} at its peak, over the limit {graph.usage_limit}")
    sol = Solution(tuple(result), sc.cost, sc.peak_usage, True, "limited", seconds=seconds)
    offer_incumbent(graph, sol)
    return sol
