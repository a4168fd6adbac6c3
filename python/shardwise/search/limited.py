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
from shardwise.search.graph import StrategyGraph, evaluate
from shardwise.search.local import Solution, check_time_limit
from shardwise.search.wcsp import RelaxedSolver

#: Wall-clock seconds kept back from toulbar2's time for reading its answer and scoring it.
MARGIN_SECONDS = 2.0


def solve_limited(graph: StrategyGraph, time_limit: float = 10.0, *, seed: int = 0) -> Solution:
    """Best assignment toulbar2 finds for the whole problem (module docstring) within
    ``time_limit`` seconds (wall clock; the worker's start and the network's construction
    included). ``Solution.feasible`` is false when it found none in time, or the limit cannot
    be met (the least-usage assignment is then returned); ``Solution.optimal`` is not set (a
    finished search is not told apart from a timed-out one). Raises :class:`SearchError` when
    ``pytoulbar2`` is missing or for a bad time limit."""
    t = check_time_limit(time_limit)
    begin = time.perf_counter()
    result: list[int] | None = None
    with RelaxedSolver(graph) as solver:
        left = t - (time.perf_counter() - begin) - MARGIN_SECONDS
        if left >= 1.0:
            result = solver.solve_limited(left, seed)
    seconds = time.perf_counter() - begin
    if result is None:
        least = [int(np.argmin(graph.node_usages(v))) for v in range(graph.num_nodes)]
        sc = evaluate(graph, least)
        return Solution(tuple(least), sc.cost, sc.peak_usage, False, "limited", seconds=seconds)
    sc = evaluate(graph, result)
    if not sc.feasible:
        raise SearchError(f"toulbar2's answer uses {sc.peak_usage} at its peak, over the limit {graph.usage_limit}")
    return Solution(tuple(result), sc.cost, sc.peak_usage, True, "limited", seconds=seconds)
