"""The strategy graph with its forbidden components contracted, and the exact ILP over it.

A *forbidden component* is a set of nodes joined by edges that carry forbidden entries
(>= 10**18, the contest's impossible strategy pairs); its *joint assignments* are the choices of
all its nodes that land on none of them (``rust/src/search/components.rs``, found through
``_native.search_components``). On the IOPDDL instances those edges are functional and form a
forest, so large components have few joint assignments: on the validation instance C, 22,158 of
32,894 nodes lie in 156 components with at most 30 joint assignments each, and of the other
10,736 nodes only 81 have more than one strategy; D is alike (157 components, at most 41 joint
assignments; 71 free nodes with a choice). Every component then becomes one *unit* whose
labels are its joint assignments, every other node a unit whose labels are its strategies:

* a unit's label cost: its nodes' costs plus the edges inside it;
* an edge between two units: a matrix over their labels (parallel edges summed); one whose other
  end is a unit with a single label is folded into the first unit's label costs;
* usage: each node keeps its own interval; label ``j`` of a unit uses, at time point ``t``,
  the usage of every node of the unit live at ``t`` under ``j``.

The contraction is exact (every assignment without forbidden entries maps to one labelling and
back, at the same cost and usage), so the ILP of :mod:`shardwise.search.ilp` over the units
(one-hot label columns, marginal linearisation of the pairwise terms, a usage row per time
point) finds the optimum of the whole instance, and its dual bound bounds it. Usage rows start
from the time points where the warm start is within :data:`shardwise.search.ilp.LAZY_MARGIN`
of the limit (or from none: ``rows_from_warm=False``), and the rows an answer breaks are added
until it breaks none (as ``solve_ilp(lazy_rows=True)``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from shardwise import _native
from shardwise.errors import SearchError
from shardwise.search.graph import StrategyGraph, evaluate, point_sums, usage_profile
from shardwise.search.ilp import (
    FORBIDDEN_COST,
    LAZY_MARGIN,
    _build,
    _Rows,
    _warm,
    model_highs,
)
from shardwise.search.local import (
    Solution,
    check_time_limit,
    interruptible,
    native_graph,
    offer_incumbent,
    on_stop,
    solve_local,
)
from shardwise.search.reduce import Reduced

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

log = logging.getLogger("shardwise.search.contract")

#: Contracted model size (label columns + pairwise entries, :meth:`Contraction.terms`) up to
#: which ``solve(method="auto")`` and :func:`shardwise.search.bound.bound_for` use the
#: contracted ILP: on the contest instances A, C and D (87-95k terms) HiGHS proves the optimum
#: in 12-29 s on this 2-core machine kind; on K (1.66M terms) it found nothing in 170 s.
CONTRACTED_MAX_TERMS = 500_000

#: Broken usage rows added per round of the lazy-row loop, most over the limit first.
ROWS_PER_ROUND = 400

#: The share of the contracted ILP's time held back from HiGHS to repair its last answer when
#: the time ends while that answer still breaks usage rows not yet in the model (local search
#: from it: usage-lowering moves, then polish; :func:`shardwise.search.local.solve_local`).
#: Such an answer keeps the added rows, so it is near the limit and near the optimum; without
#: the repair it was dropped for the warm start. On a 2-core machine slower than the one the
#: portfolio was measured on, D's second model (400 rows) ran out of its time with an answer
#: 1.3 % below the record that broke rows, and the warm start returned used a forbidden pair
#: (cost 2.0e18).
REPAIR_SHARE = 0.1


def _clip_sum(a: I64, b: I64) -> I64:
    """``a + b`` with both sides clipped to the forbidden cost first (no int64 overflow)."""
    out: I64 = np.minimum(np.minimum(a, FORBIDDEN_COST) + np.minimum(b, FORBIDDEN_COST), FORBIDDEN_COST)
    return out


@dataclass
class Contraction:
    """``unit[v]``: node ``v``'s unit; ``labels[v]``: the strategy ``v`` takes under each label of
    its unit (shape ``(J,)``, ``J`` the unit's label count); ``members[u]``: the nodes of unit
    ``u``; ``red``: the units as a :class:`~shardwise.search.reduce.Reduced` (label costs,
    pairwise matrices between units with more than one label, folded constant) that
    :func:`shardwise.search.ilp._build` turns into columns and rows; ``components``: how many
    units are forbidden components."""

    graph: StrategyGraph
    unit: I64
    labels: list[I64]
    members: list[list[int]]
    red: Reduced
    components: int

    @property
    def num_units(self) -> int:
        return len(self.members)

    def terms(self) -> int:
        """Label columns plus pairwise entries of the contracted model (what the ILP's size
        follows)."""
        return sum(len(k) for k in self.red.keep if len(k) > 1) + sum(int(m.size) for m in self.red.edges.values())

    def expand(self, choice: Sequence[int]) -> list[int]:
        """The assignment of the original nodes for one label per unit."""
        return [int(self.labels[v][choice[int(self.unit[v])]]) for v in range(self.graph.num_nodes)]

    def labelling(self, assignment: Sequence[int]) -> list[int] | None:
        """The label per unit of ``assignment``, or ``None`` when some component is not at one of
        its joint assignments (it lands on a forbidden entry)."""
        out: list[int] = []
        for nodes in self.members:
            cur = np.array([assignment[v] for v in nodes], dtype=np.int64)
            table = np.stack([self.labels[v] for v in nodes], axis=1)  # (J, members)
            hit = np.nonzero((table == cur).all(axis=1))[0]
            if hit.size == 0:
                return None
            out.append(int(hit[0]))
        return out


def has_forbidden(graph: StrategyGraph) -> bool:
    """Whether some edge-matrix entry of ``graph`` is forbidden (what :func:`contract` needs)."""
    return bool((graph.edge_cost >= FORBIDDEN_COST).any())


def contract(graph: StrategyGraph) -> Contraction:
    """Contracts the forbidden components of ``graph`` (module docstring). Raises
    :class:`SearchError` for a graph that fails validation."""
    try:
        comps = _native.search_components(native_graph(graph))
    except _native.InvalidShardingError as err:
        raise SearchError(str(err)) from None
    n = graph.num_nodes
    unit = np.full(n, -1, dtype=np.int64)
    labels: list[I64] = [np.zeros(0, np.int64)] * n
    members: list[list[int]] = []
    for c in comps:
        table = np.asarray(c.joints, dtype=np.int64).reshape(c.count, len(c.nodes))
        for i, v in enumerate(c.nodes):
            unit[v] = len(members)
            labels[v] = table[:, i]
        members.append(list(c.nodes))
    for v in np.nonzero(unit < 0)[0].tolist():
        unit[v] = len(members)
        labels[v] = np.arange(graph.k(v), dtype=np.int64)
        members.append([v])
    nu = len(members)
    size = np.array([len(labels[m[0]]) for m in members], dtype=np.int64)
    cost = [np.zeros(int(size[u]), dtype=np.int64) for u in range(nu)]
    for v in range(n):
        u = int(unit[v])
        cost[u] = _clip_sum(cost[u], graph.node_costs(v)[labels[v]])
    pairs: dict[tuple[int, int], I64] = {}
    for e in range(graph.num_edges):
        a, b = (int(x) for x in graph.edges[e])
        ua, ub = int(unit[a]), int(unit[b])
        m = graph.edge_matrix(e)
        if ua == ub:  # inside one unit (a self-edge included): both ends follow its label
            cost[ua] = _clip_sum(cost[ua], m[labels[a], labels[b]])
            continue
        sub = m[np.ix_(labels[a], labels[b])]
        if size[ub] == 1:
            cost[ua] = _clip_sum(cost[ua], sub[:, 0])
        elif size[ua] == 1:
            cost[ub] = _clip_sum(cost[ub], sub[0, :])
        else:
            if ua > ub:
                ua, ub, sub = ub, ua, sub.T
            pairs[(ua, ub)] = _clip_sum(pairs[(ua, ub)], sub) if (ua, ub) in pairs else np.minimum(sub, FORBIDDEN_COST)
    constant = 0
    for u in range(nu):
        if size[u] == 1:
            constant += int(cost[u][0])
            cost[u] = cost[u] * 0
    red = Reduced(
        keep=[list(range(int(s))) for s in size],
        node_cost=cost,
        node_usage=[np.zeros(int(s), np.int64) for s in size],
        edges=pairs,
        constant=constant,
        removed_strategies=0,
    )
    return Contraction(graph, unit, labels, members, red, len(comps))


class _UnitUsageRows:
    """The usage rows over unit label columns: at time point ``t``, for every node live there,
    its usage under each label of its unit above the least of them (columns of one unit summed),
    against the limit less those least usages. Only points where the largest usages could go over
    the limit are kept (:attr:`binding`)."""

    def __init__(self, con: Contraction, col: I64) -> None:
        g = con.graph
        limit = g.usage_limit
        assert limit is not None
        npoints, first_all, last_all = g.time_points()
        live = np.nonzero(first_all < last_all)[0]
        lo = np.zeros(len(live), dtype=np.int64)
        spread = np.zeros(len(live), dtype=np.int64)
        t_first: list[int] = []
        t_last: list[int] = []
        t_col: list[I64] = []
        t_coef: list[I64] = []
        for i, v in enumerate(live.tolist()):
            u = g.node_usages(v)[con.labels[v]]
            lo[i] = int(u.min())
            spread[i] = int(u.max()) - lo[i]
            unit_col = int(col[con.unit[v]])
            if spread[i] > 0 and unit_col >= 0:
                js = np.nonzero(u > lo[i])[0]
                t_col.append(unit_col + js)
                t_coef.append(u[js] - lo[i])
                t_first.append(int(first_all[v]))
                t_last.append(int(last_all[v]))
        first, last = first_all[live], last_all[live]
        #: Right-hand side per time point: the limit less every live node's least usage.
        self.rhs = [limit - b for b in point_sums(npoints, first, last, lo)]
        worst = point_sums(npoints, first, last, spread)
        #: The time points whose row can bind.
        self.binding = [t for t in range(npoints) if worst[t] > self.rhs[t]]
        lens = np.array([len(c) for c in t_col], dtype=np.int64)
        self.first = np.repeat(np.array(t_first, dtype=np.int64), lens)
        self.last = np.repeat(np.array(t_last, dtype=np.int64), lens)
        self.col = np.concatenate(t_col) if t_col else np.zeros(0, np.int64)
        self.coef = np.concatenate(t_coef) if t_coef else np.zeros(0, np.int64)

    def rows(self, points: Sequence[int]) -> _Rows:
        starts: list[int] = []
        index: list[npt.NDArray[np.int32]] = []
        value: list[F64] = []
        pos = 0
        for t in points:
            on = (self.first <= t) & (t < self.last)
            cols, inv = np.unique(self.col[on], return_inverse=True)
            vals = np.bincount(inv, weights=self.coef[on].astype(np.float64), minlength=len(cols))
            starts.append(pos)
            index.append(cols.astype(np.int32))
            value.append(vals.astype(np.float64))
            pos += len(cols)
        return _Rows(
            np.array(starts, dtype=np.int64),
            np.concatenate(index) if index else np.zeros(0, np.int32),
            np.concatenate(value) if value else np.zeros(0),
            np.full(len(points), -np.inf),
            np.array([float(self.rhs[t]) for t in points]),
        )


def solve_contracted(
    graph: StrategyGraph,
    time_limit: float = 10.0,
    *,
    initial: Sequence[int] | None = None,
    threads: int = 1,
    con: Contraction | None = None,
    rows_from_warm: bool = True,
    repair_share: float = REPAIR_SHARE,
) -> Solution:
    """Optimal (or best found within ``time_limit`` seconds, the contraction included)
    assignment by the ILP over the contracted graph (module docstring); ``Solution.method`` is
    ``"contracted-ilp"``, ``Solution.optimal`` true when HiGHS proved optimality with no usage
    row broken, ``Solution.lower_bound`` HiGHS's dual bound (a bound of the whole instance: the
    contraction is exact). ``initial``: a warm start (kept when HiGHS finds nothing better);
    ``con``: a contraction made earlier by :func:`contract`; ``rows_from_warm``: the first
    model has the usage rows of the time points where the warm start is near the limit (else
    none: its optimum, without usage rows, shows the rows that bind). HiGHS gets all but
    ``repair_share`` of the time (default :data:`REPAIR_SHARE`; 0 for a merge's sub-instance,
    whose search goes on after it, and for a bound); when it stops at its limit with an answer that breaks
    usage rows, local search repairs that answer in the rest (``Solution.method``
    ``"contracted-ilp+repair"`` when the repair is the best answer). Raises :class:`SearchError` for a
    bad time limit, or when neither HiGHS, the repair nor the warm start gives a feasible answer."""
    try:
        import highspy
    except ImportError:  # pragma: no cover - highspy is a runtime dependency
        raise SearchError("the contracted ILP needs highspy (pip install highspy)") from None
    t = check_time_limit(time_limit)
    if not 0.0 <= repair_share < 1.0:
        raise SearchError(f"repair_share: expected a share of the time limit in [0, 1), got {repair_share!r}")
    return interruptible(
        lambda: _solve(highspy, graph, t, initial, threads, con, rows_from_warm, repair_share),
        graph,
        t,
    )


def _solve(
    highspy: Any,
    graph: StrategyGraph,
    t_limit: float,
    initial: Sequence[int] | None,
    threads: int,
    con: Contraction | None,
    rows_from_warm: bool,
    repair_share: float,
) -> Solution:
    start = time.perf_counter()
    deadline = start + t_limit
    highs_deadline = start + t_limit * (1.0 - repair_share)
    warm_score = evaluate(graph, initial) if initial is not None else None
    if initial is not None and warm_score is not None:
        offer_incumbent(
            graph,
            Solution(
                tuple(int(x) for x in initial),
                warm_score.cost,
                warm_score.peak_usage,
                warm_score.feasible,
                "contracted-ilp",
            ),
        )
    con = con if con is not None else contract(graph)
    red = con.red
    model = _build(red, con.num_units, lambda: None)
    usage = _UnitUsageRows(con, model.col) if graph.usage_limit is not None else None
    warm_labels = con.labelling(initial) if initial is not None else None
    added: set[int] = set()
    if (
        rows_from_warm
        and usage is not None
        and warm_labels is not None
        and warm_score is not None
        and warm_score.feasible
    ):
        prof = usage_profile(graph, initial)  # type: ignore[arg-type]
        near = graph.usage_limit * (1 - LAZY_MARGIN)  # type: ignore[operator]
        added = {p for p in usage.binding if prof[p] > near}
    rows = _Rows.concat([model.rows, usage.rows(sorted(added))]) if usage is not None else model.rows
    n = len(model.obj)
    highs: list[Any] = []
    best: tuple[int, list[int]] | None = None
    if initial is not None and warm_score is not None and warm_score.feasible:
        best = (warm_score.cost, [int(x) for x in initial])
    optimal = False
    dual: float | None = None
    rounds = 0
    #: HiGHS's last answer while it broke usage rows not yet added (None once one fits).
    broken_answer: list[int] | None = None
    method = "contracted-ilp"

    def cancel() -> None:
        for h in highs:
            h.cancelSolve()

    with on_stop(cancel) as stopped:
        h = model_highs(highspy, model, rows, threads)
        highs.append(h)
        warm = _warm(highspy, red, model, warm_labels) if warm_labels is not None else None
        while True:
            left = highs_deadline - time.perf_counter()
            if left <= 0.01 or stopped.is_set():
                break
            h.setOptionValue("time_limit", left)
            if warm is not None:
                h.setSolution(warm)
            h.run()
            rounds += 1
            status = h.getModelStatus()
            dual = float(h.getInfo().mip_dual_bound)
            if int(h.getInfo().primal_solution_status) != 2:
                break
            xs = np.asarray(h.getSolution().col_value)
            choice = [
                int(np.argmax(xs[model.col[u] : model.col[u] + len(red.keep[u])])) if len(red.keep[u]) > 1 else 0
                for u in range(con.num_units)
            ]
            assignment = con.expand(choice)
            sc = evaluate(graph, assignment)
            log.debug(
                "contracted ILP round %d: %d columns, %d usage rows, cost %d, peak %d, %s, %.1f s",
                rounds,
                n,
                len(added),
                sc.cost,
                sc.peak_usage,
                h.modelStatusToString(status),
                time.perf_counter() - start,
            )
            if sc.feasible:
                if best is None or sc.cost < best[0]:
                    best = (sc.cost, assignment)
                optimal = status == highspy.HighsModelStatus.kOptimal
                broken_answer = None
                break
            broken_answer = assignment
            assert usage is not None and graph.usage_limit is not None
            prof = usage_profile(graph, assignment)
            broken = sorted(
                (p for p in usage.binding if p not in added and prof[p] > graph.usage_limit),
                key=lambda p: -prof[p],
            )[:ROWS_PER_ROUND]
            if not broken:
                break
            added.update(broken)
            usage.rows(broken).add_to(h)
            labels = con.labelling(best[1]) if best is not None else None
            warm = _warm(highspy, red, model, labels) if labels is not None else None
    if broken_answer is not None and not stopped.is_set():
        repaired = _repair(graph, broken_answer, deadline, best[0] if best is not None else None)
        if repaired is not None:
            best, method = repaired, "contracted-ilp+repair"
    if best is None:
        raise SearchError(f"contracted ILP: no feasible assignment within {t_limit:.3g} s")
    sc = evaluate(graph, best[1])
    lower = None
    if dual is not None and math.isfinite(dual):
        lower = math.ceil(dual - 1e-6 - abs(dual) * 1e-9) + red.constant
    sol = Solution(
        tuple(best[1]),
        sc.cost,
        sc.peak_usage,
        sc.feasible,
        method,
        optimal=optimal,
        seconds=time.perf_counter() - start,
        lower_bound=lower,
    )
    offer_incumbent(graph, sol)
    return sol


def _repair(
    graph: StrategyGraph, answer: list[int], deadline: float, best_cost: int | None
) -> tuple[int, list[int]] | None:
    """Local search from ``answer`` (an ILP answer that breaks usage rows) until ``deadline``:
    its usage-lowering repair, then polish (``lagrange_share=0``). The repaired answer and
    its cost when it fits and is cheaper than ``best_cost``, else ``None``."""
    left = deadline - time.perf_counter()
    if left <= 0.05:
        return None
    sol = solve_local(graph, left, initial=answer, lagrange_share=0.0)
    log.debug(
        "contracted ILP repair: cost %d, peak %d, %s, %.1f s",
        sol.cost,
        sol.peak_usage,
        "fits" if sol.feasible else "still over the limit",
        sol.seconds,
    )
    if sol.feasible and (best_cost is None or sol.cost < best_cost):
        return sol.cost, list(sol.assignment)
    return None
