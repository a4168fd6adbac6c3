"""IOPDDL benchmark: solves every shared instance (``../shared/iopddl``) with ``shardwise
iopddl``'s solver inside the contest's time limit (IOPDDL.md table; ``--time-scale`` shrinks it)
and writes a Markdown table: instance, nodes, edges, our cost, best known, gap %, seconds
(reading included), feasible.

    python benches/bench_iopddl.py [--time-scale 1.0] [--method auto] [--threads 1] [-o benches/iopddl.md]
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from shardwise.files import write_atomic
from shardwise.search import read_instance, score, solve
from shardwise.search.iopddl import contest_time_limit, output_reserve

DATA = Path(__file__).resolve().parents[2] / "shared" / "iopddl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--time-scale", type=float, default=1.0, help="fraction of the contest time limit to use")
    ap.add_argument("--method", default="auto", choices=["auto", "ilp", "limited", "local", "penalty"])
    ap.add_argument("--threads", type=int, default=1, help="solver threads (solve's threads: the penalty search and threads-1 local searches under auto)")
    ap.add_argument("--only", default="", help="instance letters, e.g. BGV")
    ap.add_argument("-o", "--output", type=Path, default=Path(__file__).with_name("iopddl.md"))
    args = ap.parse_args()
    best = {r["instance"]: int(r["best_known_cost"]) for r in csv.DictReader(open(args.data / "best_known.csv"))}
    rows = ["| instance | nodes | edges | our cost | best known | gap % | seconds | limit s | feasible | found by |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for path in sorted(args.data.glob("*.json.gz")):
        letter = path.name.split(".")[0].rsplit("-", 1)[-1]
        if args.only and letter not in args.only:
            continue
        limit = (contest_time_limit(letter) or 60.0) * args.time_scale
        start = time.perf_counter()
        g = read_instance(path)
        sol = solve(g, max(limit - (time.perf_counter() - start) - output_reserve(limit), 0.0), args.method,
                    threads=args.threads)
        secs = time.perf_counter() - start
        cost = score(g, sol.assignment)
        bk = best.get(letter)
        gap = "" if cost is None or bk is None else f"{100.0 * (cost - bk) / bk:.2f}"
        row = (f"| {letter} | {g.num_nodes} | {g.num_edges} | {'inf' if cost is None else cost} | {bk} | {gap} | "
               f"{secs:.1f} | {limit:.0f} | {'yes' if cost is not None else 'no'} | "
               f"{sol.method}{' (optimal)' if sol.optimal else ''} |")
        print(row, flush=True)
        rows.append(row)
    write_atomic(args.output, "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
