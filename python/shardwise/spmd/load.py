"""Reading a partition directory written by ``shardwise.partition`` (the hidet RFC's
``load_partition``): ``partitioned.mlir``, ``rank{r}.mlir``, ``meta.json``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from shardwise.errors import ShardwiseError
from shardwise.ir.core import Module
from shardwise.ir.rewrite import Uses, erase_op

__all__ = ["load_partition", "load_meta", "load_global", "unpartitioned", "check_outdir"]

_SDY_COLLECTIVES = ("sdy.all_gather", "sdy.all_slice", "sdy.all_to_all", "sdy.collective_permute", "sdy.all_reduce", "sdy.reduce_scatter")


#: The most ranks a partition directory may name (a tampered ``num_ranks`` is refused, not
#: simulated).
MAX_RANKS = 1 << 16


def _file(outdir: str | os.PathLike[str], name: str) -> Path:
    path = Path(outdir) / name
    if not path.is_file() and (path.exists() or path.is_symlink()):
        what = "a directory" if path.is_dir() else "a dangling symbolic link" if not path.exists() else "not a regular file"
        raise ShardwiseError(f"{outdir} is not a partition directory: {name} is {what}")
    if not path.is_file():
        raise ShardwiseError(f"{outdir} is not a partition directory: {name} is missing (write one with 'shardwise partition IN.mlir -o OUTDIR')")
    if path.is_symlink() and Path(outdir).resolve() not in path.resolve().parents:
        raise ShardwiseError(f"{path} is a symbolic link out of the partition directory (to {path.resolve()}); refusing to read it")
    return path


def check_rank_files(outdir: str | os.PathLike[str], n: int) -> None:
    """``ShardwiseError`` (one line) unless ``rank0.mlir .. rank{n-1}.mlir`` are regular files
    inside ``outdir``: checked before ranks start, so a bad file is one error, not a rank's
    traceback."""
    for r in range(n):
        _file(outdir, f"rank{r}.mlir")


def entry(meta: dict[str, Any], module: Module) -> str:
    """The function named by ``meta['func']`` (``main`` when absent), checked against
    ``module``; ``ShardwiseError`` otherwise."""
    func = meta.get("func", "main")
    names = [f.sym_name for f in module.funcs]
    if not isinstance(func, str) or func not in names:
        raise ShardwiseError(f"meta.json names the function {func!r}, but the partitioned program has {', '.join('@' + n for n in names)}")
    return func


def load_meta(outdir: str | os.PathLike[str]) -> dict[str, Any]:
    """``meta.json`` of ``outdir`` as a dictionary (format in ``spmd.partition.meta``).
    ``ShardwiseError`` if it is missing or not a format-1 partition description."""
    path = _file(outdir, "meta.json")
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ShardwiseError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ShardwiseError(f"{path}: not valid JSON ({e})") from None
    except RecursionError:
        raise ShardwiseError(f"{path}: JSON nested too deeply") from None
    if not isinstance(meta, dict) or meta.get("format") != 1:
        raise ShardwiseError(f"{path}: expected a format-1 partition description, got {str(meta)[:80]!r}")
    n = meta.get("num_ranks")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_RANKS:
        raise ShardwiseError(f"{path}: num_ranks must be an integer from 1 to {MAX_RANKS}, got {n!r}")
    if not isinstance(meta.get("func", "main"), str):
        raise ShardwiseError(f"{path}: func must be a function name, got {meta.get('func')!r}")
    return meta


def load_partition(outdir: str | os.PathLike[str], rank: int) -> tuple[Module, dict[str, Any]]:
    """Rank ``rank``'s StableHLO program (``rank{rank}.mlir``) and the partition's meta.
    ``ShardwiseError`` for a rank outside ``0..num_ranks-1`` or a missing file."""
    from shardwise.importers.mlir import load_mlir

    meta = load_meta(outdir)
    n = meta["num_ranks"]
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < n:
        raise ShardwiseError(f"rank must be an int in [0, {n}) for {outdir}, got {rank!r}")
    return load_mlir(_file(outdir, f"rank{rank}.mlir")), meta


def load_global(outdir: str | os.PathLike[str]) -> Module:
    """The global program with explicit sdy collectives (``partitioned.mlir``)."""
    from shardwise.importers.mlir import load_mlir

    return load_mlir(_file(outdir, "partitioned.mlir"))


def unpartitioned(global_module: Module) -> Module:
    """A copy of the global program with every sdy collective removed: on the global view a
    collective leaves the tensor's value unchanged (it only moves or reduces the pieces each
    device holds), so this is the program before partitioning."""
    m = global_module.copy()
    uses = Uses(m.op)
    for op in list(m.walk()):
        if op.name in _SDY_COLLECTIVES and op.parent is not None:
            uses.replace_all_uses(op.results[0], op.operands[0])
            erase_op(op, uses)
    return m


def simulate_outdir(outdir: str | os.PathLike[str], *, seed: int = 0) -> Any:
    """Every rank of a partition directory in the in-process simulator on the blocks of random
    global inputs (``random_inputs(seed)``), without a comparison; returns the
    ``SimulationResult`` (outputs, collective records, peak live bytes per rank)."""
    import numpy as np

    from shardwise.execute.inputs import random_inputs
    from shardwise.execute.simulator import simulate
    from shardwise.spmd.partition.check import shard_inputs

    meta = load_meta(outdir)
    g = load_global(outdir)
    func = entry(meta, g)
    ranks = [load_partition(outdir, r)[0] for r in range(meta["num_ranks"])]
    inputs = [np.asarray(x) for x in random_inputs(g.func(func), seed)]
    return simulate(ranks, shard_inputs(g, inputs, len(ranks), func), func=func)


def check_outdir(outdir: str | os.PathLike[str], *, seed: int = 0) -> Any:
    """``check_partition`` on a partition directory: the rank programs in the simulator against
    ``unpartitioned(partitioned.mlir)``; returns a ``CheckResult``."""
    from shardwise.spmd.partition.check import check_partition

    meta = load_meta(outdir)
    g = load_global(outdir)
    ranks = [load_partition(outdir, r)[0] for r in range(meta["num_ranks"])]
    return check_partition(unpartitioned(g), g, ranks, seed=seed, func=entry(meta, g))
