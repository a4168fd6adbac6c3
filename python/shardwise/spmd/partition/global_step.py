"""The global step of the SPMD partitioner: a propagated module becomes the same program with
Shardy's explicit collectives (``partitioned.mlir``).

1. Ops whose sharded dimensions the local rewrite cannot compute exactly
   (``coverage.replicated_dims``; reshapes of padded shards; non-splat sharded constants) get
   their operands resharded to replicated on those dimensions and their results resharded back
   (``sdy.reshard`` ops), the fallback of issue 6's "Partitioner".
2. ``sdy-insert-explicit-reshards{enable-full-version=true}`` (shardwise's own, identical to
   Shardy's ``insert_explicit_reshards.cc``): every op's operands and results agree with one
   factor sharding; sharded reduction factors get an ``sdy.all_reduce``.
3. Every ``sdy.reshard`` / ``sdy.sharding_constraint`` is lowered with ``plan_reshard`` into
   ``sdy.all_gather``, ``sdy.all_slice``, ``sdy.all_to_all``, ``sdy.collective_permute``,
   ``sdy.all_reduce`` and ``sdy.reduce_scatter`` (the ops of Shardy's
   ``reshard_to_collectives`` pass, ``shardy/dialect/sdy/transforms/export/``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from shardwise.errors import ProgramError
from shardwise.execute.attrs import parse_array
from shardwise.ir.core import Block, Func, Module, Op, Value
from shardwise.ir.loops import times as loop_times
from shardwise.ir.rewrite import Uses, erase_op, insert_after, insert_before
from shardwise.ir.sdy import get_sharding, with_parts
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef, DimSharding, TensorSharding
from shardwise.spmd.partition.coverage import contracted_dims, grouped_feature_dims, replicated_dims
from shardwise.spmd.partition.groups import axis_size, ceil_div
from shardwise.spmd.partition.halo import HALO_OPS, halos
from shardwise.spmd.redistribute import CostModel, dtype_bytes, plan_reshard

__all__ = ["Collective", "drop_unused_meshes", "lower_to_collectives", "merge_equal_reshards", "single_mesh"]

_LOWERED = ("sdy.reshard", "sdy.sharding_constraint")


@dataclass(frozen=True)
class Collective:
    """One collective of the partitioned program: its Shardy op name, where it comes from
    (``op`` of the reshard or reduction, with location), the global shape and element type, the
    bytes each device sends each time it runs (the planner's cost model,
    ``spmd.redistribute``) and ``times``, how often it runs per run of the program (inside a
    ``stablehlo.while``: the trip counts, ``ir.loops.times``)."""

    kind: str
    source: str
    shape: tuple[int, ...]
    dtype: str
    bytes: float
    text: str
    times: int = 1


def single_mesh(module: Module) -> tuple[str, Mesh]:
    """The module's one mesh with axes (name, mesh; meshes without axes, such as JAX's
    ``@empty_mesh``, mean replicated and are ignored); ``ProgramError`` when it has none or
    several (naming them, with a value sharded on each)."""
    meshes = {k: m for k, m in module.meshes.items() if m.axes}
    if len(meshes) != 1:
        if not meshes:
            raise ProgramError("partitioning needs an sdy.mesh with axes in the module, got none")
        users = _mesh_users(module)
        where = "; ".join(
            f"@{k} = {m}" + (f" (e.g. {users[k]})" if k in users else " (unused)") for k, m in meshes.items()
        )
        raise ProgramError(
            f"partitioning puts a program on one mesh, but this module has {len(meshes)} meshes with axes: {where}; "
            "reshard its values onto one mesh (the Shardonnay RFC's per-tensor meshes are not partitioned yet)"
        )
    ((name, mesh),) = meshes.items()
    return name, mesh


def _describe(v: Value) -> str:
    op = v.defining_op
    if op is not None:
        return f"result {v.index} of {op.where()}"
    region = v.owner.parent if isinstance(v.owner, Block) else None
    owner = region.parent if region is not None else None
    if isinstance(owner, Func):
        return f"argument {v.index} of @{owner.sym_name}"
    return f"block argument {v.index}" + (f" of {owner.where()}" if owner is not None else "")


def _mesh_users(module: Module) -> dict[str, str]:
    """For each mesh name some sharding of ``module`` refers to, a description of the first
    value sharded on it."""
    users: dict[str, str] = {}
    for f in module.funcs:
        for i, r in enumerate(f.result_shardings):
            if r is not None and r.mesh_name and r.mesh_name not in users:
                users[r.mesh_name] = f"result {i} of @{f.sym_name}"
    for v in module.values():
        s = v.sharding
        if s is not None and s.mesh_name and s.mesh_name not in users:
            users[s.mesh_name] = _describe(v)
    for op in module.walk():
        for s in op.operand_shardings or ():
            if s is not None and s.mesh_name and s.mesh_name not in users:
                users[s.mesh_name] = f"an operand of {op.where()}"
    return users


def drop_unused_meshes(module: Module) -> None:
    """Removes the ``sdy.mesh`` definitions with axes that no sharding refers to, when there
    are several (JAX programs can declare meshes they do not use)."""
    with_axes = [k for k, m in module.meshes.items() if m.axes]
    if len(with_axes) < 2:
        return
    users = _mesh_users(module)
    unused = {k for k in with_axes if k not in users}
    if not unused or len(unused) == len(with_axes):
        return
    for op in list(module.ops):
        if op.name == "sdy.mesh" and op.attributes["sym_name"].strip('"') in unused:
            erase_op(op)


def drop_empty_meshes(module: Module) -> None:
    """Rewrites every sharding on a mesh without axes (the empty mesh, or a maximal mesh: a
    value computed on one device, which every device computing it alike implements) as
    replicated on the module's mesh, with the rank of the value it shards."""
    name, mesh = single_mesh(module)
    empty = {k for k, m in module.meshes.items() if not m.axes}
    if not empty:
        return

    def fix(s: TensorSharding | None, t: object) -> TensorSharding | None:
        if s is None or s.mesh_name not in empty:
            return s
        rank = t.rank if isinstance(t, TensorType) else len(s.dims)
        return TensorSharding(mesh, [[] for _ in range(rank)], mesh_name=name)

    for v in module.values():
        v.sharding = fix(v.sharding, v.type)
    for op in module.walk():
        if op.operand_shardings is not None:
            op.operand_shardings = tuple(fix(s, v.type) or s for s, v in zip(op.operand_shardings, op.operands))
    for f in module.funcs:
        f.result_shardings = [fix(s, t) for s, t in zip(f.result_shardings, f.result_types)]


def _sharded_on(s: TensorSharding | None, dims: set[int]) -> bool:
    return s is not None and any(s.dims[d].axes for d in dims if d < len(s.dims))


def _relaxed(s: TensorSharding, dims: set[int]) -> TensorSharding:
    return with_parts(s, dims=[DimSharding((), closed=True) if i in dims else d for i, d in enumerate(s.dims)])


#: Ops whose tensor operands and result correspond dimension by dimension, every dimension
#: they do not need whole being computed block by block.
_SAME_DIMS = frozenset(
    {
        "stablehlo.slice",
        "stablehlo.pad",
        "stablehlo.concatenate",
        "stablehlo.sort",
        "stablehlo.reverse",
        "stablehlo.dynamic_slice",
        "stablehlo.reduce_window",
    }
)


@dataclass(frozen=True)
class _Move:
    """Dimension ``whole`` hands its axes to dimension ``to`` around the op."""

    whole: int
    to: int

    def sharding(self, s: TensorSharding) -> TensorSharding:
        moved = s.dims[self.whole].axes
        dims = list(s.dims)
        dims[self.whole] = DimSharding((), closed=True)
        dims[self.to] = DimSharding(tuple(s.dims[self.to].axes) + tuple(moved), closed=True)
        return with_parts(s, dims=dims)


def _axis_move(mesh: Mesh, op: Op, need: tuple[list[set[int]], list[set[int]]], uses: Uses) -> _Move | None:
    """Where an op of ``_SAME_DIMS`` needs one dimension whole that is sharded the same way on
    every operand and result, and another of its dimensions can take those axes on all of them
    (evenly), the axes move there (an all-to-all) and back after the op, instead of being
    gathered: 2(n-1)/n of a block instead of (n-1) blocks, so only for more than 2 shards
    (XLA's sort handler moves the sort dimension's sharding the same way)."""
    if op.name not in _SAME_DIMS:
        return None
    operand_dims, result_dims = need
    tensors = [(v, get_sharding(v, uses), dims) for v, dims in zip(op.operands, operand_dims) if dims]
    tensors += [(v, v.sharding, dims) for v, dims in zip(op.results, result_dims) if dims]
    if not tensors:
        return None
    whole = tensors[0][2]
    if len(whole) != 1 or any(dims != whole for _, _, dims in tensors):
        return None
    (d,) = whole
    first = tensors[0][1]
    if first is None or d >= len(first.dims) or not first.dims[d].axes:
        return None
    axes = tuple(first.dims[d].axes)
    n = 1
    for a in axes:
        n *= axis_size(mesh, a)
    if n <= 2:
        return None
    rank = len(first.dims)
    for e in range(rank):
        if e == d:
            continue
        ok = True
        for v, sh, _ in tensors:
            t = v.type
            if (
                sh is None
                or not isinstance(t, TensorType)
                or len(sh.dims) != rank
                or tuple(sh.dims[d].axes) != axes
                or t.shape[d] % n
            ):
                return None  # not the same axes everywhere, or padded blocks (no all-to-all)
            if tuple(sh.dims[e].axes) != tuple(first.dims[e].axes) or t.shape[e] % (_count(mesh, sh.dims[e].axes) * n):
                ok = False
        if ok:
            return _Move(d, e)
    return None


def _padded(mesh: Mesh, v: Value, s: TensorSharding | None) -> bool:
    """Some dimension of ``v`` is split by ``s`` into shards that do not divide it."""
    if s is None or not isinstance(v.type, TensorType):
        return False
    return any(_padded_dim(mesh, v, s, k) for k in range(min(v.type.rank, len(s.dims))))


def _padded_dim(mesh: Mesh, v: Value, s: TensorSharding | None, dim: int) -> bool:
    """Dimension ``dim`` of ``v`` is split by ``s`` into shards that do not divide it."""
    if not isinstance(v.type, TensorType):
        return False
    n = _shard_count(mesh, v, s, dim)
    return n > 1 and v.type.shape[dim] % n != 0


def _shard_count(mesh: Mesh, v: Value, s: TensorSharding | None, dim: int) -> int:
    """How many shards dimension ``dim`` of ``v`` is split into by ``s``."""
    if s is None or dim >= len(s.dims):
        return 1
    n = 1
    for a in s.dims[dim].axes:
        n *= axis_size(mesh, a)
    return n


def _needs(mesh: Mesh, op: Op, uses: Uses) -> tuple[list[set[int]], list[set[int]]] | None:
    """Per operand and result, the dimensions to replicate around ``op`` (``None``: none):
    ``coverage.replicated_dims`` refined by the shardings (reshapes and constants, reversed,
    grouped and contracted dims), less the windowed dims a halo exchange computes
    (``halo.halos``)."""
    need = _needs_by_kind(mesh, op, uses)
    if need is None or op.name not in HALO_OPS:
        return need
    it, rt = op.operands[0].type, op.results[0].type
    if not isinstance(it, TensorType) or not isinstance(rt, TensorType):
        return need
    kept = halos(mesh, op, it, get_sharding(op.operands[0], uses), rt, op.results[0].sharding)
    if not kept:
        return need
    operand_dims, result_dims = need
    operand_dims = [operand_dims[0] - set(kept), *operand_dims[1:]]
    result_dims = [result_dims[0] - {h.window.result_dim for h in kept.values()}, *result_dims[1:]]
    return operand_dims, result_dims


def _needs_by_kind(mesh: Mesh, op: Op, uses: Uses) -> tuple[list[set[int]], list[set[int]]] | None:
    if op.name == "stablehlo.reshape":
        if _padded(mesh, op.operands[0], get_sharding(op.operands[0], uses)) or _padded(
            mesh, op.results[0], op.results[0].sharding
        ):
            return [set(range(op.operands[0].type.rank))], [set(range(op.results[0].type.rank))]
        return None
    if op.name in ("sdy.constant", "stablehlo.constant"):
        text = op.attributes.get("value", "")
        splat = text.startswith("dense<") and not text.startswith("dense<[") and not text.startswith('dense<"0x')
        return None if splat else ([], [set(range(op.results[0].type.rank))])
    if op.name == "stablehlo.reverse":
        # Reversed dimensions may stay sharded when their shards are not padded: each rank
        # reverses its block and swaps it with its mirror (``local_step.mirror``).
        dims = set(parse_array(op.attributes["dimensions"]))
        padded = {k for k in dims if _padded_dim(mesh, op.operands[0], get_sharding(op.operands[0], uses), k)}
        return ([padded], [set(padded)]) if padded else None
    need = replicated_dims(op)
    if need is None:
        return None
    grouped = grouped_feature_dims(op)
    if grouped is not None:
        groups, lhs_g, rhs_o, out_f = grouped
        lhs, rhs = op.operands
        counts = {
            _shard_count(mesh, lhs, get_sharding(lhs, uses), lhs_g),
            _shard_count(mesh, rhs, get_sharding(rhs, uses), rhs_o),
            _shard_count(mesh, op.results[0], op.results[0].sharding, out_f),
        }
        if len(counts) != 1 or groups % max(counts) or _padded(mesh, lhs, get_sharding(lhs, uses)):
            # The groups cannot be split evenly over the shards: those dims stay whole too.
            operand_dims, result_dims = need
            need = [operand_dims[0] | {lhs_g}, operand_dims[1] | {rhs_o}], [result_dims[0] | {out_f}]
    contracted = contracted_dims(op)
    if contracted is not None:
        lhs, rhs = op.operands
        if not _padded(mesh, lhs, get_sharding(lhs, uses)) and not _padded(mesh, rhs, get_sharding(rhs, uses)):
            operand_dims, result_dims = need
            operand_dims = [operand_dims[0] - {contracted[0]}, operand_dims[1] - {contracted[1]}]
            return operand_dims, result_dims
    return need


def replicate_unsupported(module: Module, func: Func) -> int:
    """Step 1: reshards around every op of ``func`` (nested regions included) whose sharded
    dimensions the local rewrite cannot compute. Returns the number of ``sdy.reshard`` ops added."""
    _, mesh = single_mesh(module)
    uses = Uses(func)
    added = 0
    for op in list(func.walk_nested()):
        if op.parent is None:
            continue
        need = _needs(mesh, op, uses)
        if need is None:
            continue
        operand_dims, result_dims = need
        move = _axis_move(mesh, op, need, uses)
        for i, dims in enumerate(operand_dims):
            v = op.operands[i]
            s = get_sharding(v, uses)
            if not dims or not _sharded_on(s, dims):
                continue
            assert s is not None
            r = Op("sdy.reshard", [v], [v.type], location=op.location)
            r.results[0].sharding = move.sharding(s) if move is not None else _relaxed(s, dims)
            insert_before(op, r)
            uses.add(r)
            uses.set_operand(op, i, r.results[0])
            added += 1
        for i, dims in enumerate(result_dims):
            v = op.results[i]
            s = v.sharding
            if not dims or not _sharded_on(s, dims):
                continue
            assert s is not None
            v.sharding = move.sharding(s) if move is not None else _relaxed(s, dims)
            r = Op("sdy.reshard", [v], [v.type], location=op.location)
            r.results[0].sharding = s
            insert_after(op, r)
            uses.add(r)
            uses.replace_all_uses(v, r.results[0], except_ops=[r])
            added += 1
    return added


def _source_sharding(v: Value, uses: Uses, mesh_name: str, mesh: Mesh) -> TensorSharding:
    s = get_sharding(v, uses)
    if s is None:
        return TensorSharding(mesh, [[] for _ in range(v.type.rank)], mesh_name=mesh_name)
    return s


def _step_op(step_kind: str, operand: Value, out: TensorSharding, attrs: dict[str, str], location: str | None) -> Op:
    op = Op(f"sdy.{step_kind}", [operand], [operand.type], attrs, location=location)
    op.results[0].sharding = out
    return op


def _axis_lists(dim_axes: tuple[tuple[AxisRef, ...], ...]) -> str:
    return "#sdy<list_of_axis_ref_lists[" + ", ".join("{" + ", ".join(str(a) for a in d) + "}" for d in dim_axes) + "]>"


def _axis_list(axes: tuple[AxisRef, ...]) -> str:
    return "#sdy<axis_ref_list{" + ", ".join(str(a) for a in axes) + "}>"


def _attrs(
    step_kind: str,
    dim_axes: tuple[tuple[AxisRef, ...], ...],
    axes: tuple[AxisRef, ...],
    src: int | None,
    tgt: int | None,
    reduction: str | None,
) -> dict[str, str]:
    if step_kind == "all_gather":
        return {"gathering_axes": _axis_lists(dim_axes)}
    if step_kind == "all_slice":
        return {"slicing_axes": _axis_lists(dim_axes)}
    if step_kind == "reduce_scatter":
        out = {"reduce_scatter_axes": _axis_lists(dim_axes)}
    elif step_kind == "all_reduce":
        out = {"reduction_axes": _axis_list(axes)}
    elif step_kind == "all_to_all":
        return {"params": "#sdy<all_to_all_param_list[{" + ", ".join(str(a) for a in axes) + f"}}: {src}->{tgt}]>"}
    else:
        return {}
    if reduction not in (None, "sum"):
        out["reduction_op"] = f"#sdy<reduction_op {reduction}>"
    return out


def merge_equal_reshards(func: Func, uses: Uses) -> int:
    """Reshards of one value to one sharding in one block become the first of them (its result
    replaces the later ones'), so the value is moved once: an LSTM cell's four gate matmuls
    all-gather the hidden state once, not four times. XLA gets the same from ``HloCSE`` after
    its SPMD partitioner (identical all-gathers of one operand). The first reshard comes before
    the later ones in their block, so every use stays dominated. Returns the number removed."""
    removed = 0
    blocks = [func.body] + [b for op in func.walk_nested() for r in op.regions for b in r.blocks]
    for block in blocks:
        first: dict[tuple[int, str, str], Op] = {}
        for op in list(block.ops):
            s = (
                op.results[0].sharding
                if op.name in _LOWERED and len(op.operands) == 1 and len(op.results) == 1
                else None
            )
            if s is None:
                continue
            key = (id(op.operands[0]), op.name, str(s))
            kept = first.setdefault(key, op)
            if kept is not op:
                uses.replace_all_uses(op.results[0], kept.results[0])
                erase_op(op, uses)
                removed += 1
    return removed


#: The attribute that marks a collective lowered from a reshard with its index among the
#: planned collectives, so that it is found again after the canonicalization (which runs
#: natively and gives the module new Python ops); removed when read.
_PLANNED = "shardwise.planned_collective"


def _lower_reshard(op: Op, uses: Uses, mesh_name: str, mesh: Mesh, model: CostModel, out: list[Collective]) -> None:
    v = op.operands[0]
    tgt = op.results[0].sharding
    t = v.type
    if tgt is None or not isinstance(t, TensorType):
        raise ProgramError(f"{op.where()}: a reshard needs a ranked tensor and a target sharding")
    src = _source_sharding(v, uses, mesh_name, mesh)
    plan = plan_reshard(mesh, t.shape, t.element_type, src, tgt, model)
    current = v
    for step in plan.steps:
        attrs = _attrs(step.kind, step.dim_axes, step.axes, step.src_dim, step.tgt_dim, step.reduction)
        new = _step_op(
            step.kind,
            current,
            step.out.bind(mesh, mesh_name=mesh_name) if step.out.mesh is None else step.out,
            attrs,
            op.location,
        )
        insert_before(op, new)
        uses.add(new)
        new.attributes[_PLANNED] = f"{len(out)} : i64"
        out.append(Collective(f"sdy.{step.kind}", op.where(), t.shape, t.element_type, step.bytes, step.text))
        current = new.results[0]
    uses.replace_all_uses(op.results[0], current)
    erase_op(op, uses)


def _local_permutes(op: Op, uses: Uses, mesh_name: str, mesh: Mesh, model: CostModel) -> list[Collective]:
    """The collective-permutes the local step adds for ``op``: a halo exchange per side of each
    window kept sharded (``halo.py``), or the swap of a reverse's blocks with their mirrors
    (``local_step.mirror``); with their bytes per device."""
    t, rt = op.operands[0].type, op.results[0].type
    assert isinstance(t, TensorType) and isinstance(rt, TensorType)
    src = _source_sharding(op.operands[0], uses, mesh_name, mesh)
    local = [ceil_div(d, _count(mesh, dim.axes)) for d, dim in zip(t.shape, src.dims)]
    width = dtype_bytes(t.element_type)
    out = []
    if op.name == "stablehlo.reverse":
        axes = [a for k in parse_array(op.attributes["dimensions"]) if k < len(src.dims) for a in src.dims[k].axes]
        if axes:
            n = 1
            for d in local:
                n *= d
            out.append(
                Collective(
                    "sdy.collective_permute",
                    op.where(),
                    t.shape,
                    t.element_type,
                    model.cost("collective_permute", mesh, axes, n * width)[0],
                    "reverse: blocks swapped with their mirrors",
                )
            )
        return out
    for d, h in halos(mesh, op, t, src, rt, op.results[0].sharding).items():
        for side, amount in (("left", h.left), ("right", h.right)):
            if amount <= 0:
                continue
            n = amount
            for k, size in enumerate(local):
                n *= size if k != d else 1
            text = f"halo exchange: {amount} elements of dim {d} from the {'previous' if side == 'left' else 'next'} block along {{{', '.join(str(a) for a in h.axes)}}}"
            out.append(
                Collective(
                    "sdy.collective_permute",
                    op.where(),
                    t.shape,
                    t.element_type,
                    model.cost("collective_permute", mesh, list(h.axes), n * width)[0],
                    text,
                )
            )
    return out


def _all_reduce_bytes(op: Op, mesh: Mesh, model: CostModel) -> float:
    """Bytes per device of an ``sdy.all_reduce`` inserted by the explicit-reshards pass."""

    t = op.operands[0].type
    s = op.results[0].sharding
    assert isinstance(t, TensorType)
    local = t.shape if s is None else tuple(ceil_div(d, _count(mesh, dim.axes)) for d, dim in zip(t.shape, s.dims))
    n = 1
    for d in local:
        n *= d
    text = op.attributes["reduction_axes"]
    axes = [AxisRef.parse(a.strip()) for a in text[text.index("{") + 1 : text.rindex("}")].split(",") if a.strip()]
    return model.cost("all_reduce", mesh, axes, n * dtype_bytes(t.element_type))[0]


def _all_reduce_text(op: Op) -> str:
    text = op.attributes["reduction_axes"]
    axes = text[text.index("{") : text.rindex("}") + 1]
    out = op.results[0].sharding
    return f"sdy.all_reduce {axes}" + ("" if out is None else f" out_sharding={out.body()}")


def _count(mesh: Mesh, axes: tuple[AxisRef, ...]) -> int:
    n = 1
    for a in axes:
        n *= a.full_size(mesh) if a.size is None else a.size
    return n


def lower_to_collectives(module: Module, func: Func, model: CostModel | None = None) -> list[Collective]:
    """Step 3 on ``func``: lowers every ``sdy.reshard`` / ``sdy.sharding_constraint`` into
    Shardy's collectives (a reshard between equal shardings disappears), then runs Shardy's
    collective canonicalisation (``canonicalize{enable-patterns={sdy-collective}}``: an
    ``all_reduce`` followed by an ``all_slice`` of the reduced axes becomes one
    ``reduce_scatter``, half the bytes). Returns every collective of the function in program
    order, with its bytes per device."""
    from shardwise.passes import run_pipeline

    mesh_name, mesh = single_mesh(module)
    model = CostModel() if model is None else model
    uses = Uses(func)
    merge_equal_reshards(func, uses)
    planned: list[Collective] = []
    for op in list(func.walk_nested()):
        if op.name in _LOWERED and op.parent is not None:
            _lower_reshard(op, uses, mesh_name, mesh, model, planned)
        elif op.name in ("sdy.sharded_to_unreduced", "sdy.replicated_to_unreduced"):
            raise ProgramError(f"{op.where()}: unreduced shardings are not supported by the partitioner yet")
    name = func.sym_name
    run_pipeline(module, "builtin.module(canonicalize{enable-patterns={sdy-collective}})")
    func = module.func(name)  # the module's ops are new after the native pass
    uses = Uses(func)
    out: list[Collective] = []
    for op in func.walk_nested():
        before = len(out)
        _collectives_of(op, uses, mesh_name, mesh, model, planned, out)
        n = loop_times(op) if len(out) > before else 1
        if n != 1:
            out[before:] = [replace(c, times=n) for c in out[before:]]
    return out


def _collectives_of(
    op: Op,
    uses: Uses,
    mesh_name: str,
    mesh: Mesh,
    model: CostModel,
    planned: list[Collective],
    out: list[Collective],
) -> None:
    """Appends the collectives of ``op`` (one run of it) to ``out``."""
    index = op.attributes.pop(_PLANNED, None)
    if index is not None:
        out.append(planned[int(index.split(":")[0])])
        return
    t = op.operands[0].type if op.operands else None
    if not isinstance(t, TensorType):
        return
    if op.name in HALO_OPS or op.name == "stablehlo.reverse":
        out += _local_permutes(op, uses, mesh_name, mesh, model)
    elif op.name == "sdy.all_reduce":
        out.append(
            Collective(
                "sdy.all_reduce",
                op.where(),
                t.shape,
                t.element_type,
                _all_reduce_bytes(op, mesh, model),
                _all_reduce_text(op),
            )
        )
    elif op.name in ("sdy.reduce_scatter", "sdy.all_slice"):
        key = "reduce_scatter_axes" if op.name == "sdy.reduce_scatter" else "slicing_axes"
        per_dim = [
            [AxisRef.parse(a.strip()) for a in d.split(",") if a.strip()]
            for d in re.findall(r"\{([^}]*)\}", op.attributes[key])
        ]
        src = _source_sharding(op.operands[0], uses, mesh_name, mesh)
        local = 1
        for d, dim in zip(t.shape, src.dims):
            local *= ceil_div(d, _count(mesh, dim.axes))
        n_bytes = 0.0
        if op.name == "sdy.reduce_scatter":
            n_bytes = model.cost(
                "reduce_scatter", mesh, [a for d in per_dim for a in d], local * dtype_bytes(t.element_type)
            )[0]
        out_s = op.results[0].sharding
        text = f"{op.name} {op.attributes[key].removeprefix('#sdy<list_of_axis_ref_lists').removesuffix('>')}" + (
            "" if out_s is None else f" out_sharding={out_s.body()}"
        )
        out.append(Collective(op.name, op.where(), t.shape, t.element_type, n_bytes, text))
