"""Export passes that Shardy's propagation pipeline runs after propagation (Shardy's
``transforms/export/``): ``sdy-export-named-computations``, ``sdy-propagate-to-func-results``,
``sdy-unflatten-call-graph``, ``sdy-insert-func-call-reshards``,
``sdy-constant-or-scalar-merger``, ``sdy-remove-sharding-groups``,
``sdy-sharding-constraint-to-reshard``, ``sdy-update-non-divisible-input-output-shardings``,
``sdy-remove-sub-axes-in-input-output-shardings``, ``sdy-close-shardings``,
``sdy-drop-sharding-rules``, ``sdy-remove-propagation-debug-info``; and
``sdy-populate-op-sharding-rules`` (``transforms/propagation/populate_op_sharding_rules.cc``)."""

from __future__ import annotations

import math

from shardwise.errors import ProgramError
from shardwise.ir.attrs import quote, unquote
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.rewrite import SymbolTable, Uses, erase_op, erase_ops, insert_after_value, insert_before
from shardwise.ir.sdy import (
    CALL,
    DATA_FLOW_EDGE,
    MANUAL_COMPUTATION,
    NAMED_COMPUTATION,
    ORIGINAL_FUNC_NAME,
    RESHARD,
    SHARDING_CONSTRAINT,
    SHARDING_GROUP,
    SHARDING_RULE,
    ShardingSite,
    add_free_axes,
    callee_name,
    closed_like,
    erase_manual_axes,
    fully_closed_like,
    get_sharding,
    is_equivalent,
    is_scalar,
    is_static_tensor,
    manual_axes,
    original_func_name,
    post_order,
    set_callee,
    set_sharding,
    symbol_ref,
    transform_shardings,
    with_parts,
)
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.passes.call_graph import func_arg_shardings, func_result_shardings
from shardwise.passes.data_flow import _shardings_from_edges, main_func
from shardwise.passes.registry import Options, register_pass
from shardwise.sharding import AxisRef, DimSharding, TensorSharding

__all__ = [
    "close_shardings",
    "constant_or_scalar_merger",
    "drop_sharding_rules",
    "export_named_computations",
    "insert_func_call_reshards",
    "populate_op_sharding_rules",
    "propagate_to_func_results",
    "remove_propagation_debug_info",
    "remove_sharding_groups",
    "remove_sub_axes_in_input_output_shardings",
    "sharding_constraint_to_reshard",
    "unflatten_call_graph",
    "update_non_divisible_input_output_shardings",
]

FUNC_MANUAL_AXES = "sdy.func_manual_axes"
EXECUTION_THREAD = "execution_thread"
_NAMED_INHERENT = frozenset({"name", "in_shardings", "out_shardings"})


def _callee(call: Op, symbols: SymbolTable) -> Func:
    try:
        return symbols.lookup_func(callee_name(call))
    except KeyError:
        raise ProgramError(f"{call.where()}: calls @{callee_name(call)}, which the module does not define") from None


# ---------------------------------------------------------------------------------- named computations


def _remove_edges(values: list[Value], uses: Uses) -> None:
    for v in values:
        users = uses.users(v)
        if users and users[0].name == DATA_FLOW_EDGE:
            edge = users[0]
            uses.replace_all_uses(edge.results[0], edge.operands[0])
            erase_op(edge, uses)


@register_pass(
    "sdy-export-named-computations",
    acts_on=frozenset({NAMED_COMPUTATION}),
    adds=frozenset({CALL, "func.func", "func.return"}),
)
def export_named_computations(module: Module, options: Options | None = None) -> None:
    """Turns every ``sdy.named_computation`` (innermost first) into a ``func.call`` of a new
    private function holding its body (named after it, renamed ``name_N`` on a clash, with
    ``sdy.original_func_name``); shardings come from its data flow edges (then removed) or its
    in/out shardings: the inputs' on the function arguments, the outputs' on the call. Mirrors
    Shardy's ``export_named_computations.cc``."""
    if not any(op.name == NAMED_COMPUTATION for op in module.walk()):
        return
    symbols = SymbolTable(module)
    uses = Uses(module)
    call_results: list[Value] = []
    body = module.op.regions[0].entry
    for top in list(module.ops):
        for named in post_order(top):
            if named.name != NAMED_COMPUTATION:
                continue
            block = named.regions[0].entry
            in_sh = _shardings_from_edges(block.args, uses)
            if in_sh is not None:
                named.operand_shardings = tuple(in_sh)
            out_sh = _shardings_from_edges(named.results, uses)
            if out_sh is not None:
                for r, s in zip(named.results, out_sh):
                    r.sharding = s
            name = unquote(named.attributes["name"])
            func = Func(
                name,
                [a.type for a in block.args],
                [r.type for r in named.results],
                {"sym_visibility": quote("private")},
                named.location,
            )
            func.attributes[ORIGINAL_FUNC_NAME] = named.attributes["name"]
            # Move the body: the function's entry block becomes the named computation's block.
            region = named.regions[0]
            func.regions[0] = region
            region.parent = func
            named.regions.clear()
            block.ops[-1].name = "func.return"
            func.arg_attrs = [{} for _ in block.args]
            func.result_attrs = [{} for _ in named.results]
            func.result_shardings = [None] * len(named.results)
            _remove_edges(list(block.args), uses)
            if named.operand_shardings is not None:
                for a, s in zip(block.args, named.operand_shardings):
                    a.sharding = s
            if EXECUTION_THREAD in named.attributes:
                func.attributes[EXECUTION_THREAD] = named.attributes[EXECUTION_THREAD]
            body.append(func)
            func_name = symbols.insert(func)
            attrs = {k: v for k, v in named.attributes.items() if k not in _NAMED_INHERENT and k != EXECUTION_THREAD}
            attrs["callee"] = "@" + _sym(func_name)
            call = Op(CALL, named.operands, [r.type for r in named.results], attrs, location=named.location)
            has_out = all(r.sharding is not None for r in named.results) and bool(named.results)
            if has_out:
                for r, cr in zip(named.results, call.results):
                    cr.sharding = r.sharding
            insert_before(named, call)
            uses.add(call, nested=False)
            for r, cr in zip(named.results, call.results):
                uses.replace_all_uses(r, cr)
            uses.drop(named)  # its body has moved: only its own operands
            erase_op(named)
            call_results.extend(call.results)
    _remove_edges(call_results, uses)


def _sym(name: str) -> str:
    return symbol_ref(name)


@register_pass("sdy-propagate-to-func-results", adds=frozenset())
def propagate_to_func_results(module: Module, options: Options | None = None) -> None:
    """Sets the result shardings of every function but the main one to the shardings of the
    values it returns (clearing those without one). Mirrors Shardy's
    ``propagate_to_func_results.cc``. Raises ``ProgramError`` when there are several functions
    and none is ``@main``."""
    main = main_func(module)
    if all(f is main or not f.regions[0].blocks for f in module.funcs):
        return
    uses = Uses(module)
    for f in module.funcs:
        if f is main or not f.regions[0].blocks:
            continue
        ret = f.return_op
        if ret.name != "func.return":
            continue
        for i, v in enumerate(ret.operands):
            f.result_shardings[i] = get_sharding(v, uses)


@register_pass("sdy-unflatten-call-graph", options={"dedup-functions-fully": False}, adds=frozenset())
def unflatten_call_graph(module: Module, options: Options | None = None) -> None:
    """Makes calls of functions cloned from the same original (``sdy.original_func_name``)
    with the same manual axes and argument/result shardings call one of them (the first
    called); with ``dedup-functions-fully``, shardings are ignored and the most called variant
    is kept. Removes ``sdy.original_func_name`` and ``sdy.func_manual_axes``. Mirrors Shardy's
    ``unflatten_call_graph.cc``."""
    fully = bool((options or {}).get("dedup-functions-fully", False))
    symbols = SymbolTable(module)
    meshes = module.meshes

    def key(f: Func, ignore: bool) -> tuple[object, ...]:
        if ignore:
            return (original_func_name(f), f.attributes.get(FUNC_MANUAL_AXES), None, None)
        args = func_arg_shardings(f, meshes)
        results = func_result_shardings(f, meshes)
        return (
            original_func_name(f),
            f.attributes.get(FUNC_MANUAL_AXES),
            None if args is None else tuple(str(s) for s in args),
            None if results is None else tuple(str(s) for s in results),
        )

    calls = [op for op in module.walk() if op.name == CALL]
    cache: dict[tuple[object, ...], Func] = {}
    for call in calls:
        f = _callee(call, symbols)
        cache.setdefault(key(f, fully), f)
    if fully:
        counts: dict[tuple[object, ...], int] = {}
        for call in calls:
            f = _callee(call, symbols)
            k = key(f, True)
            fk = key(f, False)
            counts[fk] = counts.get(fk, 0) + 1
            cached = cache[k]
            if counts[fk] > counts.get(key(cached, False), 0):
                cache[k] = f
    for call in calls:
        f = _callee(call, symbols)
        set_callee(call, cache[key(f, fully)].sym_name)
    for f in module.funcs:
        f.attributes.pop(ORIGINAL_FUNC_NAME, None)
        f.attributes.pop(FUNC_MANUAL_AXES, None)


@register_pass("sdy-insert-func-call-reshards", acts_on=frozenset({CALL}), adds=frozenset({RESHARD}))
def insert_func_call_reshards(module: Module, options: Options | None = None) -> None:
    """Where a call's result sharding differs from its callee's result sharding, makes the
    call take the callee's sharding and adds an ``sdy.reshard`` to the call's former sharding
    (fully closed when it had none) for the other uses. Mirrors Shardy's
    ``insert_func_call_reshards.cc`` (``insertReshardsOnFuncResults``)."""
    if not any(op.name == CALL for op in module.walk()):
        return
    symbols = SymbolTable(module)
    meshes = module.meshes
    uses = Uses(module)
    for top in list(module.ops):
        for call in post_order(top):
            if call.name != CALL:
                continue
            f = _callee(call, symbols)
            func_sh = func_result_shardings(f, meshes)
            if func_sh is None:
                if not call.results or all(r.sharding is None for r in call.results):
                    continue
                func_sh = [fully_closed_like(r.sharding) for r in call.results if r.sharding is not None]
            for s, r in zip(func_sh, call.results):
                call_sh = get_sharding(r, uses)
                if not is_equivalent(s, call_sh):
                    reshard = Op(RESHARD, [r], [r.type], location=call.location)
                    reshard.results[0].sharding = call_sh if call_sh is not None else fully_closed_like(s)
                    insert_after_value(r, reshard)
                    uses.replace_all_uses(r, reshard.results[0])
                    uses.add(reshard)
            for s, r in zip(func_sh, call.results):
                r.sharding = s


# ---------------------------------------------------------------------------------- function passes


def _key_text(op: Op, texts: dict[int, str]) -> tuple[object, ...]:
    """What decides whether two constants (or broadcasts) are alike: their attributes and the
    printed shardings of their results. ``texts``: each sharding object's text, by id (the
    objects outlive the pass)."""
    shardings = []
    for r in op.results:
        s = r.sharding
        if s is None:
            shardings.append("")
            continue
        text = texts.get(id(s))
        if text is None:
            text = texts[id(s)] = str(s)
        shardings.append(text)
    return (tuple(sorted(op.attributes.items())), tuple(shardings))


#: The ops ``sdy-constant-or-scalar-merger`` merges: constants and broadcasts (of a scalar).
_MERGED_OPS = frozenset({"sdy.constant", "stablehlo.constant", "stablehlo.broadcast_in_dim"})


@register_pass("sdy-constant-or-scalar-merger", anchor="func.func", adds=frozenset())
def constant_or_scalar_merger(module: Module, func: Func, options: Options | None = None) -> None:
    """Merges identical constants (same attributes and shardings, same region) and identical
    broadcasts of the same scalar, keeping the first. Mirrors Shardy's
    ``constant_or_scalar_merger.cc``."""
    constants: dict[tuple[object, ...], Op] = {}
    broadcasts: dict[tuple[object, ...], Op] = {}
    merged: list[Op] = []
    # The uses of merged results are replaced after the walk, in one pass over the function
    # (no use lists); the one operand the walk reads, a broadcast's scalar, is looked up here.
    replaced: dict[int, Value] = {}  # id(result of a merged op) -> the kept op's result
    texts: dict[int, str] = {}
    for op in post_order(func):
        name = op.name
        if name not in _MERGED_OPS or op.parent is None:
            continue
        region = id(op.parent.parent)
        cached: Op | None = None
        if name != "stablehlo.broadcast_in_dim":
            cached = constants.setdefault((region, _key_text(op, texts)), op)
        elif is_scalar(op.operands[0]):
            scalar = replaced.get(id(op.operands[0]), op.operands[0])
            cached = broadcasts.setdefault((region, _key_text(op, texts), str(op.results[0].type), id(scalar)), op)
        if cached is not None and cached is not op:
            for r, cr in zip(op.results, cached.results):
                replaced[id(r)] = cr
            merged.append(op)
    if replaced:
        for op in func.walk():
            operands = op.operands
            for i, v in enumerate(operands):
                new = replaced.get(id(v))
                if new is not None:
                    operands[i] = new
    erase_ops(merged, release=True)


@register_pass("sdy-remove-sharding-groups", acts_on=frozenset({SHARDING_GROUP}), adds=frozenset())
def remove_sharding_groups(module: Module, options: Options | None = None) -> None:
    """Removes every ``sdy.sharding_group``. Mirrors Shardy's ``remove_sharding_groups.cc``."""
    for op in list(module.walk()):
        if op.name == SHARDING_GROUP and op.parent is not None:
            erase_op(op)


@register_pass(
    "sdy-sharding-constraint-to-reshard",
    anchor="func.func",
    acts_on=frozenset({SHARDING_CONSTRAINT}),
    adds=frozenset({RESHARD}),
)
def sharding_constraint_to_reshard(module: Module, func: Func, options: Options | None = None) -> None:
    """Turns every ``sdy.sharding_constraint`` into an ``sdy.reshard`` with the same input,
    sharding and other attributes. Mirrors Shardy's ``sharding_constraint_to_reshard.cc``."""
    for op in func.walk():
        if op.name == SHARDING_CONSTRAINT:
            op.name = RESHARD


def _size(a: AxisRef, mesh: Mesh) -> int:
    return a.size if a.size is not None else mesh.axis_size(a.name)


def _evenly_sharded(s: TensorSharding, shape: tuple[int, ...], mesh: Mesh) -> TensorSharding:
    dims = []
    for d, size in zip(s.dims, shape):
        sharded = 1
        for a in d.axes:
            sharded *= _size(a, mesh)
        if size % sharded == 0:
            dims.append(d)
            continue
        remaining = size
        new_axes: list[AxisRef] = []
        for a in d.axes:
            asize = _size(a, mesh)
            g = math.gcd(asize, remaining)
            if g == 1:
                break
            if asize == g:
                new_axes.append(a)
                remaining //= g
            else:
                new_axes.append(AxisRef(a.name, a.pre_size or 1, g))
                break
        dims.append(DimSharding(new_axes, d.closed))
    return with_parts(s, dims=dims)


def _mesh(s: TensorSharding, meshes: dict[str, Mesh]) -> Mesh:
    m = s.mesh if s.mesh is not None else meshes.get(s.mesh_name or "")
    if m is None:
        raise ProgramError(f"sharding {s} refers to mesh @{s.mesh_name}, which the module does not define")
    return m


@register_pass("sdy-update-non-divisible-input-output-shardings", adds=frozenset())
def update_non_divisible_input_output_shardings(module: Module, options: Options | None = None) -> None:
    """Shrinks the function argument/result, call result and manual computation in/out
    shardings that do not divide their tensor: each non-dividing dimension keeps its longest
    prefix of axes (possibly ending in a sub-axis) that divides it. Mirrors Shardy's
    ``update_non_divisible_input_output_shardings.cc``."""
    meshes = module.meshes
    done: dict[tuple[TensorSharding, tuple[int, ...]], TensorSharding] = {}  # few distinct pairs

    def even(s: TensorSharding, v_type: object) -> TensorSharding:
        assert isinstance(v_type, TensorType)
        key = (s, v_type.shape)
        new = done.get(key)
        if new is None:
            new = done[key] = _evenly_sharded(s, v_type.shape, _mesh(s, meshes))
        return new

    for f in module.funcs:
        if f.regions[0].blocks:
            for a in f.args:
                # A function argument holds its own sharding (no data flow edge): no use lists.
                s = get_sharding(a)
                if s is not None and is_static_tensor(a):
                    set_sharding(a, even(s, a.type))
        for i, t in enumerate(f.result_types):
            s = f.result_shardings[i]
            if s is not None and isinstance(t, TensorType) and all(d >= 0 for d in t.shape):
                f.result_shardings[i] = even(s, t)
    for op in list(module.walk()):
        if op.name == CALL:
            if op.results and all(r.sharding is not None for r in op.results):
                for r in op.results:
                    if is_static_tensor(r):
                        assert r.sharding is not None
                        r.sharding = even(r.sharding, r.type)
        elif op.name == MANUAL_COMPUTATION:
            manual = manual_axes(op)
            if op.operand_shardings:
                args = op.regions[0].entry.args
                new = []
                for outer, a in zip(op.operand_shardings, args):
                    inner = erase_manual_axes(outer, manual)
                    if is_static_tensor(a):
                        inner = even(inner, a.type)
                    new.append(add_free_axes(outer, inner, manual))
                op.operand_shardings = tuple(new)
            if op.results and all(r.sharding is not None for r in op.results):
                for r in op.results:
                    if is_static_tensor(r):
                        assert r.sharding is not None
                        r.sharding = even(r.sharding, r.type)


@register_pass("sdy-remove-sub-axes-in-input-output-shardings", adds=frozenset())
def remove_sub_axes_in_input_output_shardings(module: Module, options: Options | None = None) -> None:
    """In the argument and result shardings of the main function, cuts every open dimension
    before its first sub-axis. Mirrors Shardy's
    ``remove_sub_axes_in_input_output_shardings.cc``. Raises ``ProgramError`` when there are
    several functions and none is ``@main``."""
    main = main_func(module)

    done: dict[TensorSharding, TensorSharding] = {}  # few distinct shardings, many arguments

    def cut(s: TensorSharding) -> TensorSharding:
        new = done.get(s)
        if new is None:
            new = done[s] = _cut(s)
        return new

    def _cut(s: TensorSharding) -> TensorSharding:
        dims = []
        for d in s.dims:
            if d.closed:
                dims.append(d)
                continue
            axes: list[AxisRef] = []
            for a in d.axes:
                if a.is_sub_axis:
                    break
                axes.append(a)
            dims.append(DimSharding(axes, d.closed, d.priority))
        return with_parts(s, dims=dims)

    if main.regions[0].blocks:
        for a in main.args:
            s = get_sharding(a)  # its own sharding, as above
            if s is not None:
                set_sharding(a, cut(s))
    for i, s in enumerate(main.result_shardings):
        if s is not None:
            main.result_shardings[i] = cut(s)


@register_pass("sdy-close-shardings", adds=frozenset())
def close_shardings(module: Module, options: Options | None = None) -> None:
    """Closes every dimension of every sharding and drops replicated axes (Shardy's
    ``getClosedLike``). Mirrors Shardy's ``close_shardings.cc``."""

    closed: dict[TensorSharding, TensorSharding] = {}  # few distinct shardings, many values

    def close(s: TensorSharding, site: ShardingSite) -> TensorSharding:
        c = closed.get(s)
        if c is None:
            c = closed[s] = closed_like(s)
        return c

    transform_shardings(module, close)


def _is_custom_rule(text: str) -> bool:
    return text.rstrip().endswith("custom>")


@register_pass("sdy-drop-sharding-rules", anchor="func.func", adds=frozenset())
def drop_sharding_rules(module: Module, func: Func, options: Options | None = None) -> None:
    """Removes the ``sdy.sharding_rule`` of every op in the function except users' custom
    rules. Mirrors Shardy's ``drop_sharding_rules.cc``."""
    for op in func.walk():
        text = op.attributes.get(SHARDING_RULE)
        if text is not None and not _is_custom_rule(text):
            del op.attributes[SHARDING_RULE]


_DEBUG_ATTRS = (
    "sdy.propagation_edges",
    "sdy.block_arg_propagation_edges",
    "sdy.result_propagation_edges",
    "sdy.sharding_origins",
    "sdy.block_arg_sharding_origins",
    "sdy.result_sharding_origins",
)


@register_pass("sdy-remove-propagation-debug-info")
def remove_propagation_debug_info(module: Module, options: Options | None = None) -> None:
    """Removes the propagation debug attributes (sharding origins and propagation edges) from
    every op and function argument/result. Mirrors Shardy's
    ``remove_propagation_debug_info.cc``."""
    for op in module.walk():
        if isinstance(op, Func):
            for d in op.arg_attrs + op.result_attrs:
                for name in _DEBUG_ATTRS:
                    d.pop(name, None)
        else:
            for name in _DEBUG_ATTRS:
                op.attributes.pop(name, None)


@register_pass("sdy-populate-op-sharding-rules", anchor="func.func", options={"conservative-propagation": False})
def populate_op_sharding_rules(module: Module, func: Func, options: Options | None = None) -> None:
    """Gives every op of the function that has a sharding rule and none yet its
    ``sdy.sharding_rule`` (``shardwise.rules``). Mirrors Shardy's
    ``populate_op_sharding_rules.cc``."""
    from shardwise.rules.from_ir import rules_for

    conservative = bool((options or {}).get("conservative-propagation", False))
    rules = rules_for(module, conservative=conservative)
    for op in func.walk():
        rule = rules.get(id(op))
        if rule is not None and SHARDING_RULE not in op.attributes:
            op.attributes[SHARDING_RULE] = str(rule)
