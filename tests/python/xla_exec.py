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
        arr = jax.make_array_from_single_device_arrays(tuple(out_shapes[i]), GSPMDSharding(tuple(devices), out_shardings[i]), per_device)
        results.append(np.asarray(arr))
    return results
