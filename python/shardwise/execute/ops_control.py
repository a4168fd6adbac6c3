"""Control flow and calls: while, case, if, func.call, optimization_barrier (StableHLO spec)."""

from __future__ import annotations

from typing import Any

from shardwise.errors import ProgramError
from shardwise.execute._util import to_int
from shardwise.execute.interpreter import Interpreter, register
from shardwise.ir.attrs import unquote
from shardwise.ir.core import Op


@register("stablehlo.while")
def _while(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    cond, body = op.regions
    env = it.env()
    values = list(args)
    while True:
        c = it.run_region(cond, values, env)[0]
        if not bool(c.reshape(()) if hasattr(c, "reshape") else c):
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


@register("stablehlo.if")
def _if(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    pred = bool(args[0].reshape(()))
    return it.run_region(op.regions[0 if pred else 1], [], it.env())


@register("func.call", "call")
def _call(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    name = op.attributes.get("callee", "").strip().lstrip("@")
    name = unquote(name) if name.startswith('"') else name
    f = it.funcs.get(name)
    if f is None:
        raise ProgramError(f"{op.where()}: call to unknown function @{name}; known: {sorted(it.funcs)}")
    return it.call(f, args)


@register("stablehlo.optimization_barrier")
def _barrier(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return list(args)
