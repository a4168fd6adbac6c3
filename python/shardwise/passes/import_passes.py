"""Import passes on shardings and sharding groups: ``sdy-apply-sharding-constraints``,
``sdy-sharding-group-import`` and ``sdy-manual-axes-cleanup`` (Shardy's
``transforms/import/apply_sharding_constraints.cc``, ``sharding_group_import.cc``,
``manual_axes_cleanup.cc``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from shardwise.errors import ProgramError
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.rewrite import Uses, enclosing, erase_op, insert_after_value, insert_before, move_after, move_before
from shardwise.ir.sdy import (
    DATA_FLOW_EDGE,
    MANUAL_COMPUTATION,
    RETURN,
    SHARDING_CONSTRAINT,
    SHARDING_GROUP,
    SHARDING_RULE,
    TERMINATORS,
    fully_replicated,
    get_sharding,
    lookup_data_flow_edge,
    manual_axes,
    manual_axes_text,
    mesh_ref,
    post_order,
    set_sharding,
    shardable_value,
    with_parts,
)
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.passes.registry import Options, register_pass
from shardwise.propagation.debug import DebugInfo
from shardwise.sharding import AxisRef, TensorSharding

if TYPE_CHECKING:
    from shardwise.rules.from_ir import RuleCache

__all__ = ["apply_sharding_constraints", "manual_axes_cleanup", "sharding_group_import"]


# ---------------------------------------------------------------------------------- apply constraints


class _Constraints:
    def __init__(self, module: Module, origins: bool = False, edges: bool = False) -> None:
        self.module = module
        self.uses = Uses(module)
        self._rules: RuleCache | None = None
        self.debug = DebugInfo(origins, edges, self.uses)

    def rule_text(self, op: Op) -> str | None:
        from shardwise.rules.from_ir import RuleCache

        if self._rules is None:
            self._rules = RuleCache(self.module)
        rule = self._rules.rule(op)
        return None if rule is None else str(rule)

    def used_by_constraint_with_different_sharding(self, value: Value, sharding: TensorSharding) -> bool:
        for user, index in self.uses.of(value):
            if user.name == SHARDING_CONSTRAINT and user.results[0].sharding != sharding:
                return True
            if (
                user.name == MANUAL_COMPUTATION
                and user.operand_shardings is not None
                and user.operand_shardings[index] != sharding
            ):
                return True
        return False

    def used_by_constraint(self, value: Value, excluded: Op | None = None) -> bool:
        return any(
            u is not excluded and u.name in (SHARDING_CONSTRAINT, MANUAL_COMPUTATION) for u in self.uses.users(value)
        )

    def should_apply(self, value: Value, sharding: TensorSharding) -> bool:
        if shardable_value(value, self.uses) is None:
            return False
        if get_sharding(value, self.uses) is not None:
            return False
        if not all(d.closed for d in sharding.dims):
            return False
        return not self.used_by_constraint_with_different_sharding(value, sharding)

    def apply(self, op: Op, value: Value, sharding: TensorSharding, constraint_after_value: Callable[[], Op]) -> None:
        if not self.should_apply(value, sharding):
            return
        defining = value.defining_op
        if (defining is not None and defining.name == DATA_FLOW_EDGE) or lookup_data_flow_edge(
            value, self.uses
        ) is not None:
            constraint = constraint_after_value()
            self.uses.replace_all_uses(value, constraint.results[0], except_ops=[constraint])
            if sharding.unreduced:
                current = get_sharding(value, self.uses)
                if current is None:
                    current = fully_replicated(mesh_ref(sharding), sharding.rank, False)
                set_sharding(value, with_parts(current, unreduced=sharding.unreduced), self.uses)
            return
        rule = op.attributes.get(SHARDING_RULE)
        if rule is None:
            rule = self.rule_text(op)
            if rule is not None:
                op.attributes[SHARDING_RULE] = rule
        set_sharding(value, sharding, self.uses)
        if self.debug.active and rule is not None and sharding.rank > 0:
            self.debug.record_constraint(op)

    def chain_tail(self, head: Op) -> Op | None:
        inp = head.operands[0]
        if inp.defining_op is not None and inp.defining_op.name == SHARDING_CONSTRAINT:
            return None
        if get_sharding(inp, self.uses) is not None:
            return None
        if self.used_by_constraint(inp, head):
            return None
        tail = head
        while True:
            users = self.uses.users(tail.results[0])
            if len(users) == 1 and users[0].name == SHARDING_CONSTRAINT:
                tail = users[0]
            else:
                break
        if tail is head:
            return None
        if self.used_by_constraint(tail.results[0]):
            return None
        return tail

    def run(self) -> None:
        if self.debug.active:
            self.debug.prepare(self.module)
        for top in list(self.module.ops):
            for op in post_order(top):
                if op.name == SHARDING_CONSTRAINT:
                    self.constraint(op)
                elif op.name == MANUAL_COMPUTATION:
                    self.manual(op)
        if self.debug.active:
            self.debug.save(self.module)

    def constraint(self, op: Op) -> None:
        tail = self.chain_tail(op)
        if tail is not None:
            t = tail

            def pred(user: Op, index: int) -> bool:
                return user is not op and user.name != RETURN and user.parent is t.parent and _before(t, user)

            self.uses.replace_uses_if(op.operands[0], tail.results[0], pred)
        value = op.operands[0]
        sharding = op.results[0].sharding
        assert sharding is not None

        def after() -> Op:
            _move_after_value(op, value)
            return op

        self.apply(op, value, sharding, after)

    def manual(self, op: Op) -> None:
        if op.operand_shardings is None:
            return
        for value, sharding in zip(list(op.operands), op.operand_shardings):

            def after(value: Value = value, sharding: TensorSharding = sharding) -> Op:
                c = Op(SHARDING_CONSTRAINT, [value], [value.type], location=op.location)
                c.results[0].sharding = sharding
                insert_after_value(value, c)
                self.uses.add(c)
                return c

            self.apply(op, value, sharding, after)


def _before(a: Op, b: Op) -> bool:
    block = a.parent
    assert block is not None
    ia = ib = -1
    for i, o in enumerate(block.ops):
        if o is a:
            ia = i
        if o is b:
            ib = i
    return ia < ib


def _move_after_value(op: Op, value: Value) -> None:
    d = value.defining_op
    if d is not None:
        move_after(op, d)
    else:
        block = value.owner
        assert not isinstance(block, Op)
        if block.ops and block.ops[0] is not op:
            move_before(op, block.ops[0])


@register_pass(
    "sdy-apply-sharding-constraints",
    options={"debug-sharding-origins": False, "debug-propagation-edge-sharding": False},
    acts_on=frozenset({SHARDING_CONSTRAINT, MANUAL_COMPUTATION}),
    acts_always_with=("debug-sharding-origins", "debug-propagation-edge-sharding"),
)
def apply_sharding_constraints(module: Module, options: Options | None = None) -> None:
    """Gives the input of each ``sdy.sharding_constraint`` (and each operand of a manual
    computation) the constraint's sharding when the input has none, the sharding is fully
    closed and no other constraint on it disagrees; an input that is a data flow edge target
    instead has all its uses go through the constraint (moved right after it). A chain of
    constraints also takes over the later uses of the chain's input in its block. Mirrors
    Shardy's ``apply_sharding_constraints.cc``; ``debug-sharding-origins`` and
    ``debug-propagation-edge-sharding`` record where each axis came from
    (``sdy.sharding_origins``, ``sdy.sharding_origin_name``) and the edges that moved it
    (``sdy.propagation_edges``), as Shardy's ``SourceShardingHandler`` does."""
    opts = options or {}
    origins, edges = (
        bool(opts.get("debug-sharding-origins", False)),
        bool(opts.get("debug-propagation-edge-sharding", False)),
    )
    if (
        not origins
        and not edges
        and not any(op.name in (SHARDING_CONSTRAINT, MANUAL_COMPUTATION) for op in module.walk())
    ):
        return  # nothing to apply and nothing to record
    _Constraints(module, origins, edges).run()


# ---------------------------------------------------------------------------------- sharding groups


def _group_id(op: Op) -> int:
    text = op.attributes["group_id"]
    return int(text.split(":")[0].strip())


@register_pass("sdy-sharding-group-import", acts_on=frozenset({SHARDING_GROUP}), adds=frozenset())
def sharding_group_import(module: Module, options: Options | None = None) -> None:
    """Merges sharding groups that share a value (transitively), renumbers the groups
    ``0..N-1`` in the order their first members appear, and removes duplicate
    ``sdy.sharding_group`` ops of a value within a group. Mirrors Shardy's
    ``sharding_group_import.cc``. Raises ``ProgramError`` (naming the op and its location)
    when a group crosses a manual computation boundary or mixes shapes."""
    by_value: dict[int, list[Op]] = {}
    order: list[int] = []
    group_manual: dict[int, int | None] = {}
    group_shape: dict[int, tuple[int, ...]] = {}
    for top in list(module.ops):
        for op in post_order(top):
            if op.name != SHARDING_GROUP:
                continue
            v = op.operands[0]
            if id(v) not in by_value:
                by_value[id(v)] = []
                order.append(id(v))
            by_value[id(v)].append(op)
            gid = _group_id(op)
            manual = enclosing(op, MANUAL_COMPUTATION)
            mid = None if manual is None else id(manual)
            if group_manual.setdefault(gid, mid) != mid:
                raise ProgramError(
                    f"{op.where()}: ShardingGroupOps values cannot cross ManualComputationOp boundaries for groupId: {gid}"
                )
            if group_shape.setdefault(gid, v.type.shape) != v.type.shape:
                raise ProgramError(f"{op.where()}: ShardingGroupOps values must have the same shape for groupId: {gid}")
    if not by_value:
        return
    # LLVM's EquivalenceClasses: members kept in insertion order, the leader of a union is the
    # leader of the first set.
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for vid in order:
        ops = by_value[vid]
        canon = _group_id(ops[0])
        for o in ops:
            a, b = find(canon), find(_group_id(o))
            if a != b:
                parent[b] = a
    leaders = [g for g in parent if find(g) == g]
    reindex = {g: i for i, g in enumerate(leaders)}
    groups: list[list[Op]] = [[] for _ in leaders]
    for vid in order:
        for o in by_value[vid]:
            new = reindex[find(_group_id(o))]
            o.attributes["group_id"] = f"{new} : i64"
            groups[new].append(o)
    for members in groups:
        seen: set[int] = set()
        for o in members:
            if id(o.operands[0]) in seen:
                erase_op(o)
            else:
                seen.add(id(o.operands[0]))


# ---------------------------------------------------------------------------------- manual axes cleanup


def _common_mesh(shardings: list[TensorSharding], meshes: dict[str, Mesh]) -> tuple[TensorSharding, Mesh] | None:
    """Shardy's ``getCommonMeshOrRef``: the first sharding on a non-empty mesh (or the first)
    when all non-empty meshes agree."""
    ref: TensorSharding | None = None
    mesh: Mesh | None = None
    for s in shardings:
        other = s.mesh if s.mesh is not None else meshes.get(s.mesh_name or "")
        if other is None:
            raise ProgramError(f"sharding {s} refers to mesh @{s.mesh_name}, which the module does not define")
        if mesh is None or mesh.is_empty:
            mesh, ref = other, s
            continue
        if other.is_empty:
            continue
        if other != mesh:
            return None
    if ref is None or mesh is None:
        return None
    return ref, mesh


def _add_unused_manual_axes(
    shardings: tuple[TensorSharding, ...], values: list[Value], manual: list[AxisRef], ref: TensorSharding, mesh: Mesh
) -> tuple[TensorSharding, ...] | None:
    out: list[TensorSharding] = []
    modified = False
    for s, v in zip(shardings, values):
        if not hasattr(v.type, "element_type"):
            out.append(s)
            continue
        unused = list(AxisRef.set_diff(manual, s.axis_refs, mesh))
        if not unused:
            out.append(s)
            continue
        rep = list(AxisRef.sort_and_merge([*s.replicated, *unused], mesh))
        out.append(with_parts(s, replicated=rep, ref=(ref.mesh_name, mesh)))
        modified = True
    return tuple(out) if modified else None


@register_pass("sdy-manual-axes-cleanup", acts_on=frozenset({MANUAL_COMPUTATION}), adds=frozenset())
def manual_axes_cleanup(module: Module, options: Options | None = None) -> None:
    """For every ``sdy.manual_computation``: sorts ``manual_axes`` in mesh order and adds the
    manual axes an in/out sharding does not use to its replicated axes. Mirrors Shardy's
    ``manual_axes_cleanup.cc``. Raises ``ProgramError`` (naming the op and its location) for
    a manual computation with manual axes, no inputs or outputs and a non-empty body, or
    whose shardings are on different meshes."""
    meshes = module.meshes
    for top in list(module.ops):
        for op in post_order(top):
            if op.name != MANUAL_COMPUTATION:
                continue
            ins = list(op.operand_shardings or ())
            outs = [r.sharding for r in op.results if r.sharding is not None]
            names = manual_axes(op)
            if not ins and not outs:
                body = op.regions[0].entry.ops
                if names and not (body and body[0].name == "sdy.return"):
                    raise ProgramError(
                        f"{op.where()}: op has manual_axes when there are no in/out shardings and the body is not empty. "
                        "This isn't allowed at this stage, please contact the Shardy team or file a bug."
                    )
                continue
            common = _common_mesh(ins + outs, meshes)
            if common is None:
                raise ProgramError(f"{op.where()}: expected inputs and outputs to have a common mesh")
            ref, mesh = common
            order = {n: i for i, n in enumerate(mesh.axis_names)}
            sorted_names = sorted(names, key=lambda n: order.get(n, len(order)))
            if list(sorted_names) != list(names):
                op.attributes["manual_axes"] = manual_axes_text(sorted_names)
            manual = [AxisRef(n) for n in sorted_names]
            if op.operand_shardings is not None:
                new = _add_unused_manual_axes(op.operand_shardings, list(op.operands), manual, ref, mesh)
                if new is not None:
                    op.operand_shardings = new
            if all(r.sharding is not None for r in op.results) and op.results:
                outs_t = tuple(r.sharding for r in op.results if r.sharding is not None)
                new = _add_unused_manual_axes(outs_t, list(op.results), manual, ref, mesh)
                if new is not None:
                    for r, s in zip(op.results, new):
                        r.sharding = s


# ---------------------------------------------------------------------------------- gather/scatter batching

_GATHER_FIELDS = (
    "offset_dims",
    "collapsed_slice_dims",
    "operand_batching_dims",
    "start_indices_batching_dims",
    "start_index_map",
    "index_vector_dim",
)
_SCATTER_FIELDS = (
    "update_window_dims",
    "inserted_window_dims",
    "input_batching_dims",
    "scatter_indices_batching_dims",
    "scatter_dims_to_operand_dims",
    "index_vector_dim",
)
_STRUCT_FIELD = re.compile(r"(\w+)\s*=\s*(\[[^\]]*\]|-?\d+)")


def _parse_struct(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for name, value in _STRUCT_FIELD.findall(text):
        if value.startswith("["):
            out[name] = [int(x) for x in value[1:-1].split(",") if x.strip()]
        else:
            out[name] = [int(value)]
    return out


def _print_struct(mnemonic: str, fields: tuple[str, ...], values: dict[str, list[int]]) -> str:
    parts = []
    for f in fields:
        v = values.get(f, [])
        if f == "index_vector_dim":
            parts.append(f"{f} = {v[0] if v else 0}")
        elif v:
            parts.append(f"{f} = [{', '.join(str(x) for x in v)}]")
    return f"#stablehlo.{mnemonic}<{', '.join(parts)}>"


def _i64_array(values: list[int]) -> str:
    return "array<i64" + (": " + ", ".join(str(v) for v in values) if values else "") + ">"


def _unwrap(v: Value) -> Value:
    while True:
        d = v.defining_op
        if d is None:
            return v
        if d.name in ("stablehlo.reshape", "stablehlo.broadcast_in_dim"):
            v = d.operands[0]
        elif d.name == "stablehlo.clamp":
            v = d.operands[1]
        elif d.name == "stablehlo.select":
            on_false = d.operands[2]
            v = (
                on_false
                if on_false.defining_op is not None and on_false.defining_op.name == "stablehlo.iota"
                else d.operands[1]
            )
        else:
            return v


def _iota_origin(indices: Value, index_vector_dim: int, removed: int) -> bool:
    v = indices
    d = v.defining_op
    if d is not None and d.name == "stablehlo.concatenate":
        if _int_attr(d, "dimension") != index_vector_dim or removed >= len(d.operands):
            return False
        v = d.operands[removed]
    root = _unwrap(v).defining_op
    return root is not None and root.name == "stablehlo.iota" and _int_attr(root, "iota_dimension") == 0


def _int_attr(op: Op, name: str) -> int:
    return int(op.attributes.get(name, "0").split(":")[0].strip())


def _slice_and_concat(before: Op, indices: Value, index_vector_dim: int, removed: int) -> Value:
    t = indices.type
    assert isinstance(t, TensorType)
    shape = list(t.shape)
    total = shape[index_vector_dim]
    new_shape = list(shape)
    new_shape[index_vector_dim] -= 1
    d = indices.defining_op
    if (
        d is not None
        and d.name == "stablehlo.concatenate"
        and _int_attr(d, "dimension") == index_vector_dim
        and len(d.operands) == total
    ):
        inputs = [v for i, v in enumerate(d.operands) if i != removed]
        if len(inputs) == 1:
            return inputs[0]
        concat = Op(
            "stablehlo.concatenate",
            inputs,
            [TensorType(new_shape, t.element_type)],
            {"dimension": f"{index_vector_dim} : i64"},
            location=before.location,
        )
        insert_before(before, concat)
        return concat.results[0]
    parts: list[Value] = []
    for start_i, end_i in ((0, removed), (removed + 1, total)):
        if start_i >= end_i:
            continue
        start = [0] * len(shape)
        limit = list(shape)
        start[index_vector_dim], limit[index_vector_dim] = start_i, end_i
        part_shape = list(shape)
        part_shape[index_vector_dim] = end_i - start_i
        attrs = {
            "start_indices": _i64_array(start),
            "limit_indices": _i64_array(limit),
            "strides": _i64_array([1] * len(shape)),
        }
        sl = Op("stablehlo.slice", [indices], [TensorType(part_shape, t.element_type)], attrs, location=before.location)
        insert_before(before, sl)
        parts.append(sl.results[0])
    if len(parts) == 1:
        return parts[0]
    concat = Op(
        "stablehlo.concatenate",
        parts,
        [TensorType(new_shape, t.element_type)],
        {"dimension": f"{index_vector_dim} : i64"},
        location=before.location,
    )
    insert_before(before, concat)
    return concat.results[0]


def _batch(op: Op, attr: str, mnemonic: str, fields: tuple[str, ...], data: Value, indices_index: int) -> bool:
    dims = _parse_struct(op.attributes.get(attr, ""))
    batching_field, collapsed_field, map_field = (fields[2], fields[1], fields[4])
    if dims.get(batching_field):
        return False
    indices = op.operands[indices_index]
    dt, it = data.type, indices.type
    if not isinstance(dt, TensorType) or not isinstance(it, TensorType) or dt.rank == 0 or it.rank == 0:
        return False
    ivd = dims.get("index_vector_dim", [0])[0]
    if ivd >= it.rank or it.shape[ivd] <= 1:
        return False
    if it.shape[0] != dt.shape[0]:
        return False
    index_map = list(dims.get(map_field, []))
    if 0 not in index_map:
        return False
    removed = index_map.index(0)
    if not _iota_origin(indices, ivd, removed):
        return False
    index_map.pop(removed)
    collapsed = list(dims.get(collapsed_field, []))
    if 0 not in collapsed:
        return False
    collapsed.remove(0)
    new_indices = _slice_and_concat(op, indices, ivd, removed)
    dims[map_field] = index_map
    dims[collapsed_field] = collapsed
    dims[batching_field] = [0]
    dims[fields[3]] = [0]
    op.attributes[attr] = _print_struct(mnemonic, fields, dims)
    op.operands[indices_index] = new_indices
    return True


def _erase_dead(func: Op) -> None:
    from shardwise.passes.constants import _NO_MEMORY_EFFECT_OPS

    changed = True
    while changed:
        changed = False
        uses = Uses(func)
        for op in reversed([o for o in func.walk() if o is not func]):
            if (
                op.name in _NO_MEMORY_EFFECT_OPS
                and op.name not in TERMINATORS
                and not any(uses.has_uses(r) for r in op.results)
                and op.parent is not None
            ):
                erase_op(op, uses)
                changed = True


@register_pass("sdy-explicit-gather-scatter-batching", anchor="func.func")
def explicit_gather_scatter_batching(module: Module, func: Func, options: Options | None = None) -> None:
    """Turns the implicit batch dimension 0 of a ``stablehlo.gather`` / ``stablehlo.scatter``
    (dimension 0 of operand and indices of equal size, indexed by an iota along dimension 0,
    collapsed / inserted) into explicit batching dimensions, dropping that index component
    (slicing or re-concatenating the indices); then removes ops left without uses, as MLIR's
    greedy rewriter does. Mirrors Shardy's ``explicit_gather_scatter_batching.cc`` (the
    greedy rewriter's constant folding and hoisting are not reproduced)."""
    for op in list(func.walk()):
        if op.parent is None:
            continue
        if op.name == "stablehlo.gather":
            _batch(op, "dimension_numbers", "gather", _GATHER_FIELDS, op.operands[0], 1)
        elif op.name == "stablehlo.scatter":
            n = (len(op.operands) - 1) // 2
            _batch(op, "scatter_dimension_numbers", "scatter", _SCATTER_FIELDS, op.operands[0], n)
    _erase_dead(func)
