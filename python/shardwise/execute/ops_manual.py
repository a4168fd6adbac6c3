"""``sdy.manual_computation`` on the global view: the operands are split along the manual axes
(the in_shardings' leading manual axes of each dimension), the body runs once per mesh device
on the simulator's rank threads (``execute.threads``; its collectives see device ids as ranks,
each device an interpreter from ``Interpreter.for_rank``), and each result is assembled from
the devices' local results along the manual axes of the out_shardings (Shardonnay RFC, "Manual
computation")."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from shardwise.errors import ProgramError
from shardwise.execute._util import quiet_fp, zeros
from shardwise.execute.registry import register
from shardwise.execute.threads import run_ranks
from shardwise.ir.core import Op
from shardwise.mesh import Mesh
from shardwise.sharding import TensorSharding

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


def _manual_axes(op: Op) -> list[str]:
    return re.findall(r'"((?:[^"\\]|\\.)*)"', op.attributes.get("manual_axes", ""))


def _mesh(it: Interpreter, op: Op, shardings: list[TensorSharding]) -> Mesh:
    for s in shardings:
        if s.mesh is not None:
            return s.mesh
    raise ProgramError(
        f"{op.where()}: the shardings of sdy.manual_computation name no mesh the interpreter can resolve"
    )


def _slices(
    it: Interpreter,
    op: Op,
    s: TensorSharding,
    shape: tuple[int, ...],
    mesh: Mesh,
    coords: dict[str, int],
    manual: set[str],
) -> tuple[slice, ...]:
    out = []
    for d, dim in enumerate(s.dims):
        index, count = 0, 1
        for a in dim.axes:
            if a.name not in manual:
                break
            if a.is_sub_axis:
                raise ProgramError(f"{op.where()}: manual sub-axis {a} is not supported")
            size = mesh.axis_size(a.name)
            index = index * size + coords[a.name]
            count *= size
        if shape[d] % count:
            raise ProgramError(
                f"{op.where()}: dimension {d} of size {shape[d]} is not divisible by its {count} manual shards"
            )
        chunk = shape[d] // count
        out.append(slice(index * chunk, (index + 1) * chunk))
    return tuple(out)


@register("sdy.manual_computation")
def _manual_computation(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    if it.comm is not None:
        raise ProgramError(
            f"{op.where()}: sdy.manual_computation inside an SPMD-simulated program is not supported (partition it first)"
        )
    ins = list(op.operand_shardings or ())
    outs = [r.sharding for r in op.results]
    if len(ins) != len(args) or any(s is None for s in outs):
        raise ProgramError(
            f"{op.where()}: sdy.manual_computation needs in_shardings and out_shardings for every operand and result"
        )
    out_sh = [s for s in outs if s is not None]
    mesh = _mesh(it, op, ins + out_sh)
    manual = set(_manual_axes(op))
    names = [a.name for a in mesh.axes]
    sizes = [a.size for a in mesh.axes]
    devices = list(mesh.devices)
    xp = it.xp
    coords_of = []
    for pos in range(len(devices)):
        c, rest = {}, pos
        for name, size in reversed(list(zip(names, sizes))):
            c[name] = rest % size
            rest //= size
        coords_of.append(c)
    rank_pos = {d: p for p, d in enumerate(devices)}
    if sorted(devices) != list(range(len(devices))):
        raise ProgramError(f"{op.where()}: mesh device ids {devices} are not a permutation of 0..{len(devices) - 1}")
    region = op.regions[0]

    def body(rank: int, comm: Any) -> list[Any]:
        coords = coords_of[rank_pos[rank]]
        local = [x[_slices(it, op, s, tuple(x.shape), mesh, coords, manual)] for x, s in zip(args, ins)]
        inner = it.for_rank(comm, rank)
        with quiet_fp():  # numpy's error state is per thread
            return inner.run_block(region.entry, local, {})

    per_rank, _ = run_ranks(len(devices), body, xp)
    results = []
    for i, (r, s) in enumerate(zip(op.results, out_sh)):
        shape = r.type.shape
        dtype = it.dtype(r)
        full = zeros(xp, shape, dtype)
        for rank in range(len(devices)):
            full[_slices(it, op, s, shape, mesh, coords_of[rank_pos[rank]], manual)] = per_rank[rank][i]
        results.append(full)
    return results
