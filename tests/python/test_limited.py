"""The limited toulbar2 solve (the whole problem, usage limit as knapsack constraints): its
optimum against exhaustive search on random graphs where the limit binds, an unmeetable limit,
a hand case, and ``auto``'s use of it on 1 and 2 threads."""

from __future__ import annotations

import importlib
import random
import time

import pytest
from shardwise.search import StrategyGraph, evaluate, solve
from shardwise.search.limited import MARGIN_SECONDS, solve_limited
from shardwise.search.solve import LIMITED_SHARE
from shardwise.search.wcsp import RelaxedSolver, available
from test_penalty import _unlimited
from test_search import exhaustive, random_graph

pytestmark = pytest.mark.skipif(not available(), reason="pytoulbar2 has no wheel for this platform")


def _cases(count: int) -> list[tuple[StrategyGraph, int]]:
    """Random graphs with a feasible optimum, and that optimum's cost."""
    rng = random.Random(11)
    out = []
    while len(out) < count:
        g = random_graph(rng, 7, 3)
        best = exhaustive(g)
        if best is not None:
            out.append((g, best[0]))
    return out


def test_limited_optimum_equals_exhaustive_search() -> None:
    # toulbar2 finishes on 7 nodes, so its answer is the optimum under the limit. The limit
    # binds in some of these cases: the unconstrained optimum is cheaper there.
    binding = 0
    for g, best in _cases(16):
        sol = solve_limited(g, 10.0)
        sc = evaluate(g, sol.assignment)
        assert sol.feasible and sc.feasible and sol.cost == sc.cost == best and sol.method == "limited"
        free = exhaustive(_unlimited(g))
        assert free is not None
        binding += free[0] < best
    assert binding >= 2


def test_usage_constraints_keep_the_points_that_can_overflow() -> None:
    # Node 0 lives at points 0-1 and node 1 at point 1 only. Alone, node 0 fits the limit 15
    # whatever its strategy; together the big strategies (10 + 10) do not: one constraint, on
    # point 1, over the usage above each node's least (9 each), bound 15 - 1 - 1 = 13.
    g = StrategyGraph.build(
        [[0, 50], [0, 3]], [[10, 1], [10, 1]], [[0, 4], [1, 5]], [[0, 1]], [[0, 0, 0, 0]], usage_limit=15
    )
    from shardwise.search.wcsp import Network

    net = Network(g)
    assert net.usage_constraints() == [([(0, 0, 9), (1, 0, 9)], 13)]
    sol = solve(g, 5.0, "limited")
    assert sol.assignment == (0, 1) and sol.cost == 3


def test_unmeetable_limit_gives_an_infeasible_answer() -> None:
    g = StrategyGraph.build(
        [[0, 1], [0, 1]], [[10, 8], [10, 8]], [[0, 4], [1, 5]], [[0, 1]], [[0, 0, 0, 0]], usage_limit=15
    )
    sol = solve_limited(g, 5.0)
    assert not sol.feasible and sol.assignment == (1, 1) and sol.peak_usage == 16
    with RelaxedSolver(g) as solver:
        assert solver.solve_limited(3.0, 0) is None


def _auto_budget(g: StrategyGraph) -> float:
    """Seconds that leave the limited solve time to answer (one thread: :data:`LIMITED_SHARE`
    of them, less the worker's start and :data:`MARGIN_SECONDS`) on this machine as loaded now:
    the worker's start is measured (under CI's load it took over 1.2 s, and auto's answer came
    from local search instead), with room for it to be four times slower in the solve."""
    begin = time.perf_counter()
    with RelaxedSolver(g) as solver:
        solver.solve_limited(1.0, 0)
    startup = time.perf_counter() - begin
    return max(6.0, (MARGIN_SECONDS + 1.0 + 4 * startup) / LIMITED_SHARE)


@pytest.mark.parametrize("threads", [1, 2])
def test_auto_runs_the_limited_solve_on_small_limited_graphs(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # With the ILP out of the way, auto takes the limited path: the optimum wins (the other
    # solvers cannot beat it, and ties go to the limited solve).
    monkeypatch.setattr(importlib.import_module("shardwise.search.solve"), "AUTO_ILP_MAX_TERMS", 0)
    g, best = _cases(1)[0]
    sol = solve(g, _auto_budget(g), "auto", threads=threads)
    assert sol.feasible and sol.cost == best and sol.method == "limited"
