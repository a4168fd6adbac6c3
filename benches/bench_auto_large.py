"""auto_shard on a large training step (issue 26, "a 20k-op training step searched in <= 60 s
on 2 cores"): the GPT step of ``python/shardwise/testing/real_models.py`` with ``--layers`` blocks (16:
about 20,000 ops once calls are inlined), flax + optax, lowered raw and un-annotated (calls
kept, state donated), on a 2x4 data x model mesh under 40 % of the replicated plan's peak.

Times (wall clock, seconds): lowering with jax, building the strategy graph alone
(``prepare``), then ``auto_shard`` end to end (its own graph build, the textbook baselines,
the search within ``--time-limit`` solver seconds, writing and propagating the plan) and
``partition`` of its output. Prints a Markdown table (written to ``-o FILE`` as well); with
``--check`` also runs ``check_partition`` on 8 simulated ranks (minutes at this size).

    python benches/bench_auto_large.py [--layers 16] [--time-limit 30] [--check] [-o FILE]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import shardwise as sw
from shardwise.files import write_atomic
from shardwise.search.auto import prepare
from shardwise.search.graph import evaluate
from shardwise.testing.real_models import deep_gpt

MESH = "data=2,model=4"
SHARE = 0.4


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("-o", "--output")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # chlo ops without a Shardy rule (UnknownOpWarning)

    t0 = time.perf_counter()
    model = deep_gpt(args.layers)
    lowered = time.perf_counter() - t0
    module = sw.load_mlir(model.text)
    t0 = time.perf_counter()
    problem = prepare(module, MESH)
    built = time.perf_counter() - t0
    budget = int(SHARE * evaluate(problem.graph, [0] * problem.graph.num_nodes).peak_usage)
    t0 = time.perf_counter()
    out, report = sw.auto_shard(module, MESH, memory_budget=budget, time_limit=args.time_limit)
    searched = time.perf_counter() - t0
    t0 = time.perf_counter()
    part = sw.partition(out)
    partitioned = time.perf_counter() - t0
    check = "not run"
    if args.check:
        res = sw.check_partition(out, part.global_module, part.ranks, seed=0)
        check = "pass" if res.passed else "FAIL"
    best = min(((k, v) for k, v in report.baselines.items() if v is not None), key=lambda kv: kv[1], default=None)
    rows = [
        "| layers | nodes | edges | budget (B) | lower (s) | graph (s) | auto_shard (s) | method | objective (us) | best default baseline (us) | predicted B | partition B | partition (s) | check |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---|",
        (
            f"| {args.layers} | {len(problem.nodes):,} | {len(problem.edges):,} | {budget:,} | {lowered:.1f} | {built:.1f} | {searched:.1f} | "
            f"{report.method}{'' if report.feasible else ' (over budget)'} | {report.objective_ps / 1e6:,.1f} | "
            f"{'none fits' if best is None else f'{best[0]} {best[1] / 1e6:,.1f}'} | {report.comm_bytes:,.0f} | {part.bytes_per_device:,.0f} | {partitioned:.1f} | {check} |"
        ),
    ]
    text = (
        f"`python benches/bench_auto_large.py --layers {args.layers} --time-limit {args.time_limit:g}` ({os.cpu_count()} cores), mesh {MESH}, "
        f"budget {SHARE:.0%} of the replicated plan's peak.\n\n" + "\n".join(rows) + "\n"
    )
    print(text, flush=True)
    if args.output:
        write_atomic(args.output, text)


if __name__ == "__main__":
    main()
