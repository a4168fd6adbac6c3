"""Call-graph passes: ``symbol-dce`` (MLIR's ``SymbolDCE``), ``sdy-flatten-call-graph``,
``sdy-import-func-calls``, ``sdy-propagate-sharding-from-func-to-call`` and
``sdy-pre-order-funcs`` (Shardy's ``transforms/import/flatten_call_graph.cc``,
``import_func_calls.cc``, ``propagate_sharding_from_func_to_call.cc``, ``pre_order_funcs.cc``),
and the helpers they share with the export passes (``getFuncArgShardings``,
``getFuncResultShardings``, ``cloneFuncRecursively`` of ``shardy/dialect/sdy/ir/utils.cc``)."""

from __future__ import annotations

import re
import warnings

from shardwise.errors import PassWarning, ProgramError
from shardwise.ir.attrs import quote, unquote
from shardwise.ir.core import Func, Module, Op, Region
from shardwise.ir.rewrite import SymbolTable, Uses, clone_func, clone_region, erase_op, insert_before, symbol_name
from shardwise.ir.sdy import (
    CALL,
    DATA_FLOW_EDGE,
    NAMED_COMPUTATION,
    ORIGINAL_FUNC_NAME,
    SHARDING,
    call_graph_rpo,
    callee_name,
    fully_replicated,
    mesh_ref,
    original_func_name,
    post_order,
    rank_of,
    set_callee,
)
from shardwise.mesh import Mesh
from shardwise.passes.data_flow import add_edges
from shardwise.passes.registry import Options, register_pass
from shardwise.sharding import TensorSharding

__all__ = [
    "PassWarning",
    "clone_func_recursively",
    "flatten_call_graph",
    "func_arg_shardings",
    "func_result_shardings",
    "import_func_calls",
    "pre_order_funcs",
    "propagate_sharding_from_func_to_call",
    "symbol_dce",
    "walk_calls",
]

EXECUTION_THREAD = "execution_thread"
#: Inherent attributes of ``func.call`` (the others are discardable).
_CALL_INHERENT = frozenset({"callee", "arg_attrs", "res_attrs", "no_inline"})


# ---------------------------------------------------------------------------------- helpers


def walk_calls(module: Module, symbols: SymbolTable, *, pre_order: bool = False) -> list[Op]:
    """The ``func.call`` ops in the order of Shardy's ``walkCalls``: functions in post-order of
    the call graph (callees first; ``pre_order`` for callers first), calls of a function in
    program order. The list is taken before any edit."""
    calls: dict[int, list[Op]] = {}
    funcs = call_graph_rpo(module, symbols, calls=calls)
    if not pre_order:
        funcs = funcs[::-1]
    out: list[Op] = []
    for f in funcs:
        out.extend(calls[id(f)])
    return out


def _mesh_of(s: TensorSharding, meshes: dict[str, Mesh]) -> Mesh | None:
    return s.mesh if s.mesh is not None else meshes.get(s.mesh_name or "")


def _first_non_maximal(shardings: list[TensorSharding | None], meshes: dict[str, Mesh]) -> TensorSharding | None:
    for s in shardings:
        if s is None:
            continue
        m = _mesh_of(s, meshes)
        if m is None or not m.is_maximal:
            return s
    return None


def func_arg_shardings(func: Func, meshes: dict[str, Mesh]) -> list[TensorSharding] | None:
    """Shardy's ``getFuncArgShardings``: the argument shardings, fully open (on the mesh of the
    first sharding that is not on a maximal mesh) where missing; ``None`` when no argument has
    such a sharding."""
    shardings = [a.sharding for a in func.args]
    ref = _first_non_maximal(shardings, meshes)
    if ref is None:
        return None
    return [
        s if s is not None else fully_replicated(mesh_ref(ref), rank_of(a), False) for s, a in zip(shardings, func.args)
    ]


def func_result_shardings(func: Func, meshes: dict[str, Mesh]) -> list[TensorSharding] | None:
    """Shardy's ``getFuncResultShardings`` (as ``func_arg_shardings``, for the results)."""
    shardings = list(func.result_shardings)
    ref = _first_non_maximal(shardings, meshes)
    if ref is None:
        return None
    return [
        s if s is not None else fully_replicated(mesh_ref(ref), t.rank, False)
        for s, t in zip(shardings, func.result_types)
    ]


def clone_func_recursively(func: Func, symbols: SymbolTable) -> Func:
    """Shardy's ``cloneFuncRecursively``: a detached copy of ``func`` marked with
    ``sdy.original_func_name``, whose calls call fresh recursive copies of their callees
    (inserted into the module, renamed ``name_N``)."""
    new = clone_func(func, func.sym_name)
    new.attributes[ORIGINAL_FUNC_NAME] = quote(original_func_name(func))
    for call in [o for o in post_order(new) if o.name == CALL]:
        callee = symbols.lookup_func(callee_name(call))
        set_callee(call, symbols.insert(clone_func_recursively(callee, symbols)))
    return new


# ---------------------------------------------------------------------------------- symbol-dce

_SYMBOL_REF = re.compile(r'@("(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_$.]*)')


def _referenced(op: Op) -> set[str]:
    out: set[str] = set()
    for o in op.walk():
        texts = list(o.attributes.values())
        if isinstance(o, Func):
            texts += [v for d in o.arg_attrs + o.result_attrs for v in d.values()]
        for text in texts:
            for m in _SYMBOL_REF.finditer(text):
                name = m.group(1)
                out.add(unquote(name) if name.startswith('"') else name)
    return out


@register_pass("symbol-dce", adds=frozenset())
def symbol_dce(module: Module, options: Options | None = None) -> None:
    """MLIR's ``symbol-dce``: removes the private symbols (``sym_visibility = "private"``) of
    the module that no live op references, transitively."""
    symbols = {symbol_name(op): op for op in module.ops if symbol_name(op) is not None}
    live: set[int] = set()
    work: list[Op] = []
    for op in module.ops:
        name = symbol_name(op)
        if name is None or op.attributes.get("sym_visibility") != '"private"':
            live.add(id(op))
            work.append(op)
    if len(live) == len(module.ops):
        return  # no private symbol: nothing can be removed
    while work:
        op = work.pop()
        for name in _referenced(op):
            target = symbols.get(name)
            if target is not None and id(target) not in live:
                live.add(id(target))
                work.append(target)
    for op in list(module.ops):
        if id(op) not in live:
            erase_op(op)


@register_pass(
    "sdy-save-module", options={"module-dump-directory": "", "module-file-name": "", "dump-index": 0}, adds=frozenset()
)
def save_module(module: Module, options: Options | None = None) -> None:
    """Shardy's ``sdy-save-module`` debugging dump: does nothing here (no dump directory)."""


# ---------------------------------------------------------------------------------- passes


@register_pass("sdy-propagate-sharding-from-func-to-call", acts_on=frozenset({CALL}), adds=frozenset())
def propagate_sharding_from_func_to_call(module: Module, options: Options | None = None) -> None:
    """Gives every ``func.call`` without result shardings the result shardings of its callee
    (``getFuncResultShardings``), if it has any. Mirrors Shardy's
    ``propagate_sharding_from_func_to_call.cc``. Raises ``ProgramError`` for a call to an
    unknown function."""
    symbols = SymbolTable(module)
    meshes = module.meshes
    for op in list(module.walk()):
        if op.name != CALL:
            continue
        func = _callee(op, symbols)
        if any(r.sharding is not None for r in op.results):
            continue
        shardings = func_result_shardings(func, meshes)
        if shardings is not None:
            for r, s in zip(op.results, shardings):
                r.sharding = s


def _callee(call: Op, symbols: SymbolTable) -> Func:
    try:
        return symbols.lookup_func(callee_name(call))
    except KeyError:
        raise ProgramError(f"{call.where()}: calls @{callee_name(call)}, which the module does not define") from None


@register_pass("sdy-pre-order-funcs", adds=frozenset())
def pre_order_funcs(module: Module, options: Options | None = None) -> None:
    """Moves the functions (with bodies) to the end of the module in pre-order of the call
    graph (callers before callees). Mirrors Shardy's ``pre_order_funcs.cc``."""
    body = module.op.regions[0].entry
    for f in call_graph_rpo(module):
        erase_op(f)
        body.append(f)


@register_pass("sdy-flatten-call-graph", acts_on=frozenset({CALL}), adds=frozenset())
def flatten_call_graph(module: Module, options: Options | None = None) -> None:
    """Makes every function called at most once: each call after the first of a function
    calls a fresh recursive copy of it (``name_N``, with ``sdy.original_func_name``). Mirrors
    Shardy's ``flatten_call_graph.cc``. Raises ``ProgramError`` for a call to an unknown
    function."""
    symbols = SymbolTable(module)
    seen: set[str] = set()
    for call in walk_calls(module, symbols):
        func = _callee(call, symbols)
        if func.sym_name not in seen:
            seen.add(func.sym_name)
            continue
        set_callee(call, symbols.insert(clone_func_recursively(func, symbols)))


@register_pass(
    "sdy-import-func-calls",
    options={"add-data-flow-edges-on-named-computations": True},
    acts_on=frozenset({CALL, NAMED_COMPUTATION}),
    adds=frozenset({NAMED_COMPUTATION, DATA_FLOW_EDGE, "sdy.return"}),
)
def import_func_calls(module: Module, options: Options | None = None) -> None:
    """Replaces every ``func.call`` by an ``sdy.named_computation`` named after the callee's
    original name, holding the callee's body (moved for the first call of a function, cloned
    for the others, with a ``PassWarning``), with the callee's argument shardings as
    ``in_shardings``, the call's result shardings as ``out_shardings`` and the call's other
    discardable attributes (and the callee's ``execution_thread``); the inlined functions are
    removed. With ``add-data-flow-edges-on-named-computations`` (default) every named
    computation then gets data flow edges. Mirrors Shardy's ``import_func_calls.cc``. Raises
    ``ProgramError`` for a call to an unknown function."""
    opts = options or {}
    symbols = SymbolTable(module)
    meshes = module.meshes
    moved: dict[str, Op] = {}
    # The callee's argument shardings, read before its body moves away.
    arg_shardings: dict[str, list[TensorSharding] | None] = {}
    warned = False
    calls = walk_calls(module, symbols)
    edges = opts.get("add-data-flow-edges-on-named-computations", True)
    if not calls and not (edges and any(op.name == NAMED_COMPUTATION for op in module.walk())):
        return  # nothing to inline, no named computation to give edges: no use lists needed
    uses = Uses(module)
    for call in calls:
        func = _callee(call, symbols)
        name = func.sym_name
        attrs = {k: v for k, v in call.attributes.items() if k not in _CALL_INHERENT and k != SHARDING}
        attrs["name"] = quote(original_func_name(func))
        if EXECUTION_THREAD in func.attributes:
            attrs[EXECUTION_THREAD] = func.attributes[EXECUTION_THREAD]
        named = Op(NAMED_COMPUTATION, call.operands, [r.type for r in call.results], attrs, location=call.location)
        if name not in arg_shardings:
            arg_shardings[name] = func_arg_shardings(func, meshes)
        in_shardings = arg_shardings[name]
        named.operand_shardings = None if in_shardings is None else tuple(in_shardings)
        if all(r.sharding is not None for r in call.results) and call.results:
            for r, nr in zip(call.results, named.results):
                nr.sharding = r.sharding
        if name in moved:
            if not warned:
                warnings.warn(
                    f"{call.where()}: function @{name} has multiple call ops, we need to clone the function body for each call",
                    PassWarning,
                    stacklevel=2,
                )
                warned = True
            named.add_region(clone_region(moved[name].regions[0]))
            uses.add(named)
        else:
            if not func.regions[0].blocks:
                raise ProgramError(
                    f"{call.where()}: calls @{name}, a function declaration without a body, which cannot be inlined"
                )
            region = func.regions[0]
            func.regions[0] = Region()
            func.regions[0].parent = func
            for a in region.entry.args:
                a.sharding = None
            ret = region.entry.ops[-1]
            ret.name = "sdy.return"
            named.add_region(region)
            moved[name] = named
            uses.add(named, nested=False)
        insert_before(call, named)
        for r, nr in zip(call.results, named.results):
            uses.replace_all_uses(r, nr)
        erase_op(call, uses)
    for name in moved:
        op = symbols.lookup(name)
        if op is not None:
            symbols.erase(op)
    if opts.get("add-data-flow-edges-on-named-computations", True):
        for top in list(module.ops):
            for op in post_order(top):
                if op.name == NAMED_COMPUTATION:
                    add_edges(op.regions[0].entry.args, uses)
                    add_edges(op.results, uses)
