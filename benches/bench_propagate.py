"""Propagation at scale, shardwise and Shardy side by side in one run (issue 5).

Programs: N-layer transformer training steps (``jax.value_and_grad`` of unrolled attention +
MLP layers) on a 2x4 mesh, generated now by ``python/shardwise/testing/programs.py``; layer counts from
``SHARDWISE_BENCH_LAYERS`` (default ``20,160,635``: about 2.7k, 22k and 87k ops).

For each program:

* ``shardwise``: ``shardwise.propagate`` (``sdy-propagation-pipeline``) on a module loaded
  beforehand (parsing excluded), and the time of each pass of the pipeline;
* ``shardy``: jaxlib's ``sdy-propagation-pipeline`` on a module parsed beforehand;
* ``load``: ``shardwise.load_mlir`` (the native reader), measured apart, and
  ``load_mlir(reader="jaxlib")`` (import through jaxlib's MLIR bindings) beside it;
* end to end, text to text: ``Module.to_mlir`` of the propagated module (shardwise's writer,
  then the native verifier and printer), ``to_mlir(printer="jaxlib")`` beside it (jaxlib's
  parser, which verifies, and printer), and Shardy's ``ir.Module.parse`` and printing of its
  propagated module, so that reading + propagating + writing compare side by side; the native
  output is checked equal to jaxlib's;
* the frozen program's bytes per op; the two results compared value by value (identical
  module text after a round trip through shardwise's loader).

The session writes ``benches/results/propagation.md`` (table), ``propagation.json`` and
``propagation.png`` (µs/op against ops, both systems).

    pip install -e '.[bench]' && pytest benches/bench_propagate.py -p no:cacheprovider
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import shardwise
from bench_report import RESULTS
from shardwise.importers.mlir import load_mlir
from shardwise.testing.programs import transformer_step

LAYERS = [int(x) for x in os.environ.get("SHARDWISE_BENCH_LAYERS", "20,160,635").split(",") if x.strip()]
PIPELINE = "builtin.module(sdy-propagation-pipeline)"
_TEXTS: dict[int, str] = {}


def _text(layers: int) -> str:
    if layers not in _TEXTS:
        _TEXTS[layers] = transformer_step(layers)
    return _TEXTS[layers]


def _rounds(layers: int) -> int:
    """Rounds per size; each figure is the minimum over them. At least three at every size: the
    minimum of more rounds is lower, so one round at the largest size against five at the
    smallest inflated the growth of µs/op (one round at 87k ops was used before)."""
    return 5 if layers <= 40 else 3


def _entry(layers: int) -> dict[str, Any]:
    return RESULTS.setdefault(layers, {"layers": layers})


def _shardy_module(text: str) -> tuple[Any, Any]:
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir, passmanager

    ctx = jax_mlir.make_ir_context()
    with ctx:
        module = ir.Module.parse(text)
        pm = passmanager.PassManager.parse(PIPELINE)
    return ctx, (module, pm)


@pytest.mark.parametrize("layers", LAYERS)
def test_load(benchmark: Any, layers: int) -> None:
    text = _text(layers)
    module = benchmark.pedantic(load_mlir, args=(text,), rounds=_rounds(layers), iterations=1)
    ops = sum(1 for _ in module.walk())
    e = _entry(layers)
    e["ops"] = ops
    e["load_s"] = benchmark.stats.stats.min


@pytest.mark.parametrize("layers", LAYERS)
def test_load_jaxlib(benchmark: Any, layers: int) -> None:
    text = _text(layers)
    benchmark.pedantic(load_mlir, args=(text,), kwargs={"reader": "jaxlib"}, rounds=_rounds(layers), iterations=1)
    _entry(layers)["load_jaxlib_s"] = benchmark.stats.stats.min


@pytest.mark.parametrize("layers", LAYERS)
def test_shardwise(benchmark: Any, layers: int) -> None:
    text = _text(layers)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (load_mlir(text),), {"in_place": True}

    benchmark.pedantic(shardwise.propagate, setup=setup, rounds=_rounds(layers), iterations=1)
    e = _entry(layers)
    e["shardwise_s"] = benchmark.stats.stats.min
    # Where the time goes (one more run, per pass) and the frozen program's size.
    from shardwise.passes import run_pipeline
    from shardwise.propagation.freeze import freeze

    m = load_mlir(text)
    e["ops"] = sum(1 for _ in m.walk())
    timings: dict[str, float] = {}
    run_pipeline(m, PIPELINE, timings=timings)
    e["passes"] = dict(sorted(timings.items(), key=lambda kv: -kv[1])[:8])
    frozen = freeze(load_mlir(text))
    e["frozen_bytes_per_op"] = frozen.graph.nbytes / frozen.graph.num_ops


@pytest.mark.parametrize("layers", LAYERS)
def test_shardy(benchmark: Any, layers: int) -> None:
    text = _text(layers)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        ctx, (module, pm) = _shardy_module(text)
        return (ctx, module, pm), {}

    def run(ctx: Any, module: Any, pm: Any) -> None:
        with ctx:
            pm.run(module.operation)

    benchmark.pedantic(run, setup=setup, rounds=_rounds(layers), iterations=1)
    _entry(layers)["shardy_s"] = benchmark.stats.stats.min


@pytest.mark.parametrize("layers", LAYERS)
def test_to_mlir(benchmark: Any, layers: int) -> None:
    module = shardwise.propagate(load_mlir(_text(layers)))
    text = benchmark.pedantic(module.to_mlir, rounds=_rounds(layers), iterations=1)
    _entry(layers)["write_s"] = benchmark.stats.stats.min
    assert text == module.to_mlir(printer="jaxlib")


@pytest.mark.parametrize("layers", LAYERS)
def test_to_mlir_jaxlib(benchmark: Any, layers: int) -> None:
    module = shardwise.propagate(load_mlir(_text(layers)))
    benchmark.pedantic(module.to_mlir, kwargs={"printer": "jaxlib"}, rounds=_rounds(layers), iterations=1)
    _entry(layers)["write_jaxlib_s"] = benchmark.stats.stats.min


@pytest.mark.parametrize("layers", LAYERS)
def test_shardy_parse(benchmark: Any, layers: int) -> None:
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir

    text = _text(layers)
    ctx = jax_mlir.make_ir_context()

    def parse() -> None:
        with ctx:
            ir.Module.parse(text)

    benchmark.pedantic(parse, rounds=_rounds(layers), iterations=1)
    _entry(layers)["shardy_parse_s"] = benchmark.stats.stats.min


@pytest.mark.parametrize("layers", LAYERS)
def test_shardy_print(benchmark: Any, layers: int) -> None:
    ctx, (module, pm) = _shardy_module(_text(layers))
    with ctx:
        pm.run(module.operation)

    def print_module() -> None:
        with ctx:
            str(module.operation)

    benchmark.pedantic(print_module, rounds=_rounds(layers), iterations=1)
    _entry(layers)["shardy_print_s"] = benchmark.stats.stats.min


@pytest.mark.parametrize("layers", LAYERS)
def test_identical_results(layers: int) -> None:
    """Not timed: both systems' outputs are the same module."""
    text = _text(layers)
    ctx, (module, pm) = _shardy_module(text)
    with ctx:
        pm.run(module.operation)
        expected = str(module.operation)
    start = time.perf_counter()
    ours = shardwise.propagate(load_mlir(text)).to_mlir()
    _entry(layers)["check_s"] = time.perf_counter() - start
    identical = ours == load_mlir(expected).to_mlir()
    _entry(layers)["identical"] = identical
    assert identical
