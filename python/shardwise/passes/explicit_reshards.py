"""``sdy-insert-explicit-reshards`` (Shardy's ``transforms/export/insert_explicit_reshards.cc``
and ``explicit_reshards_util.cc``): all-reduces where unreduced axes become replicated, the
collectives that make tensors unreduced, reshards of call operands to the callee's argument
shardings, the reshard of a dot/dot_general result that makes the dot compatible, and, on the
full version, reshards to the common factor shardings of every op with a sharding rule."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shardwise.errors import ProgramError
from shardwise.ir.core import Block, Func, Module, Op, Value
from shardwise.ir.rewrite import SymbolTable, Uses, erase_op
from shardwise.ir.sdy import (
    CALL,
    DATA_FLOW_OPS,
    MANUAL_COMPUTATION,
    OUT_SHARDING_ATTR_OPS,
    RESHARD,
    TERMINATORS,
    add_free_axes,
    block_arg_edge_owners,
    callee_name,
    edge_sources,
    erase_manual_axes,
    fully_closed_like,
    fully_replicated,
    get_sharding,
    is_data_flow_op,
    is_equivalent,
    manual_axes,
    post_order,
    rank_of,
    result_edge_owners,
    set_sharding,
    with_parts,
)
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.passes import _axes, _projection
from shardwise.passes._common_axes import find_common_axes
from shardwise.passes.call_graph import func_arg_shardings
from shardwise.passes.registry import Options, register_pass
from shardwise.rules.from_ir import CONTEXT_OPS
from shardwise.rules.rule import OpShardingRule
from shardwise.sharding import AxisRef, TensorSharding

if TYPE_CHECKING:
    from shardwise.rules.from_ir import RuleCache

__all__ = ["insert_explicit_reshards"]

UNREDUCED_OPS = OUT_SHARDING_ATTR_OPS
#: Ops ``_Reshards.op`` treats apart (no memo, or another path, or the full version).
_OP_SPECIAL = TERMINATORS | DATA_FLOW_OPS | {CALL, RESHARD, "stablehlo.concatenate", "mhlo.ragged_dot"}
#: Ops whose results ``_signature`` reads through ``_Reshards.sharding`` (else: the result's
#: own sharding, as ``get_sharding`` gives it).
_SIGNATURE_SLOW_PATH = DATA_FLOW_OPS | UNREDUCED_OPS | {"sdy.propagation_barrier"}


def _axis_list(axes: list[AxisRef]) -> str:
    return "#sdy<axis_ref_list{" + ", ".join(str(a) for a in axes) + "}>"


def _axis_lists(per_dim: list[list[AxisRef]]) -> str:
    return "#sdy<list_of_axis_ref_lists[" + ", ".join("{" + ", ".join(str(a) for a in d) + "}" for d in per_dim) + "]>"


class _Inserter:
    """MLIR's insertion point: new ops go before ``next`` in ``block`` (at the end if None)."""

    def __init__(self) -> None:
        self.block: Block | None = None
        self.next: Op | None = None

    def before(self, op: Op) -> None:
        self.block, self.next = op.parent, op

    def after(self, op: Op) -> None:
        assert op.parent is not None
        self.block = op.parent
        i = self.block.ops.index(op)
        self.next = self.block.ops[i + 1] if i + 1 < len(self.block.ops) else None

    def after_value(self, v: Value) -> None:
        if isinstance(v.owner, Block):
            self.block = v.owner
            self.next = v.owner.ops[0] if v.owner.ops else None
        else:
            self.after(v.owner)

    def insert(self, op: Op) -> Op:
        assert self.block is not None
        op.parent = self.block
        if self.next is None:
            self.block.ops.append(op)
        else:
            self.block.ops.insert(self.block.ops.index(self.next), op)
        return op


class _Reshards:
    def __init__(self, module: Module, func: Func, full: bool) -> None:
        self.module = module
        self.func = func
        self.full = full
        self.meshes = module.meshes
        self.symbols = SymbolTable(module)
        self.uses = Uses(module)
        self.at = _Inserter()
        self._rules: RuleCache | None = None
        self.inserted = 0  # ops inserted so far
        # Combinations that needed no new op (see ``op``), each with the objects whose ids its
        # key holds: kept alive, no other object can take one of those ids meanwhile.
        self.unchanged: dict[tuple[object, ...], list[object]] = {}

    # ---------------------------------------------------------------- helpers

    def sharding(self, v: Value) -> TensorSharding | None:
        s = get_sharding(v, self.uses)
        if s is None and v.defining_op is not None and v.defining_op.name in UNREDUCED_OPS:
            text = v.defining_op.attributes.get("out_sharding")
            if text is not None:
                s = TensorSharding.parse(text, self.meshes or None)
        return s

    def mesh(self, s: TensorSharding) -> Mesh:
        m = s.mesh if s.mesh is not None else self.meshes.get(s.mesh_name or "")
        if m is None:
            raise ProgramError(f"sharding {s} refers to mesh @{s.mesh_name}, which the module does not define")
        return m

    def new_op(
        self, name: str, operand: Value, attrs: dict[str, str], sharding: TensorSharding | None, location: str | None
    ) -> Op:
        op = Op(name, [operand], [operand.type], attrs, location=location)
        if name in UNREDUCED_OPS:
            assert sharding is not None
            op.attributes["out_sharding"] = str(sharding)
        else:
            op.results[0].sharding = sharding
        self.at.insert(op)
        self.uses.add(op)
        self.inserted += 1
        return op

    def set_use(self, user: Op, index: int, v: Value) -> None:
        self.uses.set_operand(user, index, v)

    # ---------------------------------------------------------------- unreduced axes

    def all_reduce_if_unreduced_to_replicated(
        self, user: Op, index: int, source: TensorSharding | None, target: TensorSharding | None
    ) -> TensorSharding | None:
        """Shardy's ``insertAllReduceIfUnreducedToReplicated``."""
        if source is None or not source.unreduced:
            return source
        mesh = self.mesh(source)
        target_unreduced: tuple[AxisRef, ...] = ()
        if target is not None:
            target_unreduced = target.unreduced
            if self.mesh(target) != mesh:
                raise ProgramError(
                    f"{user.where()}: source and user shardings have different meshes for unreduced axes"
                )
        axes = _axes.axis_set_diff(list(source.unreduced), list(target_unreduced), mesh)
        if not axes:
            return source
        new = with_parts(source, unreduced=_axes.axis_set_diff(list(source.unreduced), axes, mesh))
        v = user.operands[index]
        ar = self.new_op("sdy.all_reduce", v, {"reduction_axes": _axis_list(axes)}, new, _loc(v))
        self.set_use(user, index, ar.results[0])
        return new

    def unreduced_collectives(self, user: Op, index: int, out: TensorSharding | None) -> TensorSharding | None:
        """Shardy's ``insertUnreducedCollectives``."""
        inp = user.operands[index]
        ins = self.sharding(inp)
        if ins is None or out is None or not out.unreduced:
            return None
        mesh = self.mesh(ins)
        if self.mesh(out) != mesh:
            raise ProgramError(
                f"{user.where()}: input and output shardings have different meshes; the result has unreduced axes"
            )
        r2u_s2u = _axes.axis_set_diff(list(out.unreduced), list(ins.unreduced), mesh)
        if not r2u_s2u:
            return None
        if _axes.axis_set_diff(list(ins.unreduced), list(out.unreduced), mesh):
            raise ProgramError(f"{user.where()}: input and output both have unreduced axes the other lacks")
        s2u: list[AxisRef] = []
        per_dim: list[list[AxisRef]] = [[] for _ in ins.dims]
        need_reshard = False
        tmp = list(out.dims)
        for d, (in_d, out_d) in enumerate(zip(ins.dims, out.dims)):
            status = _prefix_status(list(out_d.axes), list(in_d.axes))
            if status == "strict":
                diff: list[AxisRef] = []
                if out_d.axes and out_d.axes[-1] != in_d.axes[len(out_d.axes) - 1]:
                    suffix = _axes.suffix_without_overlap(in_d.axes[len(out_d.axes) - 1], out_d.axes[-1], mesh)
                    assert suffix is not None
                    diff.append(suffix)
                diff.extend(in_d.axes[len(out_d.axes) :])
                if not _axes.axis_set_diff(diff, r2u_s2u, mesh):
                    per_dim[d] = diff
                    s2u.extend(diff)
                    tmp[d] = in_d
                else:
                    need_reshard = True
            elif status == "not":
                need_reshard = True
        result = inp
        loc = _loc(inp)
        if need_reshard:
            result = self.new_op(RESHARD, result, {}, with_parts(ins, dims=tmp), loc).results[0]
        last = self.sharding(result)
        r2u = _axes.axis_set_diff(r2u_s2u, s2u, mesh)
        if r2u:
            unreduced = _axes.sort_and_merge([*ins.unreduced, *r2u], mesh)
            last = with_parts(ins, dims=tmp, replicated=out.replicated, unreduced=unreduced)
            result = self.new_op("sdy.replicated_to_unreduced", result, {"axes": _axis_list(r2u)}, last, loc).results[0]
        if s2u:
            result = self.new_op("sdy.sharded_to_unreduced", result, {"axes": _axis_lists(per_dim)}, out, loc).results[
                0
            ]
            last = out
        if result is not inp:
            self.set_use(user, index, result)
            return last
        return None

    def to_target(self, user: Op, index: int, target: TensorSharding | None, after_operand: bool, full: bool) -> None:
        """Shardy's ``insertExplicitReshardsToTargetSharding``."""
        operand = user.operands[index]
        source = self.sharding(operand)
        if after_operand:
            self.at.after_value(operand)
        if source is not None:
            source = self.all_reduce_if_unreduced_to_replicated(user, index, source, target)
        new = self.unreduced_collectives(user, index, target)
        if new is not None:
            source = new
        if full and not is_equivalent(source, target):
            operand = user.operands[index]
            if target is None:
                assert source is not None
                target = fully_closed_like(source)
            r = self.new_op(RESHARD, operand, {}, target, _loc(operand))
            self.set_use(user, index, r.results[0])

    # ---------------------------------------------------------------- ops

    def data_flow_op(self, op: Op, full: bool) -> None:
        for owner in [*result_edge_owners(op), *block_arg_edge_owners(op)]:
            target = self.owner_sharding(op, owner)
            for user, index in edge_sources(op, owner):
                self.to_target(user, index, target, True, full)

    def owner_sharding(self, op: Op, owner: Value) -> TensorSharding | None:
        if op.name == MANUAL_COMPUTATION:
            manual = manual_axes(op)
            assert op.operand_shardings is not None
            if owner.is_block_arg:
                outer = op.operand_shardings[owner.index]
                return add_free_axes(outer, erase_manual_axes(outer, manual), manual)
            s = owner.sharding
            return None if s is None else erase_manual_axes(s, manual)
        if owner.is_block_arg:
            return None if op.operand_shardings is None else op.operand_shardings[owner.index]
        return owner.sharding

    def call(self, op: Op) -> None:
        try:
            callee = self.symbols.lookup_func(callee_name(op))
        except KeyError:
            raise ProgramError(f"{op.where()}: calls @{callee_name(op)}, which the module does not define") from None
        targets = func_arg_shardings(callee, self.meshes)
        if targets is None:
            ref = None
            for v in op.operands:
                s = self.sharding(v)
                if s is not None and not self.mesh(s).is_maximal:
                    ref = s
                    break
            if ref is None:
                return
            targets = [fully_replicated((ref.mesh_name, ref.mesh), rank_of(v), True) for v in op.operands]
        self.at.before(op)
        for i, t in enumerate(targets):
            self.to_target(op, i, t, True, True)

    def all_reduce_on_op(self, op: Op) -> None:
        if not op.results:
            if any((s := self.sharding(v)) is not None and s.unreduced for v in op.operands):
                raise ProgramError(f"{op.where()}: some operands have unreduced axes but the operation has no results")
            return
        first = self.sharding(op.results[0])
        first_unreduced = first.unreduced if first is not None else ()
        for r in op.results[1:]:
            s = self.sharding(r)
            if (s.unreduced if s is not None else ()) != first_unreduced:
                raise ProgramError(f"{op.where()}: unreduced axes mismatch between results of a multi-result op")
        self.at.before(op)
        for i in range(len(op.operands)):
            s = self.sharding(op.operands[i])
            if s is not None:
                self.all_reduce_if_unreduced_to_replicated(op, i, s, first)

    def rule(self, op: Op) -> OpShardingRule | None:
        text = op.attributes.get("sdy.sharding_rule")
        if text is not None:
            return OpShardingRule.parse(text)
        return registry_rule(self.module, op, self)

    def common_mesh(self, shardings: list[TensorSharding | None]) -> tuple[str, Mesh] | None:
        """Shardy's ``getMesh``: the mesh all shardings share (ignoring device order), the
        most used one among the sharded tensors; ``None`` without shardings, for differing
        or maximal meshes."""
        ref: TensorSharding | None = None
        mesh: Mesh | None = None
        for s in shardings:
            if s is None:
                continue
            other = self.mesh(s)
            if mesh is None or mesh.is_empty:
                mesh, ref = other, s
                continue
            if other.is_empty:
                continue
            if other.is_maximal != mesh.is_maximal or other.axes != mesh.axes:
                return None
            if not other.device_ids:
                mesh, ref = other, s
        if ref is None or mesh is None or ref.mesh_name is None:
            return None
        if mesh.is_maximal:
            return None
        best = (ref.mesh_name, mesh)
        counts: dict[str, int] = {}
        top = 0
        for s in shardings:
            if s is None or all(not d.axes for d in s.dims):
                continue
            name = s.mesh_name or ref.mesh_name
            counts[name] = counts.get(name, 0) + 1
            if counts[name] > top:
                top = counts[name]
                best = (name, self.mesh(s))
        return best

    def process_dot(
        self,
        op: Op,
        proj: _projection.Projection,
        outs: list[TensorSharding | None],
        rule: OpShardingRule,
        mesh_name: str,
        mesh: Mesh,
    ) -> None:
        if not outs:
            return
        lhs, rhs = proj.operands[0], proj.operands[1]
        res = proj.results[0]
        sizes = [_num_elements(op.operands[0]), _num_elements(op.operands[1])]
        result_size = _num_elements(op.results[0])
        conflicting: int | None = None
        conflicting_axes: list[AxisRef] = []
        reduction: list[AxisRef] = []
        seen: list[AxisRef] = []
        for f in range(len(rule.factor_sizes)):
            la, ra = lhs.axes_of(f), rhs.axes_of(f)
            if la is not None and ra is not None:
                operand_axes = la
                max_size = max(sizes)
                if la != ra:
                    return
                if f in rule.reduction_factors:
                    reduction.extend(operand_axes)
                    continue
            else:
                operand_axes = la if la is not None else (ra or [])
                max_size = sizes[0] if la is not None else sizes[1]
                for a in operand_axes:
                    if any(_axes.overlaps(s, a) for s in seen):
                        return
                    seen.append(a)
            if res.axes_of(f) != operand_axes:
                if not operand_axes or conflicting is not None or result_size > max_size:
                    return
                conflicting = f
                conflicting_axes = list(operand_axes)
        if conflicting is None:
            return
        res_axes = res.factors[conflicting].axes
        if not res_axes or res_axes != reduction:
            return
        res.factors[conflicting].axes = conflicting_axes
        new = _projection.create_sharding(res, rule.result_mappings[0], rule.factor_sizes, mesh_name, mesh)
        set_sharding(op.results[0], new, self.uses)
        self.at.after(op)
        r = self.new_op(RESHARD, op.results[0], {}, outs[0], op.location)
        self.uses.replace_all_uses(op.results[0], r.results[0], except_ops=[r])

    def all_reduces_for_reduction_factors(
        self,
        op: Op,
        proj: _projection.Projection,
        rule: OpShardingRule,
        mesh_name: str,
        mesh: Mesh,
        common: list[list[AxisRef]] | None,
    ) -> None:
        """Shardy's ``insertAllReducesForReductionFactors``."""
        if not op.results:
            return
        first = self.sharding(op.results[0])
        unreduced = list(first.unreduced) if first is not None else []
        reduction: list[AxisRef] = []
        if common is not None:
            for f in rule.reduction_factors:
                reduction.extend(common[f])
        else:
            if not unreduced:
                return
            for f in rule.reduction_factors:
                compatible = _compatible_factor_sharding(proj, f)
                if compatible is None:
                    raise ProgramError(
                        f"{op.where()}: the result has unreduced axes while the operand has incompatible sharding along reduction factors"
                    )
                reduction.extend(compatible)
        if not reduction:
            return
        axes = _axes.axis_set_diff(reduction, unreduced, mesh)
        if not axes:
            return
        axes = _axes.sort_and_merge(axes, mesh)
        self.at.after(op)
        for r in op.results:
            s = self.sharding(r)
            if s is None:
                s = fully_replicated((mesh_name, mesh), rank_of(r), True)
            ar = self.new_op("sdy.all_reduce", r, {"reduction_axes": _axis_list(axes)}, s, op.location)
            self.uses.replace_all_uses(r, ar.results[0], except_ops=[ar])

    # ---------------------------------------------------------------- full version

    def process_full(
        self,
        op: Op,
        proj: _projection.Projection,
        ins: list[TensorSharding | None],
        outs: list[TensorSharding | None],
        rule: OpShardingRule,
        mesh_name: str,
        mesh: Mesh,
    ) -> list[list[AxisRef]]:
        """Shardy's ``processOp`` on the full version: the common axes per factor, and reshards
        of the operands/results whose factor shardings differ from them."""
        upd_in, upd_out = _projection.contains_overflow(proj)
        if (any(upd_in) or any(upd_out)) and op.name == "stablehlo.reshape":
            return self.reshape_with_overflow(op, proj, outs, rule, mesh_name, mesh)
        common = find_common_axes(proj, rule, _tensor_sizes(op), mesh)
        for f, axes in enumerate(common):
            a, b = _projection.update_sharding(proj, f, axes, [])
            upd_in = [x or y for x, y in zip(upd_in, a)]
            upd_out = [x or y for x, y in zip(upd_out, b)]
        self.reshard_operands_results(op, ins, outs, proj, upd_in, upd_out, rule, mesh_name, mesh)
        return common

    def reshard_operands_results(
        self,
        op: Op,
        ins: list[TensorSharding | None],
        outs: list[TensorSharding | None],
        proj: _projection.Projection,
        upd_in: list[bool],
        upd_out: list[bool],
        rule: OpShardingRule,
        mesh_name: str,
        mesh: Mesh,
    ) -> None:
        """Shardy's ``insertExplicitReshards``."""
        self.at.before(op)
        for i, s in enumerate(ins):
            if upd_in[i] or self.reshard_to_common_mesh(s, mesh):
                new = _projection.create_sharding(
                    proj.operands[i], rule.operand_mappings[i], rule.factor_sizes, mesh_name, mesh
                )
                operand = op.operands[i]
                r = self.new_op(RESHARD, operand, {}, new, _loc(operand))
                self.set_use(op, i, r.results[0])
        self.at.after(op)
        for i, s in enumerate(outs):
            if upd_out[i] or self.reshard_to_common_mesh(s, mesh):
                new = _projection.create_sharding(
                    proj.results[i], rule.result_mappings[i], rule.factor_sizes, mesh_name, mesh
                )
                result = op.results[i]
                current = self.sharding(result)
                if current is None:
                    current = fully_replicated((mesh_name, mesh), rank_of(result), True)
                r = self.new_op(RESHARD, result, {}, current, op.location)
                self.uses.replace_all_uses(result, r.results[0], except_ops=[r])
                set_sharding(result, new, self.uses)

    def reshard_to_common_mesh(self, s: TensorSharding | None, mesh: Mesh) -> bool:
        return s is not None and any(d.axes for d in s.dims) and self.mesh(s).device_ids != mesh.device_ids

    def reshape_with_overflow(
        self,
        op: Op,
        proj: _projection.Projection,
        outs: list[TensorSharding | None],
        rule: OpShardingRule,
        mesh_name: str,
        mesh: Mesh,
    ) -> list[list[AxisRef]]:
        """Shardy's ``processReshapeWithOverflowAxes``."""
        prefer_input = _projection.sharding_size(proj.operands[0], mesh) >= _projection.sharding_size(
            proj.results[0], mesh
        )
        best = proj.operands[0] if prefer_input else proj.results[0]
        all_axes: list[AxisRef] = []
        for f in range(len(rule.factor_sizes)):
            fs = best.factors.get(f)
            if fs is not None:
                all_axes.extend(fs.axes)
                all_axes.extend(fs.overflow)
        for t, mapping in ((proj.operands[0], rule.operand_mappings[0]), (proj.results[0], rule.result_mappings[0])):
            flat: list[_projection.FactorSharding] = []
            sizes: list[int] = []
            order: list[int] = []
            for factors in mapping:
                for f in factors:
                    fs = t.factors.get(f)
                    if fs is None:
                        continue
                    flat.append(_projection.FactorSharding([], fs.closed, fs.minor_most, []))
                    sizes.append(rule.factor_sizes[f])
                    order.append(f)
            _projection.distribute_axes(flat, sizes, all_axes, mesh)
            for f, fs in zip(order, flat):
                t.factors[f].axes = fs.axes
                t.factors[f].overflow = fs.overflow
        in_built = _projection.create_sharding(
            proj.operands[0], rule.operand_mappings[0], rule.factor_sizes, mesh_name, mesh
        )
        out_built = _projection.create_sharding(
            proj.results[0], rule.result_mappings[0], rule.factor_sizes, mesh_name, mesh
        )
        legal = _projection.build([in_built], [out_built], rule, mesh)
        common = _projection.common_prefix_axes(legal, len(rule.factor_sizes))
        for f in range(len(rule.factor_sizes)):
            _projection.update_sharding(proj, f, common[f], [])
        upd_in = [
            not is_equivalent(
                self.sharding(op.operands[0]),
                _projection.create_sharding(
                    proj.operands[0], rule.operand_mappings[0], rule.factor_sizes, mesh_name, mesh
                ),
            )
        ]
        res = _projection.create_sharding(proj.results[0], rule.result_mappings[0], rule.factor_sizes, mesh_name, mesh)
        upd_out = [not is_equivalent(res, outs[0])]
        ins = [self.sharding(v) for v in op.operands]
        self.reshard_operands_results(op, ins, outs, proj, upd_in, upd_out, rule, mesh_name, mesh)
        return common

    def full_version(self, op: Op) -> bool:
        if self.full or op.name == "mhlo.ragged_dot" or op.name == CALL:
            return True
        if op.name == "stablehlo.concatenate":
            result = self.sharding(op.results[0])
            return any(self.sharding(v) != result for v in op.operands)
        return False

    def op(self, op: Op) -> None:
        name = op.name
        if not self.full and name not in _OP_SPECIAL and name not in CONTEXT_OPS and not op.regions:
            self.memoised_tail(op, False)  # most ops: none of the paths below applies
            return
        if name in TERMINATORS:
            return
        full = self.full_version(op)
        if is_data_flow_op(op):
            self.data_flow_op(op, full)
            return
        if op.name == CALL:
            self.call(op)
            return
        if op.name == RESHARD:
            self.at.before(op)
            s = op.results[0].sharding
            if self.unreduced_collectives(op, 0, s) is not None:
                self.uses.replace_all_uses(op.results[0], op.operands[0])
                erase_op(op, self.uses)
                return
        if op.name in CONTEXT_OPS or op.regions:
            self.op_tail(op, full)
        else:
            self.memoised_tail(op, full)

    def memoised_tail(self, op: Op, full: bool) -> None:
        """``op_tail``, skipped where it is known to add nothing: ops that are alike in
        everything it reads (name, attributes, types, the shardings of operands and results,
        directly and through propagation barriers) get the same treatment, so a combination
        that needed no new op is remembered. The key holds the ids of the types and shardings
        read (hashing the objects calls Python per object): equal objects that are distinct
        only miss."""
        objects: list[object] = []
        for values in (op.operands, op.results):
            for v in values:
                objects.extend(_signature(self, v))
        key = (op.name, full, len(op.operands), tuple(op.attributes.items()), *map(id, objects))
        if key in self.unchanged:
            return
        before = self.inserted
        self.op_tail(op, full)
        if self.inserted == before:
            self.unchanged[key] = objects

    def op_tail(self, op: Op, full: bool) -> None:
        self.all_reduce_on_op(op)
        rule = self.rule(op)
        if rule is None or rule.is_custom:
            return
        ins = [_bypass(self, v) for v in op.operands]
        outs = [_bypass(self, v) for v in op.results]
        mesh = self.common_mesh(ins + outs)
        if mesh is None:
            return
        mesh_name, m = mesh
        proj = _projection.build(ins, outs, rule, m, closed_if_missing=True)
        common: list[list[AxisRef]] | None = None
        if full:
            common = self.process_full(op, proj, ins, outs, rule, mesh_name, m)
        elif op.name in ("stablehlo.dot", "stablehlo.dot_general"):
            self.process_dot(op, proj, outs, rule, mesh_name, m)
        self.all_reduces_for_reduction_factors(op, proj, rule, mesh_name, m, common)

    def run(self) -> None:
        for op in post_order(self.func):
            if op is self.func or not _attached(op, self.func):
                continue
            self.op(op)
        ret = self.func.return_op
        self.at.before(ret)
        for i in range(len(ret.operands)):
            target = self.func.result_shardings[i] if i < len(self.func.result_shardings) else None
            self.to_target(ret, i, target, False, self.full)


def registry_rule(module: Module, op: Op, cache: _Reshards) -> OpShardingRule | None:
    """The rule Shardy's registry gives ``op`` (``shardwise.rules``), without warning about
    ops that have none (Shardy's ``getOrCreateShardingRule`` is silent)."""
    import warnings

    from shardwise.rules.exceptions import UnknownOpWarning
    from shardwise.rules.from_ir import RuleCache

    if cache._rules is None:
        cache._rules = RuleCache(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownOpWarning)
        return cache._rules.rule(op)


def _attached(op: Op, root: Op) -> bool:
    while op is not root:
        block = op.parent
        if block is None or block.parent is None or block.parent.parent is None:
            return False
        op = block.parent.parent
    return True


def _signature(r: _Reshards, v: Value) -> tuple[object, TensorSharding | None, TensorSharding | None]:
    """``(type, sharding, sharding through propagation barriers)`` of ``v``: what ``op``'s
    memo key reads of a value (``_bypass`` is the sharding itself unless a barrier defines
    ``v``)."""
    d = v.owner
    if isinstance(d, Op) and d.name not in _SIGNATURE_SLOW_PATH:
        # ``r.sharding(v)`` of a result of an op that is no data flow op, no op with an
        # ``out_sharding`` attribute and no barrier: its own sharding.
        s = v.sharding
        return (v.type, s, s)
    s = r.sharding(v)
    if isinstance(d, Op) and d.name == "sdy.propagation_barrier":
        return (v.type, s, _bypass(r, v))
    return (v.type, s, s)


def _bypass(r: _Reshards, v: Value) -> TensorSharding | None:
    while v.defining_op is not None and v.defining_op.name == "sdy.propagation_barrier":
        v = v.defining_op.operands[0]
    return r.sharding(v)


def _num_elements(v: Value) -> int:
    n = 1
    for d in v.type.shape:
        n *= d
    return n


def _loc(v: Value) -> str | None:
    if isinstance(v.owner, Op):
        return v.owner.location
    return None


def _prefix_status(first: list[AxisRef], second: list[AxisRef]) -> str:
    """Shardy's ``isAxisListPrefixOf``: "equal", "strict" or "not"."""
    if not first and not second:
        return "equal"
    if not first:
        return "strict"
    if len(first) > len(second):
        return "not"
    n = len(first)
    for i in range(n - 1):
        if first[i] != second[i]:
            return "not"
    if len(first) == len(second) and first[-1] == second[-1]:
        return "equal"
    a, b = first[n - 1], second[n - 1]
    if b.contains(a) and _axes.pre_size(a) == _axes.pre_size(b):
        return "strict"
    return "not"


def _tensor_sizes(op: Op) -> list[int]:
    out = []
    for v in [*op.operands, *op.results]:
        t = v.type
        static = isinstance(t, TensorType) and all(d >= 0 for d in t.shape)
        out.append(_num_elements(v) if static else 0)
    return out


def _compatible_factor_sharding(proj: _projection.Projection, factor: int) -> list[AxisRef] | None:
    found: list[AxisRef] | None = None
    seen = False
    for t in proj.tensors:
        axes = t.axes_of(factor)
        if axes is None:
            continue
        if seen and axes != found:
            return None
        if not seen:
            found, seen = axes, True
    return found if found is not None else []


@register_pass("sdy-insert-explicit-reshards", anchor="func.func", options={"enable-full-version": False})
def insert_explicit_reshards(module: Module, func: Func, options: Options | None = None) -> None:
    """Makes the ops of ``func`` agree with their shardings: an ``sdy.all_reduce`` where a
    tensor with unreduced axes is used where those axes are replicated (operands of ops, data
    flow edge sources, returned values), ``sdy.replicated_to_unreduced`` /
    ``sdy.sharded_to_unreduced`` where they become unreduced, reshards of call operands to the
    callee's argument shardings, and, per op with a sharding rule: without
    ``enable-full-version`` (Shardy's propagation pipeline) the reshard of a dot/dot_general
    result that makes the dot compatible with its operands and the all-reduces over the
    reduction factors of ops whose results are unreduced; with it (and always for a
    concatenate whose operands are sharded unlike its result, and ``mhlo.ragged_dot``), the
    common factor shardings Shardy's heuristic picks, reshards of the operands and results
    that differ from them, and all-reduces over the sharded reduction factors. Mirrors
    Shardy's ``insert_explicit_reshards.cc`` and ``explicit_reshards_util.cc``. Raises
    ``ProgramError`` (naming the op and its location) where Shardy fails a check (meshes that
    differ around unreduced axes, incompatible reduction factors of an unreduced result)."""
    _Reshards(module, func, bool((options or {}).get("enable-full-version", False))).run()
