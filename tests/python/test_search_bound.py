"""Lower bounds of a strategy graph's optimum (``shardwise.search.bound``): never above the ILP's
optimum, the optimum itself for an answer the ILP proved, in the IOPDDL command's output, and a
Ctrl-C that returns the best bound so far."""

from __future__ import annotations

import _thread
import random
import threading
from pathlib import Path

import pytest
from shardwise.cli import main
from shardwise.errors import SearchError
from shardwise.search import StrategyGraph, solve_ilp, solve_local
from shardwise.search.bound import bound_for, lower_bound
from test_search import random_graph

EXAMPLE = Path(__file__).resolve().parents[3] / "shared" / "iopddl" / "example.json"


def test_the_bound_never_exceeds_the_ilp_optimum() -> None:
    rng = random.Random(5)
    checked = 0
    for _ in range(25):
        g = random_graph(rng, rng.randint(3, 9), 3)
        try:
            best = solve_ilp(g, 20)
        except SearchError:  # no assignment fits the limit
            continue
        assert best.optimal
        for target in (best.cost, None):
            lb = lower_bound(g, 5, target=target, max_rounds=300)
            assert lb.method == "lagrangian" and lb.rounds <= 300
            assert lb.unpriced is not None and lb.unpriced <= lb.bound <= best.cost, (lb, best.cost)
        checked += 1
    assert checked >= 10


def test_bound_for_an_answer_uses_the_ilp_where_it_fits() -> None:
    g = random_graph(random.Random(5), 8, 3)  # one with a feasible assignment
    opt = solve_ilp(g, 20)
    assert opt.optimal and opt.lower_bound == opt.cost
    lb = bound_for(g, opt, 5)
    assert (lb.bound, lb.method, lb.gap(opt.cost)) == (opt.cost, "optimal", 0.0)
    # An answer not known to be optimal: the ILP, warm started from it, proves the optimum.
    local = solve_local(g, 1, max_rounds=0, lagrange_share=0.0)
    assert not local.optimal
    lb = bound_for(g, local, 5)
    assert (lb.bound, lb.method) == (opt.cost, "optimal" if local.cost == opt.cost else "ilp")
    gap = lb.gap(local.cost)
    assert gap is not None and gap == pytest.approx((local.cost - lb.bound) / local.cost)


def test_a_stop_left_by_an_abandoned_search_does_not_end_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that overran its limit is abandoned by ``interruptible`` with the stop request
    left standing while it ends in the background; the bound after its answer is not cut
    short by that request (the Lagrangian bound, which checks it every round, makes its rounds)."""
    import shardwise.search.bound as bound_module
    from shardwise.search.ilp import ModelSize, ModelTooLarge
    from shardwise.search.local import clear_stop, request_stop, stop_requested

    def too_large(size: ModelSize, _time: float | None = None) -> None:
        raise ModelTooLarge("ILP model too large (test)", size, 0)

    monkeypatch.setattr(bound_module, "check_model", too_large)
    g = random_graph(random.Random(5), 8, 3)
    opt = solve_ilp(g, 20)
    local = solve_local(g, 1, max_rounds=0, lagrange_share=0.0)
    request_stop()  # as an abandoned search leaves it
    try:
        lb = bound_for(g, local, 1)
        assert not stop_requested()
    finally:
        clear_stop()
    assert lb.method == "lagrangian" and lb.rounds > 0 and lb.bound <= opt.cost


def test_bound_for_falls_back_to_the_lagrangian_when_the_ilp_does_not_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    import shardwise.search.bound as bound_module
    from shardwise.search.ilp import ModelSize, ModelTooLarge, estimate_model

    def too_large(size: ModelSize, _time: float | None = None) -> None:
        raise ModelTooLarge("ILP model too large (test)", size, 0)

    monkeypatch.setattr(bound_module, "check_model", too_large)
    g = random_graph(random.Random(5), 8, 3)
    assert estimate_model(g).columns > 0
    opt = solve_ilp(g, 20)
    local = solve_local(g, 1, max_rounds=0, lagrange_share=0.0)
    lb = bound_for(g, local, 1)
    assert lb.method == "lagrangian" and lb.rounds > 0 and lb.bound <= opt.cost


def test_bad_arguments_are_named() -> None:
    g = random_graph(random.Random(1), 4, 2)
    with pytest.raises(SearchError, match="time_limit: expected a finite number of seconds >= 0, got -1"):
        lower_bound(g, -1)
    with pytest.raises(SearchError, match="max_rounds: expected a number of rounds >= 1, got 0"):
        lower_bound(g, 1, max_rounds=0)


def test_iopddl_command_prints_the_bound(capsys: pytest.CaptureFixture[str]) -> None:
    if not EXAMPLE.is_file():
        pytest.skip("../shared/iopddl is absent")
    # The ILP proves the example's optimum: the bound is the answer's cost.
    assert main(["iopddl", str(EXAMPLE), "--time-limit", "5", "--bound", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        "cost: 445",
        "lower bound: 445 (gap 0.00 %: no answer costs less than 100.00 % of this one; optimal, 0.0 s)",
    ]
    # Local search proves nothing: the ILP, which fits, proves its answer optimal.
    assert main(["iopddl", str(EXAMPLE), "--time-limit", "5", "--method", "local", "--bound", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "cost: 445" and lines[2].startswith("lower bound: 445 (gap 0.00 %") and "optimal" in lines[2]
    # Without --bound the contest's two lines only.
    assert main(["iopddl", str(EXAMPLE), "--time-limit", "5"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


def _chain(n: int) -> StrategyGraph:
    """A long chain with overlapping lifetimes and a limit: many subgradient rounds."""
    rng = random.Random(3)
    k = 4
    return StrategyGraph.build(
        [[rng.randint(0, 99) for _ in range(k)] for _ in range(n)],
        [[rng.randint(1, 20) for _ in range(k)] for _ in range(n)],
        [[i, i + 5] for i in range(n)],
        [[i, i + 1] for i in range(n - 1)] + [[i, i + 3] for i in range(n - 3)],
        [[rng.randint(0, 59) for _ in range(k * k)] for _ in range(2 * n - 4)],
        usage_limit=40,
    )


def test_ctrl_c_returns_the_best_bound_so_far() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a Ctrl-C reaches the main thread only")
    g = _chain(3000)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    try:
        lb = lower_bound(g, 60)
    finally:
        timer.cancel()
    assert lb.interrupted and lb.seconds < 10 and lb.rounds >= 1
    assert lb.bound <= solve_local(g, 2).cost
