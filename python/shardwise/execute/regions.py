"""Recognising and applying the scalar bodies of reduce-like ops (reduce, reduce_window,
scatter, select_and_scatter, all_reduce, sort comparators)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from shardwise.errors import ProgramError
from shardwise.execute._util import astype
from shardwise.ir.core import Op, Region

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter

__all__ = ["apply_body", "body_kind", "combine_fn", "tree_fold"]

_KINDS = {
    "stablehlo.add": "add",
    "stablehlo.multiply": "mul",
    "stablehlo.maximum": "max",
    "stablehlo.minimum": "min",
    "stablehlo.and": "and",
    "stablehlo.or": "or",
}


def body_kind(region: Region) -> str | None:
    """``"add"``, ``"mul"``, ``"max"``, ``"min"``, ``"and"`` or ``"or"`` when the region is one
    such op of its two block arguments (either order) whose result it returns, ignoring
    value-preserving ``sdy.reshard`` / ``sdy.sharding_constraint``; else ``None``."""
    block = region.entry
    if len(block.args) != 2:
        return None
    ops = [o for o in block.ops if o.name not in ("sdy.reshard", "sdy.sharding_constraint")]
    if len(ops) != 2 or ops[0].name not in _KINDS or ops[1].name not in ("stablehlo.return", "sdy.return"):
        return None
    first, ret = ops
    if set(first.operands) != set(block.args) or len(first.operands) != 2:
        return None
    returned = ret.operands[0] if len(ret.operands) == 1 else None
    while (
        returned is not None
        and returned.defining_op is not None
        and returned.defining_op.name in ("sdy.reshard", "sdy.sharding_constraint")
    ):
        returned = returned.defining_op.operands[0]
    return _KINDS[first.name] if returned is first.results[0] else None


def apply_body(it: Interpreter, op: Op, region: Region, args: Sequence[Any]) -> list[Any]:
    """Evaluates the scalar body ``region`` on whole arrays ``args`` (elementwise bodies only)."""
    if not it.is_elementwise(region):
        names = sorted({o.name for o in region.entry.ops})
        raise ProgramError(
            f"{op.where()}: the body of this op uses non-elementwise ops {names}; only elementwise bodies are supported"
        )
    fn = it.region_fn(region)
    with it.vectorized():
        xs = fn(*args)
    shape = it.xp.broadcast_arrays(*args)[0].shape if args else ()
    return [it.xp.broadcast_to(x, shape) if tuple(x.shape) != tuple(shape) else x for x in xs]


def combine_fn(it: Interpreter, op: Op, region: Region, n: int) -> Callable[[list[Any], list[Any]], list[Any]]:
    """A function combining two lists of ``n`` arrays with the body (args: lhs..., rhs...)."""

    def combine(a: list[Any], b: list[Any]) -> list[Any]:
        out = apply_body(it, op, region, [*a, *b])
        return [astype(it.xp, x, y.dtype) if x.dtype != y.dtype else x for x, y in zip(out, a)]

    return combine


def tree_fold(items: list[list[Any]], combine: Callable[[list[Any], list[Any]], list[Any]]) -> list[Any]:
    """Pairwise (tree) reduction of ``items`` (each a list of arrays) with ``combine``; the
    order of application is a valid StableHLO schedule (the spec leaves it unspecified)."""
    while len(items) > 1:
        nxt = [combine(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        if len(items) % 2:
            nxt.append(items[-1])
        items = nxt
    return items[0]
