"""Compile an MLIR module text with XLA (Shardy partitioner) on 8 CPU devices and run it
(recipe of ../shared/design/JAX_RECIPES.md)."""

from __future__ import annotations

from typing import Any

import numpy as np


def run_sharded(module_text: str, args: list[np.ndarray], specs: list[Any], mesh: Any) -> list[np.ndarray]:
    """Runs ``module_text`` with ``args`` placed as ``NamedSharding(mesh, spec)``. The module's
    results must be replicated (closed ``[{}, ...]`` result shardings): each is read from
    device 0. Also checks that every device holds the same result."""
    import jax
    from jax._src import xla_bridge
    from jax._src.lib import xla_client as xc
    from jax.sharding import NamedSharding

    backend = xla_bridge.get_backend()
    opts = xc.CompileOptions()
    bo = opts.executable_build_options
    bo.num_partitions = 8
    bo.num_replicas = 1
    bo.use_spmd_partitioning = True
    bo.use_shardy_partitioner = True
    bo.device_assignment = xc.DeviceAssignment.create(np.arange(8).reshape(1, 8))
    devices = jax.devices()[:8]
    exe = backend.compile_and_load(module_text, xc.DeviceList(tuple(devices)), opts)
    placed = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, specs)]
    outs = exe.execute_sharded(placed).disassemble_into_single_device_arrays()
    results = []
    for per_device in outs:
        first = np.asarray(per_device[0])
        for other in per_device[1:]:
            np.testing.assert_array_equal(np.asarray(other), first)
        results.append(first)
    return results
