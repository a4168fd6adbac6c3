"""The SPMD partitioner (issue 6, "Partitioner"; the Shardonnay RFC's "SPMD Partitioner"; the
hidet RFC's ``partition`` / ``load_partition``): a propagated module becomes

* the global program with Shardy's explicit collectives (``partitioned.mlir``, ``global_step``),
* one StableHLO program per rank on local shapes (``rank{r}.mlir``, ``local_step``),
* ``meta.json`` (``meta``): mesh, device ids, communicator groups, global/local shapes and
  shardings of arguments and results, per-collective bytes per device;
* with ``weights=``, each rank's block of those arguments (``weights/rank{r}.npz``, the hidet
  RFC's partitioned weight matrices; layout in ``meta``).

The search before partitioning (the hidet RFC's first step) is ``shardwise.workflow.partition``
(``shardwise.partition``): this layer does not import ``shardwise.search``.

Rank ``r`` runs on device id ``r`` of the mesh.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shardwise.errors import MeshError, ProgramError
from shardwise.files import check_replaceable
from shardwise.ir.core import Module
from shardwise.ir.gc import no_cyclic_gc
from shardwise.mesh import Mesh
from shardwise.spmd.partition.chlo_rules import chlo_rules
from shardwise.spmd.partition.global_step import (
    Collective,
    drop_empty_meshes,
    drop_unused_meshes,
    lower_to_collectives,
    replicate_unsupported,
    single_mesh,
)
from shardwise.spmd.partition.groups import check_device_ids
from shardwise.spmd.partition.inline import inline_calls
from shardwise.spmd.partition.local_step import LocalTypes, localize
from shardwise.spmd.partition.meta import MAX_RANKS, Weights, build_meta, check_weights, is_partition_dir, write_outdir
from shardwise.spmd.redistribute import CostModel

__all__ = ["Collective", "Partition", "entry_func", "needs_propagation", "partition"]


@dataclass
class Partition:
    """A partitioned program. ``global_module``: the program with explicit sdy collectives;
    ``ranks[r]``: rank ``r``'s StableHLO program; ``collectives``: every collective of the global
    program with its bytes per device; ``meta``: the ``meta.json`` dictionary; ``added_reshards``:
    reshards the partitioner added around ops it cannot compute on sharded dimensions;
    ``weights``: argument index to its global array (``partition(weights=...)``), written as
    each rank's blocks; ``search_report``: the ``shardwise.search.Report`` of the search that
    chose the shardings (``shardwise.partition(search=True)``), else ``None``."""

    global_module: Module
    ranks: list[Module]
    mesh_name: str
    mesh: Mesh
    collectives: list[Collective]
    meta: dict[str, Any] = field(default_factory=dict)
    added_reshards: int = 0
    weights: dict[int, np.ndarray] = field(default_factory=dict)
    search_report: Any = None

    @property
    def bytes_per_device(self) -> float:
        """Total bytes each device sends over all collectives per run of the program (planner
        cost model; a collective inside a loop counts its trip count times)."""
        return float(sum(c.bytes * c.times for c in self.collectives))

    def write(self, outdir: str | os.PathLike[str], *, force: bool = False) -> None:
        """Writes ``partitioned.mlir``, ``rank{r}.mlir``, ``meta.json`` and, with weights,
        ``weights/rank{r}.npz`` to ``outdir`` through a temporary directory renamed into place
        (nothing half-written). An existing
        ``outdir`` is replaced only when it is empty or a previous partition; anything else
        raises ``ShardwiseError`` naming it, unless ``force`` (``write_outdir``)."""
        write_outdir(self, outdir, force=force)


def entry_func(module: Module) -> str:
    """The function the partition runs: ``@main``, else the module's only public function
    with a body; ``ProgramError`` naming the functions otherwise."""
    names = [f.sym_name for f in module.funcs]
    if "main" in names:
        return "main"
    public = [
        f.sym_name
        for f in module.funcs
        if f.regions[0].blocks and f.attributes.get("sym_visibility", '"public"') != '"private"'
    ]
    if len(public) == 1:
        return public[0]
    raise ProgramError(
        f"partitioning runs @main or the module's only public function; the module has {', '.join('@' + n for n in names) or 'no function'}"
    )


def needs_propagation(module: Module) -> bool:
    """Whether ``module`` still has undecided shardings: an open dimension, a sharding
    constraint or group, or an op result without a sharding beside sharded values."""
    sharded = False
    unsharded_result = False
    for op in module.walk():
        if op.name in ("sdy.sharding_constraint", "sdy.sharding_group"):
            return True
        for v in op.results:
            s = v.sharding
            if s is None:
                if (
                    op.name not in ("sdy.constant", "stablehlo.constant")
                    and v.type.rank > 0
                    and op.parent is not None
                    and _in_main_flow(op)
                ):
                    unsharded_result = True
                continue
            if any(d.is_open for d in s.dims):
                return True
            sharded = sharded or any(d.axes for d in s.dims)
    for f in module.funcs:
        for a in f.args:
            if a.sharding is not None and any(d.is_open for d in a.sharding.dims):
                return True
            sharded = sharded or (a.sharding is not None and any(d.axes for d in a.sharding.dims))
    return sharded and unsharded_result


def _in_main_flow(op: Any) -> bool:
    from shardwise.ir.rewrite import parent_op

    p = parent_op(op)
    while p is not None:
        if p.name in (
            "stablehlo.reduce",
            "stablehlo.reduce_window",
            "stablehlo.sort",
            "stablehlo.scatter",
            "stablehlo.select_and_scatter",
            "stablehlo.all_reduce",
            "stablehlo.reduce_scatter",
        ):
            return False
        if p.name == "func.func":
            return True
        p = parent_op(p)
    return True


@no_cyclic_gc()  # the global program and one copy per rank: millions of objects (ir/gc.py)
def partition(
    module: Module,
    outdir: str | os.PathLike[str] | None = None,
    *,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    propagate: bool | None = None,
    cost_model: CostModel | None = None,
    force: bool = False,
    weights: Weights | None = None,
) -> Partition:
    """Partitions ``module`` (left unchanged) for its mesh and returns a ``Partition``; writes
    ``outdir`` when given (see ``Partition.write``; ``force`` replaces a directory that is not
    a previous partition).

    ``mesh``: must equal the module's mesh when the module has one (``MeshError`` naming both
    otherwise); a module without a mesh gets it as ``@mesh`` (everything replicated).
    ``propagate``: run ``shardwise.propagate`` first (default: when ``needs_propagation``),
    on the program as XLA's propagation sees it: calls inlined, elementwise CHLO ops with the
    pointwise rule (``inline.py``, ``chlo_rules.py``). A module propagated beforehand keeps its
    shardings; its calls are inlined with reshards where call sites and callees disagree.
    ``cost_model``: the planner's cost model (default ``CostModel()``).
    ``weights``: argument (index, ``arg{i}``, or its ``jax.arg_info`` name) to a numpy array of
    its global shape and element type (``meta.check_weights``); the partition then carries them
    and ``outdir`` gets each rank's blocks under the argument's final sharding
    (``weights/rank{r}.npz``, read back by ``load_partition``).

    Raises ``ProgramError`` naming the op for what cannot be partitioned (several meshes,
    dynamic shapes, unreduced shardings, a collective whose blocks do not nest) and naming the
    argument for weights of the wrong shape or dtype or for an unknown argument (before any
    work), ``MeshError`` for a mesh mismatch or device ids that are not ``0..N-1``."""
    from shardwise.api import propagate as run_propagation
    from shardwise.passes import run_pipeline

    if outdir is not None:  # a bad output directory fails before the work
        check_replaceable(outdir, is_partition_dir, force=force, what="partition")
    work = module.copy()
    drop_unused_meshes(work)
    if mesh is not None:
        want = Mesh.from_spec(mesh)
        meshes = work.meshes
        if not meshes:
            work.add_mesh("mesh", want)
        else:
            name, have = single_mesh(work)
            if have.shape != want.shape or have.devices != want.devices:
                raise MeshError(f"--mesh {want} disagrees with the module's mesh @{name} = {have}")
    if not work.meshes:
        raise ProgramError("the module has no sdy.mesh; pass mesh= (e.g. --mesh x=2,y=4)")
    mesh_name, the_mesh = single_mesh(work)
    if the_mesh.size > MAX_RANKS:
        raise ProgramError(
            f"partitioning writes one program per device: mesh @{mesh_name} = {the_mesh} has {the_mesh.size} devices, at most {MAX_RANKS} are supported"
        )
    check_device_ids(the_mesh)
    arrays = check_weights(work.func(entry_func(work)), weights)  # before the work
    with chlo_rules():
        if propagate or (propagate is None and needs_propagation(work)):
            # What XLA does before its Shardy and SPMD partitioner run: calls inlined (so each
            # call site gets its own shardings) and CHLO legalized (``chlo_rules``).
            inline_calls(work, decided=False)
            work = run_propagation(work)
        drop_empty_meshes(work)
        inline_calls(work)
        added = 0
        for f in work.funcs:
            if f.regions[0].blocks:
                added += replicate_unsupported(work, f)
        run_pipeline(work, "builtin.module(func.func(sdy-insert-explicit-reshards{enable-full-version=true}))")
        collectives: list[Collective] = []
        # By name: each lowering runs a pass that gives the module new Python ops.
        for name in [f.sym_name for f in work.funcs if f.regions[0].blocks]:
            collectives += lower_to_collectives(work, work.func(name), cost_model)
    types: LocalTypes = {}  # local types, computed once for all ranks
    ranks = [localize(work, r, types) for r in range(the_mesh.size)]
    part = Partition(work, ranks, mesh_name, the_mesh, collectives, added_reshards=added, weights=arrays)
    part.meta = build_meta(part, entry_func(work))
    if outdir is not None:
        part.write(outdir, force=force)
    return part
