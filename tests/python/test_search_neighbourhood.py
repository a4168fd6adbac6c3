"""The ILP's very large neighbourhood (shardwise.search.neighbourhood): local costs, the
candidate strategies, exactness over the neighbourhood, and the descent's schedule."""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import replace

import numpy as np
import pytest
from shardwise.search import neighbourhood
from shardwise.search.graph import StrategyGraph, evaluate
from shardwise.search.ilp import ModelSize, ModelTooLarge, solve_ilp
from shardwise.search.local import Solution
from shardwise.search.neighbourhood import (
    FIRST_M,
    LAST_M,
    Descent,
    candidates,
    improve,
    local_costs,
)


def random_graph(rng: random.Random, n: int, limit: int | None, forbidden: float = 0.0) -> StrategyGraph:
    """Random strategies, intervals and edges, parallel edges and self-edges included; a share
    ``forbidden`` of the edge entries 10^18."""
    ks = [rng.randint(1, 4) for _ in range(n)]
    costs = [[rng.randint(0, 60) for _ in range(k)] for k in ks]
    usages = [[rng.randint(0, 9) for _ in range(k)] for k in ks]
    intervals = [[s, s + rng.randint(0, 4)] for s in (rng.randint(0, 6) for _ in range(n))]
    edges, mats = [], []
    for _ in range(n + n // 2):
        a, b = rng.randrange(n), rng.randrange(n)
        edges.append([a, b])
        mats.append([10**18 if rng.random() < forbidden else rng.randint(0, 40) for _ in range(ks[a] * ks[b])])
    return StrategyGraph.build(costs, usages, intervals, edges, mats, usage_limit=limit)


def feasible_start(g: StrategyGraph) -> list[int]:
    """The least-usage assignment (feasible whenever the instance is)."""
    return [int(np.argmin(g.node_usages(v))) for v in range(g.num_nodes)]


@pytest.mark.parametrize("seed", range(8))
def test_local_costs_are_the_exact_change_of_one_node(seed: int) -> None:
    rng = random.Random(seed)
    g = random_graph(rng, 9, None)
    x = [rng.randrange(g.k(v)) for v in range(g.num_nodes)]
    local = local_costs(g, x)
    base = evaluate(g, x).cost
    for v in range(g.num_nodes):
        for s in range(g.k(v)):
            y = list(x)
            y[v] = s
            got = local[g.offsets[v] + s] - local[g.offsets[v] + x[v]]
            assert got == evaluate(g, y).cost - base, (v, s)


def test_candidates_hold_the_incumbent_the_least_usage_and_the_m_cheapest() -> None:
    rng = random.Random(3)
    g = random_graph(rng, 30, None)
    x = [rng.randrange(g.k(v)) for v in range(g.num_nodes)]
    local = local_costs(g, x)
    for m in (0, 1, 2):
        allowed = candidates(g, x, m)
        for v, a in enumerate(allowed):
            k = g.k(v)
            lv = local[g.offsets[v] : g.offsets[v] + k]
            cheapest = sorted(range(k), key=lambda s: (lv[s], s))[:m]
            u = g.node_usages(v)
            least = min(range(k), key=lambda s: (u[s], g.cost[g.offsets[v] + s], s))
            assert a == sorted({x[v], least, *cheapest})
    with pytest.raises(ValueError, match="m: expected"):
        candidates(g, x, -1)
    with pytest.raises(ValueError, match="assignment: expected 30"):
        candidates(g, x[:-1], 1)


@pytest.mark.parametrize("seed", range(6))
def test_improve_is_the_optimum_of_its_neighbourhood(seed: int) -> None:
    rng = random.Random(100 + seed)
    g0 = random_graph(rng, 8, None, forbidden=0.2 if seed % 2 else 0.0)
    x = feasible_start(g0)
    g = replace(g0, usage_limit=evaluate(g0, x).peak_usage + 6)
    allowed = candidates(g, x, 1)
    best = min(
        (sc.cost for y in itertools.product(*allowed) if (sc := evaluate(g, y)).feasible),
        default=None,
    )
    sol = improve(g, x, 20.0, 1)
    assert sol.method == "neighbourhood" and sol.feasible and sol.optimal
    assert all(s in a for s, a in zip(sol.assignment, allowed))
    assert sol.cost == best <= evaluate(g, x).cost


def test_descent_ends_in_a_local_optimum_of_its_last_neighbourhood() -> None:
    rng = random.Random(7)
    g = random_graph(rng, 40, None)
    g = replace(g, usage_limit=evaluate(g, feasible_start(g)).peak_usage + 10)
    d = Descent(g)
    x = feasible_start(g)
    start = evaluate(g, x).cost
    ms, rounds = [], 0
    while (sol := d.step(x, 20.0)) is not None:
        rounds += 1
        ms.append(d.m)
        assert sol.feasible and sol.cost <= evaluate(g, x).cost
        x = list(sol.assignment)
    assert d.done and rounds >= 2 and ms == sorted(ms) and ms[-1] >= LAST_M
    assert evaluate(g, x).cost < start
    # Nothing better left at the last m; a new incumbent starts the descent again at FIRST_M.
    assert improve(g, x, 20.0, ms[-1]).cost == evaluate(g, x).cost
    assert d.step(feasible_start(g), 20.0) is not None and d.m >= FIRST_M


def test_a_neighbourhood_holding_every_strategy_is_the_whole_instance() -> None:
    rng = random.Random(8)
    g = random_graph(rng, 40, None)
    x = feasible_start(g)
    g = replace(g, usage_limit=evaluate(g, x).peak_usage + 10)
    opt = solve_ilp(g, 30.0)
    assert opt.optimal
    assert improve(g, x, 30.0, 4).cost == opt.cost  # k <= 4: every strategy kept


def test_a_neighbourhood_too_large_for_the_ilp_ends_the_descent_for_good(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(9)
    g = random_graph(rng, 12, None)
    calls = []

    def too_large(*args: object, **kwargs: object) -> None:
        calls.append(args)
        size = ModelSize(columns=196_800, rows=10, nonzeros=18_300_000, terms=0)
        raise ModelTooLarge("ILP model of 196.8k columns and 18.3M nonzeros", size, 0)

    monkeypatch.setattr(neighbourhood, "improve", too_large)
    d = Descent(g)
    x = feasible_start(g)
    assert d.step(x, 5.0) is None and d.done and d.too_large
    y = list(x)
    y[0] = (y[0] + 1) % g.k(0)
    assert d.step(y, 5.0) is None and len(calls) == 1


def wide_graph(k: int) -> StrategyGraph:
    """Three nodes, one of them with ``k`` strategies, two edges, no usage limit problem."""
    return StrategyGraph.build(
        [[0, 1], list(range(k)), [0, 1]],
        [[1, 1], [1] * k, [1, 1]],
        [[0, 1], [0, 1], [0, 1]],
        [[0, 1], [1, 2]],
        [[0] * (2 * k), [0] * (2 * k)],
        usage_limit=10,
    )


def scripted(monkeypatch: pytest.MonkeyPatch, optimal: list[bool]) -> list[int]:
    """``improve`` replaced by one that answers at once with the incumbent itself (nothing
    better), proven optimal or not as ``optimal`` says round by round (its last entry for the
    rounds after); the ``m`` of each call is recorded in the list returned."""
    ms: list[int] = []

    def fake(graph: StrategyGraph, x: tuple[int, ...], t: float, m: int, threads: int = 1) -> Solution:
        ms.append(m)
        sc = evaluate(graph, x)
        proven = optimal[min(len(ms) - 1, len(optimal) - 1)]
        return Solution(x, sc.cost, sc.peak_usage, True, "neighbourhood", optimal=proven)

    monkeypatch.setattr(neighbourhood, "improve", fake)
    return ms


def test_fast_rounds_from_the_last_m_on_double_m_up_to_every_strategy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every round proves at once that nothing is better: m grows by one to LAST_M, then doubles
    # while the neighbourhood does not yet hold every strategy (20 strategies: m = 19 holds all).
    ms = scripted(monkeypatch, [True])
    d = Descent(wide_graph(20))
    while d.step([0, 0, 0], 30.0) is not None:
        pass
    assert ms[: LAST_M - FIRST_M + 1] == list(range(FIRST_M, LAST_M + 1))
    grown = ms[LAST_M - FIRST_M + 1 :]
    assert grown and all(b == min(2 * a, 19) for a, b in zip([LAST_M] + grown, grown))
    assert ms[-1] == 19 and d.done and d.ceiling is None


def test_a_slow_round_at_the_last_m_ends_the_descent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Proven, but not within GROW_SHARE of its limit: no growth.
    ms = scripted(monkeypatch, [True])
    monkeypatch.setattr(neighbourhood, "GROW_SHARE", 0.0)
    d = Descent(wide_graph(20))
    while d.step([0, 0, 0], 30.0) is not None:
        pass
    assert ms == list(range(FIRST_M, LAST_M + 1)) and d.done


def test_a_grown_round_out_of_time_caps_m_for_later_incumbents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The round at 2 * LAST_M is not solved in time: it ends the descent and becomes the
    # ceiling; the next incumbent starts at LAST_M (solved fast) and grows only to just below it.
    proven = [True] * (LAST_M - FIRST_M + 1) + [False] + [True] * 20
    ms = scripted(monkeypatch, proven)
    d = Descent(wide_graph(64))
    while d.step([0, 0, 0], 30.0) is not None:
        pass
    assert ms[-1] == 2 * LAST_M and d.done and d.ceiling == 2 * LAST_M
    rounds = len(ms)
    assert d.resume == LAST_M
    while d.step([1, 0, 0], 30.0) is not None:
        pass
    assert ms[rounds:] == [LAST_M] + [m for m in [2 * LAST_M - 1] if m > LAST_M]
    assert d.done and d.ceiling == 2 * LAST_M


def test_a_new_incumbent_resumes_at_the_largest_m_solved_fast(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Fast rounds grow m to 19 (every strategy of the 20); the next incumbent starts there. A
    # round there that is not proven halves where the one after starts, and caps m.
    ms = scripted(monkeypatch, [True] * 7 + [False] + [True])
    d = Descent(wide_graph(20))
    while d.step([0, 0, 0], 30.0) is not None:
        pass
    assert len(ms) == 6 and ms[-1] == 19 and d.resume == 19
    assert d.step([1, 0, 0], 30.0) is not None and ms[-1] == 19 and d.done
    assert d.step([0, 0, 0], 30.0) is not None and ms[-1] == 19  # not proven
    assert d.resume == 9 and d.done and d.ceiling == 19
    assert d.step([1, 0, 0], 30.0) is not None and ms[-1] == 9


def test_a_grown_round_takes_at_most_grow_time_times_the_round_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Rounds of about 0.05 s: each grown round's limit is GROW_TIME times that plus a second,
    # not the 30 s offered; rounds up to LAST_M keep the 30 s.
    limits: list[tuple[int, float]] = []

    def fake(graph: StrategyGraph, x: tuple[int, ...], t: float, m: int, threads: int = 1) -> Solution:
        limits.append((m, t))
        time.sleep(0.05)
        sc = evaluate(graph, x)
        return Solution(x, sc.cost, sc.peak_usage, True, "neighbourhood", optimal=True)

    monkeypatch.setattr(neighbourhood, "improve", fake)
    d = Descent(wide_graph(20))
    while d.step([0, 0, 0], 30.0) is not None:
        pass
    grown = [t for m, t in limits if m > LAST_M]
    assert grown and all(t == 30.0 for m, t in limits if m <= LAST_M)
    assert all(neighbourhood.GROW_TIME * 0.05 + 1.0 <= t < 3.0 for t in grown)


def test_a_round_the_clock_cut_short_leaves_the_descent_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Rounds given less than a full round (30 s) run out of time: the descent goes on at the
    # same m, and resume stays; a full round that runs out of time ends it. A round at a grown
    # m given less than its own (GROW_TIME) limit is cut short too: no ceiling.
    calls: list[tuple[int, float]] = []

    def fake(graph: StrategyGraph, x: tuple[int, ...], t: float, m: int, threads: int = 1) -> Solution:
        calls.append((m, t))
        sc = evaluate(graph, x)
        return Solution(x, sc.cost, sc.peak_usage, True, "neighbourhood", optimal=t >= 2.0)

    monkeypatch.setattr(neighbourhood, "improve", fake)
    d = Descent(wide_graph(20), full_seconds=30.0)
    for _ in range(3):
        assert d.step([0, 0, 0], 1.5) is not None
        assert not d.done and d.m == FIRST_M and d.resume == FIRST_M
    assert d.step([0, 0, 0], 30.0) is not None and d.m == FIRST_M + 1
    while d.m <= LAST_M:
        assert d.step([0, 0, 0], 30.0) is not None
    grown = d.m
    # Its own limit is about a second (GROW_TIME times an instant round, plus a second).
    assert grown > LAST_M and d.step([0, 0, 0], 0.5) is not None
    assert not d.done and d.m == grown and d.ceiling is None and d.resume == LAST_M
    assert calls[-1] == (grown, 0.5)
    assert d.step([0, 0, 0], 30.0) is not None and d.done and d.ceiling == grown
    # The same rounds given their whole limit, not proven: the descent ends.
    scripted(monkeypatch, [False])
    d = Descent(wide_graph(20), full_seconds=30.0)
    assert d.step([0, 0, 0], 30.0) is not None and d.done


def test_an_incumbent_only_a_little_cheaper_keeps_m(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Costs near 1e6: moving node 0 saves 1e-6 of the cost (less than MIN_GAIN), moving node 1
    # 5e-3. Rounds prove nothing better at once, so m grows; the small change keeps it, the
    # large one sends it back to where new incumbents start (resume).
    ms = scripted(monkeypatch, [True])
    k = 20
    g = StrategyGraph.build(
        [[10**6, 10**6 + 1], [1000 * s for s in range(k)], [0, 1]],
        [[1, 1], [1] * k, [1, 1]],
        [[0, 1], [0, 1], [0, 1]],
        [[0, 1], [1, 2]],
        [[0] * (2 * k), [0] * (2 * k)],
        usage_limit=10,
    )
    d = Descent(g, full_seconds=30.0)
    while d.m <= LAST_M:
        assert d.step([1, 5, 0], 30.0) is not None
    assert d.m == 2 * LAST_M and d.resume == LAST_M
    assert d.step([0, 5, 0], 30.0) is not None and ms[-1] == 2 * LAST_M
    assert d.m == 4 * LAST_M and d.resume == 2 * LAST_M
    assert d.step([0, 0, 0], 30.0) is not None and ms[-1] == 2 * LAST_M
