"""The contraction of forbidden components and the ILP over it (``shardwise.search.contract``):
exact against the plain ILP and exhaustive search, its usage rows added lazily, and ``solve``'s
``contracted`` method and ``auto``'s choice of it."""

from __future__ import annotations

import importlib
import itertools
import random
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from shardwise.errors import SearchError
from shardwise.search import solve
from shardwise.search.contract import contract, has_forbidden, solve_contracted
from shardwise.search.graph import StrategyGraph, evaluate
from shardwise.search.ilp import ModelTooLarge, solve_ilp
from shardwise.search.local import Solution
from shardwise.search.merge import restrict, solve_merged
from shardwise.search.solve import FallbackWarning

solve_mod = importlib.import_module("shardwise.search.solve")  # the module, not the function

F = 10**18


def forbidden_graph(rng: random.Random, n: int, limit: int | None, bad: float = 0.08) -> StrategyGraph:
    """Functional forbidden edges on a random forest (each strategy of the first end allows at
    most one of the second), free edges between the trees, some forbidden node strategies."""
    ks = [rng.randint(1, 4) for _ in range(n)]
    costs = [[F if rng.random() < bad else rng.randint(0, 60) for _ in range(k)] for k in ks]
    usages = [[rng.randint(0, 9) for _ in range(k)] for k in ks]
    starts = [rng.randint(0, 6) for _ in range(n)]
    intervals = [[s, s + rng.randint(0, 4)] for s in starts]
    edges, mats = [], []
    for b in range(1, n):
        a = rng.randrange(b)
        m = [F] * (ks[a] * ks[b])
        if rng.random() < 0.7:
            for sa in range(ks[a]):
                if rng.random() < 1 - bad:
                    m[sa * ks[b] + rng.randrange(ks[b])] = rng.randint(0, 30)
        else:
            m = [rng.randint(0, 40) for _ in range(ks[a] * ks[b])]
        edges.append([a, b])
        mats.append(m)
    for _ in range(n // 2):  # free edges, parallel ones and a self-edge now and then
        a, b = rng.randrange(n), rng.randrange(n)
        edges.append([a, b])
        mats.append([rng.randint(0, 40) for _ in range(ks[a] * ks[b])])
    return StrategyGraph.build(costs, usages, intervals, edges, mats, usage_limit=limit)


def limited_instances(rng: random.Random) -> Iterator[StrategyGraph]:
    """Random forbidden-component graphs (40 tries) whose contracted optimum without a limit
    uses more than 4, each with its usage limit set 3 below that peak: the first contracted
    answer (no usage rows) then breaks the limit."""
    for _ in range(40):
        g = forbidden_graph(rng, 24, None, bad=0.0)
        try:
            free = solve_contracted(g, 20)
        except SearchError:  # every assignment lands on a forbidden entry
            continue
        if free.cost >= F or free.peak_usage <= 4:
            continue
        yield replace(g, usage_limit=free.peak_usage - 3)


def exhaustive(g: StrategyGraph) -> int | None:
    best = None
    for a in itertools.product(*(range(g.k(v)) for v in range(g.num_nodes))):
        s = evaluate(g, a)
        if s.feasible and s.cost < F and (best is None or s.cost < best):
            best = s.cost
    return best


def test_contraction_maps_assignments_both_ways() -> None:
    rng = random.Random(3)
    seen = 0
    for _ in range(30):
        g = forbidden_graph(rng, 12, None)
        con = contract(g)
        seen += con.components
        assert sorted(v for m in con.members for v in m) == list(range(g.num_nodes))
        for _ in range(5):
            choice = [rng.randrange(len(k)) for k in con.red.keep]
            a = con.expand(choice)
            back = con.labelling(a)
            assert back is not None and con.expand(back) == a
            # The contracted costs price the expanded assignment exactly (when it avoids
            # forbidden entries, which every label of a component does inside it).
            sc = evaluate(g, a)
            if sc.cost < F:
                priced = con.red.constant + sum(int(con.red.node_cost[u][c]) for u, c in enumerate(choice))
                priced += sum(int(m[choice[x], choice[y]]) for (x, y), m in con.red.edges.items())
                assert priced == sc.cost
    assert seen >= 10


@pytest.mark.parametrize("seed", range(12))
def test_contracted_ilp_is_exact(seed: int) -> None:
    rng = random.Random(100 + seed)
    g = forbidden_graph(rng, 9, rng.randint(12, 30))
    best = exhaustive(g)
    if best is None:  # every assignment lands on a forbidden entry (or breaks the limit)
        try:
            sol = solve_contracted(g, 20)
        except SearchError:
            return
        assert sol.cost >= F or not sol.feasible
        return
    sol = solve_contracted(g, 20)
    assert sol.feasible and sol.optimal and sol.method == "contracted-ilp"
    assert sol.cost == best == evaluate(g, sol.assignment).cost
    assert sol.lower_bound is not None and sol.lower_bound <= best


def test_contracted_ilp_adds_the_usage_rows_an_answer_breaks() -> None:
    # A chain whose components can all take a cheap large strategy; the limit allows only some.
    rng = random.Random(9)
    found = 0
    for limited in limited_instances(rng):
        try:
            want = solve_ilp(limited, 30)
        except SearchError:
            continue
        if not want.optimal or want.cost >= F:
            continue
        sol = solve_contracted(limited, 30)
        assert sol.feasible and sol.optimal
        assert sol.cost == want.cost
        found += 1
        if found == 4:
            break
    assert found == 4


def test_solve_contracted_method_and_auto_choice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(21)
    g = forbidden_graph(rng, 40, None, bad=0.0)
    g = replace(g, usage_limit=solve_contracted(g, 10).peak_usage - 2)
    assert has_forbidden(g)
    want = solve_ilp(g, 30)
    sol = solve(g, 10, method="contracted")
    assert sol.method == "contracted-ilp" and sol.optimal and sol.cost == want.cost
    # auto takes the plain ILP on a graph this small, the contracted one past its size limit.
    assert solve(g, 10).method == "ilp"
    monkeypatch.setattr(solve_mod, "AUTO_ILP_MAX_TERMS", 0)
    sol = solve(g, 10, threads=2)
    assert sol.method == "contracted-ilp" and sol.optimal and sol.cost == want.cost
    monkeypatch.setattr(solve_mod, "CONTRACTED_MAX_TERMS", 0)
    assert solve(g, 2).method != "contracted-ilp"


def test_contracted_method_without_forbidden_entries_falls_back() -> None:
    g = StrategyGraph.build(
        [[1, 2], [3, 1]],
        [[1, 1], [1, 1]],
        [[0, 2], [1, 3]],
        [[0, 1]],
        [[0, 5, 5, 0]],
        usage_limit=10,
    )
    assert not has_forbidden(g)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sol = solve(g, 1, method="contracted")
    assert sol.feasible and sol.cost == 3 and sol.method == "local"
    assert any(issubclass(w.category, FallbackWarning) and "no forbidden component" in str(w.message) for w in caught)


def test_merges_over_a_contracted_sub_instance_match_the_plain_ilp() -> None:
    # The penalty search's merge contracts the pool's sub-instance when that makes it smaller;
    # its answer is the plain ILP's optimum over the same sub-instance.
    rng = random.Random(5)
    merged = 0
    for _ in range(20):
        g = forbidden_graph(rng, 30, None, bad=0.0)
        try:
            free = solve_contracted(g, 10)
        except SearchError:
            continue
        # Random labellings of the contracted graph that fit: pools whose members differ on
        # whole components, as the penalty search's relaxed optima do.
        g = replace(g, usage_limit=free.peak_usage + 4)
        con_g = contract(g)
        pool = []
        for _ in range(60):
            p = con_g.expand([rng.randrange(len(k)) for k in con_g.red.keep])
            if evaluate(g, p).feasible and evaluate(g, p).cost < F:
                pool.append(p)
        if len(pool) < 2:
            continue
        allowed = [sorted({p[v] for p in pool}) for v in range(g.num_nodes)]
        sub = restrict(g, allowed)
        con = contract(sub)
        if not con.components or con.terms() >= sub.cost.size + sub.edge_cost.size:
            continue
        want = solve_ilp(sub, 30)
        got = solve_merged(g, pool, 30)
        assert want.optimal and got.optimal
        assert got.cost == want.cost and evaluate(g, got.assignment).feasible
        merged += 1
    assert merged >= 3


def test_bound_for_uses_the_contracted_ilp_when_the_plain_model_is_too_large(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bound_mod = importlib.import_module("shardwise.search.bound")

    def too_large(size: object, t: float | None = None) -> None:
        raise ModelTooLarge("too large (test)", size, 0)  # type: ignore[arg-type]

    monkeypatch.setattr(bound_mod, "check_model", too_large)
    rng = random.Random(8)
    while True:  # a graph whose limit binds, with a feasible answer above the optimum
        g = forbidden_graph(rng, 7, None, bad=0.0)
        g = replace(g, usage_limit=solve_contracted(g, 10).peak_usage - 1)
        scores = [evaluate(g, a) for a in itertools.product(*(range(g.k(v)) for v in range(g.num_nodes)))]
        costs = sorted({s.cost for s in scores if s.feasible and s.cost < F})
        if len(costs) >= 2:
            break
    best = costs[0]
    worse = next(
        a
        for a in itertools.product(*(range(g.k(v)) for v in range(g.num_nodes)))
        if evaluate(g, a).feasible and evaluate(g, a).cost == costs[1]
    )
    sol = Solution(worse, evaluate(g, worse).cost, evaluate(g, worse).peak_usage, True, "local")
    lb = bound_mod.bound_for(g, sol, 10)
    assert lb.method in ("ilp", "optimal")
    assert best * (1 - 1e-4) - 1 <= lb.bound <= best


def test_the_first_model_takes_the_warm_starts_rows_only_when_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A warm start at the limit: with rows_from_warm its time points at the limit are the first
    # model's usage rows; without, the first model has none (the whole-instance path of solve,
    # whose warm start is a short local search's). Both end at the same optimum.
    rng = random.Random(9)
    for limited in limited_instances(rng):
        want = solve_contracted(limited, 30)
        if not want.optimal or want.peak_usage != limited.usage_limit:
            continue
        firsts = []
        for seeded in (True, False):
            caplog.clear()
            with caplog.at_level("DEBUG", logger="shardwise.search.contract"):
                sol = solve_contracted(limited, 30, initial=want.assignment, rows_from_warm=seeded)
            assert sol.optimal and sol.cost == want.cost
            first = [r.getMessage() for r in caplog.records if "round 1:" in r.getMessage()]
            firsts.append(int(first[0].split(" usage rows")[0].rsplit(" ", 1)[1]))
        assert firsts[0] > 0 and firsts[1] == 0
        return
    pytest.fail("no instance with an optimum at the limit")


def test_solve_starts_the_contracted_ilp_without_usage_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []
    real = solve_mod.solve_contracted

    def spy(*args: Any, rows_from_warm: bool = True, **kw: Any) -> Solution:
        seen.append(rows_from_warm)
        sol: Solution = real(*args, rows_from_warm=rows_from_warm, **kw)
        return sol

    monkeypatch.setattr(solve_mod, "solve_contracted", spy)
    rng = random.Random(21)
    g = forbidden_graph(rng, 40, None, bad=0.0)
    g = replace(g, usage_limit=solve_contracted(g, 10).peak_usage - 2)
    assert solve(g, 10, method="contracted").method == "contracted-ilp"
    assert seen == [False]


def test_an_answer_that_breaks_usage_rows_when_the_time_ends_is_repaired(monkeypatch: pytest.MonkeyPatch) -> None:
    # HiGHS's first answer (no usage rows) breaks the limit, and the module's clock moves to
    # HiGHS's deadline as that round ends: the loop stops with that answer, and local search
    # repairs it in the time held back (REPAIR_SHARE). Without the repair no answer fits (there
    # is no warm start) and solve_contracted raised SearchError.
    contract_mod = importlib.import_module("shardwise.search.contract")
    rng = random.Random(9)
    for limited in limited_instances(rng):
        want = solve_ilp(limited, 30)
        if want.optimal and want.cost < F:
            break
    else:
        pytest.fail("no instance whose first contracted answer breaks the limit")

    t_limit = 20.0
    real_clock = time.perf_counter
    start = [0.0]
    ran: list[float] = []  # when HiGHS's first round ended (real clock)

    class Clock:
        @staticmethod
        def perf_counter() -> float:
            now = real_clock()
            if not ran:
                return now
            return start[0] + t_limit * (1 - contract_mod.REPAIR_SHARE) + (now - ran[0])

    class Highs:
        def __init__(self, h: Any) -> None:
            self._h = h

        def __getattr__(self, name: str) -> Any:
            return getattr(self._h, name)

        def run(self) -> Any:
            out = self._h.run()
            ran.append(real_clock())
            return out

    real_model = contract_mod.model_highs
    monkeypatch.setattr(contract_mod, "model_highs", lambda *a, **kw: Highs(real_model(*a, **kw)))
    monkeypatch.setattr(contract_mod, "time", Clock)
    start[0] = real_clock()
    sol = solve_contracted(limited, t_limit)
    assert len(ran) == 1
    assert sol.method == "contracted-ilp+repair"
    assert sol.feasible and not sol.optimal
    assert want.cost <= sol.cost < F
