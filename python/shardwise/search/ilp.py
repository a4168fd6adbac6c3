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
right-hand side. With ``lazy_rows`` and a feasible warm start, the first model has only the
usage rows of the time points where the warm start is within :data:`LAZY_MARGIN` of the limit;
the rows an answer breaks are added and the model solved again, until an answer breaks none
(then it is optimal for the whole model too) or the time is up (then the warm start is kept).
Where the usage binds at a few time points, as in the pools the penalty search merges, this
keeps the model small: a pool of the shared instance S with 1,266 binding time points needed
291 rows and no second round. Costs >= :data:`FORBIDDEN_COST` (the contest instances mark impossible
combinations with 10**18) are constraints (the variable fixed at 0), not objective terms, to keep
the LP well scaled. HiGHS runs with the time limit and a warm start (local search); on timeout
the best integer solution found so far is returned (never worse than the warm start).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from shardwise.errors import SearchError
from shardwise.search.graph import StrategyGraph, evaluate, point_sums, usage_profile
from shardwise.search.local import Solution, check_time_limit
from shardwise.search.reduce import Reduced, reduce_graph

#: Entries at or above this are treated as forbidden by the ILP (scores stay exact).
FORBIDDEN_COST = 10**18
#: With ``lazy_rows``, the first model's usage rows: the time points where the warm start uses
#: more than ``(1 - LAZY_MARGIN)`` of the limit.
LAZY_MARGIN = 0.02




class NoFeasibleSolution(SearchError):
    """The ILP found no assignment within the usage limit in its time, and had no warm start
    to fall back on (the budget may be infeasible)."""

_BANNER_SHOWN = False


def new_highs(highspy: Any) -> Any:
    """A ``highspy.Highs`` with its output off. HiGHS prints its banner on the C-level
    standard output the first time a ``Highs`` is constructed in a process, before any option
    can be set; that first construction runs with file descriptor 1 pointed at ``/dev/null``,
    so ``shardwise auto --json`` and library callers get a clean stdout."""
    global _BANNER_SHOWN
    if _BANNER_SHOWN:
        h = highspy.Highs()
    else:
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "w") as null:
                os.dup2(null.fileno(), 1)
                h = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        _BANNER_SHOWN = True
    h.setOptionValue("output_flag", False)
    return h

def solve_ilp(
    graph: StrategyGraph,
    time_limit: float = 10.0,
    *,
    initial: Sequence[int] | None = None,
    threads: int = 1,
    lazy_rows: bool = False,
) -> Solution:
    """Optimal (or best found within ``time_limit`` seconds) assignment by MILP.

    ``initial``: a feasible warm start (e.g. from :func:`shardwise.search.local.solve_local`).
    ``lazy_rows``: start from the usage rows near the warm start's peaks and add broken ones
    (module docstring); ignored without a feasible ``initial``.
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
    usage = _UsageRows(graph, red, col) if graph.usage_limit is not None else None
    warm_score = evaluate(graph, initial) if initial is not None else None
    lazy = lazy_rows and usage is not None and warm_score is not None and warm_score.feasible
    added: set[int] = set()
    if usage is not None:
        if lazy:
            assert initial is not None and graph.usage_limit is not None
            near = graph.usage_limit - graph.usage_limit * LAZY_MARGIN
            prof = usage_profile(graph, initial)
            added = {t for t in usage.binding if prof[t] > near}
        else:
            added = set(usage.binding)
        for t in sorted(added):
            cols, coefs, rhs = usage.row(t)
            row(cols, coefs, -np.inf, rhs)
    choice: dict[int, int] | None = None
    optimal = False
    status_text = "no free node"
    n = len(obj)
    if n == 0:  # every node fixed by the reductions
        if evaluate(graph, red.expand({})).feasible:
            choice, optimal = {}, True
    else:
        h = new_highs(highspy)
        h.setOptionValue("threads", int(threads))
        h.setOptionValue("time_limit", max(t_limit - (time.perf_counter() - start), 0.01))
        h.addCols(n, np.array(obj), np.zeros(n), np.array(ub), 0, np.array([], dtype=np.int32),
                  np.array([], dtype=np.int32), np.array([]))
        h.addRows(len(rows_lo), np.array(rows_lo), np.array(rows_hi), len(index), np.array(starts[:-1], dtype=np.int32),
                  np.array(index, dtype=np.int32), np.array(value))
        h.changeColsIntegrality(nx, np.arange(nx, dtype=np.int32),
                                np.full(nx, int(highspy.HighsVarType.kInteger), dtype=np.uint8))
        warm = _warm(red, col, ecol, n, initial) if initial is not None else None
        while True:
            if warm is not None:
                h.setSolution(warm)
            h.run()
            status = h.getModelStatus()
            status_text = h.modelStatusToString(status)
            choice, optimal = None, False
            if int(h.getInfo().primal_solution_status) == 2:  # kSolutionStatusFeasible
                xs = np.asarray(h.getSolution().col_value)
                choice = {v: int(np.argmax(xs[col[v]:col[v] + len(red.keep[v])])) for v in free}
                optimal = status == highspy.HighsModelStatus.kOptimal
            if not lazy or choice is None:
                break
            assert usage is not None and graph.usage_limit is not None
            prof = usage_profile(graph, red.expand(choice))
            broken = [t for t in usage.binding if t not in added and prof[t] > graph.usage_limit]
            left = t_limit - (time.perf_counter() - start)
            if not broken or left <= 0.01:
                break
            added.update(broken)
            _add_rows(h, [usage.row(t) for t in broken])
            h.setOptionValue("time_limit", left)
    if choice is None:
        if initial is None:
            raise NoFeasibleSolution(f"ILP: no feasible solution within {t_limit} s (HiGHS status: {status_text})")
        assignment = list(initial)
    else:
        assignment = red.expand(choice)
    sc = evaluate(graph, assignment)
    if initial is not None and warm_score is not None and (warm_score.cost < sc.cost or not sc.feasible):
        assignment, sc, optimal = list(initial), warm_score, False
    return Solution(tuple(assignment), sc.cost, sc.peak_usage, sc.feasible, "ilp", optimal=optimal,
                    seconds=time.perf_counter() - start)


class _UsageRows:
    """The usage rows of the ILP: one per distinct interval start (each has its own live set,
    as a node starting there is live only from there) that can bind (:attr:`binding`), each
    built on demand by :meth:`row`."""

    def __init__(self, graph: StrategyGraph, red: Reduced, col: dict[int, int]) -> None:
        limit = graph.usage_limit
        assert limit is not None
        npoints, first_all, last_all = graph.time_points()
        live = np.nonzero(first_all < last_all)[0]
        first, last = first_all[live], last_all[live]  # live at time points first .. last-1
        lo = np.array([int(red.node_usage[v].min()) for v in live], dtype=np.int64)
        spread = np.array([int(red.node_usage[v].max()) - int(red.node_usage[v].min()) if v in col else 0
                           for v in live], dtype=np.int64)
        #: Right-hand side per time point: the limit less every live node's least usage.
        self.rhs = [limit - b for b in point_sums(npoints, first, last, lo)]
        worst = point_sums(npoints, first, last, spread)
        #: The time points whose row can bind (even every node's largest usage may not fit).
        self.binding = [t for t in range(npoints) if worst[t] > self.rhs[t]]
        self.movable = np.nonzero(spread > 0)[0]
        self.first, self.last = first[self.movable], last[self.movable]
        self.terms: list[tuple[list[int], list[float]]] = []
        for i in self.movable.tolist():
            v = int(live[i])
            u = red.node_usage[v]
            low = int(u.min())
            ss = [s for s, x in enumerate(u.tolist()) if x > low]
            self.terms.append(([col[v] + s for s in ss], [float(int(u[s]) - low) for s in ss]))

    def row(self, t: int) -> tuple[list[int], list[float], float]:
        """Columns, coefficients and upper bound of the usage row of time point ``t``."""
        cols: list[int] = []
        coefs: list[float] = []
        for j in np.nonzero((self.first <= t) & (t < self.last))[0].tolist():
            c, k = self.terms[j]
            cols += c
            coefs += k
        return cols, coefs, float(self.rhs[t])


def _add_rows(h: Any, rows: Sequence[tuple[list[int], list[float], float]]) -> None:
    """Adds ``Σ coefs · x[cols] <= bound`` rows to the HiGHS model ``h``."""
    starts: list[int] = []
    index: list[int] = []
    value: list[float] = []
    for cols, coefs, _ in rows:
        starts.append(len(index))
        index += cols
        value += coefs
    h.addRows(len(rows), np.full(len(rows), -np.inf), np.array([b for _, _, b in rows]), len(index),
              np.array(starts, dtype=np.int32), np.array(index, dtype=np.int32), np.array(value))


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
