"""auto_shard against the textbook plans on real training steps (issue 26): each flax + optax
model of ``python/shardwise/testing/real_models.py`` lowered raw and un-annotated (calls kept, state
donated), on a 2x4 and an 8x1 data x model mesh, under a budget of 40 % of the replicated
plan's peak. For each: the textbook plans' best completions (``search.baselines``), the
search's plan, its partition's measured bytes per device and whether ``check_partition``
passes. Prints a Markdown table (written to ``-o FILE`` as well).

    python benches/bench_auto_real.py [--time-limit 6] [-o benches/auto_real.md] [models...]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
import warnings

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import shardwise as sw
from shardwise.files import write_atomic
from shardwise.search.auto import prepare
from shardwise.search.baselines import complete_plan
from shardwise.search.graph import evaluate
from shardwise.testing.real_models import model_names, plain_model
from shardwise.testing.textbook import hand_plans

SHARE = 0.4
MESHES = ("data=2,model=4", "data=8,model=1")


def _us(ps: float) -> str:
    return f"{ps / 1e6:,.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "models",
        nargs="*",
        default=model_names(),
    )
    ap.add_argument("--time-limit", type=float, default=6.0)
    ap.add_argument("-o", "--output")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # chlo.top_k has no rule (UnknownOpWarning)
    head = "| model | mesh | nodes | budget (B) | best textbook plan (us) | auto_shard (us) | method | peak (B) | predicted B | partition B | check |"
    lines = [head, "|---|---|---:|---:|---|---:|---|---:|---:|---:|---|"]
    print(head, flush=True)
    for name in args.models:
        model = plain_model(name)
        module = sw.load_mlir(model.text)
        for mesh in MESHES:
            problem = prepare(module, mesh)
            budget = int(evaluate(problem.graph, [0] * problem.graph.num_nodes).peak_usage * SHARE)
            problem.graph = dataclasses.replace(problem.graph, usage_limit=budget)
            hand = {
                p: complete_plan(problem, spec, time_limit=1.5) for p, spec in hand_plans(model, problem.mesh).items()
            }
            fits = {p: s.cost for p, s in hand.items() if s.feasible}
            best = min(fits, key=fits.__getitem__) if fits else None
            t = time.perf_counter()
            try:
                out, rep = sw.auto_shard(
                    module,
                    mesh,
                    memory_budget=budget,
                    method="auto",
                    time_limit=args.time_limit,
                )
            except sw.InfeasibleBudget as e:
                row = f"| {name} | {mesh} | {problem.graph.num_nodes} | {budget:,} | {'-' if best is None else f'{best} {_us(fits[best])}'} | infeasible: {e} |"
                print(row, flush=True)
                lines.append(row)
                continue
            part = sw.partition(out)
            ok = sw.check_partition(out, part.global_module, part.ranks, seed=3).passed
            row = (
                f"| {name} | {mesh} | {problem.graph.num_nodes} | {budget:,} | {'-' if best is None else f'{best} {_us(fits[best])}'} | "
                f"{_us(rep.objective_ps)} | {rep.method} ({time.perf_counter() - t:.1f} s) | {rep.peak_memory:,} | {rep.comm_bytes:,.0f} | "
                f"{part.bytes_per_device:,.0f} | {'pass' if ok else 'FAIL'} |"
            )
            print(row, flush=True)
            lines.append(row)
    if args.output:
        title = (
            "# auto_shard against the textbook plans on real training steps\n\n"
            f"`python benches/bench_auto_real.py --time-limit {args.time_limit:g}` (2 cores): budget "
            f"{SHARE:.0%} of the replicated plan's peak; the textbook plans' best completions "
            "(1.5 s each) against auto_shard's plan (objective in modelled microseconds; the method "
            "column's seconds include building the graph); predicted bytes per device (the report) "
            "against the partition's; `check_partition` on 8 simulated ranks.\n\n"
        )
        write_atomic(args.output, title + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
