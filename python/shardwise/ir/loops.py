"""How many times a ``stablehlo.while`` body runs (``trip_count``), and an op inside loops
(``times``): the search prices a loop body's ops and reshards that many times, and the
partition counts its collectives' bytes so.

JAX lowers ``lax.scan``, ``lax.fori_loop`` and flax's ``nn.scan`` to a ``stablehlo.while`` whose
condition compares one carried counter with a constant (``compare LT, %iterArg, %c`` where
``%c = stablehlo.constant dense<N>``) and whose counter starts from a constant operand and steps
by a constant (``add %iterArg, %c1`` yielded back). ``trip_count`` reads that pattern, as XLA's
``WhileLoopTripCountAnnotator`` does for its cost analysis."""

from __future__ import annotations

import re

from shardwise.ir.core import Op, Value

__all__ = ["UNKNOWN_TRIPS", "times", "trip_count"]

#: The trip count assumed when the loop does not follow the counted pattern: the body runs at
#: least once whenever its cost matters (a loop that never runs costs nothing anyway).
UNKNOWN_TRIPS = 1

_SCALAR = re.compile(r"\s*dense<\s*(-?\d+)\s*>\s*:\s*tensor<[su]?i\d+>\s*")
_DIRECTION = re.compile(r"comparison_direction\s+(\w+)")


def _constant(v: Value) -> int | None:
    """The value of ``v`` when it is a scalar integer constant (``stablehlo.constant``, or
    ``sdy.constant`` as Shardy's import rewrites it), else ``None``."""
    op = v.owner
    if not isinstance(op, Op) or op.name not in ("stablehlo.constant", "sdy.constant"):
        return None
    m = _SCALAR.fullmatch(op.attributes.get("value", ""))
    return int(m.group(1)) if m else None


def trip_count(loop: Op) -> int | None:
    """How many times the body of the ``stablehlo.while`` ``loop`` runs, when its condition is
    ``counter LT|LE|GT|GE|NE limit`` (either side) with a constant limit, the counter starts
    from a constant operand and the body yields ``counter + step`` (or ``step + counter``) with
    a constant ``step``; ``None`` otherwise (the caller uses :data:`UNKNOWN_TRIPS`)."""
    if loop.name != "stablehlo.while" or len(loop.regions) != 2:
        return None
    cond, body = (r.blocks[0] for r in loop.regions)
    ret = cond.ops[-1] if cond.ops else None
    if ret is None or len(ret.operands) != 1:
        return None
    cmp = ret.operands[0].owner
    if not isinstance(cmp, Op) or cmp.name != "stablehlo.compare" or len(cmp.operands) != 2:
        return None
    m = _DIRECTION.search(cmp.attributes.get("comparison_direction", ""))
    if not m:
        return None
    direction = m.group(1)
    lhs, rhs = cmp.operands
    flip = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "NE": "NE"}
    if _arg_index(cond.args, lhs) is not None and _constant(rhs) is not None:
        counter, limit = _arg_index(cond.args, lhs), _constant(rhs)
    elif _arg_index(cond.args, rhs) is not None and _constant(lhs) is not None and direction in flip:
        counter, limit, direction = _arg_index(cond.args, rhs), _constant(lhs), flip[direction]
    else:
        return None
    assert counter is not None and limit is not None
    start = _constant(loop.operands[counter])
    step = _step(body.args[counter], body.ops[-1].operands[counter] if body.ops else None)
    if start is None or step is None:
        return None
    if direction in ("LT", "LE") and step > 0:
        return max(0, -(-(limit - start + (direction == "LE")) // step))
    if direction in ("GT", "GE") and step < 0:
        return max(0, -(-(start - limit + (direction == "GE")) // -step))
    if direction == "NE" and step != 0 and (limit - start) % step == 0 and (limit - start) // step >= 0:
        return (limit - start) // step
    return None


def _arg_index(args: list[Value], v: Value) -> int | None:
    for i, a in enumerate(args):
        if a is v:
            return i
    return None


def _step(arg: Value, yielded: Value | None) -> int | None:
    """The constant ``step`` of ``yielded = arg + step`` (or ``step + arg``), else ``None``."""
    op = yielded.owner if yielded is not None else None
    if not isinstance(op, Op) or op.name != "stablehlo.add" or len(op.operands) != 2:
        return None
    a, b = op.operands
    if a is arg:
        return _constant(b)
    if b is arg:
        return _constant(a)
    return None


def times(op: Op) -> int:
    """How many times ``op`` runs per run of its function: the product, over the
    ``stablehlo.while`` ops around it, of their trip count (:data:`UNKNOWN_TRIPS` when
    :func:`trip_count` cannot tell), plus one for an op of a condition region."""
    n = 1
    block = op.parent
    while block is not None and block.parent is not None and block.parent.parent is not None:
        owner = block.parent.parent
        if owner.name == "stablehlo.while" and len(owner.regions) == 2:
            trips = trip_count(owner)
            k = UNKNOWN_TRIPS if trips is None else trips
            n *= k + 1 if block.parent is owner.regions[0] else k
        block = owner.parent
    return n
