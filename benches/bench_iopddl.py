"""IOPDDL benchmark: solves every shared instance (``../shared/iopddl`` and its ``validation/``
folder) with ``shardwise iopddl``'s solver inside the contest's time limit (IOPDDL.md table;
``--time-scale`` shrinks it) and writes a Markdown table: instance, nodes, edges, our cost, best
known, gap %, seconds (reading included), limit, feasible, the method that found the answer, and
then, outside the limit, a lower bound of the optimum (``shardwise.search.bound.bound_for``,
``--bound-time`` seconds; 0: none), the answer's gap to it, ``(cost - bound) / cost``, and its
seconds.

Each instance is solved in a process of its own (this script runs itself with ``--one``), as
the contest runs one per instance, so that no instance runs after another in a warm process.

    python benches/bench_iopddl.py [--time-scale 1.0] [--method auto] [--threads 1] [-o benches/iopddl.md]
        [--repeat 1] [--log DIR] [--only LETTERS] [--bound-time 30]
"""

from __future__ import annotations

import argparse
import csv
import logging
import subprocess
import sys
import time
from pathlib import Path

from shardwise.files import write_atomic
from shardwise.search import read_instance, score, solve
from shardwise.search.bound import bound_for
from shardwise.search.iopddl import contest_time_limit, output_reserve

DATA = Path(__file__).resolve().parents[2] / "shared" / "iopddl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--time-scale", type=float, default=1.0, help="fraction of the contest time limit to use")
    ap.add_argument("--method", default="auto", choices=["auto", "contracted", "ilp", "limited", "local", "penalty"])
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="solver threads (solve's threads: the penalty search and threads-1 local searches under auto)",
    )
    ap.add_argument("--only", default="", help="instance letters, e.g. BGV")
    ap.add_argument("-o", "--output", type=Path, default=Path(__file__).with_name("iopddl.md"))
    ap.add_argument("--repeat", type=int, default=1, help="runs of each instance (one row each)")
    ap.add_argument("--log", type=Path, help="folder for each instance's search trace (LETTER.log, DEBUG level)")
    ap.add_argument(
        "--bound-time", type=float, default=30.0, help="seconds for the lower bound after each answer (0: none)"
    )
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # the child's instance
    args = ap.parse_args()
    if args.one is not None:
        with open(args.data / "best_known.csv") as f:
            best = {r["instance"]: int(r["best_known_cost"]) for r in csv.DictReader(f)}
        if args.log is not None:
            args.log.mkdir(parents=True, exist_ok=True)
            logging.basicConfig(
                filename=args.log / f"{_letter(args.one)}.log",
                filemode="w",
                level=logging.DEBUG,
                format="%(relativeCreated)9.0f ms %(threadName)s %(name)s: %(message)s",
            )
        print(_row(args.one, best, args.time_scale, args.method, args.threads, args.bound_time), flush=True)
        return
    rows = [
        (
            "| instance | nodes | edges | our cost | best known | gap % | seconds | limit s | feasible | found by "
            "| lower bound | gap to bound % | bound s |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|",
    ]
    folders = [args.data] + ([args.data / "validation"] if (args.data / "validation").is_dir() else [])
    paths = sorted((p for d in folders for p in d.glob("*.json.gz")), key=_letter)
    for path in paths:
        letter = _letter(path)
        if args.only and letter not in args.only:
            continue
        for run in range(args.repeat):
            log = (
                [] if args.log is None else ["--log", str(args.log if args.repeat == 1 else args.log / f"run{run + 1}")]
            )
            child = [
                sys.executable,
                __file__,
                "--one",
                str(path),
                "--data",
                str(path.parent),
                "--time-scale",
                str(args.time_scale),
                "--method",
                args.method,
                "--threads",
                str(args.threads),
                "--bound-time",
                str(args.bound_time),
            ] + log
            done = subprocess.run(child, stdout=subprocess.PIPE, text=True, check=True)
            row = done.stdout.strip().splitlines()[-1]
            print(row, flush=True)
            rows.append(row)
    write_atomic(args.output, "\n".join(rows) + "\n")


def _letter(path: Path) -> str:
    return path.name.split(".")[0].rsplit("-", 1)[-1]


def _row(path: Path, best: dict[str, int], time_scale: float, method: str, threads: int, bound_time: float) -> str:
    """One instance solved in this process: its table row."""
    letter = _letter(path)
    limit = (contest_time_limit(letter) or 60.0) * time_scale
    start = time.perf_counter()
    g = read_instance(path)
    sol = solve(g, max(limit - (time.perf_counter() - start) - output_reserve(limit), 0.0), method, threads=threads)
    secs = time.perf_counter() - start
    cost = score(g, sol.assignment)
    bk = best.get(letter)
    gap = "" if cost is None or bk is None else f"{100.0 * (cost - bk) / bk:.2f}"
    lower = to_bound = bound_secs = ""
    if bound_time > 0:
        lb = bound_for(g, sol, bound_time)
        share = None if cost is None else lb.gap(cost)
        to_bound = "" if share is None else f"{100.0 * share:.2f}"
        lower, bound_secs = f"{lb.bound}{' (optimal)' if lb.method == 'optimal' else ''}", f"{lb.seconds:.1f}"
    return (
        f"| {letter} | {g.num_nodes} | {g.num_edges} | {'inf' if cost is None else cost} | {bk} | {gap} | "
        f"{secs:.1f} | {limit:.0f} | {'yes' if cost is not None else 'no'} | "
        f"{sol.method}{' (optimal)' if sol.optimal else ''} | {lower} | {to_bound} | {bound_secs} |"
    )


if __name__ == "__main__":
    main()
