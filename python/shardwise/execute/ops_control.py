"""Control flow and calls: while, case, if, func.call, optimization_barrier (StableHLO spec)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardwise.errors import ProgramError
from shardwise.execute._util import to_int
from shardwise.execute.registry import register
from shardwise.ir.attrs import unquote
from shardwise.ir.core import Op

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


@register("stablehlo.while")
def _while(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    cond, body = op.regions
    env = it.env()
    values = list(args)
    while True:
        c = it.run_region(cond, values, env)[0]
        if not bool(it.xp.reshape(c, ())):
            return values
        values = it.run_region(body, values, env)


@register("stablehlo.case")
def _case(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Runs branch ``index``; an index outside ``[0, n)`` runs the last branch (spec)."""
    index = to_int(args[0])
    n = len(op.regions)
    if index < 0 or index >= n:
        index = n - 1
    return it.run_region(op.regions[index], [], it.env())


@register("sdy.named_computation")
def _named_computation(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Its body with the operands as block arguments (on the global view the in- and
    out-shardings do not change values; Shardonnay RFC, "Named computation")."""
    return it.run_region(op.regions[0], args, {})


@register("stablehlo.if")
def _if(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    pred = bool(it.xp.reshape(args[0], ()))
    return it.run_region(op.regions[0 if pred else 1], [], it.env())


def call_function(it: Interpreter, op: Op, symbol: str, args: list[Any]) -> list[Any]:
    """Calls the module's function named by the symbol reference ``symbol`` (``@name``)."""
    name = symbol.strip().lstrip("@")
    name = unquote(name) if name.startswith('"') else name
    f = it.funcs.get(name)
    if f is None:
        raise ProgramError(f"{op.where()}: call to unknown function @{name}; known: {sorted(it.funcs)}")
    return it.call(f, args)


@register("func.call", "call")
def _call(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return call_function(it, op, op.attributes.get("callee", ""), args)


@register("stablehlo.optimization_barrier")
def _barrier(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return list(args)
