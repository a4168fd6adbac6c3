"""``canonicalize`` as Shardy's export pipeline runs it (``enable-patterns={sdy-collective}``):
MLIR's greedy rewriter (``GreedyPatternRewriteDriver``, bottom-up) with only Shardy's collective
canonicalization patterns enabled (``shardy/dialect/sdy/ir/canonicalization.cc`` / ``.td``).
Each sweep puts every op on a worklist in post-order, first offering each ``stablehlo.constant``
to a new ``OperationFolder`` (one constant per value and type is kept in the entry block of the
nearest isolated computation, hoisted to its start; the others are replaced by it). It then pops
ops from the back: an op that is trivially dead is erased, otherwise the first pattern that
applies rewrites it; the ops a rewrite creates or changes, and the ops defining the operands of
an erased op, are pushed again. Sweeps repeat while one changes the program, at most
``max-iterations`` times. ``rust/src/transforms/canonicalize/`` is the same driver natively."""

from __future__ import annotations

import re

from shardwise.ir.core import Block, Func, Module, Op, Value
from shardwise.ir.rewrite import Uses, erase_op, insert_at_start, insert_before, move_before
from shardwise.ir.sdy import get_sharding, is_equivalent, make_sharding, mesh_ref, post_order, with_parts
from shardwise.mesh import Mesh
from shardwise.passes.constants import _NO_MEMORY_EFFECT_OPS
from shardwise.passes.registry import Options, PipelineError, register_pass
from shardwise.sharding import AxisRef, DimSharding, TensorSharding

__all__ = ["canonicalize", "is_trivially_dead"]

#: Ops whose memory effects are those of the ops in their regions.
RECURSIVE_EFFECT_OPS = frozenset(
    {
        "stablehlo.if",
        "stablehlo.case",
        "stablehlo.while",
        "stablehlo.reduce",
        "stablehlo.map",
        "stablehlo.scatter",
        "stablehlo.select_and_scatter",
        "stablehlo.sort",
        "stablehlo.reduce_window",
        "sdy.named_computation",
        "sdy.manual_computation",
    }
)
_TERMINATORS = frozenset({"func.return", "stablehlo.return", "sdy.return", "mhlo.return"})
_ISOLATED = frozenset({"func.func", "sdy.manual_computation", "sdy.named_computation", "builtin.module"})


def _effect_free(op: Op) -> bool:
    if op.name in _TERMINATORS:
        return True
    if op.name == "stablehlo.custom_call":
        return op.attributes.get("has_side_effect", "false") != "true"
    if op.name in _NO_MEMORY_EFFECT_OPS:
        return True
    if op.name in RECURSIVE_EFFECT_OPS:
        return all(_effect_free(o) for r in op.regions for b in r.blocks for o in b.ops)
    return False


_NEVER_DEAD = _TERMINATORS | {"sdy.mesh", "builtin.module"}


def is_trivially_dead(op: Op, uses: Uses) -> bool:
    """MLIR's ``isOpTriviallyDead``: not a terminator, no used result, no side effects
    (looking into the regions of ops whose effects are their body's)."""
    if op.name in _NEVER_DEAD or isinstance(op, Func):
        return False
    if uses.any_used(op.results):
        return False
    return _effect_free(op)


_EMPTY_LISTS = re.compile(r"#sdy<list_of_axis_ref_lists\[(\{\}(, \{\})*)?\]>")


#: The ops ``_collective_pattern`` rewrites.
_PATTERN_OPS = frozenset(
    {
        "sdy.all_gather",
        "sdy.all_slice",
        "sdy.all_reduce",
        "sdy.reduce_scatter",
        "sdy.collective_permute",
        "sdy.all_to_all",
    }
)


class _Driver:
    """The worklist and the edits that notify it, as MLIR's ``RewriterBase`` notifies the
    greedy driver: a created op and an op whose operand changed are pushed (with the ops holding
    them), and erasing an op pushes the ops defining its operands when they are left with at
    most one other user."""

    def __init__(self, module: Module, uses: Uses) -> None:
        self.top = module.op.regions[0].blocks[0]
        self.uses = uses
        self.meshes = module.meshes
        self.list: list[Op | None] = []
        self.at: dict[int, int] = {}

    def push(self, op: Op) -> None:
        """MLIR's ``addToWorklist``: ``op`` and the ops holding it, up to the module's top
        level (nothing for an op no longer in the module)."""
        chain = [op]
        cur = op
        while True:
            block = cur.parent
            if block is None:
                return
            if block is self.top:
                break
            region = block.parent
            owner = None if region is None else region.parent
            if owner is None:
                return
            chain.append(owner)
            cur = owner
        for o in chain:
            if id(o) not in self.at:
                self.at[id(o)] = len(self.list)
                self.list.append(o)

    def pop(self) -> Op | None:
        while self.list:
            op = self.list.pop()
            if op is not None:
                del self.at[id(op)]
                return op
        return None

    def clear(self) -> None:
        self.list.clear()
        self.at.clear()

    def remove(self, op: Op) -> None:
        i = self.at.pop(id(op), None)
        if i is not None:
            self.list[i] = None

    def replace_all_uses(self, old: Value, new: Value) -> None:
        for user, i in self.uses.of(old):
            self.uses.set_operand(user, i, new)
            self.push(user)

    def _push_operand_definers(self, op: Op) -> None:
        for v in op.operands:
            d = v.defining_op
            if d is None:
                continue
            other: Op | None = None
            more = False
            for user, _ in self.uses.of(v):
                if user is op or user is other:
                    continue
                if other is None:
                    other = user
                    continue
                more = True
                break
            if not more:
                self.push(d)

    def erase(self, op: Op) -> None:
        """MLIR's ``RewriterBase::eraseOp``: the ops nested in ``op`` (last first), then ``op``;
        ``ValueError`` if a result of ``op`` is still used outside it."""
        tree = list(op.walk()) if op.regions else [op]
        inner = {id(o) for o in tree}
        for r in op.results:
            if any(id(u) not in inner for u, _ in self.uses.of(r)):
                raise ValueError(f"cannot erase {op.where()}: result {r.index} still has uses")
        for o in reversed(tree):
            self._push_operand_definers(o)
            self.remove(o)
            self.uses.drop(o, nested=False)
        erase_op(op)

    def replace_op(self, op: Op, value: Value) -> None:
        """MLIR's ``RewriterBase::replaceOp`` of a one-result op by ``value``."""
        self.replace_all_uses(op.results[0], value)
        self.erase(op)

    def insert_before(self, anchor: Op, op: Op) -> Value:
        """The new ``op`` right before ``anchor`` (the op being rewritten); its result."""
        insert_before(anchor, op)
        self.uses.add(op)
        self.push(op)
        return op.results[0]


def _collective_pattern(op: Op, d: _Driver) -> bool:
    """Applies the first of Shardy's ``sdy-collective`` patterns for ``op``'s kind that matches,
    in the order MLIR's ``PatternApplicator`` tries them (most matched ops first, then as
    registered); whether one did."""
    name = op.name
    uses = d.uses
    if name == "sdy.all_gather" and _EMPTY_LISTS.fullmatch(op.attributes.get("gathering_axes", "")):
        d.replace_op(op, op.operands[0])
        return True
    if name == "sdy.all_slice":
        g = op.operands[0].defining_op
        if g is not None and g.name == "sdy.all_gather":
            gathering = g.attributes.get("gathering_axes", "").replace("list_of_axis_ref_lists", "")
            slicing = op.attributes.get("slicing_axes", "").replace("list_of_axis_ref_lists", "")
            if gathering == slicing:
                d.replace_op(op, g.operands[0])
                return True
        if _EMPTY_LISTS.fullmatch(op.attributes.get("slicing_axes", "")):
            d.replace_op(op, op.operands[0])
            return True
        return _reduce_scatter_fusion(op, d)
    if name == "sdy.all_reduce":
        s = op.operands[0].defining_op
        if (
            s is not None
            and s.name == "sdy.replicated_to_unreduced"
            and _axes_text(s.attributes.get("axes", "")) == _axes_text(op.attributes.get("reduction_axes", ""))
        ):
            d.replace_op(op, s.operands[0])
            return True
        if op.attributes.get("reduction_axes", "").replace(" ", "") == "#sdy<axis_ref_list{}>":
            d.replace_op(op, op.operands[0])
            return True
        if s is not None and s.name == "sdy.sharded_to_unreduced" and _sharded_to_unreduced_matches(s, op, d.meshes):
            gather = Op(
                "sdy.all_gather",
                [s.operands[0]],
                [op.results[0].type],
                {"gathering_axes": s.attributes["axes"]},
                location=op.location,
            )
            gather.results[0].sharding = op.results[0].sharding
            d.replace_op(op, d.insert_before(op, gather))
            return True
    if name == "sdy.reduce_scatter" and _EMPTY_LISTS.fullmatch(op.attributes.get("reduce_scatter_axes", "")):
        d.replace_op(op, op.operands[0])
        return True
    if name == "sdy.collective_permute":
        source = get_sharding(op.operands[0], uses)
        if source is not None and is_equivalent(source, op.results[0].sharding):
            d.replace_op(op, op.operands[0])
            return True
    if name == "sdy.all_to_all":
        inner = op.operands[0].defining_op
        if inner is not None and inner.name == "sdy.all_to_all" and uses.has_one_use(inner.results[0]):
            a, b = _a2a_params(inner.attributes.get("params", "")), _a2a_params(op.attributes.get("params", ""))
            dims = [d for p in a + b for d in (p[1], p[2])]
            if len(dims) == len(set(dims)):
                params = sorted(a + b, key=lambda p: p[1])
                text = (
                    "#sdy<all_to_all_param_list["
                    + ", ".join(f"{{{axes}}}: {src}->{tgt}" for axes, src, tgt in params)
                    + "]>"
                )
                fused = Op(
                    "sdy.all_to_all",
                    [inner.operands[0]],
                    [op.results[0].type],
                    {**op.attributes, "params": text},
                    location=op.location,
                )
                fused.results[0].sharding = op.results[0].sharding
                d.replace_op(op, d.insert_before(op, fused))
                return True
        if not uses.has_uses(op.results[0]):
            d.replace_op(op, op.operands[0])
            return True
    return False


_A2A_PARAM = re.compile(r"\{([^}]*)\}: (\d+)->(\d+)")
_AXIS_LIST = re.compile(r"#sdy<axis_ref_list\{(.*)\}>")


def _axis_lists(text: str) -> list[list[AxisRef]]:
    m = re.fullmatch(r"#sdy<list_of_axis_ref_lists\[(.*)\]>", text.strip())
    if m is None:
        return []
    return [[AxisRef.parse(a) for a in _split_axes(d)] for d in re.findall(r"\{([^}]*)\}", m.group(1))]


def _axis_lists_text(per_dim: list[list[AxisRef]]) -> str:
    return "#sdy<list_of_axis_ref_lists[" + ", ".join("{" + ", ".join(str(a) for a in d) + "}" for d in per_dim) + "]>"


def _reduce_scatter_fusion(all_slice: Op, d: _Driver) -> bool:
    """Shardy's ``ReduceScatterFusion``: ``all_slice(all_reduce(x))`` whose slicing axes start
    with all the reduction axes becomes ``reduce_scatter(x)`` (then an ``all_slice`` of the
    remaining slicing axes)."""
    uses, meshes = d.uses, d.meshes
    all_reduce = all_slice.operands[0].defining_op
    if all_reduce is None or all_reduce.name != "sdy.all_reduce":
        return False
    block = all_slice.parent
    assert block is not None
    users = uses.users(all_reduce.results[0])
    for u in users:
        if u.name != "sdy.all_slice" or u.attributes.get("slicing_axes") != all_slice.attributes.get("slicing_axes"):
            return False
        if u.parent is block and block.ops.index(u) < block.ops.index(all_slice):
            return False
    out = all_reduce.results[0].sharding
    if out is None:
        return False
    mesh = out.mesh if out.mesh is not None else meshes.get(out.mesh_name or "")
    if mesh is None:
        return False
    m = _AXIS_LIST.fullmatch(all_reduce.attributes.get("reduction_axes", "").strip())
    reduction = [AxisRef.parse(a) for a in _split_axes(m.group(1))] if m else []
    remaining = list(reduction)
    scatter: list[list[AxisRef]] = []
    residual: list[list[AxisRef]] = []
    has_residual = False
    for axes in _axis_lists(all_slice.attributes.get("slicing_axes", "")):
        k = 0
        while k < len(axes) and axes[k] in remaining:
            remaining.remove(axes[k])
            k += 1
        scatter.append(axes[:k])
        residual.append(axes[k:])
        has_residual |= bool(axes[k:])
    if remaining:
        return False
    tensor = all_reduce.operands[0]
    in_sharding = get_sharding(tensor, uses)
    if in_sharding is None:
        in_sharding = make_sharding((None, mesh), [DimSharding((), closed=True) for _ in scatter])
    dims = []
    for dim, extra in zip(in_sharding.dims, scatter):
        axes = list(dim.axes)
        for a in extra:  # Shardy's addAxisOrMerge
            if axes and axes[-1].can_merge(a):
                axes[-1] = axes[-1].merge(a, mesh)
            else:
                axes.append(a)
        dims.append(DimSharding(axes, closed=True))
    slice_out = all_slice.results[0].sharding
    assert slice_out is not None
    # The all_slice's replicated and unreduced axes (and their reduction) on the all_reduce's
    # mesh; the reduce_scatter reduces as the all_reduce did.
    rs_sharding = with_parts(slice_out, dims=dims, ref=mesh_ref(out))
    attrs = {"reduce_scatter_axes": _axis_lists_text(scatter)}
    if "reduction_op" in all_reduce.attributes:
        attrs["reduction_op"] = all_reduce.attributes["reduction_op"]
    rs = Op("sdy.reduce_scatter", [tensor], [tensor.type], attrs, location=all_reduce.location)
    rs.results[0].sharding = rs_sharding
    final = d.insert_before(all_slice, rs)
    if has_residual:
        rest = Op(
            "sdy.all_slice",
            [final],
            [tensor.type],
            {"slicing_axes": _axis_lists_text(residual)},
            location=all_slice.location,
        )
        rest.results[0].sharding = slice_out
        final = d.insert_before(all_slice, rest)
    for u in uses.users(all_reduce.results[0]):
        d.replace_op(u, final)
    d.erase(all_reduce)
    return True


def _a2a_params(text: str) -> list[tuple[str, int, int]]:
    return [(axes, int(src), int(tgt)) for axes, src, tgt in _A2A_PARAM.findall(text)]


def _axes_text(text: str) -> str:
    m = _AXIS_LIST.fullmatch(text.strip())
    return m.group(1).replace(" ", "") if m else text


def _sharded_to_unreduced_matches(s2u: Op, all_reduce: Op, meshes: dict[str, Mesh]) -> bool:

    out = s2u.attributes.get("out_sharding")
    if out is None:
        return False
    sharding = TensorSharding.parse(out, meshes or None)
    mesh = sharding.mesh if sharding.mesh is not None else meshes.get(sharding.mesh_name or "")
    if mesh is None:
        return False
    axes = [
        AxisRef.parse(a.strip())
        for d in re.findall(r"\{([^}]*)\}", s2u.attributes.get("axes", ""))
        for a in _split_axes(d)
    ]
    merged = ", ".join(str(a) for a in AxisRef.sort_and_merge(axes, mesh))
    return merged.replace(" ", "") == _axes_text(all_reduce.attributes.get("reduction_axes", ""))


def _split_axes(text: str) -> list[str]:
    return [m.group(0) for m in re.finditer(r'"(?:[^"\\]|\\.)*"(?::\(\d+\)\d+)?', text)]


def _attached(op: Op, module: Module) -> bool:
    while op is not module.op:
        block = op.parent
        if block is None or block.parent is None or block.parent.parent is None:
            return False
        op = block.parent.parent
    return True


def _insertion_block(op: Op) -> Block | None:
    block = op.parent
    while block is not None:
        region = block.parent
        owner = None if region is None else region.parent
        if owner is None:
            return None
        if owner.name in _ISOLATED:
            return region.blocks[0] if region is not None else None
        block = owner.parent
    return None


def _fold_constant(op: Op, d: _Driver, kept: dict[tuple[int, str, str], Op], hoisted: set[int]) -> bool:
    """``OperationFolder::insertKnownConstant`` for the constant ``op``: the first constant of
    each value and type in an insertion block is kept (and hoisted to the block's start, after
    the constants hoisted before it); the others are replaced by it. Whether ``op`` was."""
    block = _insertion_block(op)
    if block is None:
        return False
    key = (id(block), op.attributes.get("value", ""), str(op.results[0].type))
    existing = kept.get(key)
    if existing is not None:
        d.replace_op(op, existing.results[0])
        return True
    kept[key] = op
    at_front = op.parent is block and block.ops and block.ops[0] is op
    prev_hoisted = False
    if op.parent is block:
        i = block.ops.index(op)
        prev_hoisted = i > 0 and id(block.ops[i - 1]) in hoisted
    if not at_front and not prev_hoisted:
        if block.ops:
            move_before(op, block.ops[0])
        else:
            insert_at_start(block, op)
    hoisted.add(id(op))
    return False


def _sweep(module: Module, d: _Driver) -> bool:
    """One sweep of MLIR's driver (see the module docstring); whether it changed the program."""
    d.clear()
    kept: dict[tuple[int, str, str], Op] = {}
    hoisted: set[int] = set()
    for first in list(module.ops):
        for op in post_order(first):
            if not _attached(op, module):  # a constant replaced earlier in this walk
                continue
            if op.name == "stablehlo.constant" and op.parent is not None and _fold_constant(op, d, kept, hoisted):
                continue
            d.push(op)
    changed = False
    while (popped := d.pop()) is not None:
        if is_trivially_dead(popped, d.uses):
            d.erase(popped)
            changed = True
            continue
        if popped.name in _PATTERN_OPS and _collective_pattern(popped, d):
            changed = True
    return changed


@register_pass(
    "canonicalize",
    options={
        "enable-patterns": "",
        "disable-patterns": "",
        "max-iterations": 10,
        "max-num-rewrites": -1,
        "region-simplify": "aggressive",
        "test-convergence": False,
        "top-down": False,
        "cse-between-iterations": False,
    },
)
def canonicalize(module: Module, options: Options | None = None) -> None:
    """MLIR's ``canonicalize`` as Shardy's export pipeline runs it
    (``enable-patterns={sdy-collective}``): Shardy's collective patterns (no-op
    ``all_gather`` / ``all_slice`` / ``all_reduce`` / ``reduce_scatter`` /
    ``collective_permute`` removed; ``all_slice`` of a matching ``all_gather`` and
    ``all_reduce`` of a matching ``replicated_to_unreduced`` folded away; ``all_reduce`` of a
    matching ``sharded_to_unreduced`` turned into an ``all_gather``; ``all_slice`` of an
    ``all_reduce`` fused into a ``reduce_scatter``; chained ``all_to_all`` fused; unused
    ``all_to_all`` removed), plus the greedy rewriter's removal of unused side-effect-free ops
    and uniquing/hoisting of ``stablehlo.constant``. Mirrors Shardy's
    ``shardy/dialect/sdy/ir/canonicalization.cc``/``.td``. Raises ``PipelineError`` for any
    other pattern selection (MLIR's full canonicalization is not implemented)."""
    opts = options or {}
    enabled = str(opts.get("enable-patterns", "")).strip("{} ")
    if enabled != "sdy-collective":
        raise PipelineError(
            f"canonicalize: only enable-patterns={{sdy-collective}} (Shardy's export pipeline) is supported, got {{{enabled}}}"
        )
    d = _Driver(module, Uses(module))
    limit = int(opts.get("max-iterations", 10))
    iterations = 0
    while True:
        iterations += 1
        if 0 <= limit < iterations or not _sweep(module, d):
            break
