"""HiGHS's pace (``shardwise.search.pace``): what it records and predicts, ``solve_ilp`` not
running HiGHS when the prediction is over the share allowed, and the penalty search turning a
whole merge predicted too slow into relinking merges."""

from __future__ import annotations

import importlib
import random

import pytest
from shardwise.errors import SearchError
from shardwise.search import StrategyGraph
from shardwise.search.ilp import solve_ilp
from shardwise.search.pace import PACE_EXPONENT, HighsPace, TooSlow


def _dense(seed: int, n: int = 12, k: int = 4) -> StrategyGraph:
    # Every pair of nodes joined, random costs, nothing live: the reductions leave free nodes
    # and every assignment is feasible.
    rng = random.Random(seed)
    edges = [[a, b] for b in range(n) for a in range(b)]
    return StrategyGraph.build(
        [[rng.randint(0, 99) for _ in range(k)] for _ in range(n)],
        [[0] * k for _ in range(n)],
        [[0, 0]] * n,
        edges,
        [[rng.randint(0, 59) for _ in range(k * k)] for _ in edges],
        usage_limit=0,
    )


def test_the_pace_predicts_from_the_largest_optimal_run() -> None:
    pace = HighsPace()
    assert pace.predict(1000) is None  # nothing recorded
    pace.record(1000, 2.0, optimal=False)
    assert pace.predict(1000) is None  # a run the clock stopped is no reference
    pace.record(1000, 2.0, optimal=True)
    assert pace.predict(2000) == pytest.approx(2.0 * 2**PACE_EXPONENT)
    pace.record(500, 9.0, optimal=True)  # smaller: the larger run stays the reference
    assert pace.reference == (1000, 2.0)
    pace.record(4000, 3.0, optimal=True)
    assert pace.reference == (4000, 3.0) and pace.predict(2000) == pytest.approx(3.0 / 2**PACE_EXPONENT)


def test_solve_ilp_records_its_run_and_refuses_one_predicted_too_slow() -> None:
    g = _dense(0)
    pace = HighsPace()
    sol = solve_ilp(g, 10.0, pace=pace, pace_share=0.5)  # nothing recorded yet: it runs
    assert sol.optimal and pace.reference[0] > 0
    columns = pace.reference[0]
    pace.reference = (columns, 50.0)  # as if this very model had taken 50 s
    with pytest.raises(TooSlow, match=rf"ILP of {columns} columns: HiGHS predicted to take 50.0 s, over the") as e:
        solve_ilp(g, 10.0, pace=pace, pace_share=0.5)
    assert isinstance(e.value, SearchError) and e.value.columns == columns and e.value.allowed <= 5.0
    assert solve_ilp(g, 10.0, pace=pace).optimal  # without a share it only records
    assert pace.reference[0] == columns


def test_a_whole_merge_predicted_too_slow_turns_to_relinking(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whole merges ask for the pace check (PACE_SHARE); one refused ends the whole merges as a
    # stalled one would, without spending its time, and the next merge relinks only what was
    # pooled since.
    penalty = importlib.import_module("shardwise.search.penalty")
    g = StrategyGraph.build([[10, 0], [10, 0]], [[1, 100], [1, 100]], [[0, 1], [0, 1]], [], [], usage_limit=101)
    shared = penalty._Shared(g, 100.0, 0)
    calls: list[tuple[int, object]] = []

    def improve(
        pool: list[list[int]], best: object, seconds: float, whole: object = None, share: object = None
    ) -> object:
        calls.append((len(pool), share))
        if share is not None:
            raise TooSlow(65_102, 21.0, 14.2)
        return penalty.Solution((1, 0), 50, 101, True, "merge", optimal=True)

    monkeypatch.setattr(shared.merger, "improve", improve)
    shared.offer([1, 0], penalty.Solution((1, 0), 60, 101, True, "local"))
    shared.offer([0, 1])
    assert shared.merge(40.0, windows=False)
    assert calls == [(2, penalty.PACE_SHARE)] and shared.merge_stalled and shared.merged_at == 2
    assert shared.reserve() == 0.0 and shared.best is not None and shared.best.cost == 60
    shared.offer([0, 0])
    assert shared.merge(40.0, windows=False) and calls[-1] == (1, None)  # relinking: the one new
    assert shared.best.cost == 50
