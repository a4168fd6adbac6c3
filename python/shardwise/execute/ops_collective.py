"""StableHLO collectives through the interpreter's ``Communicator``: all_reduce (body
recognised as add/mul/max/min/and/or), all_gather, reduce_scatter, all_to_all,
collective_permute, collective_broadcast.

``replica_groups`` are read as groups of ranks (flattened device ids, as with
``use_global_device_ids`` in SPMD programs: one replica of ``size`` partitions); an empty
``replica_groups`` is one group of all ranks. The group containing this rank is passed to the
communicator in the listed order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from shardwise.errors import ProgramError
from shardwise.execute.attrs import parse_dense, parse_int
from shardwise.execute.comm import Communicator
from shardwise.execute.regions import body_kind
from shardwise.execute.registry import register
from shardwise.ir.core import Op

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


def _comm(it: Interpreter, op: Op) -> Communicator:
    if it.comm is None:
        raise ProgramError(
            f"{op.where()}: a collective needs a communicator (run it in the SPMD simulator or pass comm=)"
        )
    return it.comm


def _dense_rows(text: str) -> list[list[int]]:
    if re_empty(text):
        return []
    arr = parse_dense(text)
    arr = arr.reshape(arr.shape[0] if arr.ndim else 1, -1) if arr.size else np.zeros((0, 0), dtype=np.int64)
    return [[int(v) for v in row if v >= 0] for row in arr.tolist()]


def re_empty(text: str) -> bool:
    return text.replace(" ", "").startswith("dense<>")


def group_of(it: Interpreter, op: Op) -> tuple[int, ...]:
    """The replica group containing this rank (all ranks when ``replica_groups`` is empty)."""
    comm = _comm(it, op)
    groups = _dense_rows(op.attributes["replica_groups"]) if "replica_groups" in op.attributes else []
    if not groups or groups == [[]]:
        return tuple(range(comm.size))
    for g in groups:
        if it.rank in g:
            return tuple(g)
    raise ProgramError(f"{op.where()}: rank {it.rank} is in no replica group of {groups}")


def _reduction(op: Op) -> str:
    kind = body_kind(op.regions[0])
    if kind is None:
        names = [o.name for o in op.regions[0].entry.ops]
        raise ProgramError(
            f"{op.where()}: reduction body {names} is not one add/mul/max/min/and/or of its two arguments"
        )
    return kind


@register("stablehlo.all_reduce")
def _all_reduce(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    group = group_of(it, op)
    kind = _reduction(op)
    return [_comm(it, op).all_reduce(x, group, kind) for x in args]


@register("stablehlo.all_gather")
def _all_gather(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    group = group_of(it, op)
    dim = parse_int(op.attributes["all_gather_dim"])
    return [_comm(it, op).all_gather(x, group, dim) for x in args]


@register("stablehlo.reduce_scatter")
def _reduce_scatter(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    group = group_of(it, op)
    dim = parse_int(op.attributes["scatter_dimension"])
    kind = _reduction(op)
    return [_comm(it, op).reduce_scatter(x, group, dim, kind) for x in args]


@register("stablehlo.all_to_all")
def _all_to_all(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    group = group_of(it, op)
    split = parse_int(op.attributes["split_dimension"])
    concat = parse_int(op.attributes["concat_dimension"])
    count = parse_int(op.attributes["split_count"])
    if count != len(group):
        raise ProgramError(
            f"{op.where()}: split_count {count} differs from the replica group size {len(group)} ({group})"
        )
    return [_comm(it, op).all_to_all(x, group, split, concat) for x in args]


@register("stablehlo.collective_permute")
def _collective_permute(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    pairs = [(row[0], row[1]) for row in _dense_rows(op.attributes["source_target_pairs"])]
    return [_comm(it, op).collective_permute(args[0], pairs)]


@register("stablehlo.collective_broadcast")
def _collective_broadcast(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """The first rank of the group broadcasts: an all_gather of the group, keeping its chunk."""
    group = group_of(it, op)
    x = args[0]
    gathered = _comm(it, op).all_gather(it.xp.reshape(x, (1, *x.shape)), group, 0)
    return [gathered[0]]
