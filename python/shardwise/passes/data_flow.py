"""Data flow edge passes: ``sdy-add-data-flow-edges`` and ``sdy-add-func-data-flow-edges``
(Shardy's ``transforms/import/add_data_flow_edges.cc``, ``add_func_data_flow_edges.cc``, and
``addDataFlowEdges`` in ``transforms/propagation/utils.cc``), and their export counterparts
``sdy-sink-data-flow-edges`` and ``sdy-sink-func-data-flow-edges``
(``transforms/export/sink_data_flow_edges.cc``, ``sink_func_data_flow_edges.cc``, with
``saveDebugInfoDictsFromDataFlowEdges`` of ``propagation/debugging/source_sharding.cc``)."""

from __future__ import annotations

from collections.abc import Sequence

from shardwise.errors import ProgramError
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.rewrite import (
    SymbolTable,
    Uses,
    erase_op,
    insert_after,
    insert_after_value,
    insert_at_start,
    insert_before,
)
from shardwise.ir.sdy import (
    CALL,
    DATA_FLOW_EDGE,
    DATA_FLOW_OPS,
    FUNC_DATA_FLOW_EDGE,
    MANUAL_COMPUTATION,
    add_free_axes,
    block_arg_edge_owners,
    fully_replicated,
    get_sharding,
    is_data_flow_op,
    is_static_tensor,
    lookup_data_flow_edge,
    manual_axes,
    post_order,
    rank_of,
    result_edge_owners,
    set_sharding,
)
from shardwise.passes.registry import Options, register_pass
from shardwise.sharding import TensorSharding

__all__ = [
    "add_data_flow_edges",
    "add_func_data_flow_edges",
    "main_func",
    "sink_data_flow_edges",
    "sink_func_data_flow_edges",
]

SHARDING_ORIGINS = "sdy.sharding_origins"
PROPAGATION_EDGES = "sdy.propagation_edges"
BLOCK_ARG_SHARDING_ORIGINS = "sdy.block_arg_sharding_origins"
BLOCK_ARG_PROPAGATION_EDGES = "sdy.block_arg_propagation_edges"
RESULT_SHARDING_ORIGINS = "sdy.result_sharding_origins"
RESULT_PROPAGATION_EDGES = "sdy.result_propagation_edges"


def add_edges(owners: Sequence[Value], uses: Uses) -> None:
    """Shardy's ``addDataFlowEdges``: an ``sdy.data_flow_edge`` right after each owner with a
    static shape, holding the owner's sharding, which every other use of the owner now uses."""
    for owner in reversed(owners):
        if not is_static_tensor(owner):
            continue
        sharding = get_sharding(owner, uses)
        edge = Op(DATA_FLOW_EDGE, [owner], [owner.type], location=_loc(owner))
        edge.results[0].sharding = sharding
        insert_after_value(owner, edge)
        uses.replace_all_uses(owner, edge.results[0])
        uses.add(edge)


def _loc(v: Value) -> str | None:
    if isinstance(v.owner, Op):
        return v.owner.location
    parent = v.owner.parent
    return None if parent is None or parent.parent is None else parent.parent.location


@register_pass("sdy-add-data-flow-edges", acts_on=DATA_FLOW_OPS, adds=frozenset({DATA_FLOW_EDGE}))
def add_data_flow_edges(module: Module, options: Options | None = None) -> None:
    """Inserts an ``sdy.data_flow_edge`` for every data flow edge owner (the body arguments
    and results of named and manual computations, the results of ``while``, ``case`` and
    ``optimization_barrier``), taking the owner's sharding. Mirrors Shardy's
    ``add_data_flow_edges.cc``."""
    if not any(is_data_flow_op(op) for op in module.walk()):
        return
    uses = Uses(module)
    for top in list(module.ops):
        for op in post_order(top):
            if is_data_flow_op(op):
                add_edges(block_arg_edge_owners(op), uses)
                add_edges(result_edge_owners(op), uses)


def main_func(module: Module, symbols: SymbolTable | None = None, *, use_single_func: bool = True) -> Func:
    """Shardy's ``getMainFuncOrDie``: the only function when ``use_single_func`` and there is
    one, else ``@main``; ``ProgramError`` when there is none."""
    funcs = module.funcs
    if use_single_func and len(funcs) == 1:
        return funcs[0]
    for f in funcs:
        if f.sym_name == "main":
            return f
    raise ProgramError("the module has no @main function (Shardy's getMainFuncOrDie)")


@register_pass("sdy-add-func-data-flow-edges")
def add_func_data_flow_edges(module: Module, options: Options | None = None) -> None:
    """Inserts an ``sdy.func_data_flow_edge`` for every argument of every function but the main
    one (at the start of its body) and for every result of every ``func.call`` (right after
    it), holding the value's sharding. Mirrors Shardy's ``add_func_data_flow_edges.cc``.
    Raises ``ProgramError`` when the module has several functions and none is ``@main``."""
    main = main_func(module)
    uses = Uses(module)
    for top in list(module.ops):
        for f in post_order(top):
            if not isinstance(f, Func) or f is main or not f.regions[0].blocks:
                continue
            first = f.body.ops[0] if f.body.ops else None
            for arg in f.args:
                if not is_static_tensor(arg):
                    continue
                edge = Op(FUNC_DATA_FLOW_EDGE, [arg], [arg.type], location=f.location)
                if first is None:
                    insert_at_start(f.body, edge)
                else:
                    insert_before(first, edge)
                uses.replace_all_uses(arg, edge.results[0])
                uses.add(edge)
                sharding = get_sharding(arg, uses)
                if sharding is not None:
                    edge.results[0].sharding = sharding
    for top in list(module.ops):
        for call in post_order(top):
            if call.name != CALL:
                continue
            anchor = call
            for r in call.results:
                if not is_static_tensor(r):
                    continue
                edge = Op(FUNC_DATA_FLOW_EDGE, [r], [r.type], location=call.location)
                insert_after(anchor, edge)
                anchor = edge
                uses.replace_all_uses(r, edge.results[0])
                uses.add(edge)
                sharding = get_sharding(r, uses)
                if sharding is not None:
                    edge.results[0].sharding = sharding


def _shardings_from_edges(owners: Sequence[Value], uses: Uses) -> list[TensorSharding] | None:
    """Shardy's ``getShardingsFromDataFlowEdges``: the shardings of the owners' edges, fully
    open (on the first named mesh) where an edge has none; ``None`` when no edge has a
    sharding on a named mesh."""
    found: list[TensorSharding | None] = []
    ref: TensorSharding | None = None
    for owner in owners:
        edge = lookup_data_flow_edge(owner, uses)
        s = edge.results[0].sharding if edge is not None else None
        if s is not None and ref is None and s.mesh_name is not None:
            ref = s
        found.append(s)
    if ref is None:
        return None
    out = []
    for s, owner in zip(found, owners):
        out.append(s if s is not None else fully_replicated((ref.mesh_name, ref.mesh), rank_of(owner), False))
    return out


def _set_block_arg_owner_shardings(op: Op, shardings: list[TensorSharding]) -> None:
    if op.name == MANUAL_COMPUTATION:
        assert op.operand_shardings is not None
        manual = manual_axes(op)
        op.operand_shardings = tuple(
            add_free_axes(outer, new, manual) for outer, new in zip(op.operand_shardings, shardings)
        )
    else:
        op.operand_shardings = tuple(shardings)


def _debug_dicts(owners: Sequence[Value], op: Op, origins: bool, edges: bool, operand: bool, uses: Uses) -> None:
    if not origins and not edges:
        return
    origin_dicts: list[str] = []
    edge_dicts: list[str] = []
    for owner in owners:
        edge = lookup_data_flow_edge(owner, uses)
        if edge is None:
            continue
        if origins and SHARDING_ORIGINS in edge.attributes:
            origin_dicts.append(edge.attributes[SHARDING_ORIGINS])
        if edges:
            text = edge.attributes.get(PROPAGATION_EDGES)
            if text is not None and text.replace(" ", "") != "#sdy.propagation_edges<[]>":
                edge_dicts.append(text)
    if origins:
        op.attributes[BLOCK_ARG_SHARDING_ORIGINS if operand else RESULT_SHARDING_ORIGINS] = (
            "[" + ", ".join(origin_dicts) + "]"
        )
    if edges:
        op.attributes[BLOCK_ARG_PROPAGATION_EDGES if operand else RESULT_PROPAGATION_EDGES] = (
            "[" + ", ".join(edge_dicts) + "]"
        )


@register_pass(
    "sdy-sink-data-flow-edges",
    anchor="func.func",
    options={"sink-debug-sharding-origins": False, "sink-debug-propagation-edge-sharding": False},
    acts_on=DATA_FLOW_OPS | {DATA_FLOW_EDGE},
    adds=frozenset(),
)
def sink_data_flow_edges(module: Module, func: Func, options: Options) -> None:
    """Moves the shardings of the ``sdy.data_flow_edge`` ops of ``func`` back onto their data
    flow ops (in/out shardings of named and manual computations, result shardings of the
    others) and removes the edges; with the debug options, also gathers the edges'
    ``sdy.sharding_origins`` / ``sdy.propagation_edges`` onto the op. Mirrors Shardy's
    ``sink_data_flow_edges.cc``."""
    origins = bool(options.get("sink-debug-sharding-origins", False))
    debug_edges = bool(options.get("sink-debug-propagation-edge-sharding", False))
    if not any(op.name == DATA_FLOW_EDGE or is_data_flow_op(op) for op in func.walk_nested()):
        return
    uses = Uses(func)

    def walk(ops: list[Op]) -> None:
        for op in list(ops):
            if op.name == DATA_FLOW_EDGE:
                uses.replace_all_uses(op.results[0], op.operands[0])
                erase_op(op, uses)
                continue
            if is_data_flow_op(op):
                owners = block_arg_edge_owners(op)
                shardings = _shardings_from_edges(owners, uses)
                if shardings is not None:
                    _set_block_arg_owner_shardings(op, shardings)
                _debug_dicts(owners, op, origins, debug_edges, True, uses)
                results = result_edge_owners(op)
                shardings = _shardings_from_edges(results, uses)
                if shardings is not None:
                    for r, s in zip(results, shardings):
                        r.sharding = s
                _debug_dicts(results, op, origins, debug_edges, False, uses)
            for region in op.regions:
                for block in region.blocks:
                    walk(block.ops)

    walk(func.body.ops)


@register_pass("sdy-sink-func-data-flow-edges", anchor="func.func")
def sink_func_data_flow_edges(module: Module, func: Func, options: Options | None = None) -> None:
    """Moves the sharding of each ``sdy.func_data_flow_edge`` in ``func`` onto its operand
    (a fully open one when the edge has none but the operand has) and removes the edge.
    Mirrors Shardy's ``sink_func_data_flow_edges.cc``."""
    uses = Uses(func)

    def walk(ops: list[Op]) -> None:
        for op in list(ops):
            if op.name == FUNC_DATA_FLOW_EDGE:
                operand, result = op.operands[0], op.results[0]
                operand_sharding = get_sharding(operand, uses)
                sharding = get_sharding(result, uses)
                if sharding is not None:
                    set_sharding(operand, sharding, uses)
                elif operand_sharding is not None:
                    set_sharding(
                        operand,
                        fully_replicated(
                            (operand_sharding.mesh_name, operand_sharding.mesh), operand_sharding.rank, False
                        ),
                        uses,
                    )
                uses.replace_all_uses(result, operand)
                erase_op(op, uses)
                continue
            for region in op.regions:
                for block in region.blocks:
                    walk(block.ops)

    walk(func.body.ops)
