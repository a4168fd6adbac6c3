"""How long ``shardwise.partition`` takes, against the ops of the program, beside XLA's compile
of the same text (issue 28, item 6: the partitioner on top of the native IR, made faster where
profiling says so).

The programs are the generated transformer training steps of ``bench_propagate.py``
(``shardwise.testing.programs.transformer_step``: JAX's raw text, 2x4 mesh, calls and all).
Per size:

* shardwise: ``shardwise.partition(load_mlir(text))``: propagation (the calls inlined first, as
  XLA sees the program), the explicit reshards, the collectives and the 8 per-rank StableHLO
  programs; minimum over rounds;
* XLA: jax 0.10.2's ``compile_and_load`` of the same text on 8 CPU devices (Shardy, the SPMD
  partitioner, and the rest of XLA's pipeline with CPU code generation), once: a scale for
  what a user of ``jax.jit`` waits for, not the same work.

Not a timed test: the session writes ``benches/results/partition_speed.md``.

    pip install -e '.[bench]' && pytest benches/bench_partition_speed.py -p no:cacheprovider
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import shardwise
from bench_partition_bytes import compile_hlo
from bench_report import OUT, SMOKE
from shardwise.files import write_atomic
from shardwise.testing.programs import transformer_step

#: Transformer layers per program (2.1k, 8.5k and 17k ops).
LAYERS = (2,) if SMOKE else (20, 80, 160)
ROWS: dict[int, dict[str, Any]] = {}


@pytest.mark.parametrize("layers", LAYERS)
def test_partition_speed(benchmark: Any, layers: int) -> None:
    text = transformer_step(layers)
    ops = sum(1 for _ in shardwise.load_mlir(text).walk())

    def run() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return shardwise.partition(shardwise.load_mlir(text))

    part = benchmark.pedantic(run, rounds=1 if SMOKE else 3, iterations=1)
    assert len(part.ranks) == 8
    t0 = time.perf_counter()
    compile_hlo(text)
    ROWS[layers] = {"ops": ops, "shardwise": benchmark.stats.stats.min, "xla": time.perf_counter() - t0}


def teardown_module() -> None:
    if not ROWS:
        return
    lines = [
        "| layers | ops | shardwise partition s | µs/op | µs/op per rank | XLA compile s | XLA / shardwise |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for layers, r in sorted(ROWS.items()):
        us = r["shardwise"] / r["ops"] * 1e6
        lines.append(
            f"| {layers} | {r['ops']:,} | {r['shardwise']:.2f} | {us:.0f} | {us / 8:.0f} | {r['xla']:.2f} "
            f"| {r['xla'] / r['shardwise']:.1f}x |"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    write_atomic(OUT / "partition_speed.md", "\n".join(lines) + "\n")
    print("\n" + "\n".join(lines))
