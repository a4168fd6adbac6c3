"""Shardy's notions that the passes, the propagation driver and the partitioner share, over the
shardwise IR (the lowest layer that knows the ``sdy`` dialect): building shardings like
Shardy's ``TensorShardingAttr`` helpers, the ``ShardableDataFlowOpInterface`` of ops with data
flow edges (``shardy/dialect/sdy/ir/dialect.cc``, ``ir/extensions/stablehlo_extensions.cc``),
``getSharding`` / ``setSharding`` (``shardy/dialect/sdy/ir/utils.cc``), the sharding walker
(``transforms/common/sharding_walker.cc``), MLIR's post-order walk (``post_order``) and the
call-graph orders of ``iterateFuncs`` / ``walkCalls``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from shardwise.errors import ProgramError
from shardwise.ir.attrs import quote, unquote
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.rewrite import SymbolTable, Uses, owning_op
from shardwise.ir.slots import SDY_COLLECTIVES
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef, DimSharding, TensorSharding

SHARDING = "sdy.sharding"
SHARDING_RULE = "sdy.sharding_rule"
ORIGINAL_FUNC_NAME = "sdy.original_func_name"
DATA_FLOW_EDGE = "sdy.data_flow_edge"
FUNC_DATA_FLOW_EDGE = "sdy.func_data_flow_edge"
NAMED_COMPUTATION = "sdy.named_computation"
MANUAL_COMPUTATION = "sdy.manual_computation"
SHARDING_CONSTRAINT = "sdy.sharding_constraint"
RESHARD = "sdy.reshard"
SHARDING_GROUP = "sdy.sharding_group"
CALL = "func.call"
RETURN = "func.return"

#: Ops whose body block arguments and results own data flow edges.
REGION_DATA_FLOW_OPS = frozenset({NAMED_COMPUTATION, MANUAL_COMPUTATION})
#: StableHLO ops whose results own data flow edges.
RESULT_DATA_FLOW_OPS = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.optimization_barrier"})
#: Every op implementing Shardy's ``ShardableDataFlowOpInterface``.
DATA_FLOW_OPS = REGION_DATA_FLOW_OPS | RESULT_DATA_FLOW_OPS
#: Collectives whose ``out_sharding`` the IR keeps as attribute text (``ir/slots.py`` has no
#: slot for them).
OUT_SHARDING_ATTR_OPS = frozenset({"sdy.sharded_to_unreduced", "sdy.replicated_to_unreduced"})
#: Shardy's collective ops (``CollectiveOpInterface``): their result sharding is ``out_sharding``.
COLLECTIVES = frozenset(SDY_COLLECTIVES) | OUT_SHARDING_ATTR_OPS
TERMINATORS = frozenset({"func.return", "stablehlo.return", "sdy.return", "mhlo.return"})

MeshRef = tuple[str | None, Mesh | None]


# ---------------------------------------------------------------------------------- shardings


def mesh_ref(s: TensorSharding) -> MeshRef:
    """The mesh a sharding refers to: ``(name, Mesh)``; name ``None`` for an inlined mesh, Mesh
    ``None`` when the name is not bound to a known mesh."""
    return (s.mesh_name, s.mesh)


def make_sharding(
    ref: MeshRef,
    dims: Iterable[DimSharding],
    replicated: Iterable[AxisRef] = (),
    unreduced: Iterable[AxisRef] = (),
    reduction: str = "sum",
) -> TensorSharding:
    """A sharding on the mesh ``ref`` (see ``mesh_ref``)."""
    name, mesh = ref
    if mesh is not None:
        return TensorSharding(
            mesh,
            list(dims),
            replicated=replicated,
            unreduced=unreduced,
            reduction=reduction,
            mesh_name=name or "mesh",
            inline=name is None,
        )
    assert name is not None
    return TensorSharding(name, list(dims), replicated=replicated, unreduced=unreduced, reduction=reduction)


def with_parts(
    s: TensorSharding,
    dims: Iterable[DimSharding] | None = None,
    replicated: Iterable[AxisRef] | None = None,
    unreduced: Iterable[AxisRef] | None = None,
    ref: MeshRef | None = None,
) -> TensorSharding:
    """``s`` with some of its parts replaced (Shardy's ``replaceDimShardings`` & co.)."""
    unr = s.unreduced if unreduced is None else tuple(unreduced)
    return make_sharding(
        mesh_ref(s) if ref is None else ref,
        s.dims if dims is None else dims,
        s.replicated if replicated is None else replicated,
        unr,
        s.reduction if unr else "sum",
    )


def fully_replicated(ref: MeshRef, rank: int, closed: bool) -> TensorSharding:
    """``[{}, ...]`` (closed) or ``[{?}, ...]`` (open) on ``ref``."""
    return make_sharding(ref, [DimSharding((), closed=closed) for _ in range(rank)])


def fully_closed_like(s: TensorSharding) -> TensorSharding:
    """Shardy's ``getFullyClosedLike``: ``[{}, ...]`` on the mesh of ``s``."""
    return fully_replicated(mesh_ref(s), s.rank, True)


def closed_like(s: TensorSharding) -> TensorSharding:
    """Shardy's ``getClosedLike``: every dim closed (priorities kept), replicated axes dropped."""
    dims = [DimSharding(d.axes, closed=True, priority=d.priority) for d in s.dims]
    return with_parts(s, dims=dims, replicated=())


def is_fully_replicated(s: TensorSharding | None) -> bool:
    """Shardy's ``isFullyReplicated``: no sharding, or no axes in dims and no unreduced axes."""
    return s is None or (all(not d.axes for d in s.dims) and not s.unreduced)


def is_equivalent(a: TensorSharding | None, b: TensorSharding | None) -> bool:
    """Shardy's ``TensorShardingAttr::isEquivalent`` as in jaxlib's Shardy (before unreduced
    axes counted): same mesh and the same axes in every dimension; a missing sharding and
    shardings without dimension axes are all equivalent."""

    def replicated(s: TensorSharding | None) -> bool:
        return s is None or all(not d.axes for d in s.dims)

    if replicated(a):
        return replicated(b)
    if a is None or b is None:
        return False
    if not same_mesh_ref(a, b):
        return False
    return len(a.dims) == len(b.dims) and all(x.axes == y.axes for x, y in zip(a.dims, b.dims))


def same_mesh_ref(a: TensorSharding, b: TensorSharding) -> bool:
    """The two shardings refer to the same mesh symbol, or inline equal meshes (Shardy's
    ``getMeshOrRef()`` equality)."""
    if a.mesh_name is not None or b.mesh_name is not None:
        return a.mesh_name == b.mesh_name
    return a.mesh == b.mesh


def rank_of(v: Value) -> int:
    """The rank of a ranked tensor value, 0 for other types (tokens)."""
    return v.type.rank if isinstance(v.type, TensorType) else 0


def is_static_tensor(v: Value) -> bool:
    """A ranked tensor with a static shape (Shardy's ``isStaticShapedType``)."""
    return isinstance(v.type, TensorType) and all(d >= 0 for d in v.type.shape)


def is_scalar(v: Value) -> bool:
    """A rank-0 tensor (Shardy's ``isScalar``)."""
    return isinstance(v.type, TensorType) and v.type.rank == 0


# ---------------------------------------------------------------------------------- manual axes

_MANUAL_AXES = re.compile(r'"((?:[^"\\]|\\.)*)"')


def manual_axes(op: Op) -> tuple[str, ...]:
    """The ``manual_axes`` of an ``sdy.manual_computation``."""
    text = op.attributes.get("manual_axes", "")
    return tuple(unquote(f'"{m}"') for m in _MANUAL_AXES.findall(text))


def manual_axes_text(names: Sequence[str]) -> str:
    """The ``manual_axes`` attribute text for ``names``."""
    return "#sdy<manual_axes{" + ", ".join(quote(n) for n in names) + "}>"


def _first_free(axes: Sequence[AxisRef], manual: Sequence[str]) -> int:
    # The axes of a dim start with the manual ones (partition point).
    i = 0
    while i < len(axes) and axes[i].name in manual:
        i += 1
    return i


def erase_manual_axes(s: TensorSharding, manual: Sequence[str]) -> TensorSharding:
    """Shardy's ``eraseManualAxes``: the sharding inside a manual computation."""
    if not manual:
        return s
    dims = [DimSharding(d.axes[_first_free(d.axes, manual) :], d.closed, d.priority) for d in s.dims]
    return with_parts(
        s,
        dims=dims,
        replicated=[a for a in s.replicated if a.name not in manual],
        unreduced=[a for a in s.unreduced if a.name not in manual],
    )


def erase_free_axes(s: TensorSharding, manual: Sequence[str]) -> TensorSharding:
    """Shardy's ``eraseFreeAxes``: only the manual axes of each dim (and of the replicated and
    unreduced lists... as Shardy: the non-manual ones of those)."""
    dims = [DimSharding(d.axes[: _first_free(d.axes, manual)], d.closed, d.priority) for d in s.dims]
    return with_parts(
        s,
        dims=dims,
        replicated=[a for a in s.replicated if a.name not in manual],
        unreduced=[a for a in s.unreduced if a.name not in manual],
    )


def add_free_axes(outer: TensorSharding, new: TensorSharding, manual: Sequence[str]) -> TensorSharding:
    """Shardy's ``addFreeAxesToManualComputationSharding``: the manual axes of ``outer`` then
    the axes of ``new`` per dim (open/closed and priority of ``new``); replicated and unreduced
    axes of ``outer``."""
    base = erase_free_axes(outer, manual)
    dims = list(base.dims)
    for i, nd in enumerate(new.dims[: len(dims)]):
        dims[i] = DimSharding(dims[i].axes + nd.axes, nd.closed, nd.priority)
    return make_sharding(
        mesh_ref(new), dims, outer.replicated, outer.unreduced, outer.reduction if outer.unreduced else "sum"
    )


# ---------------------------------------------------------------------------------- data flow ops


def is_data_flow_op(op: Op | None) -> bool:
    """``op`` implements Shardy's ``ShardableDataFlowOpInterface``."""
    return op is not None and op.name in DATA_FLOW_OPS


def block_arg_edge_owners(op: Op) -> list[Value]:
    """``getBlockArgumentEdgeOwners``: the body arguments of named/manual computations."""
    if op.name in REGION_DATA_FLOW_OPS and op.regions and op.regions[0].blocks:
        return list(op.regions[0].entry.args)
    return []


def result_edge_owners(op: Op) -> list[Value]:
    """``getOpResultEdgeOwners``: the results."""
    return list(op.results)


def terminator(op: Op, region: int = 0) -> Op:
    """The terminator of the entry block of region ``region`` of ``op``."""
    return op.regions[region].entry.ops[-1]


def edge_owner_from_target(op: Op, target: Value) -> Value:
    """``getEdgeOwnerFromTarget``: a while's block argument maps to its result; any other
    target is its own owner."""
    if op.name == "stablehlo.while" and target.is_block_arg:
        return op.results[target.index]
    return target


def edge_sources(op: Op, owner: Value) -> list[tuple[Op, int]]:
    """``getEdgeSources`` as (op, operand index) pairs."""
    if op.name == "stablehlo.while":
        return [(op, owner.index), (terminator(op, 1), owner.index)]
    if op.name == "stablehlo.case":
        return [(r.entry.ops[-1], owner.index) for r in op.regions]
    if op.name == "stablehlo.optimization_barrier":
        return [(op, owner.index)]
    if owner.is_block_arg:
        return [(op, owner.index)]
    return [(terminator(op), owner.index)]


def edge_owner_from_source(op: Op, user: Op, index: int) -> Value:
    """``getEdgeOwnerFromSource``: the owner fed by operand ``index`` of ``user`` (``op`` or
    the terminator of one of its regions)."""
    if op.name in RESULT_DATA_FLOW_OPS:
        return op.results[index]
    if user is not op:
        return op.results[index]
    return op.regions[0].entry.args[index]


def data_flow_edge_user(owner: Value, uses: Uses) -> Op | None:
    """The ``sdy.data_flow_edge`` that is the single user of ``owner``, if any."""
    users = uses.users(owner)
    if len(users) == 1 and users[0].name == DATA_FLOW_EDGE:
        return users[0]
    return None


def lookup_data_flow_edge(target: Value, uses: Uses) -> Op | None:
    """``DataFlowEdgeOp::lookup(Value)``."""
    owner_op = owning_op(target)
    if owner_op is not None and is_data_flow_op(owner_op):
        return data_flow_edge_user(edge_owner_from_target(owner_op, target), uses)
    return None


# ---------------------------------------------------------------------------------- get/set sharding


def shardable_value(value: Value, uses: Uses | None) -> Value | None:
    """Shardy's ``getShardableValue``: where the sharding of ``value`` is held (its data flow
    edge, itself, or its edge owner); ``None`` for arguments of other region ops."""
    owner = value.owner
    if isinstance(owner, Op) and owner.name not in DATA_FLOW_OPS:
        return value  # the result of an op without data flow edges: the common case
    if uses is not None:
        edge = lookup_data_flow_edge(value, uses)
        if edge is not None:
            return edge.results[0]
    if not value.is_block_arg:
        return value
    op = owning_op(value)
    if op is None:
        return None
    if isinstance(op, Func):
        return value
    if is_data_flow_op(op):
        return edge_owner_from_target(op, value)
    if op.name == "stablehlo.async_start":
        return op.operands[value.index]
    return None


def _owner_block_arg_sharding(op: Op, value: Value) -> TensorSharding | None:
    if op.operand_shardings is None:
        return None
    s = op.operand_shardings[value.index]
    if op.name == MANUAL_COMPUTATION:
        return erase_manual_axes(s, manual_axes(op))
    return s


def get_sharding(value: Value, uses: Uses | None = None) -> TensorSharding | None:
    """Shardy's ``getSharding(Value)``."""
    owner = value.owner
    if isinstance(owner, Op) and owner.name not in DATA_FLOW_OPS:
        return value.sharding  # as ``shardable_value`` decides for such a result
    v = shardable_value(value, uses)
    if v is None:
        return None
    if v.is_block_arg:
        op = owning_op(v)
        if op is not None and op.name in REGION_DATA_FLOW_OPS:
            return _owner_block_arg_sharding(op, v)
        return v.sharding
    return v.sharding


def set_sharding(value: Value, sharding: TensorSharding, uses: Uses | None = None) -> None:
    """Shardy's ``setSharding(Value, sharding)``: an op's other results without a sharding get
    a fully open one on the same mesh, as Shardy's per-value attribute needs one per result."""
    v = shardable_value(value, uses)
    if v is None:
        return
    if v.is_block_arg:
        op = owning_op(v)
        if op is not None and op.name in REGION_DATA_FLOW_OPS:
            set_block_arg_owner_sharding(op, v.index, sharding)
            return
        v.sharding = sharding
        return
    set_result_sharding(v, sharding)


def set_result_sharding(v: Value, sharding: TensorSharding) -> None:
    """Sets the sharding of an op result, filling the op's other unsharded results with fully
    open shardings on the same mesh (Shardy's ``getOpenShardingsWithShardingAtIndex``)."""
    op = v.defining_op
    v.sharding = sharding
    if op is not None and len(op.results) > 1:
        for r in op.results:
            if r.sharding is None:
                r.sharding = fully_replicated(mesh_ref(sharding), rank_of(r), False)


def set_block_arg_owner_sharding(op: Op, index: int, sharding: TensorSharding) -> None:
    """``setBlockArgumentEdgeOwnerSharding`` of a named or manual computation."""
    args = op.regions[0].entry.args
    if op.operand_shardings is None:
        current = [fully_replicated(mesh_ref(sharding), rank_of(a), False) for a in args]
        current[index] = sharding
        if op.name == MANUAL_COMPUTATION:
            raise ProgramError(f"{op.where()}: manual computation without in_shardings")
        op.operand_shardings = tuple(current)
        return
    shardings = list(op.operand_shardings)
    if op.name == MANUAL_COMPUTATION:
        sharding = add_free_axes(shardings[index], sharding, manual_axes(op))
    shardings[index] = sharding
    op.operand_shardings = tuple(shardings)


# ---------------------------------------------------------------------------------- sharding walker

#: Where a sharding sits: a value, or a function result (func, index).
ShardingSite = Value | tuple[Func, int] | None
TransformFn = Callable[[TensorSharding, ShardingSite], TensorSharding]


def _zero_result_shardings(op: Op) -> tuple[TensorSharding, ...] | None:
    text = op.attributes.get(SHARDING)
    if text is None:
        return None
    return TensorSharding.parse_per_value(text)


#: Ops with one result whose shardings ``transform_shardings`` reads elsewhere than on the
#: result (functions have no results).
_TRANSFORM_APART = REGION_DATA_FLOW_OPS | OUT_SHARDING_ATTR_OPS


def transform_shardings(
    module: Module | Op, fn: TransformFn, *, consume_op: Callable[[Op], None] | None = None, transform: bool = True
) -> None:
    """Shardy's ``transformShardings`` / ``walkShardings``: calls ``fn(sharding, site)`` on
    every sharding in pre-order (function argument then result shardings; a manual
    computation's in then out shardings; a named computation's in then out shardings; each op's
    result shardings) and, with ``transform``, stores what it returns."""
    # A snapshot: the callback may add ops (meshes) while the walk runs.
    ops = list(module.walk())
    meshes = module.meshes if isinstance(module, Module) else None
    for op in ops:
        if consume_op is not None:
            consume_op(op)
        results = op.results
        if len(results) == 1 and op.name not in _TRANSFORM_APART:
            # Most ops: one result, its own sharding (what ``_results`` does for one result).
            r = results[0]
            s = r.sharding
            if s is not None:
                new = fn(s, r)
                if transform:
                    r.sharding = new
            continue
        if isinstance(op, Func):
            for a in op.args:
                if a.sharding is not None:
                    new = fn(a.sharding, a)
                    if transform:
                        a.sharding = new
            for i, s in enumerate(op.result_shardings):
                if s is not None:
                    new = fn(s, (op, i))
                    if transform:
                        op.result_shardings[i] = new
            continue
        if op.name in REGION_DATA_FLOW_OPS:
            if op.operand_shardings is not None:
                args = op.regions[0].entry.args
                new_in = tuple(fn(s, a) for s, a in zip(op.operand_shardings, args))
                if transform:
                    op.operand_shardings = new_in
            _results(op, fn, transform)
            continue
        if not op.results:
            ss = _zero_result_shardings(op)
            if ss is not None:
                new_ss = [fn(s, None) for s in ss]
                if transform:
                    if meshes:
                        new_ss = [
                            s if s.mesh is not None or s.mesh_name not in meshes else s.bind(meshes[s.mesh_name])
                            for s in new_ss
                        ]
                    op.attributes[SHARDING] = TensorSharding.print_per_value(new_ss)
            continue
        if op.name in OUT_SHARDING_ATTR_OPS and "out_sharding" in op.attributes and op.results[0].sharding is None:
            # The IR keeps these ops' `out_sharding` as attribute text (see ir/slots.py).
            old = TensorSharding.parse(op.attributes["out_sharding"], meshes or None)
            new = fn(old, op.results[0])
            if transform:
                op.attributes["out_sharding"] = str(new)
            continue
        _results(op, fn, transform)


def _results(op: Op, fn: TransformFn, transform: bool) -> None:
    if all(r.sharding is None for r in op.results):
        return
    if len(op.results) > 1 and any(r.sharding is None for r in op.results):
        ref = next(r.sharding for r in op.results if r.sharding is not None)
        for r in op.results:
            if r.sharding is None:
                r.sharding = fully_replicated(mesh_ref(ref), rank_of(r), False)
    for r in op.results:
        s = r.sharding
        assert s is not None
        new = fn(s, r)
        if transform:
            r.sharding = new


# ---------------------------------------------------------------------------------- call graph


def post_order(root: Op) -> list[Op]:
    """``root`` and its nested ops in post-order (MLIR's default walk order)."""
    out: list[Op] = []

    def visit(o: Op) -> None:
        for r in o.regions:
            for b in r.blocks:
                for inner in b.ops:
                    if inner.regions:
                        visit(inner)  # noqa: F821 (a recursive closure, deleted after use)
                    else:  # most ops: no call
                        out.append(inner)
        out.append(o)

    visit(root)
    del visit  # a recursive closure refers to itself: without this, the cycle waits for the collector
    return out


def call_graph_rpo(
    module: Module, symbols: SymbolTable | None = None, *, calls: dict[int, list[Op]] | None = None
) -> list[Func]:
    """The functions with bodies in reverse post-order of MLIR's ``CallGraph`` from its
    external node (Shardy's ``iterateFuncs(preOrder=true)``): callers before callees,
    functions in module order otherwise. ``calls``, when given, receives the ``func.call``
    ops of each function (by ``id``), in program order, from the same walk."""
    symbols = symbols or SymbolTable(module)
    funcs = [f for f in module.funcs if f.regions[0].blocks]
    edges: dict[int, list[Func]] = {}
    for f in funcs:
        out: list[Func] = []
        seen: set[int] = set()
        in_f: list[Op] = []
        if calls is not None:
            calls[id(f)] = in_f
        for op in f.walk():
            if op.name == CALL:
                in_f.append(op)
                callee = symbols.lookup(callee_name(op))
                if isinstance(callee, Func) and callee.regions[0].blocks and id(callee) not in seen:
                    seen.add(id(callee))
                    out.append(callee)
        edges[id(f)] = out
    visited: set[int] = set()
    post: list[Func] = []
    for root in funcs:
        if id(root) in visited:
            continue
        visited.add(id(root))
        stack: list[tuple[Func, int]] = [(root, 0)]
        while stack:
            node, i = stack[-1]
            children = edges[id(node)]
            if i < len(children):
                stack[-1] = (node, i + 1)
                c = children[i]
                if id(c) not in visited:
                    visited.add(id(c))
                    stack.append((c, 0))
            else:
                stack.pop()
                post.append(node)
    return post[::-1]


def callee_name(call: Op) -> str:
    """The callee symbol of a ``func.call`` (without ``@``)."""
    text = call.attributes["callee"]
    return unquote(text[1:]) if text.startswith('@"') else text[1:]


def set_callee(call: Op, name: str) -> None:
    """Makes ``call`` call ``@name``."""
    call.attributes["callee"] = "@" + symbol_ref(name)


def symbol_ref(name: str) -> str:
    """A symbol name as written after ``@`` (quoted unless a bare identifier)."""
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name) else quote(name)


def original_func_name(f: Func) -> str:
    """``sdy.original_func_name`` of ``f`` if set, else its name (``getOriginalFuncName``)."""
    text = f.attributes.get(ORIGINAL_FUNC_NAME)
    return unquote(text) if text is not None else f.sym_name
