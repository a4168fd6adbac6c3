"""Every program of ../shared/conformance/dev (inputs to Shardy's propagation and its outputs)
run by the interpreter on random inputs and compared with XLA running the same text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from corpus import conformance_dir, corpus_params
from xla_exec import rel_error, xla_run, xla_run_f64

pytestmark = [pytest.mark.jax, pytest.mark.corpus]


def _dev_programs() -> list[Path]:
    root = conformance_dir()
    return sorted((root / "dev").glob("*.mlir")) if root else []


@pytest.mark.parametrize("path", corpus_params(_dev_programs()))
def test_dev_program_matches_xla(path: Path) -> None:
    from shardwise import load_mlir
    from shardwise.execute import random_inputs, run

    text = path.read_text()
    module = load_mlir(text)
    f = module.func("main")
    inputs = random_inputs(f, seed=0)
    ours = run(module, inputs)
    shapes = [t.shape for t in f.result_types]
    ref = xla_run(text, inputs, shapes)
    assert len(ours) == len(ref)
    wide = None
    for i, (got, want) in enumerate(zip(ours, ref)):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype, (
            f"result {i}: {got.dtype}{got.shape} vs XLA {want.dtype}{want.shape}"
        )
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want, err_msg=f"result {i}")
            continue
        err = rel_error(got, want)
        if err <= 1e-5:
            continue
        # Long float32/bf16 chains (gradients through tanh/softmax, bf16 blocks): XLA's own
        # rounding differs from ours by more than 1e-5. Then ours must be as close to the exact
        # (double precision) answer as XLA is: within 3x XLA's own error.
        wide = wide if wide is not None else xla_run_f64(text, inputs, shapes)
        exact = np.asarray(wide[i])
        xla_err, our_err = rel_error(want, exact), rel_error(got, exact)
        assert our_err <= max(1e-5, 3 * xla_err), (
            f"result {i}: error vs XLA {err:.2e}; vs exact: ours {our_err:.2e}, XLA {xla_err:.2e}"
        )
