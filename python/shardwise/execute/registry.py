"""The interpreter's op table: op name to implementation, filled by ``register`` in the op
family modules (``ops_*``, all imported by ``shardwise.execute.ops``) and read by the
interpreter. The lowest layer of the interpreter: it imports neither the interpreter nor the
op families."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter
    from shardwise.ir.core import Op

__all__ = ["ELEMENTWISE", "OPS", "OpFn", "register"]

OpFn = Callable[["Interpreter", "Op", list[Any]], list[Any]]

#: op name -> implementation ``fn(interpreter, op, operand_arrays) -> result_arrays``.
OPS: dict[str, OpFn] = {}

#: ops whose implementation is elementwise and shape-agnostic, so a region made only of them
#: (a reduction or comparator body) can be evaluated on whole arrays at once.
ELEMENTWISE: set[str] = set()


def register(*names: str, elementwise: bool = False) -> Callable[[OpFn], OpFn]:
    """Registers ``fn`` as the implementation of each op in ``names``."""

    def deco(fn: OpFn) -> OpFn:
        for n in names:
            OPS[n] = fn
            if elementwise:
                ELEMENTWISE.add(n)
        return fn

    return deco
