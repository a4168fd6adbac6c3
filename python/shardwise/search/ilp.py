"""Exact search by integer linear programming with HiGHS (``highspy``; Huangfu & Hall,
"Parallelizing the dual revised simplex method", Math. Prog. Comp. 2018), the formulation of
Alpa (Zheng et al., OSDI 2022, §4.2 eq. 1) and of the hidet auto-parallel RFC
(``references/hidet-auto-parallel-rfc.md``), with a memory constraint per liveness event:

    minimise   Σ_v Σ_s c_vs x_vs + Σ_(a,b) Σ_(s,t) C_ab[s,t] y_ab,st
    subject to Σ_s x_vs = 1                        (one strategy per node)
               Σ_t y_ab,st = x_as,  Σ_s y_ab,st = x_bt   (marginal linearisation of x_as·x_bt;
                                                    tighter than y >= x_as + x_bt − 1)
               Σ_{v live at t} Σ_s u_vs x_vs <= limit − base(t)  at every distinct interval start t
               x binary, y in [0, 1]

after the exact reductions of :mod:`shardwise.search.reduce`. A usage row that can never bind
(even every node's largest usage fits) is dropped, and each node's least usage is moved to the
right-hand side. Costs >= :data:`FORBIDDEN_COST` (the contest instances mark impossible
combinations with 10**18) are constraints (the variable fixed at 0), not objective terms, to keep
the LP well scaled. HiGHS runs with the time limit and a warm start (local search); on timeout
the best integer solution found so far is returned (never worse than the warm start).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from shardwise.errors import SearchError
from shardwise.search.graph import StrategyGraph, evaluate
from shardwise.search.local import Solution, check_time_limit
from shardwise.search.reduce import Reduced, reduce_graph

RowAdder = Callable[[Sequence[int], Sequence[float], float, float], None]

#: Entries at or above this are treated as forbidden by the ILP (scores stay exact).
FORBIDDEN_COST = 10**18


def solve_ilp(
    graph: StrategyGraph,
    time_limit: float = 10.0,
    *,
    initial: Sequence[int] | None = None,
    threads: int = 1,
) -> Solution:
    """Optimal (or best found within ``time_limit`` seconds) assignment by MILP.

    ``initial``: a feasible warm start (e.g. from :func:`shardwise.search.local.solve_local`).
    ``Solution.optimal`` is true when HiGHS proved optimality. Raises :class:`SearchError` when
    ``highspy`` is missing, for a bad time limit, or when no feasible solution was found and no
    warm start was given.
    """
    try:
        import highspy
    except ImportError:  # pragma: no cover - highspy is a runtime dependency
        raise SearchError("method 'ilp' needs highspy (pip install highspy)") from None
    t_limit = check_time_limit(time_limit)
    start = time.perf_counter()
    red = reduce_graph(graph)
    free = red.free_nodes()
    col: dict[int, int] = {}
    obj: list[float] = []
    ub: list[float] = []
    for v in free:
        col[v] = len(obj)
        for c in red.node_cost[v]:
            forbidden = int(c) >= FORBIDDEN_COST
            obj.append(0.0 if forbidden else float(c))
            ub.append(0.0 if forbidden else 1.0)
    nx = len(obj)
    rows_lo: list[float] = []
    rows_hi: list[float] = []
    starts: list[int] = [0]
    index: list[int] = []
    value: list[float] = []

    def row(cols: Sequence[int], coefs: Sequence[float], lo: float, hi: float) -> None:
        index.extend(cols)
        value.extend(coefs)
        starts.append(len(index))
        rows_lo.append(lo)
        rows_hi.append(hi)

    for v in free:
        k = len(red.keep[v])
        row(range(col[v], col[v] + k), [1.0] * k, 1.0, 1.0)
    ecol: dict[tuple[int, int], int] = {}
    for (a, b), m in red.edges.items():
        ka, kb = m.shape
        if not m.any():
            continue
        base = len(obj)
        ecol[(a, b)] = base
        flat = m.reshape(-1)
        for c in flat:
            forbidden = int(c) >= FORBIDDEN_COST
            obj.append(0.0 if forbidden else float(c))
            ub.append(0.0 if forbidden else 1.0)
        for s in range(ka):  # Σ_t y_st = x_as
            row([base + s * kb + t for t in range(kb)] + [col[a] + s], [1.0] * kb + [-1.0], 0.0, 0.0)
        for t in range(kb):  # Σ_s y_st = x_bt
            row([base + s * kb + t for s in range(ka)] + [col[b] + t], [1.0] * ka + [-1.0], 0.0, 0.0)
    if graph.usage_limit is not None:
        _memory_rows(graph, red, col, row)
    choice: dict[int, int] | None = None
    optimal = False
    status_text = "no free node"
    n = len(obj)
    if n == 0:  # every node fixed by the reductions
        if evaluate(graph, red.expand({})).feasible:
            choice, optimal = {}, True
    else:
        h = highspy.Highs()  # type: ignore[no-untyped-call]
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", int(threads))
        h.setOptionValue("time_limit", max(t_limit - (time.perf_counter() - start), 0.01))
        h.addCols(n, np.array(obj), np.zeros(n), np.array(ub), 0, np.array([], dtype=np.int32),
                  np.array([], dtype=np.int32), np.array([]))
        h.addRows(len(rows_lo), np.array(rows_lo), np.array(rows_hi), len(index), np.array(starts[:-1], dtype=np.int32),
                  np.array(index, dtype=np.int32), np.array(value))
        h.changeColsIntegrality(nx, np.arange(nx, dtype=np.int32),
                                np.full(nx, int(highspy.HighsVarType.kInteger), dtype=np.uint8))
        if initial is not None:
            h.setSolution(_warm(red, col, ecol, n, initial))
        h.run()
        status = h.getModelStatus()
        status_text = h.modelStatusToString(status)
        if int(h.getInfo().primal_solution_status) == 2:  # kSolutionStatusFeasible
            xs = np.asarray(h.getSolution().col_value)
            choice = {v: int(np.argmax(xs[col[v]:col[v] + len(red.keep[v])])) for v in free}
            optimal = status == highspy.HighsModelStatus.kOptimal
    if choice is None:
        if initial is None:
            raise SearchError(f"ILP: no feasible solution within {t_limit} s (HiGHS status: {status_text})")
        assignment = list(initial)
    else:
        assignment = red.expand(choice)
    if initial is not None and evaluate(graph, initial).cost < evaluate(graph, assignment).cost:
        assignment = list(initial)
    sc = evaluate(graph, assignment)
    return Solution(tuple(assignment), sc.cost, sc.peak_usage, sc.feasible, "ilp", optimal=optimal,
                    seconds=time.perf_counter() - start)


def _memory_rows(graph: StrategyGraph, red: Reduced, col: dict[int, int], row: RowAdder) -> None:
    """One usage row per distinct interval start (each has its own live set, as a node starting
    there is live only from there), kept only when it can bind; vectorised over time points."""
    limit = graph.usage_limit
    assert limit is not None
    npoints, first_all, last_all = graph.time_points()
    live = np.nonzero(first_all < last_all)[0]
    if live.size == 0:
        return
    first, last = first_all[live], last_all[live]  # live at time points first .. last-1
    lo = np.array([int(red.node_usage[v].min()) for v in live], dtype=np.int64)
    spread = np.array([int(red.node_usage[v].max()) - int(red.node_usage[v].min()) if v in col else 0
                       for v in live], dtype=np.int64)

    def per_time(x: npt.NDArray[np.int64]) -> list[int]:
        delta = [0] * (npoints + 1)  # Python ints: exact sums
        for f, l_, val in zip(first.tolist(), last.tolist(), x.tolist(), strict=True):
            delta[f] += val
            delta[l_] -= val
        return list(itertools.accumulate(delta[:-1]))

    rhs = [limit - b for b in per_time(lo)]
    worst = per_time(spread)
    binding = [t for t in range(npoints) if worst[t] > rhs[t]]
    if not binding:
        return
    terms: dict[int, tuple[list[int], list[float]]] = {}
    for i in np.nonzero(spread > 0)[0].tolist():
        v = int(live[i])
        u = red.node_usage[v]
        low = int(u.min())
        ss = [s for s, x in enumerate(u.tolist()) if x > low]
        terms[i] = ([col[v] + s for s in ss], [float(int(u[s]) - low) for s in ss])
    movable = np.nonzero(spread > 0)[0]
    for t in binding:
        cols: list[int] = []
        coefs: list[float] = []
        for i in movable[(first[movable] <= t) & (t < last[movable])].tolist():
            c, k = terms[i]
            cols += c
            coefs += k
        row(cols, coefs, -np.inf, float(rhs[t]))


def _warm(red: Reduced, col: dict[int, int], ecol: dict[tuple[int, int], int], n: int,
          initial: Sequence[int]) -> Any:
    import highspy

    sol = highspy.HighsSolution()
    x = np.zeros(n)
    pos: dict[int, int] = {}
    for v, c in col.items():
        try:
            pos[v] = red.keep[v].index(int(initial[v]))
        except ValueError:
            return sol  # the warm start uses a removed (dominated) strategy: no warm start
        x[c + pos[v]] = 1.0
    for (a, b), base in ecol.items():
        kb = len(red.keep[b])
        x[base + pos[a] * kb + pos[b]] = 1.0
    sol.col_value = list(x)
    sol.value_valid = True
    return sol
