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
import json
from pathlib import Path
from typing import Any

from shardwise.errors import SearchError
from shardwise.search.graph import Score, StrategyGraph, evaluate

#: Seconds allowed per released benchmark (IOPDDL.md, "Benchmarks" table).
CONTEST_TIME_LIMITS: dict[str, float] = {
    "A": 60, "B": 60, "C": 60, "D": 60, "E": 60, "F": 120, "G": 120, "H": 120, "I": 120, "J": 120,
    "K": 180, "L": 180, "M": 180, "N": 180, "O": 180, "P": 240, "Q": 240, "R": 240, "S": 240,
    "T": 240, "U": 300, "V": 300, "W": 300, "X": 300, "Y": 300,
}


def _field(d: Any, key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise SearchError(f"IOPDDL instance: expected key \"{where}{key}\", got {sorted(d) if isinstance(d, dict) else type(d).__name__}")
    return d[key]


def parse_instance(data: Any) -> StrategyGraph:
    """A :class:`StrategyGraph` from the decoded JSON of an instance. Raises
    :class:`SearchError` naming the missing key, node or edge."""
    p = _field(data, "problem", "")
    nodes = _field(p, "nodes", "problem.")
    edges = _field(p, "edges", "problem.")
    limit = p.get("usage_limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
        raise SearchError(f"IOPDDL instance: usage_limit must be an integer, got {limit!r}")
    return StrategyGraph.build(
        _field(nodes, "costs", "problem.nodes."),
        _field(nodes, "usages", "problem.nodes."),
        _field(nodes, "intervals", "problem.nodes."),
        _field(edges, "nodes", "problem.edges."),
        _field(edges, "costs", "problem.edges."),
        usage_limit=limit,
        name=str(p.get("name", "")),
    )


def read_instance(path: str | Path) -> StrategyGraph:
    """Reads ``.json`` or ``.json.gz`` (gzip detected by its magic bytes). Raises
    :class:`SearchError` for unreadable JSON or a malformed instance, ``OSError`` for I/O."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SearchError(f"{path}: not a JSON IOPDDL instance: {e}") from None
    try:
        return parse_instance(data)
    except SearchError as e:
        raise SearchError(f"{path}: {e}") from None


def score(graph: StrategyGraph, assignment: list[int] | tuple[int, ...]) -> int | None:
    """The contest score of ``assignment``: its cost, or ``None`` when the usage limit is
    exceeded (the contest rejects the solution). Raises :class:`SearchError` for a wrong length
    or an out-of-range strategy index (the contest's ``InvalidArgument`` / ``OutOfRange``)."""
    s: Score = evaluate(graph, assignment)
    return s.cost if s.feasible else None


def output_reserve(time_limit: float) -> float:
    """Seconds of ``time_limit`` kept back from the solver for scoring and writing the answer:
    0.5 s plus 0.5% of the limit (1.4 s of a 3-minute limit; the solver's own deadline checks
    and the exact scoring of a 35,000-node answer take up to a few tenths of a second)."""
    return 0.5 + 0.005 * time_limit


def contest_time_limit(name: str) -> float | None:
    """The contest's time limit in seconds for an instance named ``asplos-2025-iopddl-X``."""
    letter = name.rsplit("-", 1)[-1].split(".")[0]
    return CONTEST_TIME_LIMITS.get(letter)


def solve_file(
    path: str | Path, time_limit: float, method: str = "auto", *, seed: int = 0, threads: int = 1
) -> list[str]:
    """Reads and solves an instance within ``time_limit`` seconds counted from the call (the
    reading included), and returns the output lines: the contest's answer line (the strategy
    index per node, ``[i0, i1, ...]``) and last ``cost: N``, scored by the contest's rules
    (``cost: inf`` when the usage limit is exceeded). ``threads``: local-search portfolio size
    (see ``shardwise.search.solve``). Raises :class:`SearchError` for a bad instance, method,
    time limit or thread count."""
    import time

    from shardwise.search.local import check_time_limit
    from shardwise.search.solve import solve

    start = time.perf_counter()
    check_time_limit(time_limit)
    graph = read_instance(path)
    rest = max(float(time_limit) - (time.perf_counter() - start) - output_reserve(float(time_limit)), 0.0)
    sol = solve(graph, rest, method, seed=seed, threads=threads)
    cost = score(graph, sol.assignment)
    return ["[" + ", ".join(str(i) for i in sol.assignment) + "]", f"cost: {'inf' if cost is None else cost}"]
