"""Call inlining before SPMD partitioning.

JAX 0.10.2 lowers ``jax.nn.relu``, ``jnp.where``, ``jnp.take_along_axis``, ``cumsum``, flax
layers and optax updates into private functions called with ``func.call``. Shardy's
propagation keeps the calls (``sdy-flatten-call-graph`` / ``sdy-import-func-calls`` /
``sdy-unflatten-call-graph``), so a propagated module calls functions whose bodies carry one
set of shardings while each call site has its own. A per-rank program cannot keep them: a
function called with two different local shapes has no single local signature.

XLA does the same thing before its SPMD partitioner: its ``CallInliner`` pass inlines every
``call`` into the caller (``xla/service/call_inliner.cc``; the SPMD pipeline of
``xla/service/spmd/``), and the partitioner sees one flat computation. Here every
``func.call`` reachable from a public function is replaced by a copy of the callee's body,
innermost calls first, so the propagation result itself (what ``shardwise propagate`` writes,
identical to Shardy's) is unchanged; only the partitioner's working copy is flattened.

Where a call's operand sharding differs from the callee's argument sharding, or a returned
value's sharding differs from the call result's sharding, an ``sdy.reshard`` joins the two, so
``sdy-insert-explicit-reshards`` and the collective lowering then treat the inlined ops like
any others.
"""

from __future__ import annotations

from shardwise.errors import ProgramError
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.rewrite import Mapping, SymbolTable, Uses, clone_op, erase_op, insert_before
from shardwise.ir.sdy import CALL, RESHARD, callee_name, fully_replicated, is_equivalent, mesh_ref
from shardwise.sharding import TensorSharding

__all__ = ["inline_calls"]

CONSTRAINT = "sdy.sharding_constraint"
NAMED = "sdy.named_computation"


def _is_public(f: Func) -> bool:
    return f.attributes.get("sym_visibility", '"public"') != '"private"'


def _calls_in(f: Func) -> list[Op]:
    return [op for op in f.walk_nested() if op.name == CALL]


def _order(module: Module, symbols: SymbolTable) -> list[Func]:
    """The functions with bodies reachable from the public ones, callees before callers.
    ``ProgramError`` on a call of a missing function, of a declaration, or on recursion."""
    state: dict[int, int] = {}  # 1: on the stack, 2: done
    order: list[Func] = []
    stack: list[tuple[Func, list[Func]]] = []

    def enter(f: Func) -> None:
        callees: list[Func] = []
        for call in _calls_in(f):
            name = callee_name(call)
            callee = symbols.lookup(name)
            if not isinstance(callee, Func):
                raise ProgramError(f"{call.where()} calls @{name}, which is not a function of the module")
            if not callee.regions[0].blocks:
                raise ProgramError(
                    f"{call.where()} calls @{name}, a declaration without a body: it cannot be partitioned"
                )
            if callee is f or state.get(id(callee)) == 1:
                raise ProgramError(
                    f"{call.where()} calls @{name} recursively: recursive calls cannot be inlined for partitioning"
                )
            callees.append(callee)
        state[id(f)] = 1
        stack.append((f, callees[::-1]))

    for root in (f for f in module.funcs if f.regions[0].blocks and _is_public(f)):
        if id(root) in state:
            continue
        enter(root)
        while stack:
            f, pending = stack[-1]
            if pending:
                c = pending.pop()
                if state.get(id(c)) == 1:
                    raise ProgramError(
                        f"@{c.sym_name} calls itself through @{f.sym_name}: recursive calls cannot be inlined for partitioning"
                    )
                if id(c) not in state:
                    enter(c)
            else:
                stack.pop()
                state[id(f)] = 2
                order.append(f)
    return order


def _replicated_like(s: TensorSharding, rank: int) -> TensorSharding:
    return fully_replicated(mesh_ref(s), rank, True)


def _join(value: Value, want: TensorSharding | None, anchor: Op, uses: Uses, decided: bool) -> Value:
    """``value`` itself when its sharding is equivalent to ``want``; otherwise the result of a
    new ``sdy.reshard`` to ``want`` (replicated when ``want`` is ``None``) put before ``anchor``.
    Before propagation (``decided`` false) a missing ``want`` asks nothing, and a given one
    becomes an ``sdy.sharding_constraint``."""
    have = value.sharding
    if not decided:
        if want is None:
            return value
        c = Op(CONSTRAINT, [value], [value.type], location=anchor.location)
        c.results[0].sharding = want
        insert_before(anchor, c)
        uses.add(c)
        return c.results[0]
    if is_equivalent(have, want):
        return value
    ref = want if want is not None else have
    assert ref is not None
    target = want if want is not None else _replicated_like(ref, value.type.rank)
    r = Op(RESHARD, [value], [value.type], location=anchor.location)
    r.results[0].sharding = target
    insert_before(anchor, r)
    uses.add(r)
    return r.results[0]


def _inline_call(call: Op, callee: Func, uses: Uses, decided: bool) -> None:
    if len(call.operands) != len(callee.args) or len(call.results) != len(callee.result_types):
        raise ProgramError(
            f"{call.where()} passes {len(call.operands)} operands and takes {len(call.results)} results, "
            f"but @{callee.sym_name} has {len(callee.args)} arguments and {len(callee.result_types)} results"
        )
    mapping = Mapping()
    for operand, arg in zip(call.operands, callee.args):
        mapping.map(arg, _join(operand, arg.sharding, call, uses, decided))
    body = callee.body.ops
    for op in body[:-1]:
        new = clone_op(op, mapping)
        insert_before(call, new)
        uses.add(new)
    ret = body[-1]
    result_shardings = [r.sharding for r in call.results] if decided else list(callee.result_shardings)
    for returned, result, want in zip(ret.operands, call.results, result_shardings):
        value = _join(mapping.lookup_or_default(returned), want, call, uses, decided)
        uses.replace_all_uses(result, value)
    uses.drop(call)
    erase_op(call)


def _inline_named(op: Op, uses: Uses, decided: bool) -> None:
    """An ``sdy.named_computation`` replaced by its body, as a call by its callee's: its
    in-shardings play the callee's argument shardings, its out-shardings the call's result
    shardings (before propagation, the callee's declared result shardings)."""
    body = op.regions[0].entry
    ins: list[TensorSharding | None] = list(op.operand_shardings or ()) or [None] * len(op.operands)
    mapping = Mapping()
    for operand, arg, want in zip(op.operands, body.args, ins):
        mapping.map(arg, _join(operand, want, op, uses, decided))
    for inner in body.ops[:-1]:
        new = clone_op(inner, mapping)
        insert_before(op, new)
        uses.add(new)
    for returned, result in zip(body.ops[-1].operands, op.results):
        value = _join(mapping.lookup_or_default(returned), result.sharding, op, uses, decided)
        uses.replace_all_uses(result, value)
    uses.drop(op)
    erase_op(op)


def inline_calls(module: Module, *, decided: bool = True) -> int:
    """Replaces every ``func.call`` reachable from the public functions of ``module`` (in
    place; nested regions, ``while``/``case`` bodies and manual computations included) by the
    callee's body, then removes the private functions. Returns the number of calls inlined.
    Each ``sdy.named_computation`` (Shardy's form of a call, ``sdy-import-func-calls``) is
    inlined the same way, innermost first, its in- and out-shardings joined like a callee's.

    ``decided``: the module is propagated; where a call site's sharding differs from its
    callee's an ``sdy.reshard`` joins them. Before propagation (``decided=False``, what XLA's
    inliner sees: its Shardy runs on the inlined program) the body is substituted as it is,
    and a sharding the callee declares on an argument or result becomes an
    ``sdy.sharding_constraint``, so that propagation then specialises each call site.

    Raises ``ProgramError`` naming the call for a missing callee, a declaration without a body,
    recursion, or a call whose operand or result count disagrees with its callee."""
    symbols = SymbolTable(module)
    order = _order(module, symbols)
    inlined = 0
    for f in order:
        calls = _calls_in(f)
        named = [op for op in f.walk_nested() if op.name == NAMED]
        if not calls and not named:
            continue
        uses = Uses(f)
        for call in calls:
            callee = symbols.lookup(callee_name(call))
            assert isinstance(callee, Func)
            _inline_call(call, callee, uses, decided)
            inlined += 1
        # Innermost first (the walk lists an op before the ops of its regions); those inside a
        # call's body were cloned into this function above.
        for op in reversed([op for op in f.walk_nested() if op.name == NAMED]):
            _inline_named(op, uses, decided)
            inlined += 1
    for f in list(module.funcs):
        if not _is_public(f):
            symbols.erase(f)
    return inlined
