"""Strategy-graph search: exact scoring on hand cases, ILP and local search against exhaustive
search on random graphs of up to 12 nodes, reductions, and input errors."""

from __future__ import annotations

import importlib
import itertools
import random

import pytest
from shardwise.errors import SearchError, ShardwiseError
from shardwise.search import StrategyGraph, evaluate, solve, solve_ilp, solve_local
from shardwise.search.graph import Score
from shardwise.search.local import lagrange_prices
from shardwise.search.reduce import reduce_graph


def exhaustive(g: StrategyGraph) -> tuple[int, tuple[int, ...]] | None:
    best: tuple[int, tuple[int, ...]] | None = None
    for a in itertools.product(*(range(g.k(v)) for v in range(g.num_nodes))):
        s = evaluate(g, a)
        if s.feasible and (best is None or s.cost < best[0]):
            best = (s.cost, a)
    return best


def random_graph(rng: random.Random, n: int, kmax: int) -> StrategyGraph:
    ks = [rng.randint(1, kmax) for _ in range(n)]
    starts = [rng.randint(0, 8) for _ in range(n)]
    intervals = [[s, s + rng.randint(0, 5)] for s in starts]
    edges = [[a, b] for b in range(n) for a in range(b) if rng.random() < 0.3]
    edges += [[b, a] for a, b in edges[:1]]  # a parallel edge in reverse orientation
    return StrategyGraph.build(
        [[rng.randint(0, 99) for _ in range(k)] for k in ks],
        [[rng.randint(0, 19) for _ in range(k)] for k in ks],
        intervals,
        edges,
        [[rng.randint(0, 59) for _ in range(ks[a] * ks[b])] for a, b in edges],
        usage_limit=rng.randint(15, 55),
    )


def test_scorer_hand_cases() -> None:
    # Two nodes, one edge; intervals [0, 2) and [2, 4) touch but never overlap (half-open).
    g = StrategyGraph.build(
        [[1, 5], [2, 3]], [[10, 1], [10, 1]], [[0, 2], [2, 4]], [[0, 1]], [[100, 0, 7, 8]], usage_limit=10
    )
    assert evaluate(g, [0, 0]).cost == 1 + 2 + 100
    assert evaluate(g, [1, 0]).cost == 5 + 2 + 7
    assert evaluate(g, [0, 1]).cost == 1 + 3 + 0
    assert evaluate(g, [0, 0]).peak_usage == 10 and evaluate(g, [0, 0]).feasible
    # Overlapping intervals add up; an empty interval uses no memory.
    g2 = StrategyGraph.build([[0], [0], [0]], [[6], [5], [100]], [[0, 3], [2, 5], [4, 4]], [], [], usage_limit=10)
    s = evaluate(g2, [0, 0, 0])
    assert (s.cost, s.peak_usage, s.feasible) == (0, 11, False)
    # Costs beyond int64 sums stay exact.
    big = 2**62
    g3 = StrategyGraph.build([[big], [big]], [[0], [0]], [[0, 0], [0, 0]], [[0, 1]], [[big]])
    assert evaluate(g3, [0, 0]).cost == 3 * big


@pytest.mark.parametrize("seed", range(12))
def test_ilp_and_local_match_exhaustive_search(seed: int) -> None:
    rng = random.Random(seed)
    n = 12 if seed % 3 == 0 else rng.randint(3, 8)
    g = random_graph(rng, n, 2 if n == 12 else 3)
    best = exhaustive(g)
    local = solve_local(g, 5.0, max_rounds=500)
    if best is None:
        assert not local.feasible
        with pytest.raises(SearchError, match="no feasible solution"):
            solve_ilp(g, 5.0)
        return
    ilp = solve_ilp(g, 20.0)
    assert ilp.optimal and ilp.feasible
    assert ilp.cost == best[0] == evaluate(g, ilp.assignment).cost
    assert local.feasible and local.cost >= best[0]
    assert solve(g, 20.0, "auto").cost == best[0]


@pytest.mark.parametrize("seed", [1, 2, 4])
def test_local_portfolio_on_two_threads(seed: int) -> None:
    # Seeds seed and seed+1 run side by side; the answer is feasible, scored exactly, and on
    # these small graphs both runs reach the exhaustive optimum.
    rng = random.Random(seed)
    while (best := exhaustive(g := random_graph(rng, 7, 3))) is None:
        pass
    sol = solve(g, 1.0, "local", seed=seed, threads=2)
    assert sol.feasible and sol.cost == evaluate(g, sol.assignment).cost == best[0]


def test_ilp_warm_start_and_reductions() -> None:
    rng = random.Random(99)
    while (best := exhaustive(g := random_graph(rng, 8, 3))) is None:
        pass
    sol = solve_ilp(g, 20.0, initial=best[1])
    assert sol.cost == best[0]
    red = reduce_graph(g)
    # Every node keeps at least one strategy, the fixed ones are folded into the constant.
    assert all(red.keep) and red.constant >= 0
    # Dominated strategy: strategy 1 costs more, uses more and has larger edge costs.
    d = StrategyGraph.build(
        [[1, 2], [0, 0]], [[1, 2], [1, 1]], [[0, 1], [0, 1]], [[0, 1]], [[0, 1, 5, 6]], usage_limit=10
    )
    r = reduce_graph(d)
    assert r.keep[0] == [0] and r.removed_strategies >= 1
    assert solve_ilp(d, 5.0).assignment[0] == 0


def test_over_limit_warm_start_is_repaired() -> None:
    # A triangle a, b, c whose edges cost 100 unless both ends agree, and a free node d; every
    # node is big (usage 10, cost 0) or small (usage 1; cost 10, d 25); all live together, limit
    # 31. Descent from the least-usage start stops at (1, 1, 1, 0) = 30 (shrinking one triangle
    # node costs 200 in edges); the all-big warm start (usage 40) is repaired by shrinking d,
    # the cheapest per byte freed: (0, 0, 0, 1) = 25.
    tri = [[0, 100, 100, 0]] * 3
    g = StrategyGraph.build(
        [[0, 10], [0, 10], [0, 10], [0, 25]], [[10, 1]] * 4, [[0, 1]] * 4, [[0, 1], [1, 2], [0, 2]], tri, usage_limit=31
    )
    plain = solve_local(g, 1.0, max_rounds=0, lagrange_share=0.0)
    warm = solve_local(g, 1.0, initial=[0, 0, 0, 0], max_rounds=0, lagrange_share=0.0)
    assert (plain.assignment, plain.cost) == ((1, 1, 1, 0), 30)
    assert (warm.assignment, warm.cost, warm.feasible) == ((0, 0, 0, 1), 25, True)


def test_lagrange_prices() -> None:
    # The triangle above: its cheap (big) strategies break the limit together. The prices are
    # one per node, in cost per usage unit, and the priced assignment under them fits.
    tri = [[0, 100, 100, 0]] * 3
    g = StrategyGraph.build(
        [[0, 10], [0, 10], [0, 10], [0, 25]], [[10, 1]] * 4, [[0, 1]] * 4, [[0, 1], [1, 2], [0, 2]], tri, usage_limit=31
    )
    found = lagrange_prices(g, 5.0, max_cycles=50)
    assert found is not None
    prices, over = found
    assert prices.shape == (4,) and over <= 0 and (prices > 0).all()
    again = lagrange_prices(g, 5.0, max_cycles=50)
    assert again is not None and (again[0] == prices).all()  # deterministic for a cycle count
    free = StrategyGraph.build([[0, 10]], [[10, 1]], [[0, 1]], [], [])
    assert lagrange_prices(free, 1.0) is None  # no usage limit: nothing to price
    with pytest.raises(SearchError, match="time_limit: expected a finite number of seconds >= 0, got -1"):
        lagrange_prices(g, -1)


def test_time_limits_too_long_for_rust_mean_no_limit() -> None:
    # 1e30 s is finite but beyond a Rust Duration: the searches run to their own end (rounds,
    # cycles) instead of panicking across the FFI.
    g = StrategyGraph.build(
        [[0, 10], [0, 10]], [[10, 1]] * 2, [[0, 1]] * 2, [[0, 1]], [[0, 100, 100, 0]], usage_limit=11
    )
    best = exhaustive(g)
    sol = solve_local(g, 1e30, max_rounds=2)
    assert best is not None and sol.feasible and sol.cost == best[0] == 20
    found = lagrange_prices(g, 1e30, max_cycles=5)
    assert found is not None and found[0].shape == (2,)


def test_bad_inputs_raise_search_errors() -> None:
    with pytest.raises(SearchError, match="node 1: expected at least one strategy"):
        StrategyGraph.build([[1], []], [[1], []], [[0, 1], [0, 1]], [], [])
    with pytest.raises(SearchError, match=r"edge 0 \(0, 1\): expected 4 costs \(2 x 2\), got 3"):
        StrategyGraph.build([[1, 2], [1, 2]], [[1, 1], [1, 1]], [[0, 1], [0, 1]], [[0, 1]], [[1, 2, 3]])
    with pytest.raises(SearchError, match=r"node 0: expected an interval"):
        StrategyGraph.build([[1]], [[1]], [[3, 1]], [], [])
    with pytest.raises(SearchError, match="out of range for 1 nodes"):
        StrategyGraph.build([[1]], [[1]], [[0, 1]], [[0, 4]], [[1]])
    g = StrategyGraph.build([[1, 2]], [[1, 1]], [[0, 1]], [], [])
    with pytest.raises(SearchError, match="node 0: strategy 2 out of range"):
        evaluate(g, [2])
    with pytest.raises(SearchError, match="expected 1 strategy indices"):
        evaluate(g, [0, 0])
    with pytest.raises(SearchError, match="time_limit"):
        solve_local(g, float("nan"))
    for share in (-0.1, 1.5, float("nan")):
        with pytest.raises(SearchError, match="lagrange_share: expected a share of the time limit in"):
            solve_local(g, 1.0, lagrange_share=share)
    with pytest.raises(SearchError, match="method: expected one of"):
        solve(g, 1.0, "magic")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(SearchError, match="threads: expected an integer >= 1"):
            solve(g, 1.0, "local", threads=bad)  # type: ignore[arg-type]
    assert issubclass(SearchError, ShardwiseError) and issubclass(SearchError, ValueError)


def test_lazy_usage_rows_add_the_rows_an_answer_breaks() -> None:
    # One node live at one time point: strategy 0 is free but uses 20 of the limit 10, 1 costs
    # 3 and uses 5, 2 costs 4 and uses 5 (the warm start). The warm start is far below the
    # limit, so the first model has no usage row; its optimum (strategy 0) breaks the point,
    # whose row is then added.
    g = StrategyGraph.build([[0, 3, 4]], [[20, 5, 5]], [[0, 1]], [], [], usage_limit=10)
    sol = solve_ilp(g, 10.0, initial=[2], lazy_rows=True)
    assert sol.assignment == (1,) and sol.cost == 3 and sol.feasible and sol.optimal
    # Without a feasible warm start the flag changes nothing.
    assert solve_ilp(g, 10.0, lazy_rows=True).assignment == (1,)


@pytest.mark.parametrize("seed", range(8))
def test_lazy_usage_rows_keep_the_optimum(seed: int) -> None:
    rng = random.Random(1000 + seed)
    while (best := exhaustive(g := random_graph(rng, rng.randint(4, 8), 3))) is None:
        pass
    feasible = [a for a in itertools.product(*(range(g.k(v)) for v in range(g.num_nodes))) if evaluate(g, a).feasible]
    warm = max(feasible, key=lambda a: evaluate(g, a).cost)
    sol = solve_ilp(g, 20.0, initial=warm, lazy_rows=True)
    assert sol.optimal and sol.feasible and sol.cost == best[0] == evaluate(g, sol.assignment).cost


def test_a_graph_with_fewer_cost_matrices_than_edges_is_one_search_error() -> None:
    # Before: IndexError from reading the missing matrix (the fault campaign's finding).
    from shardwise.errors import SearchError
    from shardwise.search.graph import StrategyGraph

    with pytest.raises(SearchError, match="one cost matrix per edge"):
        StrategyGraph.build([[1, 2], [3]], [[0, 0], [0]], [[0, 1], [0, 1]], [[0, 1], [1, 0]], [[0, 0]])


def test_a_cheaper_warm_start_keeps_the_answer_proven_optimal_within_highs_gap() -> None:
    # HiGHS's "Optimal" holds within mip_rel_gap: a warm start cheaper than such an answer is
    # kept and is as close to the optimum; one kept because the answer broke the limit, or
    # kept over an unproven answer, is not proven.
    with_warm = importlib.import_module("shardwise.search.ilp")._with_warm
    answer, warm = Score(1_000_050, 10, True), Score(1_000_000, 12, True)
    assert with_warm(answer, True, warm) == (True, True)
    assert with_warm(answer, False, warm) == (True, False)
    assert with_warm(Score(999_000, 20, False), True, warm) == (True, False)
    assert with_warm(Score(999_999, 10, True), True, warm) == (False, True)
    assert with_warm(answer, True, None) == (False, True)
    # An infeasible warm start never replaces a feasible answer, however cheap.
    assert with_warm(answer, True, Score(1, 99, False)) == (False, True)
