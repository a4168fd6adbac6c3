"""``canonicalize`` as Shardy's export pipeline runs it (``enable-patterns={sdy-collective}``):
MLIR's greedy rewriter with only Shardy's collective canonicalization patterns enabled
(``shardy/dialect/sdy/ir/canonicalization.cc`` / ``.td``). Besides the patterns, the greedy
rewriter removes ops whose results are unused and that have no side effects, and uniques
``stablehlo.constant`` ops, hoisting them to the start of their function (or of the body of
the nearest isolated computation)."""

from __future__ import annotations

import re

from shardwise.ir.core import Block, Func, Module, Op
from shardwise.ir.rewrite import Uses, erase_op, insert_at_start, insert_before, move_before
from shardwise.ir.sdy import get_sharding, is_equivalent, make_sharding, post_order, with_parts
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


def _replace_with_operand(op: Op, uses: Uses) -> None:
    uses.replace_all_uses(op.results[0], op.operands[0])
    erase_op(op, uses)


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


def _collective_pattern(op: Op, uses: Uses, meshes: dict[str, Mesh]) -> bool:
    """Applies one of Shardy's ``sdy-collective`` patterns to ``op``; whether it did."""
    name = op.name
    if name == "sdy.all_gather" and _EMPTY_LISTS.fullmatch(op.attributes.get("gathering_axes", "")):
        _replace_with_operand(op, uses)
        return True
    if name == "sdy.all_slice":
        if _EMPTY_LISTS.fullmatch(op.attributes.get("slicing_axes", "")):
            _replace_with_operand(op, uses)
            return True
        if _reduce_scatter_fusion(op, uses, meshes):
            return True
        d = op.operands[0].defining_op
        if d is not None and d.name == "sdy.all_gather":
            gathering = d.attributes.get("gathering_axes", "").replace("list_of_axis_ref_lists", "")
            slicing = op.attributes.get("slicing_axes", "").replace("list_of_axis_ref_lists", "")
            if gathering == slicing:
                uses.replace_all_uses(op.results[0], d.operands[0])
                erase_op(op, uses)
                return True
    if name == "sdy.all_reduce":
        if op.attributes.get("reduction_axes", "").replace(" ", "") == "#sdy<axis_ref_list{}>":
            _replace_with_operand(op, uses)
            return True
        d = op.operands[0].defining_op
        if (
            d is not None
            and d.name == "sdy.replicated_to_unreduced"
            and _axes_text(d.attributes.get("axes", "")) == _axes_text(op.attributes.get("reduction_axes", ""))
        ):
            uses.replace_all_uses(op.results[0], d.operands[0])
            erase_op(op, uses)
            return True
        if d is not None and d.name == "sdy.sharded_to_unreduced" and _sharded_to_unreduced_matches(d, op, meshes):
            gather = Op(
                "sdy.all_gather",
                [d.operands[0]],
                [op.results[0].type],
                {"gathering_axes": d.attributes["axes"]},
                location=op.location,
            )
            gather.results[0].sharding = op.results[0].sharding
            insert_before(op, gather)
            uses.add(gather)
            uses.replace_all_uses(op.results[0], gather.results[0])
            erase_op(op, uses)
            return True
    if name == "sdy.reduce_scatter" and _EMPTY_LISTS.fullmatch(op.attributes.get("reduce_scatter_axes", "")):
        _replace_with_operand(op, uses)
        return True
    if name == "sdy.collective_permute":
        source = get_sharding(op.operands[0], uses)
        if source is not None and is_equivalent(source, op.results[0].sharding):
            _replace_with_operand(op, uses)
            return True
    if name == "sdy.all_to_all":
        if not uses.has_uses(op.results[0]):
            erase_op(op, uses)
            return True
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
                insert_before(op, fused)
                uses.add(fused)
                uses.replace_all_uses(op.results[0], fused.results[0])
                erase_op(op, uses)
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


def _reduce_scatter_fusion(all_slice: Op, uses: Uses, meshes: dict[str, Mesh]) -> bool:
    """Shardy's ``ReduceScatterFusion``: ``all_slice(all_reduce(x))`` whose slicing axes start
    with all the reduction axes becomes ``reduce_scatter(x)`` (then an ``all_slice`` of the
    remaining slicing axes)."""

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
    for d, extra in zip(in_sharding.dims, scatter):
        axes = list(d.axes)
        for a in extra:  # Shardy's addAxisOrMerge
            if axes and axes[-1].can_merge(a):
                axes[-1] = axes[-1].merge(a, mesh)
            else:
                axes.append(a)
        dims.append(DimSharding(axes, closed=True))
    slice_out = all_slice.results[0].sharding
    assert slice_out is not None
    rs_sharding = with_parts(out, dims=dims, replicated=slice_out.replicated, unreduced=slice_out.unreduced)
    rs = Op(
        "sdy.reduce_scatter",
        [tensor],
        [tensor.type],
        {"reduce_scatter_axes": _axis_lists_text(scatter)},
        location=all_reduce.location,
    )
    rs.results[0].sharding = rs_sharding
    insert_before(all_slice, rs)
    uses.add(rs)
    final = rs.results[0]
    if has_residual:
        rest = Op(
            "sdy.all_slice",
            [final],
            [tensor.type],
            {"slicing_axes": _axis_lists_text(residual)},
            location=all_slice.location,
        )
        rest.results[0].sharding = slice_out
        insert_before(all_slice, rest)
        uses.add(rest)
        final = rest.results[0]
    for u in uses.users(all_reduce.results[0]):
        uses.replace_all_uses(u.results[0], final)
        erase_op(u, uses)
    erase_op(all_reduce, uses)
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


def _unique_constants(module: Module, uses: Uses) -> None:
    owned: dict[int, dict[tuple[str, str, str], Op]] = {}
    folder_owned: set[int] = set()
    for top in list(module.ops):
        for op in post_order(top):
            if op.name != "stablehlo.constant" or op.parent is None:
                continue
            block = _insertion_block(op)
            if block is None:
                continue
            table = owned.setdefault(id(block), {})
            key = ("stablehlo", op.attributes.get("value", ""), str(op.results[0].type))
            existing = table.get(key)
            if existing is not None:
                uses.replace_all_uses(op.results[0], existing.results[0])
                erase_op(op, uses)
                continue
            table[key] = op
            at_front = op.parent is block and block.ops and block.ops[0] is op
            prev_owned = False
            if op.parent is block:
                i = block.ops.index(op)
                prev_owned = i > 0 and id(block.ops[i - 1]) in folder_owned
            if not at_front and not prev_owned:
                if block.ops:
                    move_before(op, block.ops[0])
                else:
                    insert_at_start(block, op)
            folder_owned.add(id(op))


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
    uses = Uses(module)
    meshes = module.meshes
    _unique_constants(module, uses)
    changed = True
    iterations = 0
    limit = int(opts.get("max-iterations", 10))
    while changed and (limit < 0 or iterations < limit):
        changed = False
        iterations += 1
        for top in list(module.ops):
            for op in reversed(post_order(top)):
                if not _attached(op, module):
                    continue
                if is_trivially_dead(op, uses):
                    erase_op(op, uses)
                    changed = True
                    continue
                if op.name in _PATTERN_OPS and _collective_pattern(op, uses, meshes):
                    changed = True
