"""Times ``auto_shard`` (building the strategy graph, solving) on the test programs: an MLP and
transformer blocks of growing width on a 2x4 (data x model) mesh. Prints one line per run:
nodes, strategies, edge entries, build and solve seconds, predicted communication bytes.

    python benches/bench_auto.py [--method ilp] [--time-limit 10]
"""

from __future__ import annotations

import argparse
import os
import time

from shardwise.search.auto import resolve_mesh
from shardwise.search.build import build_problem
from shardwise.search.cost_model import DeviceModel
from shardwise.search.solve import solve
from shardwise.testing.auto_programs import mlp, transformer_block


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", default="ilp", choices=["ilp", "local", "auto"])
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    widths = () if os.environ.get("SHARDWISE_BENCH_SMOKE", "") not in ("", "0") else (64, 128, 256)
    programs = [("mlp", mlp())] + [
        (f"transformer d={d}", transformer_block(batch=4, seq=8, d=d, heads=4, ffn=4 * d)) for d in widths
    ]
    print(f"{'program':<20} {'nodes':>6} {'strategies':>10} {'edge entries':>12} {'build s':>8} {'solve s':>8} optimal")
    for name, module in programs:
        t = time.perf_counter()
        mesh_name, mesh = resolve_mesh(module, {"data": 2, "model": 4})
        problem = build_problem(module, mesh_name, mesh, DeviceModel(), None)
        built = time.perf_counter() - t
        g = problem.graph
        sol = solve(g, args.time_limit, args.method)
        print(
            f"{name:<20} {g.num_nodes:>6} {g.cost.size:>10} {g.edge_cost.size:>12} {built:>8.2f} {sol.seconds:>8.2f} {sol.optimal}"
        )


if __name__ == "__main__":
    main()
