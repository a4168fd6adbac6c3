"""The native passes (``rust/src/transforms/``) against the same passes in Shardy (jaxlib) and
in Python (``shardwise.passes``), side by side in one run, on the transformer training steps of
``bench_propagate.py`` (layer counts from ``SHARDWISE_BENCH_LAYERS``, default ``20,160``:
about 2.7k and 22k ops).

The pass list is the part of ``sdy-propagation-pipeline`` that runs natively so far, in the
pipeline's order: the import passes, ``sdy-user-priority-propagate{keep-sharding-rules=true}``,
the call-graph passes after it and the native export passes
(``shardwise.testing.native_passes.PIPELINE``). Each system runs it on a
program it read beforehand (reading excluded); the native figure is text to text minus a read,
verify and print of the same text (``run_native_passes(text, [])``), which is reported apart.
The three outputs are compared (native text equal to the Python passes' text).

Writes ``benches/native_passes.md``.

    pip install -e '.[bench]' && pytest benches/bench_native_passes.py -p no:cacheprovider
"""

from __future__ import annotations

import os
import pathlib
import time
import warnings
from typing import Any

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
from shardwise import _native
from shardwise.importers.mlir import load_mlir
from shardwise.passes.pipeline import run_pipeline
from shardwise.testing.native_passes import PIPELINE
from shardwise.testing.programs import transformer_step

LAYERS = [int(x) for x in os.environ.get("SHARDWISE_BENCH_LAYERS", "20,160").split(",") if x.strip()]
PASSES = PIPELINE
_ROWS: dict[int, dict[str, float]] = {}
#: Passes Shardy anchors on functions (nested as ``func.func(...)`` in its pipeline).
_FUNC_PASSES = {
    "sdy-constant-or-scalar-merger",
    "sdy-sink-data-flow-edges",
    "sdy-sharding-constraint-to-reshard",
    "sdy-insert-explicit-reshards",
    "sdy-drop-sharding-rules",
}


def _best(f: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


@pytest.mark.parametrize("layers", LAYERS)
def test_native_passes_beside_shardy_and_python(benchmark: Any, layers: int) -> None:
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir, passmanager

    text = transformer_step(layers)
    rounds = 5 if layers <= 40 else 3
    ops = sum(1 for _ in load_mlir(text).walk())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        native_text = benchmark.pedantic(_native.run_native_passes, args=(text, PASSES), rounds=rounds, iterations=1)
        native = benchmark.stats.stats.min
        io = _best(lambda: _native.run_native_passes(text, []), rounds)
        shardy_steps = [
            f"func.func({p})" if p.split("{")[0] in _FUNC_PASSES else p for p in PASSES if p != "sdy-save-module"
        ]
        pipeline = "builtin.module(" + ",".join(shardy_steps) + ")"
        ctx = jax_mlir.make_ir_context()
        shardy = []
        for _ in range(rounds):
            with ctx:
                module = ir.Module.parse(text)
                pm = passmanager.PassManager.parse(pipeline)
                t = time.perf_counter()
                pm.run(module.operation)
                shardy.append(time.perf_counter() - t)
        python = []
        for _ in range(2):
            m = load_mlir(text)
            t = time.perf_counter()
            run_pipeline(m, "builtin.module(" + ",".join(PASSES) + ")")
            python.append(time.perf_counter() - t)
    assert native_text == m.to_mlir()
    _ROWS[layers] = {
        "ops": ops,
        "native": (native - io) * 1e6 / ops,
        "io": io * 1e6 / ops,
        "shardy": min(shardy) * 1e6 / ops,
        "python": min(python) * 1e6 / ops,
    }


def teardown_module() -> None:
    if not _ROWS:
        return
    lines = [
        "# Native passes beside Shardy and Python",
        "",
        (
            "The part of `sdy-propagation-pipeline` that runs natively so far (import passes, "
            "user-priority propagation, the call-graph passes after it, the native export passes), "
            "on programs read beforehand; µs per op, minimum over rounds "
            "(`pytest benches/bench_native_passes.py`)."
        ),
        "",
        "| ops | Shardy (jaxlib) | Python passes | native passes | native read + verify + print | Shardy / native |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in _ROWS.values():
        lines.append(
            f"| {r['ops']:,.0f} | {r['shardy']:.2f} | {r['python']:.2f} | {r['native']:.2f} | {r['io']:.2f} | "
            f"{r['shardy'] / r['native']:.1f}x |"
        )
    out = pathlib.Path(__file__).with_name("native_passes.md")
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out)
