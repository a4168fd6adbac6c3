"""``meta.json`` of a partitioned program and the atomic write of its output directory.

``meta.json`` (format 1)::

    {"format": 1, "num_ranks": N, "func": "main",
     "mesh": {"name": "mesh", "text": "<[\\"x\\"=2, \\"y\\"=4]>", "axes": [{"name": "x", "size": 2}, ...],
              "device_ids": [0, ..., N-1]},
     "groups": {"x": [[0, 4], [1, 5], ...], ...},          # communicator groups per mesh axis (device ids)
     "arguments": [{"global_shape": [...], "local_shape": [...], "dtype": "f32", "sharding": "#sdy.sharding<...>"}],
     "results": [...same...],
     "collectives": [{"kind": "sdy.all_gather", "source": "...", "shape": [...], "dtype": "f32",
                      "bytes_per_device": 96.0, "text": "sdy.all_gather [{\\"x\\"}, {}] out_sharding=<...>"}],
     "bytes_per_device": 96.0, "added_reshards": 0}

Rank ``r`` runs on device id ``r``; local shapes are padded shard shapes (the same on every rank).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shardwise.files import replace_dir
from shardwise.ir.types import TensorType
from shardwise.sharding import AxisRef, TensorSharding
from shardwise.spmd.partition.groups import groups

if TYPE_CHECKING:
    from shardwise.spmd.partition import Partition

__all__ = ["META_FORMAT", "build_meta", "write_outdir"]

META_FORMAT = 1


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
            {"kind": c.kind, "source": c.source, "shape": list(c.shape), "dtype": c.dtype, "bytes_per_device": c.bytes, "text": c.text}
            for c in part.collectives
        ],
        "bytes_per_device": part.bytes_per_device,
        "added_reshards": part.added_reshards,
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
    """Writes ``partitioned.mlir``, ``rank{r}.mlir`` per rank and ``meta.json`` into a temporary
    directory beside ``outdir``, then renames it to ``outdir`` (``files.replace_dir``): an
    existing ``outdir`` is replaced only once the new one is complete, and only when it is
    empty or a previous partition (``ShardwiseError`` naming it otherwise, unless ``force``).
    ``OSError`` from the file system."""

    def fill(tmp: Path) -> None:
        (tmp / "partitioned.mlir").write_text(part.global_module.to_mlir())
        for r, m in enumerate(part.ranks):
            (tmp / f"rank{r}.mlir").write_text(m.to_mlir())
        (tmp / "meta.json").write_text(json.dumps(part.meta, indent=1) + "\n")

    replace_dir(Path(outdir), fill, is_ours=is_partition_dir, force=force, what="partition")
