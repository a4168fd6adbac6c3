"""``meta.json`` of a partitioned program and the atomic write of its output directory.

``meta.json`` (format 1)::

    {"format": 1, "num_ranks": N, "func": "main",
     "mesh": {"name": "mesh", "text": "<[\\"x\\"=2, \\"y\\"=4]>", "axes": [{"name": "x", "size": 2}, ...],
              "device_ids": [0, ..., N-1]},
     "groups": {"x": [[0, 4], [1, 5], ...], ...},          # communicator groups per mesh axis (device ids)
     "arguments": [{"global_shape": [...], "local_shape": [...], "dtype": "f32", "sharding": "#sdy.sharding<...>"}],
     "results": [...same...],
     "collectives": [{"kind": "sdy.all_gather", "source": "...", "shape": [...], "dtype": "f32",
                      "bytes_per_device": 96.0, "times": 1,     # runs per program run (loop trips)
                      "text": "sdy.all_gather [{\\"x\\"}, {}] out_sharding=<...>"}],
     "bytes_per_device": 96.0, "added_reshards": 0,             # sum of bytes_per_device * times
     "weights": {"args": [1, 2], "path": "weights/rank{rank}.npz"},    # only with weights
     "search": {"method": "ilp", "comm_bytes": 3072.0, "peak_memory": 41216, # only after a search
                "memory_budget": 44000, "feasible": true, "optimal": true, "solver_seconds": 0.1}}

Rank ``r`` runs on device id ``r``; local shapes are padded shard shapes (the same on every rank).

Weights (the hidet RFC, "Reference-level explanation": ``partition`` partitions the weight
matrices and saves each rank's part): with ``partition(..., weights={i: array})`` the directory
also holds ``weights/rank{r}.npz`` per rank (``np.savez``, key ``arg{i}`` per argument listed in
``meta["weights"]["args"]``): rank ``r``'s padded block of argument ``i`` under its sharding in
the global program (``check.shard_inputs``; padding NaN for floats, 0 otherwise), of the
argument's ``local_shape`` and ``dtype``. Written inside the temporary directory that is renamed
into place, so a directory never holds only some of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shardwise.errors import ProgramError
from shardwise.files import replace_dir
from shardwise.ir.core import Func
from shardwise.ir.types import TensorType
from shardwise.sharding import AxisRef, TensorSharding
from shardwise.spmd.partition.groups import groups

if TYPE_CHECKING:
    from shardwise.spmd.partition import Partition

__all__ = ["MAX_RANKS", "META_FORMAT", "WEIGHTS_PATH", "Weights", "build_meta", "check_weights", "write_outdir"]

#: What ``partition(weights=...)`` takes: argument index or name to an array.
Weights = Mapping[int, Any] | Mapping[str, Any] | Mapping[int | str, Any]

META_FORMAT = 1

#: Rank ``r``'s weight blocks, relative to the partition directory.
WEIGHTS_PATH = "weights/rank{rank}.npz"

#: The most ranks a partition directory may name: ``partition`` refuses a larger mesh, and
#: ``spmd.load`` a tampered ``num_ranks`` (refused, not simulated).
MAX_RANKS = 1 << 16


def arg_names(func: Func) -> dict[str, int]:
    """The names by which ``weights=`` may name ``func``'s arguments: ``arg{i}`` for every
    argument, and the ``jax.arg_info`` attribute JAX writes on arguments (``"params['w1']"``)
    where the program has one."""
    names = {f"arg{i}": i for i in range(len(func.args))}
    for i, attrs in enumerate(func.arg_attrs):
        info = attrs.get("jax.arg_info")
        if info is not None and len(info) >= 2 and info[0] == info[-1] == '"':
            names.setdefault(info[1:-1], i)
    return names


def check_weights(func: Func, weights: Weights | None) -> dict[int, np.ndarray]:
    """``weights`` (argument index or name, see ``arg_names``, to an array) as argument index
    to numpy array, checked against ``func``'s argument types: the array must have the
    argument's global shape and exactly its element type (``f32``: ``float32``; no casting).
    Raises ``ProgramError`` (one line, naming the argument) for an unknown argument, an
    argument named twice, a shape or dtype that differs, or a value that is not an array."""
    from shardwise.execute.dtypes import numpy_dtype

    if weights is None:
        return {}
    if not isinstance(weights, Mapping):
        raise ProgramError(f"weights must map argument indices or names to arrays, got {type(weights).__name__}")
    names = arg_names(func)
    n = len(func.args)
    out: dict[int, np.ndarray] = {}
    seen: dict[int, object] = {}
    for key, value in weights.items():
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            i = int(key)
            if not 0 <= i < n:
                raise ProgramError(f"weights for argument {i}: @{func.sym_name} has {n} arguments (0..{n - 1})")
        elif isinstance(key, str) and key in names:
            i = names[key]
        else:
            known = ", ".join(list(names)[:12]) + (", ..." if len(names) > 12 else "")
            raise ProgramError(
                f"weights for {key!r}: @{func.sym_name} has no such argument (known: indices 0..{n - 1}, {known})"
            )
        if i in seen:
            raise ProgramError(f"weights name argument {i} twice (as {seen[i]!r} and {key!r})")
        seen[i] = key
        t = func.args[i].type
        if not isinstance(t, TensorType) or any(d < 0 for d in t.shape):
            raise ProgramError(f"weights for argument {i} ({key!r}): its type {t} is not a static tensor")
        if not isinstance(value, np.ndarray) and not hasattr(value, "__array__"):
            raise ProgramError(
                f"weights for argument {i} ({key!r}): expected an array of shape {list(t.shape)} {t.element_type}, got {type(value).__name__}"
            )
        a = np.asarray(value)
        want = numpy_dtype(t.element_type)
        if tuple(a.shape) != tuple(t.shape) or a.dtype != want:
            raise ProgramError(
                f"weights for argument {i} ({key!r}): expected shape {list(t.shape)} {want.name} ({t.element_type}), got shape {list(a.shape)} {a.dtype.name}"
            )
        out[i] = a
    return dict(sorted(out.items()))


def _tensor_info(t: Any, local: Any, s: TensorSharding | None) -> dict[str, Any]:
    info: dict[str, Any] = {"global_shape": list(t.shape) if isinstance(t, TensorType) else None}
    info["local_shape"] = list(local.shape) if isinstance(local, TensorType) else None
    info["dtype"] = t.element_type if isinstance(t, TensorType) else str(t)
    info["sharding"] = None if s is None else str(s)
    return info


def build_meta(part: Partition, func: str = "main") -> dict[str, Any]:
    """The ``meta.json`` dictionary of ``part`` for function ``func`` (format in the module docstring)."""
    g = part.global_module.func(func)
    r0 = part.ranks[0].func(func)
    mesh = part.mesh
    return {
        "format": META_FORMAT,
        "num_ranks": mesh.size,
        "func": func,
        "mesh": {
            "name": part.mesh_name,
            "text": str(mesh),
            "axes": [{"name": a.name, "size": a.size} for a in mesh.axes],
            "device_ids": list(mesh.devices),
        },
        "groups": {a.name: groups(mesh, [AxisRef(a.name)]) for a in mesh.axes},
        "arguments": [_tensor_info(a.type, b.type, a.sharding) for a, b in zip(g.args, r0.args)],
        "results": [_tensor_info(t, lt, s) for t, lt, s in zip(g.result_types, r0.result_types, g.result_shardings)],
        "collectives": [
            {
                "kind": c.kind,
                "source": c.source,
                "shape": list(c.shape),
                "dtype": c.dtype,
                "bytes_per_device": c.bytes,
                "times": c.times,
                "text": c.text,
            }
            for c in part.collectives
        ],
        "bytes_per_device": part.bytes_per_device,
        "added_reshards": part.added_reshards,
        **({"weights": {"args": sorted(part.weights), "path": WEIGHTS_PATH}} if part.weights else {}),
    }


#: ``is_partition_dir`` reads a ``meta.json`` up to this size (a partition's is kilobytes).
_MAX_META_BYTES = 64 << 20


def is_partition_dir(path: Path) -> bool:
    """``path`` holds a previous partition: a ``meta.json`` of format 1 (what ``write_outdir``
    may replace without ``force``)."""
    f = path / "meta.json"
    try:
        # Only a regular file of sane size is read (not a FIFO, a device or a huge file).
        if not f.is_file() or f.stat().st_size > _MAX_META_BYTES:
            return False
        meta = json.loads(f.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(meta, dict) and meta.get("format") == 1


def write_outdir(part: Partition, outdir: str | os.PathLike[str], *, force: bool = False) -> None:
    """Writes ``partitioned.mlir``, ``rank{r}.mlir`` per rank, ``meta.json`` and, when ``part``
    has weights, ``weights/rank{r}.npz`` per rank (module docstring) into a temporary
    directory beside ``outdir``, then renames it to ``outdir`` (``files.replace_dir``): an
    existing ``outdir`` is replaced only once the new one is complete, and only when it is
    empty or a previous partition (``ShardwiseError`` naming it otherwise, unless ``force``).
    ``OSError`` from the file system."""

    def fill(tmp: Path) -> None:
        (tmp / "partitioned.mlir").write_text(part.global_module.to_mlir())
        for r, m in enumerate(part.ranks):
            (tmp / f"rank{r}.mlir").write_text(m.to_mlir())
        if part.weights:
            _write_weights(part, tmp)
        (tmp / "meta.json").write_text(json.dumps(part.meta, indent=1) + "\n")

    replace_dir(Path(outdir), fill, is_ours=is_partition_dir, force=force, what="partition")


def _write_weights(part: Partition, tmp: Path) -> None:
    """``weights/rank{r}.npz`` of every rank: its padded block of each weight (``shard_inputs``
    on the global program, one rank at a time so only one rank's blocks are in memory)."""
    from shardwise.spmd.partition.check import shard_inputs

    func = part.meta.get("func", "main")
    nargs = len(part.global_module.func(func).args)
    # Arguments without weights get a 0-d placeholder, which shard_inputs passes through.
    inputs = [part.weights.get(i, np.zeros(())) for i in range(nargs)]
    (tmp / "weights").mkdir()
    for r in range(part.mesh.size):
        row = shard_inputs(part.global_module, inputs, part.mesh.size, func, ranks=[r])[0]
        with open(tmp / WEIGHTS_PATH.format(rank=r), "wb") as f:
            np.savez(f, **{f"arg{i}": row[i] for i in part.weights})
