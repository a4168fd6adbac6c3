"""The interpreter is written against the array API: dev corpus programs run under
``array_api_strict`` (the standard and nothing more) give the same numbers as under numpy.
Outside the standard, and so numpy/cupy only: bfloat16, bit reinterpretation (``.view``) and
the integer-array assignment that scatter / select_and_scatter use."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from corpus import conformance_dir, corpus_params

pytestmark = [pytest.mark.jax, pytest.mark.corpus]

_NEEDS_NUMPY = ("bf16", "stablehlo.scatter", "select_and_scatter", "bitcast_convert")


def _programs() -> list[Path]:
    root = conformance_dir()
    if root is None:
        return []
    return [p for p in sorted((root / "dev").glob("*.mlir")) if not any(k in p.read_text() for k in _NEEDS_NUMPY)]


@pytest.mark.parametrize("path", corpus_params(_programs()))
def test_strict_array_api_matches_numpy(path: Path) -> None:
    xs = pytest.importorskip("array_api_strict")
    from shardwise import load_mlir
    from shardwise.execute import random_inputs, run

    module = load_mlir(path.read_text())
    inputs = random_inputs(module.func("main"), seed=1)
    want = run(module, inputs)
    got = run(module, [xs.asarray(a) for a in inputs], xp=xs)
    assert all(type(g).__module__.startswith("array_api_strict") for g in got)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-6)


def test_bf16_outside_numpy_is_a_clear_error() -> None:
    xs = pytest.importorskip("array_api_strict")
    from shardwise import load_mlir
    from shardwise.errors import ProgramError
    from shardwise.execute import run

    m = load_mlir(
        "func.func @main(%arg0: tensor<2xf32>) -> tensor<2xbf16> {\n  %0 = stablehlo.convert %arg0 : (tensor<2xf32>) -> tensor<2xbf16>\n  return %0 : tensor<2xbf16>\n}"
    )
    with pytest.raises(ProgramError, match="bf16 is not an array-API dtype"):
        run(m, [xs.asarray(np.ones(2, np.float32))], xp=xs)


def test_strict_float_sort_uses_the_total_order_comparator() -> None:
    """No bit view under array_api_strict: TOTALORDER compares by value and sign bit, and the
    float sort runs through the comparator (bitonic network) with the same result as XLA."""
    xs = pytest.importorskip("array_api_strict")
    import jax
    import jax.numpy as jnp
    from shardwise import load_mlir
    from shardwise.execute import run

    x = np.random.default_rng(0).standard_normal((2, 300)).astype(np.float32)
    x[0, ::3] = np.nan
    x[1, ::4] = -0.0
    fn = jax.jit(lambda x: jnp.sort(x, axis=1))
    got = np.asarray(run(load_mlir(fn.lower(x).as_text()), [xs.asarray(x)], xp=xs)[0])
    want = np.asarray(fn(x))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
