"""The hidet workflow in one call (the hidet RFC's ``hidet.distributed.partition(g, config,
out_dir)``, "Guide-level explanation" and "Reference-level explanation"): find the sharding
strategy, partition the program and save each rank's program and weights; each rank is then
brought up with ``load_partition(out_dir, rank)`` (its program, ``meta.json`` and weights).

``partition`` here is ``shardwise.partition``. It sits above both ``shardwise.search`` (the
search, which itself uses ``shardwise.spmd``) and ``shardwise.spmd.partition`` (the SPMD
partitioner, which does not import the search), so neither imports the other's layer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from shardwise.errors import InfeasibleBudget, SearchError, ShardwiseError
from shardwise.files import check_replaceable
from shardwise.ir.core import Module
from shardwise.mesh import Mesh
from shardwise.search.auto import INTERRUPTED_SUFFIX, auto_shard
from shardwise.search.cost_model import DeviceModel
from shardwise.search.report import Report
from shardwise.spmd.partition import Partition, entry_func
from shardwise.spmd.partition import partition as spmd_partition
from shardwise.spmd.partition.meta import Weights, check_weights, is_partition_dir
from shardwise.spmd.redistribute import CostModel

__all__ = ["DEFAULT_TIME_LIMIT", "partition", "read_weights_file", "search_summary"]

#: Solver seconds of the search when ``time_limit`` is not given (``auto_shard``'s default).
DEFAULT_TIME_LIMIT = 10.0


def search_summary(report: Report) -> dict[str, Any]:
    """The search's totals kept in ``meta.json`` under ``"search"``: ``method``, ``mesh``,
    predicted ``comm_bytes`` (bytes each device sends, Σ over collectives), ``peak_memory`` and
    ``memory_budget`` (bytes per device; the budget ``None`` without a limit), ``feasible``,
    ``optimal`` (proven by the ILP) and ``solver_seconds``."""
    return {
        "method": report.method,
        "mesh": report.mesh,
        "comm_bytes": report.comm_bytes,
        "peak_memory": report.peak_memory,
        "memory_budget": report.memory_budget,
        "feasible": report.feasible,
        "optimal": report.optimal,
        "solver_seconds": report.solver_seconds,
    }


def partition(
    module: Module,
    outdir: str | os.PathLike[str] | None = None,
    *,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    propagate: bool | None = None,
    cost_model: CostModel | None = None,
    force: bool = False,
    weights: Weights | None = None,
    search: bool = False,
    method: str | None = None,
    memory_budget: int | str | None = None,
    time_limit: float | None = None,
    device: DeviceModel | None = None,
    allow_infeasible: bool = False,
) -> Partition:
    """Searches (optionally), partitions ``module`` (left unchanged) and writes ``outdir`` when
    given: the hidet RFC's ``partition(g, distributed_config, out_dir)``.

    Without ``search`` and ``method`` this is ``shardwise.spmd.partition.partition`` with the
    same arguments (``mesh``, ``propagate``, ``cost_model``, ``force``, ``weights``; see there).

    ``search=True`` or a ``method`` first runs ``shardwise.search.auto.auto_shard(module, mesh,
    memory_budget=, method=, time_limit=, device=)`` (``method`` default ``"ilp"``;
    ``memory_budget`` bytes per device, an int or ``"16GiB"``, default no limit; ``time_limit``
    solver seconds, default ``DEFAULT_TIME_LIMIT``; ``device`` default ``DeviceModel()``, or
    ``DeviceModel(cost_model=cost_model)`` when only ``cost_model`` is given, so the search and
    the partitioner price collectives alike) and partitions its sharded module; the
    returned ``Partition.search_report`` is the search's ``Report`` and ``meta.json`` gets its
    totals under ``"search"`` (``search_summary``). A plan over the budget raises
    ``InfeasibleBudget`` (a ``SearchError``; one line: the budget, the smallest peak found, the
    least any plan can peak at, the values at the peak) unless ``allow_infeasible=True``, which
    partitions it anyway (``meta.json`` then says ``"feasible": false``). A Ctrl-C that stops
    the search raises ``KeyboardInterrupt`` (nothing is written).

    ``weights``: argument (index, ``"arg{i}"`` or its ``jax.arg_info`` name) to a numpy array
    of the argument's global shape and dtype; ``outdir`` then holds each rank's blocks of them
    under the arguments' final shardings, ``weights/rank{r}.npz`` (key ``arg{i}``; padded local
    shape; layout in ``shardwise.spmd.partition.meta``), read back by ``load_partition``.

    The checks that need no work come first: ``outdir`` (``ShardwiseError`` when it may not be
    replaced), the weights (``ProgramError`` naming the argument, the expected and the given
    shape and dtype), search options without a search (``SearchError``). The directory is
    written through a temporary directory renamed into place, so an error leaves no partial
    directory. Raises what ``auto_shard`` and ``spmd.partition.partition`` raise."""
    if outdir is not None:  # a bad output directory fails before the search
        check_replaceable(outdir, is_partition_dir, force=force, what="partition")
    arrays = check_weights(module.func(entry_func(module)), weights)
    searching = search or method is not None
    if not searching:
        given = [
            n
            for n, v in (
                ("memory_budget", memory_budget),
                ("time_limit", time_limit),
                ("device", device),
            )
            if v is not None
        ]
        if given or allow_infeasible:
            names = ", ".join(given + (["allow_infeasible"] if allow_infeasible else []))
            raise SearchError(f"{names} only apply to a search: pass search=True or a method (--auto)")
        return spmd_partition(
            module,
            outdir,
            mesh=mesh,
            propagate=propagate,
            cost_model=cost_model,
            force=force,
            weights=arrays,
        )
    how = "ilp" if method is None else method
    limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    searched, report = auto_shard(
        module,
        mesh,
        memory_budget=memory_budget,
        method=how,
        time_limit=limit,
        device=device if device is not None or cost_model is None else DeviceModel(cost_model=cost_model),
        allow_infeasible=True,
    )
    if report.method.endswith(INTERRUPTED_SUFFIX):
        raise KeyboardInterrupt
    if not report.feasible and not allow_infeasible:
        raise InfeasibleBudget(
            f"{report.infeasibility} (raise the budget, or pass allow_infeasible=True / --allow-infeasible)",
            searched,
            report,
        )
    # The searched module carries the mesh (auto_shard resolved ``mesh``) and every sharding.
    part = spmd_partition(searched, None, propagate=propagate, cost_model=cost_model, weights=arrays)
    part.search_report = report
    part.meta["search"] = search_summary(report)
    if outdir is not None:
        part.write(outdir, force=force)
    return part


def read_weights_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The arrays of a ``.npz`` file (``np.savez``) by key, for ``partition(weights=...)``:
    keys ``arg0``, ``arg1``, ... or argument names (``jax.arg_info``). Read with
    ``allow_pickle=False``; ``ShardwiseError`` (one line) for a missing or unreadable file."""
    import zipfile

    import numpy as np

    what = f"--weights {os.fspath(path)}: not a readable .npz of arrays"
    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data as npz:
                return {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise ShardwiseError(f"{what} ({' '.join(str(e).split())[:200]})") from None
    # np.load of a .npy file: one bare array
    raise ShardwiseError(f"{what} (a single .npy array, expected an .npz archive: np.savez(path, arg0=..., arg1=...))")
