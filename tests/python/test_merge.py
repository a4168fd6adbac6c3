"""Solution merging (``shardwise.search.merge``): the restricted sub-instance scores exactly like
the original, its size is counted right, and the merged ILP equals exhaustive search over the
pool's strategies, is never worse than the pool's best feasible assignment, and finds a
combination no assignment of the pool has."""

from __future__ import annotations

import itertools
import random

import pytest
from shardwise.search import StrategyGraph, evaluate
from shardwise.search.merge import Merger, merged_row_entries, merged_terms, restrict, solve_merged
from test_search import random_graph


def _pool(rng: random.Random, g: StrategyGraph, size: int) -> list[list[int]]:
    return [[rng.randrange(g.k(v)) for v in range(g.num_nodes)] for _ in range(size)]


@pytest.mark.parametrize("seed", range(5))
def test_restricted_instance_scores_like_the_original(seed: int) -> None:
    rng = random.Random(seed)
    g = random_graph(rng, 7, 4)
    allowed = [rng.sample(range(g.k(v)), rng.randint(1, g.k(v))) for v in range(g.num_nodes)]
    sub = restrict(g, allowed)
    assert [sub.k(v) for v in range(g.num_nodes)] == [len(a) for a in allowed]
    for x in itertools.islice(itertools.product(*(range(len(a)) for a in allowed)), 200):
        orig = [allowed[v][s] for v, s in enumerate(x)]
        assert evaluate(sub, x) == evaluate(g, orig)


@pytest.mark.parametrize("seed", range(5))
def test_merged_terms_counts_the_restricted_instance(seed: int) -> None:
    rng = random.Random(seed)
    g = random_graph(rng, 8, 4)
    pool = _pool(rng, g, rng.randint(1, 4))
    sub = restrict(g, [sorted({x[v] for x in pool}) for v in range(g.num_nodes)])
    assert merged_terms(g, pool) == sub.cost.size + sub.edge_cost.size
    assert merged_terms(g, []) == 0


@pytest.mark.parametrize("seed", range(6))
def test_merged_optimum_equals_exhaustive_search_over_the_pool(seed: int) -> None:
    rng = random.Random(seed)
    g = random_graph(rng, 7, 4)
    pool = _pool(rng, g, 3)
    allowed = [sorted({x[v] for x in pool}) for v in range(g.num_nodes)]
    best = None
    for x in itertools.product(*allowed):
        s = evaluate(g, x)
        if s.feasible and (best is None or s.cost < best):
            best = s.cost
    if best is None:
        with pytest.raises(Exception, match="no feasible solution"):
            solve_merged(g, pool, 5.0)
        return
    sol = solve_merged(g, pool, 5.0)
    assert sol.feasible and sol.optimal and sol.method == "merge"
    assert sol.cost == best == evaluate(g, sol.assignment).cost
    assert all(sol.assignment[v] in allowed[v] for v in range(g.num_nodes))
    feasible = [evaluate(g, x).cost for x in pool if evaluate(g, x).feasible]
    assert not feasible or sol.cost <= min(feasible)


def test_merge_combines_the_cheap_and_the_feasible() -> None:
    # Three nodes live together, limit 25. Pool: all-big (cost 0, usage 30: over the limit) and
    # all-small (cost 30, usage 3: fits). The best merge shrinks only the cheapest node to
    # shrink: node 2 (cost 2): 21 <= 25, cost 2; no assignment of the pool is that.
    g = StrategyGraph.build(
        [[0, 10], [0, 18], [0, 2]], [[10, 1], [10, 1], [10, 1]], [[0, 3], [0, 3], [0, 3]], [], [], usage_limit=25
    )
    sol = solve_merged(g, [[0, 0, 0], [1, 1, 1]], 5.0)
    assert sol.assignment == (0, 0, 1) and sol.cost == 2 and sol.peak_usage == 21


def test_a_given_warm_start_is_kept_unless_beaten() -> None:
    # The penalty search passes its incumbent as the warm start instead of having every pooled
    # assignment scored again; the answer is never worse than it.
    g = StrategyGraph.build(
        [[0, 10], [0, 18], [0, 2]], [[10, 1], [10, 1], [10, 1]], [[0, 3], [0, 3], [0, 3]], [], [], usage_limit=25
    )
    sol = solve_merged(g, [[0, 0, 0], [1, 1, 1], [0, 1, 1]], 5.0, warm=[0, 1, 1])
    assert sol.assignment == (0, 0, 1) and sol.cost == 2
    only = StrategyGraph.build([[0, 10]], [[10, 1]], [[0, 3]], [], [], usage_limit=5)
    assert solve_merged(only, [[1]], 5.0, warm=[1]).assignment == (1,)
    with pytest.raises(ValueError, match="warm: expected an assignment of 1 strategies that the pool gives each node"):
        solve_merged(only, [[1]], 5.0, warm=[0])


def test_bad_input_is_named() -> None:
    g = random_graph(random.Random(0), 4, 3)
    with pytest.raises(ValueError, match=r"allowed: expected one strategy list per node \(4\), got 1"):
        restrict(g, [[0]])
    with pytest.raises(ValueError, match="allowed: node 1 keeps no strategy"):
        restrict(g, [[0], [], [0], [0]])
    with pytest.raises(ValueError, match="allowed: node 2 has no strategy 9"):
        restrict(g, [[0], [0], [9], [0]])
    with pytest.raises(ValueError, match="pool: expected at least one assignment, got none"):
        solve_merged(g, [], 1.0)
    with pytest.raises(ValueError, match=r"pool\[0\]: expected 4 strategies \(one per node\), got 2"):
        solve_merged(g, [[0, 0]], 1.0)


def _chain(n: int) -> StrategyGraph:
    # A path of n nodes, two strategies each; disagreeing ends cost 5, strategy 1 costs 1 more
    # on its node; nothing is live, so every assignment is feasible.
    return StrategyGraph.build(
        [[0, 1]] * n,
        [[0, 0]] * n,
        [[0, 0]] * n,
        [[v, v + 1] for v in range(n - 1)],
        [[0, 5, 5, 0]] * (n - 1),
        usage_limit=0,
    )


def test_windows_are_connected_bounded_and_only_improve() -> None:
    g = _chain(40)
    pool = [[0] * 40, [1] * 40]
    merger = Merger(g, max_terms=30, seed=3)
    assert not merger.whole(pool)  # 80 strategies + 39 * 4 entries
    incumbent = [1] * 20 + [0] * 20  # one disagreeing edge (5) and 20 dear nodes (20)
    nodes = merger.window(pool, incumbent)
    lo, hi = min(nodes), max(nodes)
    assert nodes == set(range(lo, hi + 1))  # grown along the path
    inner = len(nodes) * 2 + (len(nodes) - 1) * 4
    assert inner >= 30 and inner - (2 + 4) < 30  # stops at the first window of max_terms
    before = evaluate(g, incumbent).cost
    for _ in range(300):
        sol = merger.improve(pool, incumbent, 5.0)
        assert sol.feasible and sol.cost <= before
        changed = [v for v in range(40) if sol.assignment[v] != incumbent[v]]
        assert not changed or changed[-1] - changed[0] < 6  # inside one window of at most 6 nodes
        incumbent, before = list(sol.assignment), sol.cost
        if before == 0:
            break
    assert before == 0  # windows moved the 0/1 boundary off the path's start: all strategy 0
    assert merger.window(pool + [incumbent], incumbent) != set()
    assert merger.window([incumbent], incumbent) == set()  # the pool agrees: nothing to merge


def test_windows_take_their_own_size() -> None:
    # The whole-merge threshold and the window size are separate: a pool too large to merge
    # whole at 100 terms is merged in windows of about 30.
    g = _chain(40)
    pool = [[0] * 40, [1] * 40]
    merger = Merger(g, max_terms=100, seed=3, window_terms=30)
    assert not merger.whole(pool) and Merger(g, max_terms=236).whole(pool)  # 80 + 39 * 4 terms
    nodes = merger.window(pool, [1] * 20 + [0] * 20)
    inner = len(nodes) * 2 + (len(nodes) - 1) * 4
    assert inner >= 30 and inner - (2 + 4) < 30


def test_memory_row_entries_bound_a_whole_merge() -> None:
    # Nodes live at 2, 2 and 1 of the time points 0, 1, 2; the pool gives the first two nodes
    # two strategies each: 2*2 + 2*2 = 8 memory-row entries (the third has one strategy).
    g = StrategyGraph.build(
        [[0, 1]] * 3, [[1, 2]] * 3, [[0, 2], [1, 3], [2, 3]], [[0, 1]], [[0, 0, 0, 0]], usage_limit=10
    )
    pool = [[0, 0, 0], [1, 1, 0]]
    assert merged_row_entries(g, pool) == 8 and merged_row_entries(g, []) == 0
    assert Merger(g, max_terms=1000, max_rows=8).whole(pool)
    assert not Merger(g, max_terms=1000, max_rows=7).whole(pool)
    assert Merger(g, max_terms=1000).whole(pool)  # no bound by default
