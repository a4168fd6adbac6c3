"""Reading a partition directory written by ``shardwise.partition`` (the hidet RFC's
``load_partition``): ``partitioned.mlir``, ``rank{r}.mlir``, ``meta.json`` and, when the
partition was given weights, ``weights/rank{r}.npz`` (layout in ``spmd.partition.meta``).

Runs of a directory (``simulate_outdir``, ``check_outdir``, ``shardwise.spmd.launch``) feed
the saved weights to their arguments and random values (``random_inputs(seed)``) to the others;
the unpartitioned program of a check gets the weights reassembled from the ranks' blocks
(``global_weights``), so no global copy is stored."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shardwise.errors import ShardwiseError
from shardwise.ir.core import Module
from shardwise.ir.rewrite import Uses, erase_op
from shardwise.ir.slots import SDY_COLLECTIVES
from shardwise.spmd.partition.check import check_partition, check_with_inputs, shard_inputs
from shardwise.spmd.partition.meta import MAX_RANKS, WEIGHTS_PATH

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "check_outdir",
    "global_weights",
    "load_global",
    "load_meta",
    "load_partition",
    "load_weights",
    "run_inputs",
    "unpartitioned",
]


def _file(outdir: str | os.PathLike[str], name: str) -> Path:
    path = Path(outdir) / name
    if not path.is_file() and (path.exists() or path.is_symlink()):
        what = (
            "a directory"
            if path.is_dir()
            else "a dangling symbolic link"
            if not path.exists()
            else "not a regular file"
        )
        raise ShardwiseError(f"{outdir} is not a partition directory: {name} is {what}")
    if not path.is_file():
        raise ShardwiseError(
            f"{outdir} is not a partition directory: {name} is missing (write one with 'shardwise partition IN.mlir -o OUTDIR')"
        )
    if path.is_symlink() and Path(outdir).resolve() not in path.resolve().parents:
        raise ShardwiseError(
            f"{path} is a symbolic link out of the partition directory (to {path.resolve()}); refusing to read it"
        )
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
        raise ShardwiseError(
            f"meta.json names the function {func!r}, but the partitioned program has {', '.join('@' + n for n in names)}"
        )
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


def load_partition(outdir: str | os.PathLike[str], rank: int) -> tuple[Module, dict[str, Any], dict[int, np.ndarray]]:
    """Rank ``rank``'s StableHLO program (``rank{rank}.mlir``), the partition's meta and its
    weights: argument index to rank ``rank``'s padded block (numpy, the argument's
    ``local_shape`` and dtype; ``load_weights``), an empty dict when the partition has none.
    ``ShardwiseError`` (one line) for a rank outside ``0..num_ranks-1``, a missing file or a
    bad weights file."""
    from shardwise.importers.mlir import load_mlir

    meta = load_meta(outdir)
    n = meta["num_ranks"]
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < n:
        raise ShardwiseError(f"rank must be an int in [0, {n}) for {outdir}, got {rank!r}")
    return load_mlir(_file(outdir, f"rank{rank}.mlir")), meta, load_weights(outdir, rank, meta)


def _rank_module(outdir: str | os.PathLike[str], rank: int) -> Module:
    """``rank{rank}.mlir`` alone (``load_partition`` without its weights)."""
    from shardwise.importers.mlir import load_mlir

    return load_mlir(_file(outdir, f"rank{rank}.mlir"))


def weight_args(meta: dict[str, Any], path: object = "meta.json") -> list[int]:
    """The argument indices ``meta["weights"]["args"]`` lists (``[]`` without weights);
    ``ShardwiseError`` when the entry is malformed."""
    w = meta.get("weights")
    if w is None:
        return []
    args = w.get("args") if isinstance(w, dict) else None
    arguments = meta.get("arguments")
    nargs = len(arguments) if isinstance(arguments, list) else 0
    if (
        not isinstance(args, list)
        or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < nargs for i in args)
        or len(set(args)) != len(args)
        or w.get("path") != WEIGHTS_PATH
    ):
        raise ShardwiseError(
            f"{path}: weights must be {{'args': [distinct argument indices below {nargs}], 'path': {WEIGHTS_PATH!r}}}, got {str(w)[:80]!r}"
        )
    return list(args)


def load_weights(
    outdir: str | os.PathLike[str], rank: int, meta: dict[str, Any] | None = None
) -> dict[int, np.ndarray]:
    """Rank ``rank``'s weight blocks from ``weights/rank{rank}.npz`` (read with
    ``allow_pickle=False``): argument index to an array of that argument's ``local_shape`` and
    dtype in ``meta.json``; ``{}`` when the partition has no weights. ``ShardwiseError`` (one
    line) for a missing or unreadable file, a missing key, or a shape or dtype that disagrees
    with ``meta.json``."""
    import numpy as np

    from shardwise.execute.dtypes import numpy_dtype

    if meta is None:
        meta = load_meta(outdir)
    args = weight_args(meta, Path(outdir) / "meta.json")
    if not args:
        return {}
    name = WEIGHTS_PATH.format(rank=rank)
    path = _file(outdir, name)
    out: dict[int, np.ndarray] = {}
    try:
        with np.load(path, allow_pickle=False) as npz:
            for i in args:
                if f"arg{i}" not in npz.files:
                    raise ShardwiseError(
                        f"{path}: no array arg{i} (meta.json lists argument {i} as a weight); it has {', '.join(npz.files[:8]) or 'none'}"
                    )
                out[i] = npz[f"arg{i}"]
    except ShardwiseError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise ShardwiseError(f"{path}: not a readable .npz of weights ({' '.join(str(e).split())[:200]})") from None
    for i, a in out.items():
        info = meta["arguments"][i] if isinstance(meta["arguments"][i], dict) else {}
        shape, dtype = info.get("local_shape"), info.get("dtype")
        try:
            want = numpy_dtype(dtype) if isinstance(dtype, str) else None
        except ShardwiseError:
            want = None
        if want is not None and a.dtype != want and a.dtype.kind == "V" and a.dtype.itemsize == want.itemsize:
            a = out[i] = a.view(want)  # bf16 and float8 are saved as raw bytes ('|V2')
        if want is None or list(a.shape) != shape or a.dtype != want:
            raise ShardwiseError(
                f"{path}: arg{i} has shape {list(a.shape)} {a.dtype.name}; meta.json says local shape {shape} {dtype}"
            )
    return out


def global_weights(
    outdir: str | os.PathLike[str], global_module: Module | None = None, meta: dict[str, Any] | None = None
) -> dict[int, np.ndarray]:
    """The global value of every weight, reassembled from all ranks' blocks
    (``weights/rank{r}.npz``) by the argument shardings of the global program: rank ``r``'s
    unpadded block goes to ``TensorSharding.device_slices`` (the inverse of
    ``check.shard_inputs``). ``{}`` without weights; ``ShardwiseError`` as ``load_weights``."""
    meta = load_meta(outdir) if meta is None else meta
    if not weight_args(meta, Path(outdir) / "meta.json"):
        return {}
    g = load_global(outdir) if global_module is None else global_module
    return _assemble(g, entry(meta, g), [load_weights(outdir, r, meta) for r in range(meta["num_ranks"])])


def _assemble(g: Module, func: str, shards: list[dict[int, np.ndarray]]) -> dict[int, np.ndarray]:
    import numpy as np

    f = g.func(func)
    out: dict[int, np.ndarray] = {}
    for i in shards[0]:
        arg = f.args[i]
        shape = tuple(arg.type.shape)
        s = arg.sharding
        if s is None or not shape:
            out[i] = shards[0][i]
            continue
        full = np.empty(shape, dtype=shards[0][i].dtype)
        for r, row in enumerate(shards):
            sl = s.device_slices(shape, r, meshes=g.meshes)
            full[sl] = row[i][tuple(slice(0, n) for n in full[sl].shape)]
        out[i] = full
    return out


def run_inputs(
    outdir: str | os.PathLike[str],
    global_module: Module,
    meta: dict[str, Any],
    seed: int,
    ranks: list[int] | None = None,
    *,
    global_values: bool = True,
    loaded: dict[int, dict[int, np.ndarray]] | None = None,
) -> tuple[list[Any], list[list[Any]]]:
    """The global inputs of a run of ``outdir`` and the padded local inputs of each rank of
    ``ranks`` (all when ``None``): random values (``random_inputs(seed)`` of the global
    ``func``, the same with or without weights) for every argument, replaced by the saved
    weights where the partition has them (globally reassembled as ``global_weights`` does, each
    rank its own blocks from its ``.npz``). ``global_values=False`` skips reading the other
    ranks' weights: the weights' entries of the global inputs are then 0-d placeholders.
    ``loaded``: rank to its weights already read (``load_partition``'s third value), not read
    again."""
    import numpy as np

    from shardwise.execute.inputs import random_inputs

    func = entry(meta, global_module)
    n = meta["num_ranks"]
    which = list(range(n)) if ranks is None else ranks
    wanted = range(n) if global_values else which
    have = loaded or {}
    shards = (
        {r: have[r] if r in have else load_weights(outdir, r, meta) for r in wanted}
        if weight_args(meta, Path(outdir) / "meta.json")
        else {}
    )
    inputs = [np.asarray(x) for x in random_inputs(global_module.func(func), seed)]
    if shards and global_values:
        for i, a in _assemble(global_module, func, [shards[r] for r in range(n)]).items():
            inputs[i] = a
    elif shards:
        for i in shards[which[0]]:
            inputs[i] = np.zeros(())  # shard_inputs passes a 0-d value through; replaced below
    local = shard_inputs(global_module, inputs, n, func, ranks=which)
    for row, r in zip(local, which):
        for i, a in shards.get(r, {}).items():
            row[i] = a
    return inputs, local


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
        if op.name in SDY_COLLECTIVES and op.parent is not None:
            uses.replace_all_uses(op.results[0], op.operands[0])
            erase_op(op, uses)
    return m


def simulate_outdir(outdir: str | os.PathLike[str], *, seed: int = 0, device: str = "cpu") -> Any:
    """Every rank of a partition directory in the in-process simulator on the blocks of random
    global inputs (``random_inputs(seed)``) and the saved weights (``run_inputs``), without a
    comparison; returns the ``SimulationResult`` (outputs, collective records, peak live bytes
    per rank). ``device``: ``"cpu"`` (numpy) or ``"cuda"`` (CuPy, every rank on the current
    GPU; the outputs stay CuPy arrays). Raises ``ShardwiseError`` for an unknown device or
    ``"cuda"`` without CuPy or a GPU."""
    from shardwise.execute.devices import array_namespace, to_device
    from shardwise.execute.simulator import simulate

    xp = array_namespace(device)
    meta = load_meta(outdir)
    g = load_global(outdir)
    func = entry(meta, g)
    ranks = [_rank_module(outdir, r) for r in range(meta["num_ranks"])]
    _, local = run_inputs(outdir, g, meta, seed)
    return simulate(ranks, [to_device(xp, blocks) for blocks in local], xp=xp, func=func)


def check_outdir(outdir: str | os.PathLike[str], *, seed: int = 0, device: str = "cpu") -> Any:
    """``check_partition`` on a partition directory: the rank programs in the simulator (on
    ``device``, ``"cpu"`` or ``"cuda"``) against ``unpartitioned(partitioned.mlir)``, both fed
    the same values (``run_inputs``: the saved weights, random values for the other arguments);
    returns a ``CheckResult``."""
    meta = load_meta(outdir)
    g = load_global(outdir)
    func = entry(meta, g)
    ranks = [_rank_module(outdir, r) for r in range(meta["num_ranks"])]
    if not weight_args(meta, Path(outdir) / "meta.json"):
        return check_partition(unpartitioned(g), g, ranks, seed=seed, func=func, device=device)
    inputs, local = run_inputs(outdir, g, meta, seed)
    return check_with_inputs(unpartitioned(g), g, ranks, inputs, local, func=func, device=device)
