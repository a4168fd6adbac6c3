"""The oracle for the interpreter tests: compile an MLIR module text with XLA on the CPU devices
(Shardy partitioner, ``mhlo.num_partitions`` partitions) and run it on global numpy arrays,
placing each argument as the executable expects and assembling each result from its shards."""

from __future__ import annotations

import re
from typing import Any

import numpy as np


def xla_run(module_text: str, args: list[np.ndarray], out_shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Results of ``module_text``'s main function on ``args``; ``out_shapes`` are the global
    result shapes."""
    import jax
    from jax._src import xla_bridge
    from jax._src.lib import xla_client as xc
    from jax._src.sharding_impls import GSPMDSharding

    # XLA's Shardy import rejects sdy.reshard (it only appears after propagation); on values it
    # is the same identity as sdy.sharding_constraint, which XLA accepts.
    module_text = re.sub(r"sdy\.reshard (%[\w#]+) <", r"sdy.sharding_constraint \1 <", module_text)
    m = re.search(r"mhlo\.num_partitions = (\d+)", module_text)
    n = int(m.group(1)) if m else 1
    backend = xla_bridge.get_backend("cpu")
    devices = jax.devices("cpu")[:n]
    opts = xc.CompileOptions()
    bo = opts.executable_build_options
    bo.num_partitions = n
    bo.num_replicas = 1
    bo.use_spmd_partitioning = n > 1
    bo.use_shardy_partitioner = True
    bo.device_assignment = xc.DeviceAssignment.create(np.arange(n).reshape(1, n))
    exe = backend.compile_and_load(module_text, xc.DeviceList(tuple(devices)), opts)
    placed = []
    in_shardings = exe.get_parameter_shardings() if n > 1 else None
    for i, a in enumerate(args):
        if in_shardings is None:
            placed.append(jax.device_put(a, devices[0]))
        else:
            placed.append(jax.device_put(a, GSPMDSharding(tuple(devices), in_shardings[i])))
    out_shardings = exe.get_output_shardings() if n > 1 else None
    outs = exe.execute_sharded(placed).disassemble_into_single_device_arrays()
    results: list[np.ndarray] = []
    for i, per_device in enumerate(outs):
        if out_shardings is None:
            results.append(np.asarray(per_device[0]))
            continue
        arr = jax.make_array_from_single_device_arrays(
            tuple(out_shapes[i]), GSPMDSharding(tuple(devices), out_shardings[i]), per_device
        )
        results.append(np.asarray(arr))
    return results


def xla_run_f64(module_text: str, args: list[np.ndarray], out_shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """``xla_run`` of the same program with every f32/bf16/f16 tensor widened to f64: XLA's
    answer in double precision, the reference both float32 runs are measured against."""
    import jax

    wide = re.sub(r"dense<(0x[0-9A-Fa-f]+)>(\s*:\s*tensor<[^>]*?(f32|bf16|f16)>)", _widen_hex, module_text)
    wide = re.sub(r"(?<=[x<])(?:f32|bf16|f16)>", "f64>", wide)
    with jax.enable_x64(True):
        return xla_run(
            wide,
            [a.astype(np.float64) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else a for a in args],
            out_shapes,
        )


def _widen_hex(m: re.Match[str]) -> str:
    """A float constant written as its bit pattern, rewritten as the same value in f64 bits."""
    import ml_dtypes

    store = {"f32": (np.uint32, np.float32), "bf16": (np.uint16, ml_dtypes.bfloat16), "f16": (np.uint16, np.float16)}[
        m.group(3)
    ]
    value = np.array([int(m.group(1), 16)], dtype=store[0]).view(store[1]).astype(np.float64)
    return f"dense<0x{int(value.view(np.uint64)[0]):016X}>{m.group(2)}"


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| over finite elements (0 for empty arrays); infinities and
    NaNs must sit at the same places (else inf)."""
    g = np.asarray(got).astype(np.float64) if np.asarray(got).dtype.kind != "c" else np.asarray(got)
    w = np.asarray(want).astype(np.float64) if np.asarray(want).dtype.kind != "c" else np.asarray(want)
    if g.shape != w.shape:
        return float("inf")
    if g.size == 0:
        return 0.0
    finite = np.isfinite(w)
    if not np.array_equal(np.isnan(g), np.isnan(w)) or not np.array_equal(g[np.isinf(w)], w[np.isinf(w)]):
        return float("inf")
    if not finite.any():
        return 0.0
    scale = max(float(np.max(np.abs(w[finite]))), 1e-30)
    return float(np.max(np.abs(g[finite] - w[finite]))) / scale


def assert_matches(got: list[Any], want: list[np.ndarray], *, rtol: float = 1e-5, what: str = "") -> None:
    """Integers and booleans exactly equal; floats within ``rtol`` (``rel_error``)."""
    assert len(got) == len(want), f"{what}: {len(got)} results, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what} result {i}: shape {g.shape} != {w.shape}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{what} result {i}")
        else:
            err = rel_error(g, w)
            assert err <= rtol, f"{what} result {i}: relative error {err:.3e} > {rtol:.0e}"
