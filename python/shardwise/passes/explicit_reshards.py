"""``sdy-insert-explicit-reshards`` on the Python IR (Shardy's
``transforms/export/insert_explicit_reshards.cc`` and ``explicit_reshards_util.cc``), for the
rules users register, which the native pass (``rust/src/transforms/export/
insert_explicit_reshards.rs``; ``shardwise.passes.native``) does not see: all-reduces where unreduced axes become replicated, the
collectives that make tensors unreduced, reshards of call operands to the callee's argument
shardings, the reshard of a dot/dot_general result that makes the dot compatible, and, on the
full version, reshards to the common factor shardings of every op with a sharding rule. What to
insert around an op is decided in Rust (``rust/src/export/``, one ``_native`` call per op that
needs a decision); this module walks the IR and inserts the ops."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shardwise import _native
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
    mesh_ref,
    post_order,
    rank_of,
    result_edge_owners,
    set_sharding,
)
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.passes.registry import Options, register_pass
from shardwise.rules.from_ir import CONTEXT_OPS
from shardwise.rules.rule import OpShardingRule
from shardwise.sharding import AxisRef, AxisWire, ShardingWire, TensorSharding

if TYPE_CHECKING:
    from shardwise.rules.from_ir import RuleCache

__all__ = ["insert_explicit_reshards"]

UNREDUCED_OPS = OUT_SHARDING_ATTR_OPS
#: Ops ``_Reshards.op`` treats apart (no memo, or another path, or the full version).
_OP_SPECIAL = TERMINATORS | DATA_FLOW_OPS | {CALL, RESHARD, "stablehlo.concatenate", "mhlo.ragged_dot"}
#: Ops whose results ``_signature`` reads through ``_Reshards.sharding`` (else: the result's
#: own sharding, as ``get_sharding`` gives it).
_SIGNATURE_SLOW_PATH = DATA_FLOW_OPS | UNREDUCED_OPS | {"sdy.propagation_barrier"}


def _axis_list(axes: list[AxisWire]) -> str:
    return "#sdy<axis_ref_list{" + ", ".join(str(AxisRef._from_wire(a)) for a in axes) + "}>"


def _axis_lists(per_dim: list[list[AxisWire]]) -> str:
    dims = ("{" + ", ".join(str(AxisRef._from_wire(a)) for a in d) + "}" for d in per_dim)
    return "#sdy<list_of_axis_ref_lists[" + ", ".join(dims) + "]>"


def _mesh_of(s: TensorSharding, meshes: dict[str, Mesh]) -> Mesh | None:
    return s.mesh if s.mesh is not None else meshes.get(s.mesh_name or "")


def func_arg_shardings(func: Func, meshes: dict[str, Mesh]) -> list[TensorSharding] | None:
    """Shardy's ``getFuncArgShardings``: the argument shardings, fully open (on the mesh of the
    first sharding that is not on a maximal mesh) where missing; ``None`` when no argument has
    such a sharding."""
    shardings = [a.sharding for a in func.args]
    ref = next((s for s in shardings if s is not None and not getattr(_mesh_of(s, meshes), "is_maximal", False)), None)
    if ref is None:
        return None
    return [
        s if s is not None else fully_replicated(mesh_ref(ref), rank_of(a), False) for s, a in zip(shardings, func.args)
    ]


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
        # Combinations (op name, attributes, types and shardings) that needed no new op, see
        # ``memoised_tail``.
        self.unchanged: set[tuple[object, ...]] = set()

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
        """Shardy's ``insertAllReduceIfUnreducedToReplicated`` (the axes and the new sharding
        from ``_native.all_reduce_to_replicated``)."""
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
        plan = _native.all_reduce_to_replicated(source._wire(), [a._wire() for a in target_unreduced], mesh._wire())
        if plan is None:
            return source
        new = TensorSharding._from_wire(plan.sharding, source.mesh)
        v = user.operands[index]
        ar = self.new_op("sdy.all_reduce", v, {"reduction_axes": _axis_list(plan.axes)}, new, _loc(v))
        self.set_use(user, index, ar.results[0])
        return new

    def unreduced_collectives(self, user: Op, index: int, out: TensorSharding | None) -> TensorSharding | None:
        """Shardy's ``insertUnreducedCollectives`` (planned by ``_native.unreduced_collectives``)."""
        inp = user.operands[index]
        ins = self.sharding(inp)
        if ins is None or out is None or not out.unreduced:
            return None
        mesh = self.mesh(ins)
        if self.mesh(out) != mesh:
            raise ProgramError(
                f"{user.where()}: input and output shardings have different meshes; the result has unreduced axes"
            )
        try:
            plan = _native.unreduced_collectives(ins._wire(), out._wire(), mesh._wire())
        except ProgramError as e:
            raise ProgramError(f"{user.where()}: {e}") from None
        if plan is None:
            return None
        result, loc = inp, _loc(inp)
        last: TensorSharding | None = None
        if plan.reshard is not None:
            last = TensorSharding._from_wire(plan.reshard, ins.mesh)
            result = self.new_op(RESHARD, result, {}, last, loc).results[0]
        if plan.replicated_to_unreduced is not None:
            last = TensorSharding._from_wire(plan.replicated_to_unreduced, ins.mesh)
            attrs = {"axes": _axis_list(plan.replicated_to_unreduced_axes)}
            result = self.new_op("sdy.replicated_to_unreduced", result, attrs, last, loc).results[0]
        if plan.sharded_to_unreduced is not None:
            attrs = {"axes": _axis_lists(plan.sharded_to_unreduced_axes)}
            result = self.new_op("sdy.sharded_to_unreduced", result, attrs, out, loc).results[0]
            last = out
        self.set_use(user, index, result)
        return last

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
        that needed no new op is remembered, by value: the layers of a model repeat their
        combinations with equal (not identical) shardings, and a sharding hashes its cached
        hash."""
        objects: list[object] = []
        for values in (op.operands, op.results):
            for v in values:
                objects.extend(_signature(self, v))
        key = (op.name, full, len(op.operands), tuple(op.attributes.items()), *objects)
        if key in self.unchanged:
            return
        before = self.inserted
        self.op_tail(op, full)
        if self.inserted == before:
            self.unchanged.add(key)

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
        if full:
            version = "full"
        elif op.name in ("stablehlo.dot", "stablehlo.dot_general"):
            version = "dot"
        elif outs and outs[0] is not None and outs[0].unreduced:
            version = "basic"
        else:
            return  # the basic version inserts only the all-reduce of an unreduced result
        count = len(ins) + len(outs)
        sizes, order = [0] * count, [False] * count
        direct: list[TensorSharding | None] | None = None
        if full:
            sizes = _tensor_sizes(op)
            order = [self.other_device_order(s, m) for s in ins + outs]
            if op.name == "stablehlo.reshape":
                # Shardy's reshape path reads the operand itself, not through barriers.
                direct = [self.sharding(v) for v in op.operands]
                direct = None if direct == ins else direct
        elif version == "dot":
            sizes = [_num_elements(v) for v in [*op.operands, *op.results]]
        try:
            plan = _native.explicit_reshards_plan(
                rule=rule._wire(),
                operands=_wires(ins),
                results=_wires(outs),
                mesh_name=mesh_name,
                mesh=m._wire(),
                sizes=sizes,
                other_device_order=order,
                version=version,
                is_reshape=op.name == "stablehlo.reshape",
                direct_operands=None if direct is None else _wires(direct),
                direct_other_device_order=None if direct is None else [self.other_device_order(s, m) for s in direct],
            )
        except ProgramError as e:
            raise ProgramError(f"{op.where()}: {e}") from None
        self.apply(op, plan, (mesh_name, m))

    def other_device_order(self, s: TensorSharding | None, mesh: Mesh) -> bool:
        """A sharded ``s`` on a mesh that orders the devices unlike ``mesh`` (Shardy reshards
        it onto the op's common mesh)."""
        return s is not None and any(d.axes for d in s.dims) and self.mesh(s).device_ids != mesh.device_ids

    def apply(self, op: Op, plan: _native.OpReshards, ref: tuple[str, Mesh]) -> None:
        """Inserts what ``plan`` names (Shardy's ``insertExplicitReshards`` and
        ``insertAllReducesForReductionFactors``): reshards of operands before ``op``; for each
        result that ``op`` now produces differently, the new sharding and a reshard back to the
        old one for its users; then the all-reduce of every result."""
        m = ref[1]
        if any(w is not None for w in plan.operands):
            self.at.before(op)
        for i, w in enumerate(plan.operands):
            if w is not None:
                operand = op.operands[i]
                reshard = self.new_op(RESHARD, operand, {}, TensorSharding._from_wire(w, m), _loc(operand))
                self.set_use(op, i, reshard.results[0])
        if any(w is not None for w in plan.results):
            self.at.after(op)
        for i, w in enumerate(plan.results):
            if w is not None:
                result = op.results[i]
                current = self.sharding(result)
                if current is None:
                    current = fully_replicated(ref, rank_of(result), True)
                back = self.new_op(RESHARD, result, {}, current, op.location)
                self.uses.replace_all_uses(result, back.results[0], except_ops=[back])
                set_sharding(result, TensorSharding._from_wire(w, m), self.uses)
        if not plan.all_reduce_axes or not op.results:
            return
        axes = _axis_list(plan.all_reduce_axes)
        self.at.after(op)
        for r in op.results:
            s = self.sharding(r)
            if s is None:
                s = fully_replicated(ref, rank_of(r), True)
            ar = self.new_op("sdy.all_reduce", r, {"reduction_axes": axes}, s, op.location)
            self.uses.replace_all_uses(r, ar.results[0], except_ops=[ar])

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


def _wires(shardings: list[TensorSharding | None]) -> list[ShardingWire | None]:
    return [None if s is None else s._wire() for s in shardings]


def _num_elements(v: Value) -> int:
    n = 1
    for d in v.type.shape:
        n *= d
    return n


def _loc(v: Value) -> str | None:
    if isinstance(v.owner, Op):
        return v.owner.location
    return None


def _tensor_sizes(op: Op) -> list[int]:
    out = []
    for v in [*op.operands, *op.results]:
        t = v.type
        static = isinstance(t, TensorType) and all(d >= 0 for d in t.shape)
        out.append(_num_elements(v) if static else 0)
    return out


@register_pass("sdy-insert-explicit-reshards", anchor="func.func", options={"enable-full-version": False}, native=True)
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
