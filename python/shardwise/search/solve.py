"""One entry point over the solvers: ``method="local"`` (Rust local search), ``"ilp"`` (HiGHS,
warm-started by a short local search), or ``"auto"``: the ILP when the reduced model is small
enough to solve in the time (at most :data:`AUTO_ILP_MAX_TERMS` edge-matrix entries plus
strategies), else local search for the whole time limit."""

from __future__ import annotations

import time

from shardwise.errors import SearchError
from shardwise.search.graph import StrategyGraph
from shardwise.search.ilp import solve_ilp
from shardwise.search.local import Solution, check_time_limit, solve_local

METHODS = ("auto", "ilp", "local")
#: Model size (strategies + edge-matrix entries) up to which ``auto`` uses the ILP.
AUTO_ILP_MAX_TERMS = 500_000


def solve(graph: StrategyGraph, time_limit: float = 10.0, method: str = "auto", *, seed: int = 0) -> Solution:
    """Best assignment of ``graph`` within ``time_limit`` seconds by ``method`` (see module).
    Raises :class:`SearchError` for an unknown method or a bad time limit."""
    if method not in METHODS:
        raise SearchError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    t = check_time_limit(time_limit)
    start = time.perf_counter()
    if method == "auto":
        terms = int(graph.cost.size + graph.edge_cost.size)
        method = "ilp" if terms <= AUTO_ILP_MAX_TERMS else "local"
    if method == "local":
        return solve_local(graph, t, seed=seed)
    warm = solve_local(graph, min(t * 0.2, 5.0), seed=seed)
    rest = max(t - (time.perf_counter() - start), 0.01)
    sol = solve_ilp(graph, rest, initial=warm.assignment if warm.feasible else None)
    return Solution(sol.assignment, sol.cost, sol.peak_usage, sol.feasible, "ilp", sol.optimal,
                    time.perf_counter() - start)
