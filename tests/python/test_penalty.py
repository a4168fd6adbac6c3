"""Penalty search (memory as node penalties, relaxed problems by toulbar2 in a worker process):
the network against exhaustive search without a memory limit, feasibility and exact scoring with
one, a hand case where the unconstrained optimum does not fit, the worker's errors, the auto
method's hybrid, and a clean standard output for the contest CLI."""

from __future__ import annotations

import functools
import importlib
import itertools
import logging
import random
import time
from pathlib import Path
from typing import Self

import numpy as np
import pytest
from shardwise.cli import main
from shardwise.errors import SearchError
from shardwise.search import StrategyGraph, evaluate, solve
from shardwise.search.penalty import solve_penalty
from shardwise.search.wcsp import RelaxedSolver, available
from test_iopddl import example  # noqa: F401  (fixture)
from test_search import exhaustive, random_graph

pytestmark = pytest.mark.skipif(not available(), reason="pytoulbar2 has no wheel for this platform")


def _unlimited(g: StrategyGraph) -> StrategyGraph:
    return StrategyGraph.build(
        [list(g.node_costs(v)) for v in range(g.num_nodes)],
        [list(g.node_usages(v)) for v in range(g.num_nodes)],
        g.intervals.tolist(),
        g.edges.tolist(),
        [list(g.edge_matrix(e).reshape(-1)) for e in range(g.num_edges)],
        usage_limit=None,
    )


def _quick_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """More penalty rounds in a short test: no time kept back for merges, and each round's
    polish 0.05 s instead of 0.5 s."""
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty._Shared, "reserve", lambda self: 0.0)
    real_local = penalty.solve_local
    monkeypatch.setattr(penalty, "solve_local", lambda g, t, **kw: real_local(g, min(t, 0.05), **kw))


def _hot_pair() -> StrategyGraph:
    """Two overlapping nodes whose cheap strategies (usage 100, cost 0) break the limit 195
    together; the optimum takes node 0's small strategy (cost 50)."""
    return StrategyGraph.build(
        [[0, 50], [0, 60]], [[100, 1], [100, 1]], [[0, 4], [1, 5]], [[0, 1]], [[0, 0, 0, 0]], usage_limit=195
    )


@functools.cache
def _worker_figures() -> tuple[float, float]:
    """The real toulbar2 worker's exchange rate and build seconds for ``_hot_pair()``."""
    with RelaxedSolver(_hot_pair()) as solver:
        return solver.exchange_rate, solver.build_seconds


class _Scripted:
    """Stands in for the toulbar2 worker when every relaxed solve is scripted: built at once,
    with the real worker's exchange rate. The real worker's start (a Python process importing
    pytoulbar2, about 0.7 s) took over 2 s on a loaded machine (CI ran the suite on 2 workers),
    which left a 6 s search too little time for the rounds its test counts."""

    def __init__(self, graph: StrategyGraph, x: list[int], seen: list[np.ndarray]) -> None:
        assert graph.num_nodes == 2, "scripted solves stand in for the worker of _hot_pair() only"
        self.exchange_rate, self.build_seconds = _worker_figures()
        self.interrupted = False
        self._x, self._seen = x, seen

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def solve(self, w: np.ndarray, seconds: int, seed: int, hint: list[int] | None = None) -> list[int] | None:
        self._seen.append(np.array(w))
        return list(self._x)


def _always(monkeypatch: pytest.MonkeyPatch, x: list[int]) -> list[np.ndarray]:
    """Every relaxed solve answers ``x`` (:class:`_Scripted` stands in for the worker); returns
    the list its penalty vectors go to."""
    penalty = importlib.import_module("shardwise.search.penalty")
    seen: list[np.ndarray] = []
    _worker_figures()  # the real worker's start, before the search's clock runs
    monkeypatch.setattr(penalty, "RelaxedSolver", lambda graph, deadline=None: _Scripted(graph, x, seen))
    return seen


@pytest.mark.parametrize("seed", range(4))
def test_relaxed_network_optimum_equals_exhaustive_search(seed: int) -> None:
    # Without a limit the network (reductions, unary and binary functions, edge orientation,
    # a parallel reversed edge) is solved exactly by toulbar2: the exhaustive optimum.
    g = _unlimited(random_graph(random.Random(seed), 7, 3))
    best = exhaustive(g)
    assert best is not None
    with RelaxedSolver(g) as solver:
        x = solver.solve(np.zeros(g.num_nodes), 5, seed)
    assert x is not None and evaluate(g, x).cost == best[0]
    sol = solve(g, 2.0, "penalty")
    assert sol.method == "penalty" and sol.cost == best[0] == evaluate(g, sol.assignment).cost


@pytest.mark.parametrize("seed", range(4))
def test_a_hint_leaves_the_relaxed_optimum_exact(seed: int) -> None:
    # The hint only orders toulbar2's values: from any assignment, the optimum is still found.
    rng = random.Random(seed)
    g = _unlimited(random_graph(rng, 7, 3))
    best = exhaustive(g)
    assert best is not None
    hint = [rng.randrange(g.k(v)) for v in range(g.num_nodes)]
    with RelaxedSolver(g) as solver:
        x = solver.solve(np.zeros(g.num_nodes), 5, seed, hint=hint)
        assert x is not None and evaluate(g, x).cost == best[0]
        again = solver.solve(np.zeros(g.num_nodes), 10**12, seed)  # beyond toulbar2's C int: no limit
        assert again is not None and evaluate(g, again).cost == best[0]
        with pytest.raises(SearchError, match=r"hint: expected one strategy per node \(7\), got 6"):
            solver.solve(np.zeros(g.num_nodes), 1, seed, hint=hint[:-1])


def test_relaxed_and_limited_networks_set_their_own_options() -> None:
    # toulbar2's options are process globals: a penalised network (DGVNS) must not leave its
    # search method to the whole problem's network after it, nor the other way round.
    from shardwise.search.wcsp import LIMITED_OPTIONS, RELAXED_OPTIONS, Network

    net = Network(random_graph(random.Random(0), 5, 3))
    for w, opts in ((np.zeros(5), RELAXED_OPTIONS), (None, LIMITED_OPTIONS), (np.ones(5), RELAXED_OPTIONS)):
        cfn = net._network(w, 0)
        readable = [k for k in opts if k != "vnsNeighborVarHeur"]  # pytoulbar2 cannot read that one back
        assert {k: getattr(cfn.Option, k) for k in readable} == {k: opts[k] for k in readable}
    assert RELAXED_OPTIONS["searchMethod"] == 2 and LIMITED_OPTIONS["searchMethod"] == 0


@pytest.mark.parametrize("seed", [1, 2, 4])
def test_penalty_search_is_feasible_and_scored_exactly(seed: int) -> None:
    rng = random.Random(seed)
    while (best := exhaustive(g := random_graph(rng, 7, 3))) is None:
        pass
    sol = solve_penalty(g, 2.0, seed=seed)
    sc = evaluate(g, sol.assignment)
    assert sol.feasible and sc.feasible and sol.cost == sc.cost >= best[0]


def test_penalty_moves_the_cheapest_node_off_the_peak() -> None:
    # Two overlapping nodes: strategy 0 is cheap and big, strategy 1 dear and small. Together
    # the big ones need 20 > 15, so one must shrink: node 1 (+3) rather than node 0 (+50).
    g = StrategyGraph.build(
        [[0, 50], [0, 3]], [[10, 1], [10, 1]], [[0, 4], [1, 5]], [[0, 1]], [[0, 0, 0, 0]], usage_limit=15
    )
    sol = solve_penalty(g, 3.0)
    assert sol.assignment == (0, 1) and sol.cost == 3


def test_worker_errors_are_search_errors() -> None:
    g = _unlimited(random_graph(random.Random(3), 4, 2))
    with pytest.raises(SearchError, match=r"toulbar2 worker: AttributeError: .*'num_nodes'"):
        RelaxedSolver("not a graph")  # type: ignore[arg-type]  # fails in the worker
    solver = RelaxedSolver(g)
    with pytest.raises(SearchError, match=r"w: expected one penalty per node, shape \(4,\), got shape \(1,\)"):
        solver.solve(np.zeros(1), 1, 0)
    solver.close()
    solver.close()  # idempotent
    with pytest.raises(SearchError, match="toulbar2 worker: expected a reply"):
        solver.solve(np.zeros(g.num_nodes), 1, 0)


def test_auto_runs_penalty_beside_local_search(monkeypatch: pytest.MonkeyPatch) -> None:
    solve_module = importlib.import_module("shardwise.search.solve")  # the module, not the function
    monkeypatch.setattr(solve_module, "AUTO_ILP_MAX_TERMS", 0)  # take the large-graph path
    rng = random.Random(2)
    while (best := exhaustive(g := random_graph(rng, 7, 3))) is None:
        pass
    for threads in (1, 2, 3):  # penalty then local; two trajectories; two trajectories + local
        sol = solve(g, 3.0, "auto", threads=threads)
        assert sol.feasible and sol.method in (
            "local",
            "penalty",
            "penalty+merge",
            "penalty+polish",
            "penalty+merge+polish",
            "penalty+neighbourhood",
            "penalty+neighbourhood+polish",
        )
        assert sol.cost == evaluate(g, sol.assignment).cost >= best[0]


def test_cli_output_stays_clean(example: Path, capfd: pytest.CaptureFixture[str]) -> None:  # noqa: F811 (the fixture)
    # toulbar2 prints to standard output; the worker's goes to /dev/null, so the contest answer
    # is still exactly two lines (captured at the file-descriptor level, children included).
    assert main(["iopddl", str(example), "--time-limit", "4", "--method", "penalty"]) == 0
    out = capfd.readouterr().out.strip().splitlines()
    assert out == ["[0, 0, 2, 1, 0]", "cost: 445"]


@pytest.mark.parametrize("seed", [1, 4])
def test_two_trajectories_share_one_answer(seed: int) -> None:
    rng = random.Random(seed)
    while (best := exhaustive(g := random_graph(rng, 7, 3))) is None:
        pass
    sol = solve_penalty(g, 3.0, seed=seed, trajectories=2)
    sc = evaluate(g, sol.assignment)
    assert sol.feasible and sc.feasible and sol.cost == sc.cost >= best[0]
    assert sol.seconds < 4.5  # both workers stop by the deadline (toulbar2's whole-second slices)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_bad_trajectory_count(bad: object) -> None:
    g = random_graph(random.Random(0), 4, 2)
    with pytest.raises(SearchError, match=f"trajectories: expected an integer >= 1, got {bad!r}"):
        solve_penalty(g, 1.0, trajectories=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, True, 2.5, (), (8, 0)])
def test_bad_slice(bad: object) -> None:
    g = random_graph(random.Random(0), 4, 2)
    with pytest.raises(SearchError, match=r"slice_seconds: expected whole seconds >= 1 .*, got "):
        solve_penalty(g, 1.0, slice_seconds=bad)  # type: ignore[arg-type]


def test_empty_slice_is_retried_with_twice_the_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # A slice in which toulbar2 finds nothing (as on the shared instance S with 3 s) must not end
    # the trajectory: the same penalties are solved again with twice the time.
    penalty = importlib.import_module("shardwise.search.penalty")
    calls: list[tuple[int, list[float]]] = []
    real = RelaxedSolver.solve

    def flaky(
        self: RelaxedSolver, w: np.ndarray, seconds: int, seed: int, hint: list[int] | None = None
    ) -> list[int] | None:
        calls.append((seconds, list(w)))
        return None if len(calls) == 2 else real(self, w, seconds, seed, hint)

    monkeypatch.setattr(penalty.RelaxedSolver, "solve", flaky)
    g = StrategyGraph.build(
        [[0, 50], [0, 3]], [[10, 1], [10, 1]], [[0, 4], [1, 5]], [[0, 1]], [[0, 0, 0, 0]], usage_limit=15
    )
    monkeypatch.setattr(penalty._Shared, "reserve", lambda self: 0.0)  # no time kept back for merges
    sol = solve_penalty(g, 4.0, slice_seconds=1)
    assert sol.assignment == (0, 1) and sol.cost == 3
    assert len(calls) >= 3 and [c[0] for c in calls[:3]] == [1, 1, 2]
    assert calls[2][1] == calls[1][1] != calls[0][1]  # the empty slice's penalties, solved again


def test_step_grows_when_the_relaxed_optimum_comes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    # The relaxed optimum (0, 0) is 2.6% over the limit, under the 5% at which the step grows by
    # itself; coming back unchanged, it makes the step grow 1.5x a round from the second repeat.
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty, "START_SCALES", ())  # the loop's own steps from its first round
    seen = _always(monkeypatch, [0, 0])
    monkeypatch.setattr(penalty, "STALL_BOOST", 0.0)  # the additive step alone (boost: below)
    _quick_rounds(monkeypatch)
    g = _hot_pair()
    sol = solve_penalty(g, 3.0, slice_seconds=1)
    assert sol.feasible and sol.cost == 50
    assert len(seen) >= 5
    steps = [float(b[0] - a[0]) for a, b in itertools.pairwise(seen)]
    assert steps[0] > 0 and steps[1] == pytest.approx(steps[0])  # first repeat: the step as it was
    assert steps[2] == pytest.approx(1.5 * steps[1]) and steps[3] == pytest.approx(1.5 * steps[2])


def test_first_penalties_are_the_lagrangian_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both nodes' cheap strategies (usage 100 each) break the limit 195 together. The first
    # relaxed problem must carry the Lagrangian prices, searched for the price share of the
    # time (positive on both nodes; without them the first penalties are zero).
    penalty = importlib.import_module("shardwise.search.penalty")
    first: list[np.ndarray] = []
    found: list[tuple[float, np.ndarray]] = []
    real, real_prices = RelaxedSolver.solve, penalty.lagrange_prices

    def logged(
        self: RelaxedSolver, w: np.ndarray, seconds: int, seed: int, hint: list[int] | None = None
    ) -> list[int] | None:
        if not first:
            first.append(np.array(w))
        return real(self, w, seconds, seed, hint)

    def prices(graph: StrategyGraph, seconds: float, **kw: object) -> object:
        r = real_prices(graph, seconds, **kw)  # type: ignore[arg-type]
        assert r is not None
        found.append((seconds, r[0]))
        return r

    monkeypatch.setattr(penalty.RelaxedSolver, "solve", logged)
    monkeypatch.setattr(penalty, "lagrange_prices", prices)
    g = _hot_pair()
    sol = solve_penalty(g, 3.0, slice_seconds=1)
    assert sol.feasible and sol.cost == 50
    assert len(found) == 1 and found[0][0] == pytest.approx(min(penalty.PRICE_SHARE * 3.0, penalty.PRICE_SECONDS))
    assert (found[0][1] > 0).all() and (first[0] == found[0][1]).all()


def test_each_relaxed_problem_starts_from_the_previous_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    # The relaxed optima come in the order below (over the limit, as far over, fitting, the
    # same again): each solve after the first is hinted with the previous one.
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty, "START_SCALES", ())  # the loop's own steps from its first round
    optima = [[2, 0], [0, 0], [1, 0], [1, 0]]
    hints: list[list[int] | None] = []

    def scripted(
        self: RelaxedSolver, w: np.ndarray, seconds: int, seed: int, hint: list[int] | None = None
    ) -> list[int] | None:
        hints.append(None if hint is None else list(hint))
        return optima[min(len(hints), len(optima)) - 1]

    monkeypatch.setattr(penalty.RelaxedSolver, "solve", scripted)
    _quick_rounds(monkeypatch)
    g = StrategyGraph.build(
        [[0, 50, 1], [0, 60]],
        [[100, 1, 100], [100, 1]],
        [[0, 4], [1, 5]],
        [[0, 1]],
        [[0, 0, 0, 0, 0, 0]],
        usage_limit=195,
    )
    solve_penalty(g, 3.0, slice_seconds=1)  # room for five rounds after the worker's start
    assert len(hints) >= 5
    assert hints[:5] == [None, [2, 0], [0, 0], [1, 0], [1, 0]]


def test_step_grows_when_the_overflow_stalls(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two different relaxed optima, both 2.6% over the limit, in turn: never the same one twice,
    # but the overflow does not fall, so the step grows 1.5x a round from the second round.
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty, "START_SCALES", ())  # the loop's own steps from its first round
    seen: list[np.ndarray] = []

    def alternating(
        self: RelaxedSolver, w: np.ndarray, seconds: int, seed: int, hint: list[int] | None = None
    ) -> list[int] | None:
        seen.append(np.array(w))
        return [2 * (len(seen) % 2), 0]

    monkeypatch.setattr(penalty.RelaxedSolver, "solve", alternating)
    monkeypatch.setattr(penalty, "STALL_BOOST", 0.0)  # the additive step alone
    _quick_rounds(monkeypatch)
    g = StrategyGraph.build(
        [[0, 50, 1], [0, 60]],
        [[100, 1, 100], [100, 1]],
        [[0, 4], [1, 5]],
        [[0, 1]],
        [[0, 0, 0, 0, 0, 0]],
        usage_limit=195,
    )
    sol = solve_penalty(g, 3.0, slice_seconds=1)
    assert sol.feasible and sol.cost == 50
    assert len(seen) >= 5
    steps = [float(b[0] - a[0]) for a, b in itertools.pairwise(seen)]
    assert steps[0] > 0 and steps[1] == pytest.approx(steps[0])
    assert steps[2] == pytest.approx(1.5 * steps[1]) and steps[3] == pytest.approx(1.5 * steps[2])


def test_a_failed_worker_ends_only_its_trajectory(monkeypatch: pytest.MonkeyPatch) -> None:
    # toulbar2 crashing in one trajectory's worker (a SearchError from the pipe) must not lose
    # the other trajectory's answer; when every trajectory fails before any answer, it is raised.
    penalty = importlib.import_module("shardwise.search.penalty")
    real = RelaxedSolver.solve

    def crashing(
        self: RelaxedSolver, w: np.ndarray, seconds: int, seed: int, hint: list[int] | None = None
    ) -> list[int] | None:
        if seed >= 7919 or everyone:  # the second trajectory's seeds start at seed + 7919
            raise SearchError("toulbar2 worker: expected a reply, got EOFError: the other side closed the pipe")
        return real(self, w, seconds, seed, hint)

    monkeypatch.setattr(penalty.RelaxedSolver, "solve", crashing)
    g = StrategyGraph.build(
        [[0, 50], [0, 3]], [[10, 1], [10, 1]], [[0, 4], [1, 5]], [[0, 1]], [[0, 0, 0, 0]], usage_limit=15
    )
    everyone = False
    sol = solve_penalty(g, 3.0, trajectories=2, slice_seconds=1)
    assert sol.feasible and sol.assignment == (0, 1) and sol.cost == 3
    everyone = True
    # Raised as soon as both workers failed, so a long limit costs nothing; with 2 s, the
    # workers of a loaded machine were not even started by the deadline (nothing failed).
    with pytest.raises(SearchError, match="toulbar2 worker: expected a reply"):
        solve_penalty(g, 20.0, trajectories=2, slice_seconds=1)


def test_stalled_rounds_boost_the_hot_penalties(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every relaxed optimum is (0, 0), 2.6% over the limit, from first penalties (3, 5). With
    # no additive step (ETA0 = 0), only the stall boost moves the penalties of the two hot
    # nodes: none after the first round (not stalled), then x1.05, x1.075, x1.1125 (1.5x a
    # stalled round in a row).
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty, "START_SCALES", ())  # the loop's own steps from its first round
    seen = _always(monkeypatch, [0, 0])
    monkeypatch.setattr(penalty, "_start_penalties", lambda g, seconds, seed: np.array([3.0, 5.0]))
    monkeypatch.setattr(penalty, "ETA0", 0.0)
    _quick_rounds(monkeypatch)
    g = _hot_pair()
    # 3 s: the worker's start (about 0.7 s of imports) and the 1 s kept before the deadline
    # leave room for the five rounds checked below even on a loaded machine.
    sol = solve_penalty(g, 3.0, slice_seconds=1)
    assert sol.feasible and sol.cost == 50
    assert len(seen) >= 5
    ratios = [b / a for a, b in itertools.pairwise(seen)]
    for r, want in zip(ratios, [1.0, 1.05, 1.075, 1.1125], strict=False):
        assert r == pytest.approx([want, want])


def test_a_whole_merge_needs_the_time_the_last_one_took(monkeypatch: pytest.MonkeyPatch) -> None:
    # HiGHS overran a 7.7 s merge limit by 2.9 s on S; a whole merge is skipped unless the time
    # left is at least what the last one took, and the penalty rounds keep back 1.5 times that
    # (at least 2.5 s) plus 2 s for the last merge.
    penalty = importlib.import_module("shardwise.search.penalty")
    g = _hot_pair()
    shared = penalty._Shared(g, 10.0, 0)
    calls: list[float] = []
    worse = penalty.Solution((0, 1), 60, 101, True, "merge")

    def improve(pool: object, best: object, seconds: float, whole: bool) -> object:
        calls.append(seconds)
        return worse

    monkeypatch.setattr(shared.merger, "improve", improve)
    assert shared.reserve() == 0.0  # nothing feasible yet: nothing to merge into
    shared.offer([0, 0])
    shared.offer([1, 0], penalty.Solution((1, 0), 50, 101, True, "local"))
    assert shared.reserve() == pytest.approx(5.75)
    shared.merge_seconds = 10.0
    assert shared.reserve() == pytest.approx(17.0)
    assert shared.merge(5.0, windows=False) and calls == []
    assert shared.merge(12.0, windows=False) and calls == [12.0]
    assert shared.merged_at == 2 and shared.best is not None and shared.best.cost == 50


def test_a_stalled_whole_merge_ends_the_whole_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    # A whole merge that runs out of its full time without improving the best (HiGHS on K's
    # pools of 77-124k columns) stops the whole merges, and the rounds no longer keep time for
    # them; one that proves its optimum, or that the clock cut short, does not. Later merges
    # take only the assignments pooled since (relinking merges).
    penalty = importlib.import_module("shardwise.search.penalty")
    shared = penalty._Shared(_hot_pair(), 10.0, 0)
    calls: list[float] = []
    pools: list[int] = []
    answer = [penalty.Solution((1, 0), 50, 101, True, "merge", optimal=True)]

    def improve(pool: list[list[int]], best: object, seconds: float, whole: object = None) -> object:
        calls.append(seconds)
        pools.append(len(pool))
        return answer[0]

    monkeypatch.setattr(shared.merger, "improve", improve)
    shared.offer([1, 0], penalty.Solution((1, 0), 50, 101, True, "local"))
    assert shared.merge(8.0, windows=False) and not shared.merge_stalled  # optimal, not better
    answer[0] = penalty.Solution((1, 0), 50, 101, True, "merge", optimal=False)
    shared.offer([0, 1])
    assert shared.merge(8.0, windows=False) and not shared.merge_stalled  # cut short by the clock
    shared.offer([1, 1])
    assert shared.merge(40.0, windows=False) and shared.merge_stalled and len(calls) == 3
    assert shared.reserve() == 0.0
    shared.offer([0, 0])
    assert shared.merge(40.0, windows=False, last=True) and len(calls) == 4 and pools[-1] == 1
    assert shared.merge(40.0, windows=False, last=True) and len(calls) == 4  # nothing new


def test_the_last_whole_merge_takes_all_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    penalty = importlib.import_module("shardwise.search.penalty")
    shared = penalty._Shared(_hot_pair(), 100.0, 0)
    calls: list[float] = []

    def improve(pool: object, best: object, seconds: float, whole: bool) -> object:
        calls.append(seconds)
        return penalty.Solution((1, 0), 50, 101, True, "merge", optimal=True)

    monkeypatch.setattr(shared.merger, "improve", improve)
    shared.offer([1, 0], penalty.Solution((1, 0), 50, 101, True, "local"))
    shared.merge(45.0, windows=False)
    shared.offer([0, 1])
    shared.merge(45.0, windows=True, last=True)
    assert calls == [penalty.MERGE_SECONDS, 45.0]


def test_a_last_merge_that_overruns_is_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    # A last merge still running LAST_MERGE_OVERRUN times its limit (plus a second) is left to end
    # in the background: the search goes on to its polish and keeps its deadline.
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty, "LAST_MERGE_OVERRUN", 0.1)
    shared = penalty._Shared(_hot_pair(), 10.0, 0)

    def slow(pool: object, best: object, seconds: float, whole: bool) -> object:
        time.sleep(3.0)
        return penalty.Solution((1, 0), 40, 101, True, "merge", optimal=True)

    monkeypatch.setattr(shared.merger, "improve", slow)
    shared.offer([1, 0], penalty.Solution((1, 0), 50, 101, True, "local"))
    begin = time.perf_counter()
    assert shared.merge(2.0, windows=True, last=True)
    assert time.perf_counter() - begin < 2.0 and shared.merge_stalled and shared.best is not None
    assert shared.best.cost == 50


def test_the_time_left_polishes_the_best(monkeypatch: pytest.MonkeyPatch) -> None:
    # After the last merges, the feasible local search polishes the best assignment (from it,
    # no price phase) on one seed per trajectory until shortly before the deadline.
    penalty = importlib.import_module("shardwise.search.penalty")
    _always(monkeypatch, [0, 0])
    polished: list[tuple[float, tuple[int, ...] | None, float]] = []
    real_local = penalty.solve_local

    def local(g: StrategyGraph, t: float, **kw: object) -> object:
        initial = kw.get("initial")
        polished.append((t, None if initial is None else tuple(initial), float(kw.get("lagrange_share", 0.8))))  # type: ignore[arg-type]
        return real_local(g, min(t, 0.05), **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(penalty, "solve_local", local)
    sol = solve_penalty(_hot_pair(), 4.0, slice_seconds=1, trajectories=2)
    assert sol.feasible and sol.cost == 50
    last = [p for p in polished if p[1] == (1, 0)]  # the rounds polish their relaxed optimum (0, 0)
    assert len(last) == 2 and all(p[0] >= 0.5 and p[2] == 0.0 for p in last)


def test_the_search_is_traced_at_debug_level(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="shardwise.search"):
        sol = solve_penalty(_hot_pair(), 3.0, slice_seconds=1)
    assert sol.feasible
    text = caplog.text
    assert "relaxed optimum" in text and "best 50 by" in text and "penalty search ends" in text


def test_trajectories_start_again_from_fresh_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    # At RESTART_SHARE of its time the trajectory asks for prices again with another seed and
    # solves from them without a hint (a second basin for the merges), keeping the pool.
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty, "START_SCALES", ())  # the loop's own steps from its first round
    calls: list[tuple[float, int]] = []
    solves: list[tuple[float, np.ndarray, list[int] | None]] = []

    def prices(g: StrategyGraph, seconds: float, seed: int) -> np.ndarray:
        calls.append((time.perf_counter(), seed))
        return np.array([3.0, 5.0]) if len(calls) == 1 else np.array([7.0, 11.0])

    def logged(
        self: RelaxedSolver, w: np.ndarray, seconds: int, seed: int, hint: list[int] | None = None
    ) -> list[int] | None:
        solves.append((time.perf_counter(), np.array(w), None if hint is None else list(hint)))
        return [0, 0]

    monkeypatch.setattr(penalty, "_start_penalties", prices)
    monkeypatch.setattr(penalty.RelaxedSolver, "solve", logged)
    _quick_rounds(monkeypatch)
    g = _hot_pair()
    begin = time.perf_counter()
    sol = solve_penalty(g, 6.0, slice_seconds=1)
    assert sol.feasible and sol.cost == 50
    assert len(calls) == 2 and calls[0][1] != calls[1][1]
    assert calls[1][0] - begin >= penalty.RESTART_SHARE * 6.0 * 0.9
    after = [s for s in solves if s[0] > calls[1][0]]
    assert after and after[0][2] is None and (after[0][1] == [7.0, 11.0]).all()
    assert all(s[2] is not None for s in solves[1:] if s[0] < calls[1][0])


def test_a_best_on_forbidden_entries_is_not_usable() -> None:
    # On L a first repair landed on forbidden entries (9e19); while that was the best, no relaxed
    # optimum more than 30 % over the limit was repaired again. Such a best no longer counts.
    penalty = importlib.import_module("shardwise.search.penalty")
    shared = penalty._Shared(_hot_pair(), 10.0, 0)
    assert not shared.usable()
    shared.offer([1, 1], penalty.Solution((1, 1), 9 * 10**19, 2, True, "local"))
    assert shared.best is not None and not shared.usable()
    shared.offer([1, 0], penalty.Solution((1, 0), 50, 101, True, "local"))
    assert shared.usable()


def test_descent_rounds_offer_what_they_find(monkeypatch: pytest.MonkeyPatch) -> None:
    penalty = importlib.import_module("shardwise.search.penalty")
    shared = penalty._Shared(_hot_pair(), 100.0, 0)
    limits: list[float] = []
    answers = [penalty.Solution((1, 0), 50, 101, True, "neighbourhood", optimal=True), None]

    def step(incumbent: object, seconds: float) -> object:
        limits.append(seconds)
        return answers.pop(0)

    monkeypatch.setattr(shared.descent, "step", step)
    assert not shared.descend(50.0) and limits == []  # no usable best yet
    shared.offer([0, 1], penalty.Solution((0, 1), 60, 101, True, "local"))
    assert shared.descend(80.0) and limits == [penalty.NEIGHBOURHOOD_SECONDS]
    assert shared.best is not None and shared.best.cost == 50 and shared.best.method == "neighbourhood"
    assert not shared.descend(30.0) and limits[-1] == 30.0  # the descent is done there
    assert not shared.descend(1.5) and len(limits) == 2  # too little time for a round


def test_a_last_descent_round_that_overruns_is_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty, "LAST_MERGE_OVERRUN", 0.1)
    shared = penalty._Shared(_hot_pair(), 10.0, 0)

    def slow(incumbent: object, seconds: float) -> object:
        time.sleep(3.0)
        return penalty.Solution((1, 0), 40, 101, True, "neighbourhood", optimal=True)

    monkeypatch.setattr(shared.descent, "step", slow)
    shared.offer([1, 0], penalty.Solution((1, 0), 50, 101, True, "local"))
    begin = time.perf_counter()
    assert not shared.descend(2.0, last=True)
    assert time.perf_counter() - begin < 2.0 and shared.descent_abandoned
    assert not shared.descend(5.0) and shared.best is not None and shared.best.cost == 50


def test_the_merging_trajectory_descends_at_most_as_long_as_its_penalty_rounds_in_each_half(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The merging trajectory makes a descent round when the descent has one and has so far taken
    # no longer than the penalty rounds of the same half (before, or since, the restart).
    penalty = importlib.import_module("shardwise.search.penalty")
    _always(monkeypatch, [0, 0])
    _quick_rounds(monkeypatch)
    rounds: list[tuple[float, float]] = []

    calls = itertools.count()

    def descend(self: object, left: float, last: bool = False) -> bool:
        if last or next(calls) % 2:  # one round per slot: then the descent has none to make
            return False
        t0 = time.perf_counter()
        time.sleep(0.4)
        rounds.append((t0, time.perf_counter()))
        return True

    monkeypatch.setattr(penalty._Shared, "descend", descend)
    begin = time.perf_counter()
    sol = solve_penalty(_hot_pair(), 6.0, slice_seconds=1)
    assert sol.feasible and sol.cost == 50
    half = begin + penalty.RESTART_SHARE * 6.0
    for part, start in (([r for r in rounds if r[0] < half], begin), ([r for r in rounds if r[0] >= half], half)):
        assert len(part) >= 2
        for i in range(1, len(part)):
            descent = sum(e - s for s, e in part[:i])
            assert part[i][0] - start - descent >= descent * 0.95  # penalty rounds at least as long


def test_descent_rounds_follow_each_other_while_they_find_the_best(monkeypatch: pytest.MonkeyPatch) -> None:
    # A penalty round of 0.8 s pays for several slots of one descent round of 0.1 s: each finds
    # a better assignment, and the next slot starts from it at once, though it is younger than
    # the last slot took (a best found by the penalty rounds would have to be that old).
    penalty = importlib.import_module("shardwise.search.penalty")
    _quick_rounds(monkeypatch)

    def slow(
        self: RelaxedSolver, w: np.ndarray, seconds: int, seed: int, hint: list[int] | None = None
    ) -> list[int] | None:
        time.sleep(0.8)
        return [0, 0]

    monkeypatch.setattr(penalty.RelaxedSolver, "solve", slow)
    rounds: list[tuple[float, float]] = []

    calls = itertools.count()

    def descend(self: object, left: float, last: bool = False) -> bool:
        best = self.best  # type: ignore[attr-defined]
        if last or best is None or next(calls) % 2:  # one round per slot
            return False
        t0 = time.perf_counter()
        time.sleep(0.1)
        self.offer(list(best.assignment), penalty.replace(best, cost=best.cost - 1, method="neighbourhood"))  # type: ignore[attr-defined]
        rounds.append((t0, time.perf_counter()))
        return True

    monkeypatch.setattr(penalty._Shared, "descend", descend)
    solve_penalty(_hot_pair(), 8.0, slice_seconds=1)
    assert rounds
    back_to_back = sum(1 for (_, e0), (s1, _) in itertools.pairwise(rounds) if s1 - e0 < 0.05)
    assert back_to_back >= 3


def test_relaxed_optima_closer_to_the_limit_than_before_are_repaired(monkeypatch: pytest.MonkeyPatch) -> None:
    # Three overlapping nodes (usage 100 or 1) under a limit of 110: (0, 0, 0) is 173 % over,
    # (0, 0, 1) 83 %: neither within REPAIR_WITHIN, but each is repaired the first time the
    # trajectory comes that close to the limit, and not again.
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty, "START_SCALES", ())  # the loop's own steps from its first round
    g = StrategyGraph.build(
        [[0, 50]] * 3, [[100, 1]] * 3, [[0, 4], [1, 5], [2, 6]], [[0, 1]], [[0, 0, 0, 0]], usage_limit=110
    )
    script = [[0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 1]]
    repaired: list[tuple[int, ...]] = []
    real_local = penalty.solve_local

    def scripted(
        self: RelaxedSolver, w: np.ndarray, seconds: int, seed: int, hint: list[int] | None = None
    ) -> list[int] | None:
        time.sleep(0.05)  # a few dozen rounds, not thousands
        return list(script.pop(0)) if script else [0, 0, 1]

    def local(g: StrategyGraph, t: float, **kw: object) -> object:
        initial = kw.get("initial")
        if initial is not None:
            repaired.append(tuple(initial))  # type: ignore[arg-type]
        return real_local(g, min(t, 0.05), **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(penalty.RelaxedSolver, "solve", scripted)
    monkeypatch.setattr(penalty._Shared, "reserve", lambda self: 0.0)
    monkeypatch.setattr(penalty, "solve_local", local)
    monkeypatch.setattr(penalty, "RESTART_SHARE", 2.0)  # no restart in this test
    sol = solve_penalty(g, 4.0, slice_seconds=1)
    assert sol.feasible
    rounds = [x for x in repaired if x in ((0, 0, 0), (0, 0, 1))]
    assert rounds[:2] == [(0, 0, 0), (0, 0, 1)] and rounds.count((0, 0, 1)) == 1


def test_a_slow_descent_round_leaves_the_descent_to_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    # A round between the penalty rounds that runs out of time without solving its neighbourhood
    # (on K, 87.9 s for 60) ends the descent there; after the last merges it still runs.
    penalty = importlib.import_module("shardwise.search.penalty")
    shared = penalty._Shared(_hot_pair(), 100.0, 0)
    calls: list[float] = []

    def step(incumbent: object, seconds: float) -> object:
        calls.append(seconds)
        return penalty.Solution((1, 0), 50, 101, True, "neighbourhood", optimal=False)

    monkeypatch.setattr(shared.descent, "step", step)
    shared.offer([0, 1], penalty.Solution((0, 1), 60, 101, True, "local"))
    assert shared.descend(10.0) and not shared.descent_slow  # cut short by the clock: says little
    assert shared.descend(50.0) and shared.descent_slow
    assert not shared.descend(50.0) and len(calls) == 2
    assert shared.descend(20.0, last=True) and calls == [10.0, penalty.NEIGHBOURHOOD_SECONDS, 20.0]


def test_a_grown_descent_round_out_of_time_does_not_end_the_descent(monkeypatch: pytest.MonkeyPatch) -> None:
    # A round at a grown m (above LAST_M) that runs out of its full time only caps m
    # (Descent.ceiling); the rounds between the penalty rounds go on.
    penalty = importlib.import_module("shardwise.search.penalty")
    neighbourhood = importlib.import_module("shardwise.search.neighbourhood")
    shared = penalty._Shared(_hot_pair(), 100.0, 0)
    calls: list[float] = []

    def step(incumbent: object, seconds: float) -> object:
        calls.append(seconds)
        shared.descent.round_m = neighbourhood.LAST_M + 1
        return penalty.Solution((1, 0), 50, 101, True, "neighbourhood", optimal=False)

    monkeypatch.setattr(shared.descent, "step", step)
    shared.offer([0, 1], penalty.Solution((0, 1), 60, 101, True, "local"))
    assert shared.descend(50.0) and not shared.descent_slow
    assert shared.descend(50.0) and len(calls) == 2


def test_a_descent_slot_makes_rounds_for_up_to_one_rounds_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # A slot makes rounds (each followed by a merge) while the descent has them, for up to
    # NEIGHBOURHOOD_SECONDS (here 0.5 s: rounds of 0.1 s, the last one cut short by the slot).
    penalty = importlib.import_module("shardwise.search.penalty")
    _always(monkeypatch, [0, 0])
    _quick_rounds(monkeypatch)
    monkeypatch.setattr(penalty, "NEIGHBOURHOOD_SECONDS", 0.5)
    rounds: list[tuple[float, float]] = []
    merges: list[float] = []

    def descend(self: object, left: float, last: bool = False) -> bool:
        if last or left < 0.05:
            return False
        t0 = time.perf_counter()
        time.sleep(min(0.1, left))
        rounds.append((t0, time.perf_counter()))
        return True

    def merge(self: object, left: float, windows: bool, last: bool = False) -> bool:
        merges.append(time.perf_counter())
        return True

    monkeypatch.setattr(penalty._Shared, "descend", descend)
    monkeypatch.setattr(penalty._Shared, "merge", merge)
    slots: list[tuple[float, float, int]] = []
    real_slot = penalty._descent_slot

    def slot(*args: object) -> bool:
        t0, n = time.perf_counter(), len(rounds)
        ran = real_slot(*args)
        slots.append((t0, time.perf_counter(), len(rounds) - n))
        return ran

    monkeypatch.setattr(penalty, "_descent_slot", slot)
    solve_penalty(_hot_pair(), 6.0, slice_seconds=1)
    made = [x for x in slots if x[2] > 0]
    assert len(made) >= 2 and max(x[2] for x in made) >= 4
    assert all(e - s0 <= 0.5 + 0.05 for s0, e, _ in made)
    assert all(any(r[1] <= t <= r[1] + 0.02 for t in merges) for r in rounds)  # a merge after each


def test_first_rounds_try_scaled_start_prices_and_go_on_from_the_cheapest_repair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first rounds solve the start prices at each scale of START_SCALES, without a hint, and
    # repair every answer; the trajectory then goes on from the scale whose repaired assignment
    # was cheapest (x2 here), hinted with that scale's relaxed optimum.
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty, "START_SCALES", (1.0, 2.0, 0.5))
    monkeypatch.setattr(penalty, "_start_penalties", lambda g, seconds, seed: np.array([4.0, 8.0]))
    monkeypatch.setattr(penalty._Shared, "reserve", lambda self: 0.0)
    monkeypatch.setattr(penalty, "RESTART_SHARE", 2.0)  # no restart in this test
    g = StrategyGraph.build(
        [[0, 50, 30], [0, 60]], [[100, 1, 1], [100, 1]], [[0, 4], [1, 5]], [[0, 1]], [[0] * 6], usage_limit=195
    )
    by_scale = {1.0: [0, 0], 2.0: [1, 0], 0.5: [2, 0]}
    repaired_cost = {(0, 0): 100, (1, 0): 50, (2, 0): 80}
    solves: list[tuple[list[float], list[int] | None]] = []

    def scripted(
        self: RelaxedSolver, w: np.ndarray, seconds: int, seed: int, hint: list[int] | None = None
    ) -> list[int] | None:
        time.sleep(0.05)
        solves.append((w.tolist(), None if hint is None else list(hint)))
        return list(by_scale.get(float(w[0]) / 4.0, [0, 0]))

    repaired: list[tuple[int, ...]] = []

    def local(g: StrategyGraph, t: float, **kw: object) -> object:
        x = tuple(kw["initial"])  # type: ignore[arg-type]
        repaired.append(x)
        return penalty.Solution(x, repaired_cost.get(x, 100), 101, True, "local")

    monkeypatch.setattr(penalty.RelaxedSolver, "solve", scripted)
    monkeypatch.setattr(penalty, "solve_local", local)
    # 4 s: before its first round the search starts its toulbar2 worker, which took about 1 s on
    # a slow 2-core machine; with 2 s the first rounds' repairs (given 0.5 s each) left time for
    # only two of the three scales there.
    solve_penalty(g, 4.0, slice_seconds=1)
    assert len(solves) >= 4
    assert solves[:3] == [([4.0, 8.0], None), ([8.0, 16.0], None), ([2.0, 8.0 / 2], None)]
    assert repaired[:3] == [(0, 0), (1, 0), (2, 0)]
    assert solves[3] == ([8.0, 16.0], [1, 0])


def test_start_merges_relink_the_best_with_each_start_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    # Once every start scale has been tried, the best assignment is merged with each start's
    # relaxed optimum and repair, cheapest repair first, each answer the next incumbent; once.
    penalty = importlib.import_module("shardwise.search.penalty")
    monkeypatch.setattr(penalty, "START_SCALES", (1.0, 2.0))
    shared = penalty._Shared(_hot_pair(), 100.0, 0)
    calls: list[tuple[list[list[int]], list[int]]] = []
    answers = iter([penalty.Solution((1, 0), 50, 101, True, "merge"), penalty.Solution((1, 0), 50, 101, True, "merge")])

    def improve(pool: list[list[int]], incumbent: tuple[int, ...], seconds: float, whole: object = None) -> object:
        calls.append(([list(x) for x in pool], list(incumbent)))
        return next(answers)

    monkeypatch.setattr(shared.merger, "improve", improve)
    shared.offer([0, 1], penalty.Solution((0, 1), 60, 101, True, "local"))
    shared.record_start(70.0, [0, 0], [0, 1])
    assert not shared.merge_starts(50.0) and not calls  # one start scale still to try
    shared.record_start(60.0, [1, 1], [0, 1])
    assert shared.merge_starts(50.0)
    assert calls == [([[1, 1], [0, 1]], [0, 1]), ([[0, 0], [0, 1]], [1, 0])]
    assert shared.best is not None and shared.best.cost == 50 and shared.best.method == "merge"
    assert not shared.merge_starts(50.0) and len(calls) == 2


def test_stalled_whole_merges_give_way_to_relinking_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    # Once a whole merge has stalled, each merge takes only the assignments pooled since the
    # last one, with the best assignment; nothing new, no merge.
    penalty = importlib.import_module("shardwise.search.penalty")
    shared = penalty._Shared(_hot_pair(), 100.0, 0)
    calls: list[list[list[int]]] = []

    def improve(pool: list[list[int]], incumbent: tuple[int, ...], seconds: float, whole: object = None) -> object:
        calls.append([list(x) for x in pool])
        return penalty.Solution((1, 0), 50, 101, True, "merge", optimal=True)

    monkeypatch.setattr(shared.merger, "improve", improve)
    shared.offer([0, 1], penalty.Solution((0, 1), 60, 101, True, "local"))
    shared.offer([0, 0])
    shared.merged_at, shared.merge_stalled = 1, True
    assert shared.merge(20.0, windows=False)
    assert calls == [[[0, 0]]] and shared.best is not None and shared.best.cost == 50
    assert shared.merge(20.0, windows=False) and calls == [[[0, 0]]]  # the merge's answer is the only new one
    assert shared.merged_at == 3
