"""Local search on a strategy graph, in Rust (``rust/src/search/local.rs``). With a usage limit,
the first 80% of the time is a Lagrangian phase (``rust/src/search/lagrange.rs``; Fisher,
Mgmt. Sci. 1981): memory priced per time point (projected subgradient steps), the priced problem
solved by descent, exact dynamic programming over spanning forests that take the edges with
forbidden (>= 10**18) entries first, and (graphs of at most 4096 nodes, or without forbidden edge
entries) PBQP by graph reduction (``rust/src/search/pbqp.rs``; Scholz & Eckstein 2002: exact
R0/R1/R2 folds, heuristic RN with a pilot look-ahead), each result repaired to fit the limit (cheapest cost per
byte freed at the peak) and improved by feasible descent. The best feasible assignment (or the
least-usage one, feasible iff the instance is) then goes through coordinate descent over nodes
and edges with exact cost deltas and a segment-tree memory check, and iterated local search
(Lourenço, Martin & Stützle 2003) until the time limit. The GIL is released while it runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shardwise import _native
from shardwise.errors import SearchError
from shardwise.search.graph import StrategyGraph


@dataclass(frozen=True)
class Solution:
    """A solver's answer: ``assignment`` (strategy index per node), its exact ``cost``,
    ``peak_usage``, ``feasible``, the ``method`` that found it, whether it is proven
    ``optimal`` (ILP only) and the ``seconds`` the solver ran."""

    assignment: tuple[int, ...]
    cost: int
    peak_usage: int
    feasible: bool
    method: str
    optimal: bool = False
    seconds: float = 0.0


def check_time_limit(time_limit: float) -> float:
    """Seconds as a float; raises :class:`SearchError` unless finite and >= 0."""
    t = float(time_limit)
    if not (math.isfinite(t) and t >= 0):
        raise SearchError(f"time_limit: expected a finite number of seconds >= 0, got {time_limit!r}")
    return t


def wire(graph: StrategyGraph) -> tuple[list[int], bytes, bytes, list[tuple[int, int]], list[tuple[int, int]],
                                       list[int], bytes, int | None]:
    """``graph`` as the one tuple the Rust search takes (``rust/src/py/search.rs``): its arrays,
    the int64 ones as little-endian bytes."""
    le = np.dtype("<i8")
    return (
        [int(x) for x in graph.offsets],
        graph.cost.astype(le).tobytes(),
        graph.usage.astype(le).tobytes(),
        [(int(a), int(b)) for a, b in graph.intervals],
        [(int(a), int(b)) for a, b in graph.edges],
        [int(x) for x in graph.edge_offsets],
        graph.edge_cost.astype(le).tobytes(),
        graph.usage_limit,
    )


def solve_local(
    graph: StrategyGraph,
    time_limit: float = 10.0,
    *,
    seed: int = 0,
    initial: Sequence[int] | None = None,
    max_rounds: int | None = None,
    lagrange_share: float = 0.8,
) -> Solution:
    """Best assignment local search finds within ``time_limit`` seconds (wall clock).

    ``initial``: a warm start; one over the usage limit is first repaired (usage-lowering
    moves, cheapest per byte freed) and used if that makes it fit. ``max_rounds`` caps the
    perturbation rounds (the result then depends only on ``seed``). ``lagrange_share``: the
    share of the time (0 to 1) for the Lagrangian memory-price phase before the feasible search
    (0: polish ``initial`` only). Raises :class:`SearchError` for a bad
    time limit or share, or a warm start of the wrong length / out-of-range index.
    """
    import time

    t = check_time_limit(time_limit)
    if not 0.0 <= lagrange_share <= 1.0:
        raise SearchError(f"lagrange_share: expected a share of the time limit in [0, 1], got {lagrange_share!r}")
    if initial is not None and len(initial) != graph.num_nodes:
        raise SearchError(f"initial: expected {graph.num_nodes} strategy indices, got {len(initial)}")
    start = time.perf_counter()
    try:
        assign, cost, peak, feasible, _rounds, _impr = _native.search_local(
            wire(graph), t, seed, None if initial is None else [int(x) for x in initial], max_rounds, lagrange_share
        )
    except _native.InvalidShardingError as e:
        raise SearchError(str(e)) from None
    except OverflowError:
        raise SearchError("initial: strategy indices must be >= 0") from None
    return Solution(tuple(assign), int(cost), int(peak), bool(feasible), "local",
                    seconds=time.perf_counter() - start)


def lagrange_prices(
    graph: StrategyGraph, time_limit: float, *, seed: int = 0, max_cycles: int | None = None
) -> tuple[npt.NDArray[np.float64], float] | None:
    """Memory prices from the Lagrangian cycles of the local search alone
    (``rust/src/search/lagrange.rs``, ``lagrange_prices``; Fisher, Mgmt. Sci. 1981), run for
    ``time_limit`` seconds or ``max_cycles`` cycles: per node, a price in cost units per usage
    unit (shape ``(num_nodes,)``) under which the priced assignment (descent and exact forest
    moves, not an exact optimum) fits the usage limit: the average of the cycles' prices from the
    first one whose priced assignment fitted (else the last prices); and the overflow of the
    priced assignment under them as a share of the limit (<= 0: it fitted). ``None`` without a
    usage limit. Raises :class:`SearchError` for a bad time limit or graph."""
    t = check_time_limit(time_limit)
    try:
        r = _native.search_prices(wire(graph), t, seed, max_cycles)
    except _native.InvalidShardingError as e:
        raise SearchError(str(e)) from None
    if r is None:
        return None
    return np.asarray(r[0], dtype=np.float64), float(r[1])
