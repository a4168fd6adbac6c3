"""The IOPDDL contest format (ASPLOS 2025 / EuroSys 2025 Contest on Intra-Operator Parallelism
for Distributed Deep Learning; rules: github.com/asplos-contest/2025 ``IOPDDL.md``; reader and
evaluator: github.com/google/iopddl ``iopddl.cc``).

An instance is ``{"problem": {"name", "nodes": {"intervals", "costs", "usages"}, "edges":
{"nodes", "costs"}, "usage_limit"}}``; edge matrices are flattened row-major (strategy of the
first node × strategy of the second). Scoring (``Evaluate``): Σ chosen node costs + Σ chosen edge
costs; a solution whose total usage exceeds ``usage_limit`` at any time point of a half-open
interval is rejected (``ResourceExhaustedError``: the team scores 0 points on that benchmark, as
for no answer), so its cost is reported as ``None`` / ``inf``. Time limits per benchmark are the
contest table's (1 to 5 minutes; :data:`CONTEST_TIME_LIMITS`).
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from shardwise import _native
from shardwise.errors import SearchError
from shardwise.search.graph import Score, StrategyGraph, evaluate
from shardwise.search.local import GRACE_SECONDS, OVERRUN_SECONDS, POLL_SECONDS, keep_native_graph

if TYPE_CHECKING:
    from shardwise.search.local import Solution

#: Seconds allowed per released benchmark (IOPDDL.md, "Benchmarks" table).
CONTEST_TIME_LIMITS: dict[str, float] = {
    "A": 60,
    "B": 60,
    "C": 60,
    "D": 60,
    "E": 60,
    "F": 120,
    "G": 120,
    "H": 120,
    "I": 120,
    "J": 120,
    "K": 180,
    "L": 180,
    "M": 180,
    "N": 180,
    "O": 180,
    "P": 240,
    "Q": 240,
    "R": 240,
    "S": 240,
    "T": 240,
    "U": 300,
    "V": 300,
    "W": 300,
    "X": 300,
    "Y": 300,
}


def _field(d: Any, key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise SearchError(
            f'IOPDDL instance: expected key "{where}{key}", got {sorted(d) if isinstance(d, dict) else type(d).__name__}'
        )
    return d[key]


#: The most bytes an instance may take once decompressed (the largest contest instance takes
#: a few tens of MB; a small gzip bomb once took 6.3 GB of memory).
MAX_INSTANCE_BYTES = 256 << 20


def _integers(rows: Any, what: str) -> Any:
    """``rows`` (a list of lists of JSON numbers) when every number is an integer: floats
    were silently truncated, and strings and booleans accepted, before. ``SearchError`` naming
    the first offending row otherwise."""
    if not isinstance(rows, list) or not all(type(r) is list for r in rows):
        raise SearchError(f"IOPDDL instance: {what} must be a list of lists of integers, got {str(rows)[:80]}")
    if set(map(type, chain.from_iterable(rows))) <= {int}:
        return rows
    for i, r in enumerate(rows):
        bad = next((x for x in r if type(x) is not int), None)
        if bad is not None or any(type(x) is not int for x in r):
            raise SearchError(f"IOPDDL instance: {what}[{i}] must hold integers, got {bad!r} ({type(bad).__name__})")
    return rows


def parse_instance(data: Any) -> StrategyGraph:
    """A :class:`StrategyGraph` from the decoded JSON of an instance. Raises
    :class:`SearchError` naming the missing key, node or edge, or the first number that is not
    an integer."""
    p = _field(data, "problem", "")
    nodes = _field(p, "nodes", "problem.")
    edges = _field(p, "edges", "problem.")
    limit = p.get("usage_limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
        raise SearchError(f"IOPDDL instance: usage_limit must be an integer, got {limit!r}")
    edge_nodes = _integers(_field(edges, "nodes", "problem.edges."), "problem.edges.nodes")
    edge_costs = _integers(_field(edges, "costs", "problem.edges."), "problem.edges.costs")
    if len(edge_costs) != len(edge_nodes):  # checked here first: StrategyGraph.build indexed past the end
        raise SearchError(
            f"IOPDDL instance: expected one cost matrix per edge ({len(edge_nodes)}), got {len(edge_costs)}"
        )
    return StrategyGraph.build(
        _integers(_field(nodes, "costs", "problem.nodes."), "problem.nodes.costs"),
        _integers(_field(nodes, "usages", "problem.nodes."), "problem.nodes.usages"),
        _integers(_field(nodes, "intervals", "problem.nodes."), "problem.nodes.intervals"),
        edge_nodes,
        edge_costs,
        usage_limit=limit,
        name=str(p.get("name", "")),
    )


def read_instance(path: str | Path) -> StrategyGraph:
    """Reads ``.json`` or ``.json.gz`` (gzip detected by its magic bytes), at most
    ``MAX_INSTANCE_BYTES`` once decompressed. A well-formed instance is read by the native
    reader (``_native.read_iopddl``: serde_json straight into the flat arrays, the GIL
    released, and the searches' Rust copy made at once); anything else by :func:`json.loads`
    and :func:`parse_instance`, which name the fault. Raises :class:`SearchError` for a larger one,
    unreadable gzip or JSON or a malformed instance, ``OSError`` for I/O."""
    path = Path(path)
    with open(path, "rb") as f:
        raw = f.read(MAX_INSTANCE_BYTES + 1)
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as g:
                raw = g.read(MAX_INSTANCE_BYTES + 1)
        except (OSError, EOFError, zlib.error) as e:
            raise SearchError(f"{path}: not a readable gzip file ({e})") from None
    if len(raw) > MAX_INSTANCE_BYTES:
        raise SearchError(
            f"{path}: the instance is over {MAX_INSTANCE_BYTES >> 20} MiB (decompressed); refusing to read it"
        )
    fast = _native.read_iopddl(raw)
    if fast is not None:
        return _from_native(fast)
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SearchError(f"{path}: not a JSON IOPDDL instance: {e}") from None
    except RecursionError:
        raise SearchError(f"{path}: JSON nested too deeply") from None
    try:
        return parse_instance(data)
    except SearchError as e:
        raise SearchError(f"{path}: {e}") from None


def _from_native(found: _native.IopddlInstance) -> StrategyGraph:
    """The graph the native reader read (``rust/src/search/iopddl.rs``), its arrays read-only
    views of the bytes it returned, and its Rust copy kept for the searches."""

    def arr(b: bytes, shape: tuple[int, ...] | None = None) -> npt.NDArray[np.int64]:
        a = np.frombuffer(b, dtype="<i8").astype(np.int64, copy=False)
        return a if shape is None else a.reshape(shape)

    native = found.graph
    graph = StrategyGraph(
        offsets=arr(found.offsets),
        cost=arr(found.cost),
        usage=arr(found.usage),
        intervals=arr(found.intervals, (native.num_nodes, 2)),
        edges=arr(found.edges, (native.num_edges, 2)),
        edge_offsets=arr(found.edge_offsets),
        edge_cost=arr(found.edge_cost),
        usage_limit=native.usage_limit,
        name=found.name,
    )
    keep_native_graph(graph, native)
    return graph


def score(graph: StrategyGraph, assignment: list[int] | tuple[int, ...]) -> int | None:
    """The contest score of ``assignment``: its cost, or ``None`` when the usage limit is
    exceeded (the contest rejects the solution). Raises :class:`SearchError` for a wrong length
    or an out-of-range strategy index (the contest's ``InvalidArgument`` / ``OutOfRange``)."""
    bad = next((x for x in assignment if isinstance(x, int) and not -(2**63) <= x < 2**63), None)
    if bad is not None:
        raise SearchError(f"assignment: strategy index {str(bad)[:40]} is out of range")
    s: Score = evaluate(graph, assignment)
    return s.cost if s.feasible else None


def output_reserve(time_limit: float) -> float:
    """Seconds of ``time_limit`` kept back from the solver for scoring and writing the answer:
    0.5 s plus 0.5% of the limit (the solver's own deadline checks and the exact scoring of a
    35,000-node answer take up to a few tenths of a second), plus the longest a search that
    overruns its limit may hold the answer back before it is abandoned
    (:func:`shardwise.search.local.interruptible`: :data:`~shardwise.search.local.OVERRUN_SECONDS`
    + :data:`~shardwise.search.local.GRACE_SECONDS` + a poll): 2.95 s of a 3-minute limit.
    Without that last part a K run whose whole merge HiGHS held 30 s past its limit was
    abandoned as designed and still answered at 180.1 s of its 180. At most half the limit, so
    that a short one still leaves the solver time: below about 4 s, an abandoned search can
    answer past the limit."""
    full = 0.5 + 0.005 * time_limit + OVERRUN_SECONDS + GRACE_SECONDS + POLL_SECONDS
    return min(full, 0.5 * time_limit)


def contest_time_limit(name: str) -> float | None:
    """The contest's time limit in seconds for an instance named ``asplos-2025-iopddl-X``."""
    letter = name.rsplit("-", 1)[-1].split(".")[0]
    return CONTEST_TIME_LIMITS.get(letter)


def process_age() -> float:
    """Seconds since this process started (Linux: ``/proc/self/stat`` against
    ``/proc/uptime``, to a clock tick), so that a command-line time limit counts the
    interpreter's start and imports too; 0.0 where that cannot be read."""
    import os

    try:
        with open("/proc/self/stat") as f:
            # Fields after the command name (which may hold spaces), from field 3: start time is 22.
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return 0.0


def command_start() -> float | None:
    """The :func:`time.perf_counter` time this process started (:func:`process_age`) when it
    runs shardwise's command line as its program (``python -m shardwise``, the ``shardwise``
    script), so that ``--time-limit`` counts the interpreter's start and imports; ``None`` when
    ``cli.main`` is called from another program (a test, a notebook): the limit then counts
    from the call."""
    import sys
    import time

    prog = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    if prog.name == "shardwise" or (prog.name == "__main__.py" and prog.parent.name == "shardwise"):
        return time.perf_counter() - process_age()
    return None


def solve_instance(
    path: str | Path,
    time_limit: float,
    method: str = "auto",
    *,
    seed: int = 0,
    threads: int = 1,
    started: float | None = None,
    bound_time: float = 0.0,
) -> tuple[list[str], Solution]:
    """:func:`solve_file`'s output lines and the :class:`Solution` they print
    (``Solution.interrupted``: a Ctrl-C stopped the search, the lines hold the best answer
    found so far). ``started``: the :func:`time.perf_counter` time the limit counts from
    (default: the call; the command line passes its process's start, :func:`process_age`).
    ``bound_time`` > 0: after the answer, that many more seconds (outside ``time_limit``) go to a
    lower bound of the optimum (:func:`shardwise.search.bound.bound_for`), printed as a last line
    ``lower bound: N (...)`` with the gap, ``(cost - N) / cost``, how the bound was found and its
    seconds.
    Raises as :func:`solve_file`."""
    import time

    from shardwise.search.local import check_time_limit
    from shardwise.search.solve import solve

    now = time.perf_counter()
    start = now if started is None else min(started, now)
    check_time_limit(time_limit)
    graph = read_instance(path)
    rest = max(float(time_limit) - (time.perf_counter() - start) - output_reserve(float(time_limit)), 0.0)
    sol = solve(graph, rest, method, seed=seed, threads=threads)
    cost = score(graph, sol.assignment)
    lines = ["[" + ", ".join(str(i) for i in sol.assignment) + "]", f"cost: {'inf' if cost is None else cost}"]
    if check_time_limit(bound_time) > 0 and not sol.interrupted:
        from shardwise.search.bound import bound_for

        lb = bound_for(graph, sol, bound_time)
        gap = None if cost is None else lb.gap(cost)
        within = (
            ""
            if gap is None
            else f"gap {100 * gap:.2f} %: no answer costs less than {100 * (1 - gap):.2f} % of this one; "
        )
        lines.append(f"lower bound: {lb.bound} ({within}{lb.method}, {lb.seconds:.1f} s)")
    return lines, sol


def solve_file(
    path: str | Path, time_limit: float, method: str = "auto", *, seed: int = 0, threads: int = 1
) -> list[str]:
    """Reads and solves an instance within ``time_limit`` seconds counted from the call (the
    reading included), and returns the output lines: the contest's answer line (the strategy
    index per node, ``[i0, i1, ...]``) and last ``cost: N``, scored by the contest's rules
    (``cost: inf`` when the usage limit is exceeded). ``threads``: local-search portfolio size
    (see ``shardwise.search.solve``). From the main thread a Ctrl-C returns the best answer
    found so far (:func:`solve_instance` says whether it was interrupted). Raises
    :class:`SearchError` for a bad instance, method, time limit or thread count."""
    return solve_instance(path, time_limit, method, seed=seed, threads=threads)[0]
