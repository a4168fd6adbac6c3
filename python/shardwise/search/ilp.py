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
the LP well scaled. HiGHS runs with the time left and a warm start (local search); on timeout or Ctrl-C
(:func:`shardwise.search.local.request_stop`) the best integer solution found so far is
returned (never worse than the warm start).

Limits (issue 25). The model is built in numpy arrays (columns, then the rows in compressed
sparse row form, edges grouped by matrix shape): 12 bytes per nonzero and 16 per column in
this module, where Python lists of floats took over 40 per nonzero (instance A's model with
every usage row, 6.2M columns and 318M nonzeros, went past 13 GB before HiGHS saw it, and was
killed at 24 GB). Before anything is built,
:func:`estimate_model` bounds the model's size from the graph alone (no reduction): columns,
rows, nonzeros, and the bytes its build and HiGHS's solve take at their peak
(:data:`BYTES_FIXED`, :data:`BYTES_PER_COLUMN`, :data:`BYTES_PER_NONZERO`, measured); when that exceeds
:func:`memory_guard` (:data:`MEMORY_SHARE` of the memory available) or HiGHS's 32-bit indices,
or the build cannot plausibly end in the time (:data:`BUILD_SECONDS_PER_TERM`,
:data:`BUILD_SECONDS_PER_NONZERO` against :data:`BUILD_SHARE` of it), :func:`solve_ilp` raises
:class:`ModelTooLarge` (one line naming the size) and builds nothing;
:func:`shardwise.search.solve.solve` then falls back to local search. The deadline and a stop
request are checked between the build's stages; when one comes first the warm start is
returned (or :class:`NoFeasibleSolution` raised without one).
"""

from __future__ import annotations

import logging
import math
import os
import resource
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from shardwise.errors import SearchError
from shardwise.search.graph import (
    Score,
    StrategyGraph,
    evaluate,
    point_sums,
    usage_profile,
)
from shardwise.search.local import (
    Solution,
    check_time_limit,
    interruptible,
    offer_incumbent,
    on_stop,
)
from shardwise.search.reduce import Reduced, reduce_graph

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

#: Each HiGHS run (model size, seconds against the limit, status) at DEBUG level.
log = logging.getLogger("shardwise.search.ilp")

#: Entries at or above this are treated as forbidden by the ILP (scores stay exact).
FORBIDDEN_COST = 10**18
#: With ``lazy_rows``, the first model's usage rows: the time points where the warm start uses
#: more than ``(1 - LAZY_MARGIN)`` of the limit.
LAZY_MARGIN = 0.02
#: Peak bytes of a model, its build and HiGHS's solve together (HiGHS keeps the model, its
#: presolved copy with row- and column-wise links, and the LP relaxation's factors): a fixed
#: part, and per column and per nonzero. Measured on this machine kind with :func:`solve_ilp`
#: (peak RSS less the RSS before; columns / nonzeros / GB): instance B 0.25M / 0.55M / 0.31,
#: V 1.6M / 3.4M / 1.50, A without its usage limit 6.2M / 12.9M / 4.79, and B with intervals
#: lengthened so that usage rows dominate 0.25M / 1.4M / 0.46 and 0.25M / 2.8M / 0.70; the
#: constants cover each (by 8 to 30 %).
BYTES_FIXED = 100 << 20
BYTES_PER_COLUMN = 400
BYTES_PER_NONZERO = 250
#: Share of the available memory (:func:`available_memory`) a model may take (the rest: the
#: graph, the other searches of a portfolio, the rest of the machine).
MEMORY_SHARE = 0.5
#: HiGHS's indices are 32-bit: no model with more columns or nonzeros is built.
MAX_INDEX = 2**31 - 1
#: Seconds before HiGHS answers its time limit or an interrupt, on this 2-core machine kind:
#: per term (strategy or edge-matrix entry; the exact reductions dominate: 9.0 s for instance
#: A's 6.2M terms, 10.7 s for U's 4.2M) and per nonzero (the build, about 0.1 µs, and HiGHS's
#: presolve, which checks neither: 1.8 s for B's 0.54M nonzeros, 9.8 to 19.5 s for V's 3.4M) ...
BUILD_SECONDS_PER_TERM = 2.5e-6
BUILD_SECONDS_PER_NONZERO = 4.0e-6
#: ... and the share of the time limit that set-up may take by that estimate (the rest: the
#: search).
BUILD_SHARE = 0.5


class NoFeasibleSolution(SearchError):
    """The ILP found no assignment within the usage limit in its time, and had no warm start
    to fall back on (the budget may be infeasible)."""


@dataclass(frozen=True)
class ModelSize:
    """Size of an ILP model: ``columns`` (variables), ``rows`` (constraints), ``nonzeros``
    (matrix entries), ``terms`` (strategies + edge-matrix entries, what the reductions read),
    and ``bytes``, the estimated peak memory of its build and solve (:data:`BYTES_FIXED`,
    :data:`BYTES_PER_COLUMN`, :data:`BYTES_PER_NONZERO`)."""

    columns: int
    rows: int
    nonzeros: int
    terms: int

    @property
    def bytes(self) -> int:
        return BYTES_FIXED + BYTES_PER_COLUMN * self.columns + BYTES_PER_NONZERO * self.nonzeros

    def build_seconds(self) -> float:
        """Estimated seconds before HiGHS answers its time limit or an interrupt: the
        reductions, the build and HiGHS's presolve (:data:`BUILD_SECONDS_PER_TERM`,
        :data:`BUILD_SECONDS_PER_NONZERO`)."""
        return BUILD_SECONDS_PER_TERM * self.terms + BUILD_SECONDS_PER_NONZERO * self.nonzeros

    def __str__(self) -> str:
        return f"{_count(self.columns)} columns and {_count(self.nonzeros)} nonzeros"


def _count(n: int) -> str:
    return (
        f"{n / 1e9:.1f}G"
        if n >= 10**9
        else f"{n / 1e6:.1f}M"
        if n >= 10**6
        else f"{n / 1e3:.1f}k"
        if n >= 10**4
        else str(n)
    )


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


class ModelTooLarge(SearchError):
    """The ILP model would not fit the memory guard (:func:`memory_guard`), HiGHS's 32-bit
    indices or the time; raised before anything is built. ``size``: the estimate
    (:class:`ModelSize`); ``guard``: the bytes allowed."""

    def __init__(self, message: str, size: ModelSize, guard: int) -> None:
        super().__init__(message)
        self.size = size
        self.guard = guard


def available_memory() -> int:
    """Bytes this process may still take: ``MemAvailable`` of ``/proc/meminfo`` (else the
    physical memory), less what an address-space limit (``ulimit -v``) leaves."""
    avail: int | None = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            avail = 1 << 34
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm") as f:
                used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            used = 0
        avail = min(avail, max(soft - used, 0))
    return avail


def memory_guard() -> int:
    """Bytes an ILP model may take: :data:`MEMORY_SHARE` of :func:`available_memory`."""
    return int(MEMORY_SHARE * available_memory())


def usage_entries(graph: StrategyGraph) -> tuple[I64, npt.NDArray[np.bool_]]:
    """Per time point, an upper bound on its usage row's entries (the strategies of the nodes
    live there that use more than their node's least), and whether the row can bind (the
    nodes' largest usages may not fit)."""
    p, first, last = graph.time_points()
    n = graph.num_nodes
    if n == 0 or p == 0 or graph.usage_limit is None:
        return np.zeros(p, dtype=np.int64), np.zeros(p, dtype=bool)
    starts = graph.offsets[:-1]
    ks = np.diff(graph.offsets)
    lo = np.minimum.reduceat(graph.usage, starts)
    hi = np.maximum.reduceat(graph.usage, starts)
    above = np.add.reduceat((graph.usage > np.repeat(lo, ks)).astype(np.int64), starts)
    live = first < last

    def sums(values: npt.NDArray[Any], dtype: Any) -> npt.NDArray[Any]:
        delta = np.zeros(p + 1, dtype=dtype)
        np.add.at(delta, first[live], values[live])
        np.subtract.at(delta, last[live], values[live])
        return np.cumsum(delta[:-1])

    binding = sums((hi - lo).astype(np.float64), np.float64) > graph.usage_limit - sums(
        lo.astype(np.float64), np.float64
    )
    return sums(above, np.int64), binding


def estimate_model(graph: StrategyGraph, *, near: Sequence[int] | None = None) -> ModelSize:
    """An upper bound on the size of :func:`solve_ilp`'s model of ``graph``, from its arrays
    alone (no reduction, nothing built; a few numpy passes): a column per strategy and
    edge-matrix entry; a row per node (one strategy), per strategy of each edge end (the
    marginals) and per usage time point that can bind (``near``: only those time points, as
    with ``lazy_rows``)."""
    ks = np.diff(graph.offsets)
    strategies = int(graph.cost.size)
    entries = int(graph.edge_cost.size)
    if graph.num_edges:
        ka, kb = ks[graph.edges[:, 0]], ks[graph.edges[:, 1]]
        marginal_rows = int(ka.sum() + kb.sum())
    else:
        marginal_rows = 0
    per_point, binding = usage_entries(graph)
    if near is not None:
        chosen = np.zeros(per_point.size, dtype=bool)
        chosen[np.asarray(list(near), dtype=np.int64)] = True
        binding &= chosen
    usage_rows = int(binding.sum())
    usage_nz = int(per_point[binding].sum())
    return ModelSize(
        columns=strategies + entries,
        rows=graph.num_nodes + marginal_rows + usage_rows,
        nonzeros=strategies + 2 * entries + marginal_rows + usage_nz,
        terms=strategies + entries,
    )


def check_model(size: ModelSize, time_limit: float | None = None) -> None:
    """Raises :class:`ModelTooLarge` (one line naming the size) when a model of ``size`` would
    take more than :func:`memory_guard` bytes, more than HiGHS's 32-bit indices hold, or (with
    ``time_limit`` seconds) more than :data:`BUILD_SHARE` of the time to build."""
    guard = memory_guard()
    advice = "use method 'local' or 'penalty'"
    if max(size.columns, size.nonzeros) > MAX_INDEX:
        raise ModelTooLarge(f"ILP model of {size} is over HiGHS's 32-bit index limit; {advice}", size, guard)
    if size.bytes > guard:
        raise ModelTooLarge(
            f"ILP model of {size} needs about {_gib(size.bytes)}, the memory guard allows {_gib(guard)} "
            f"({MEMORY_SHARE:.0%} of the memory available); {advice}",
            size,
            guard,
        )
    if time_limit is not None and size.build_seconds() > BUILD_SHARE * time_limit:
        raise ModelTooLarge(
            f"ILP model of {size} takes about {size.build_seconds():.1f} s to build and presolve, more than "
            f"{BUILD_SHARE:.0%} of the {time_limit:.1f} s left; {advice}",
            size,
            guard,
        )


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


class _OutOfTime(Exception):
    """The deadline passed, or a stop was requested, while the model was being built."""


@dataclass
class _Rows:
    """Rows in compressed sparse row form: ``starts`` (one per row), ``index``, ``value``,
    bounds ``lo`` / ``hi``."""

    starts: I64
    index: npt.NDArray[np.int32]
    value: F64
    lo: F64
    hi: F64

    @staticmethod
    def concat(parts: Sequence[_Rows]) -> _Rows:
        offs = np.cumsum([0] + [len(r.index) for r in parts[:-1]])
        return _Rows(
            np.concatenate([r.starts + o for r, o in zip(parts, offs, strict=True)])
            if parts
            else np.zeros(0, np.int64),
            np.concatenate([r.index for r in parts]) if parts else np.zeros(0, np.int32),
            np.concatenate([r.value for r in parts]) if parts else np.zeros(0),
            np.concatenate([r.lo for r in parts]) if parts else np.zeros(0),
            np.concatenate([r.hi for r in parts]) if parts else np.zeros(0),
        )

    def add_to(self, h: Any) -> None:
        if len(self.starts):
            h.addRows(
                len(self.starts),
                self.lo,
                self.hi,
                len(self.index),
                self.starts.astype(np.int32),
                self.index,
                self.value,
            )


@dataclass
class _Model:
    """The ILP of a reduced graph: ``col[v]`` the first column of free node ``v`` (-1 for fixed
    nodes), ``nx`` the node columns, edges as ``(a, b, first column)``, the column costs and
    upper bounds, and the rows."""

    col: I64
    nx: int
    edges: list[tuple[int, int, int]]
    obj: F64
    ub: F64
    rows: _Rows


def _costs(c: I64) -> tuple[F64, F64]:
    """Objective and upper bound of columns with costs ``c``: forbidden ones fixed at 0."""
    forbidden = c >= FORBIDDEN_COST
    return np.where(forbidden, 0.0, c.astype(np.float64)), np.where(forbidden, 0.0, 1.0)


def _build(red: Reduced, n_nodes: int, check: Any) -> _Model:
    """The columns and the one-strategy and marginal rows of the reduced graph (module
    docstring), in numpy arrays; ``check()`` is called between stages (it raises
    :class:`_OutOfTime` to abandon the build)."""
    free = red.free_nodes()
    ks = np.array([len(red.keep[v]) for v in free], dtype=np.int64)
    col = np.full(n_nodes, -1, dtype=np.int64)
    firsts = np.concatenate([[0], np.cumsum(ks)[:-1]]).astype(np.int64) if free else np.zeros(0, np.int64)
    col[np.asarray(free, dtype=np.int64)] = firsts
    nx = int(ks.sum())
    xcost = np.concatenate([red.node_cost[v] for v in free]) if free else np.zeros(0, np.int64)
    xobj, xub = _costs(xcost)
    objs, ubs = [xobj], [xub]
    # One strategy per node: Σ_s x_vs = 1.
    parts = [_Rows(firsts.copy(), np.arange(nx, dtype=np.int32), np.ones(nx), np.ones(len(free)), np.ones(len(free)))]
    check()
    edges = [(a, b, m) for (a, b), m in red.edges.items() if m.any()]
    shapes = np.array([m.shape for _, _, m in edges], dtype=np.int64).reshape(-1, 2)
    sizes = shapes[:, 0] * shapes[:, 1]
    bases = nx + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if edges else np.zeros(0, np.int64)
    if edges:
        ycost = np.concatenate([m.reshape(-1) for _, _, m in edges])
        o, u = _costs(ycost)
        objs.append(o)
        ubs.append(u)
    ca = np.array([col[a] for a, _, _ in edges], dtype=np.int64)
    cb = np.array([col[b] for _, b, _ in edges], dtype=np.int64)
    check()
    # Marginals, edges grouped by matrix shape: Σ_t y_st − x_as = 0 and Σ_s y_st − x_bt = 0.
    keys = shapes[:, 0] * (1 << 32) + shapes[:, 1]
    order = np.argsort(keys, kind="stable")
    bounds = np.nonzero(np.diff(keys[order]))[0] + 1
    for grp in np.split(order, bounds) if edges else []:
        ka, kb = (int(x) for x in shapes[grp[0]])
        base, xa, xb = bases[grp], ca[grp], cb[grp]
        e = len(grp)
        s = np.arange(ka, dtype=np.int64)
        t = np.arange(kb, dtype=np.int64)
        ya = np.empty((e, ka, kb + 1), dtype=np.int64)
        ya[:, :, :kb] = base[:, None, None] + s[None, :, None] * kb + t[None, None, :]
        ya[:, :, kb] = xa[:, None] + s[None, :]
        yb = np.empty((e, kb, ka + 1), dtype=np.int64)
        yb[:, :, :ka] = base[:, None, None] + s[None, None, :] * kb + t[None, :, None]
        yb[:, :, ka] = xb[:, None] + t[None, :]
        va = np.ones((e, ka, kb + 1))
        va[:, :, kb] = -1.0
        vb = np.ones((e, kb, ka + 1))
        vb[:, :, ka] = -1.0
        na, nb = e * ka, e * kb
        starts = np.concatenate(
            [np.arange(na, dtype=np.int64) * (kb + 1), na * (kb + 1) + np.arange(nb, dtype=np.int64) * (ka + 1)]
        )
        parts.append(
            _Rows(
                starts,
                np.concatenate([ya.reshape(-1), yb.reshape(-1)]).astype(np.int32),
                np.concatenate([va.reshape(-1), vb.reshape(-1)]),
                np.zeros(na + nb),
                np.zeros(na + nb),
            )
        )
        check()
    return _Model(
        col,
        nx,
        [(a, b, int(x)) for (a, b, _), x in zip(edges, bases, strict=True)],
        np.concatenate(objs),
        np.concatenate(ubs),
        _Rows.concat(parts),
    )


def solve_ilp(
    graph: StrategyGraph,
    time_limit: float = 10.0,
    *,
    initial: Sequence[int] | None = None,
    threads: int = 1,
    lazy_rows: bool = False,
) -> Solution:
    """Optimal (or best found within ``time_limit`` seconds, the reductions and the model's
    build included) assignment by MILP.

    ``initial``: a feasible warm start (e.g. from :func:`shardwise.search.local.solve_local`).
    ``lazy_rows``: start from the usage rows near the warm start's peaks and add broken ones
    (module docstring); ignored without a feasible ``initial``.
    ``Solution.optimal`` is true when HiGHS proved optimality. When the time runs out (or a
    stop is requested, :func:`shardwise.search.local.request_stop`) before HiGHS runs, the warm
    start is returned. Raises :class:`ModelTooLarge` (nothing built) when the model's estimate
    (:func:`estimate_model`) is over the memory guard, HiGHS's index limit or what the time can
    build (module docstring); :class:`NoFeasibleSolution` when no feasible solution was found
    (or none in time) and no warm start was given; :class:`SearchError` when ``highspy`` is
    missing or for a bad time limit. From the main thread a Ctrl-C stops it with its best
    answer (``Solution.interrupted``)."""
    try:
        import highspy
    except ImportError:  # pragma: no cover - highspy is a runtime dependency
        raise SearchError("method 'ilp' needs highspy (pip install highspy)") from None
    t_limit = check_time_limit(time_limit)
    return interruptible(lambda: _solve_ilp(highspy, graph, t_limit, initial, threads, lazy_rows), graph, t_limit)


def _solve_ilp(
    highspy: Any, graph: StrategyGraph, t_limit: float, initial: Sequence[int] | None, threads: int, lazy_rows: bool
) -> Solution:
    start = time.perf_counter()
    deadline = start + t_limit
    warm_score = evaluate(graph, initial) if initial is not None else None
    lazy = lazy_rows and graph.usage_limit is not None and warm_score is not None and warm_score.feasible
    near: list[int] | None = None
    if lazy:
        assert initial is not None and graph.usage_limit is not None
        prof = usage_profile(graph, initial)
        limit_near = graph.usage_limit - graph.usage_limit * LAZY_MARGIN
        near = [t for t, x in enumerate(prof) if x > limit_near]
    size = estimate_model(graph, near=near)
    check_model(size, t_limit)
    if initial is not None and warm_score is not None:
        offer_incumbent(
            graph,
            Solution(
                tuple(int(x) for x in initial), warm_score.cost, warm_score.peak_usage, warm_score.feasible, "ilp"
            ),
        )
    highs: list[Any] = []

    def cancel() -> None:
        for h in highs:
            h.cancelSolve()

    with on_stop(cancel) as stopped:
        return _run(highspy, graph, deadline, initial, warm_score, threads, lazy, near, size, stopped, highs)


def _run(
    highspy: Any,
    graph: StrategyGraph,
    deadline: float,
    initial: Sequence[int] | None,
    warm_score: Score | None,
    threads: int,
    lazy: bool,
    near: list[int] | None,
    size: ModelSize,
    stopped: threading.Event,
    highs: list[Any],
) -> Solution:
    """:func:`solve_ilp` once the model is known to fit: reductions, build, HiGHS."""
    start = time.perf_counter()
    t_limit = deadline - start

    def fallback(why: str) -> Solution:
        if initial is None or warm_score is None:
            raise NoFeasibleSolution(f"ILP: no feasible solution within {t_limit:.3g} s ({why})")
        return Solution(
            tuple(int(x) for x in initial),
            warm_score.cost,
            warm_score.peak_usage,
            warm_score.feasible,
            "ilp",
            False,
            time.perf_counter() - start,
            note=f"ILP: {why}; the warm start is kept",
        )

    def check() -> None:
        if stopped.is_set() or time.perf_counter() >= deadline:
            raise _OutOfTime

    try:
        red = reduce_graph(graph)
        check()
        model = _build(red, graph.num_nodes, check)
        usage = _UsageRows(graph, red, model.col) if graph.usage_limit is not None else None
        check()
        added: set[int] = set()
        if usage is not None:
            added = set(usage.binding) if near is None else set(usage.binding) & set(near)
            rows = _Rows.concat([model.rows, usage.rows(sorted(added), check)])
        else:
            rows = model.rows
        check()
    except _OutOfTime:
        return fallback("stopped" if stopped.is_set() else f"the time ran out while building a model of {size}")
    choice: dict[int, int] | None = None
    optimal = False
    dual: float | None = None
    status_text = "no free node"
    free = red.free_nodes()
    n = len(model.obj)
    if n == 0:  # every node fixed by the reductions
        if evaluate(graph, red.expand({})).feasible:
            choice, optimal = {}, True
    else:
        h = model_highs(highspy, model, rows, threads)
        del rows
        warm = _warm(highspy, red, model, initial) if initial is not None else None
        highs.append(h)
        while True:
            left = deadline - time.perf_counter()
            if left <= 0.01 or stopped.is_set():
                status_text = "stopped" if stopped.is_set() else "no time left for HiGHS"
                break
            h.setOptionValue("time_limit", left)
            if warm is not None:
                h.setSolution(warm)
            t_run = time.perf_counter()
            h.run()
            status = h.getModelStatus()
            status_text = h.modelStatusToString(status)
            # HiGHS's dual bound of the reduced model (without the folded constant); with lazy
            # usage rows it bounds a relaxation, so it stays a lower bound.
            dual = float(h.getInfo().mip_dual_bound)
            log.debug(
                "HiGHS: %d columns, %d rows (%d usage rows), %.1f s of %.1f (%.1f s since the call): %s",
                n,
                h.getNumRow(),
                len(added),
                time.perf_counter() - t_run,
                left,
                time.perf_counter() - start,
                status_text,
            )
            choice, optimal = None, False
            if int(h.getInfo().primal_solution_status) == 2:  # kSolutionStatusFeasible
                xs = np.asarray(h.getSolution().col_value)
                choice = {v: int(np.argmax(xs[model.col[v] : model.col[v] + len(red.keep[v])])) for v in free}
                optimal = status == highspy.HighsModelStatus.kOptimal
            if not lazy or choice is None or stopped.is_set():
                break
            assert usage is not None and graph.usage_limit is not None
            prof = usage_profile(graph, red.expand(choice))
            broken = [t for t in usage.binding if t not in added and prof[t] > graph.usage_limit]
            if not broken:
                break
            added.update(broken)
            usage.rows(broken).add_to(h)
    if choice is None:
        if initial is None:
            raise NoFeasibleSolution(f"ILP: no feasible solution within {t_limit:.3g} s (HiGHS status: {status_text})")
        assignment = list(initial)
    else:
        assignment = red.expand(choice)
    sc = evaluate(graph, assignment)
    keep, optimal = _with_warm(sc, optimal, warm_score)
    if keep:
        assert initial is not None and warm_score is not None
        assignment, sc = list(initial), warm_score
    lower = None
    if dual is not None and math.isfinite(dual):
        # Less HiGHS's tolerances (1e-6 absolute, 1e-9 relative); costs are integers: round up.
        lower = math.ceil(dual - 1e-6 - abs(dual) * 1e-9) + red.constant
    sol = Solution(
        tuple(assignment),
        sc.cost,
        sc.peak_usage,
        sc.feasible,
        "ilp",
        optimal=optimal,
        seconds=time.perf_counter() - start,
        lower_bound=lower,
    )
    offer_incumbent(graph, sol)
    return sol


def _with_warm(answer: Score, optimal: bool, warm: Score | None) -> tuple[bool, bool]:
    """Whether the warm start ``warm`` replaces HiGHS's ``answer`` (the answer breaks the usage
    limit, or the warm start fits it and costs less), and whether the answer kept is proven
    ``optimal``. HiGHS's "Optimal" holds within its relative gap (``mip_rel_gap``, 1e-4 by
    default): a feasible answer of that status is within it of the optimum, and a cheaper
    feasible warm start is as close. (Counted as unproven, rounds of the neighbourhood descent
    on the validation instance N whose HiGHS optimum cost a little more than the incumbent
    ended the descent as if out of time.)"""
    if warm is None:
        return False, optimal
    if not answer.feasible:
        return True, False
    return warm.feasible and warm.cost < answer.cost, optimal


class _UsageRows:
    """The usage rows of the ILP: one per distinct interval start (each has its own live set,
    as a node starting there is live only from there) that can bind (:attr:`binding`), built
    on demand by :meth:`rows`."""

    def __init__(self, graph: StrategyGraph, red: Reduced, col: I64) -> None:
        limit = graph.usage_limit
        assert limit is not None
        npoints, first_all, last_all = graph.time_points()
        live = np.nonzero(first_all < last_all)[0]
        first, last = first_all[live], last_all[live]  # live at time points first .. last-1
        lo = np.array([int(red.node_usage[v].min()) for v in live], dtype=np.int64)
        spread = np.array(
            [int(red.node_usage[v].max()) - int(red.node_usage[v].min()) if col[v] >= 0 else 0 for v in live],
            dtype=np.int64,
        )
        #: Right-hand side per time point: the limit less every live node's least usage.
        self.rhs = [limit - b for b in point_sums(npoints, first, last, lo)]
        worst = point_sums(npoints, first, last, spread)
        #: The time points whose row can bind (even every node's largest usage may not fit).
        self.binding = [t for t in range(npoints) if worst[t] > self.rhs[t]]
        movable = np.nonzero(spread > 0)[0]
        self.first, self.last = first[movable], last[movable]
        cols: list[I64] = []
        coefs: list[F64] = []
        for v in live[movable].tolist():
            u = red.node_usage[v]
            ss = np.nonzero(u > u.min())[0]
            cols.append(col[v] + ss)
            coefs.append((u[ss] - u.min()).astype(np.float64))
        lens = np.array([len(c) for c in cols], dtype=np.int64)
        self.term_start = (
            np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) if cols else np.zeros(0, np.int64)
        )
        self.term_len = lens
        self.term_col = np.concatenate(cols).astype(np.int32) if cols else np.zeros(0, np.int32)
        self.term_coef = np.concatenate(coefs) if coefs else np.zeros(0)

    def rows(self, points: Sequence[int], check: Any = None) -> _Rows:
        """The usage rows of time points ``points`` (``Σ coefs · x <= bound``); ``check()``
        is called every few rows (it may raise to abandon the build)."""
        starts: list[int] = []
        index: list[npt.NDArray[np.int32]] = []
        value: list[F64] = []
        pos = 0
        for i, t in enumerate(points):
            js = np.nonzero((self.first <= t) & (t < self.last))[0]
            lens = self.term_len[js]
            total = int(lens.sum())
            # Entries of the terms js, back to back: term_start[j] + 0 .. len_j - 1.
            at = np.repeat(self.term_start[js] - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(total)
            starts.append(pos)
            index.append(self.term_col[at])
            value.append(self.term_coef[at])
            pos += total
            if check is not None and i % 64 == 63:
                check()
        return _Rows(
            np.array(starts, dtype=np.int64),
            np.concatenate(index) if index else np.zeros(0, np.int32),
            np.concatenate(value) if value else np.zeros(0),
            np.full(len(points), -np.inf),
            np.array([float(self.rhs[t]) for t in points]),
        )


def model_highs(highspy: Any, model: _Model, rows: _Rows, threads: int) -> Any:
    """A HiGHS instance holding ``model``'s columns (node columns integer) and ``rows``, with
    ``threads`` threads and user interrupts on (``cancelSolve()``, on a stop request, interrupts
    a run at HiGHS's next interrupt callback)."""
    h = new_highs(highspy)
    h.setOptionValue("threads", int(threads))
    n, nx = len(model.obj), model.nx
    h.addCols(
        n, model.obj, np.zeros(n), model.ub, 0, np.array([], dtype=np.int32), np.array([], dtype=np.int32), np.array([])
    )
    rows.add_to(h)
    h.changeColsIntegrality(
        nx, np.arange(nx, dtype=np.int32), np.full(nx, int(highspy.HighsVarType.kInteger), dtype=np.uint8)
    )
    h.HandleUserInterrupt = True
    return h


def _warm(highspy: Any, red: Reduced, model: _Model, initial: Sequence[int]) -> Any:
    sol = highspy.HighsSolution()
    x = np.zeros(len(model.obj))
    pos: dict[int, int] = {}
    for v in red.free_nodes():
        try:
            pos[v] = red.keep[v].index(int(initial[v]))
        except ValueError:
            return sol  # the warm start uses a removed (dominated) strategy: no warm start
        x[model.col[v] + pos[v]] = 1.0
    for a, b, base in model.edges:
        kb = len(red.keep[b])
        x[base + pos[a] * kb + pos[b]] = 1.0
    sol.col_value = list(x)
    sol.value_valid = True
    return sol
