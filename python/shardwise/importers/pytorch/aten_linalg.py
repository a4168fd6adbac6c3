"""Matrix products: ``mm``, ``bmm``, ``addmm`` (with ``beta`` and ``alpha``) and ``linear``,
as ``stablehlo.dot_general`` (StableHLO spec; the dimension numbers JAX emits for ``x @ w``)."""

from __future__ import annotations

from typing import Any

from shardwise.importers.pytorch.lowering import Lowering
from shardwise.importers.pytorch.registry import aten
from shardwise.ir.core import Value, tensor_type


def _scaled(lo: Lowering, x: Value, factor: Any) -> Value:
    if factor == 1:
        return x
    t = tensor_type(x)
    return lo.b.op("stablehlo.multiply", [x, lo.const(factor, t.element_type, t.shape)], [t]).result


@aten("mm.default")
def _mm(lo: Lowering, node: Any) -> Value:
    a, c = lo.value(node.args[0]), lo.value(node.args[1])
    return lo.b.dot_general(a, c, contracting=((1,), (0,)))


@aten("bmm.default")
def _bmm(lo: Lowering, node: Any) -> Value:
    a, c = lo.value(node.args[0]), lo.value(node.args[1])
    return lo.b.dot_general(a, c, contracting=((2,), (1,)), batch=((0,), (0,)))


@aten("addmm.default")
def _addmm(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    bias = lo.operand(node.args[0], out)
    a, c = lo.value(node.args[1]), lo.value(node.args[2])
    prod = _scaled(lo, lo.b.dot_general(a, c, contracting=((1,), (0,))), node.kwargs.get("alpha", 1))
    return lo.b.add(prod, _scaled(lo, bias, node.kwargs.get("beta", 1)))


@aten("linear.default")
def _linear(lo: Lowering, node: Any) -> Value:
    # y = x W^T + b over the last dim of x.
    out = lo.result_type(node)
    x, w = lo.value(node.args[0]), lo.value(node.args[1])
    y = lo.b.dot_general(x, w, contracting=((tensor_type(x).rank - 1,), (1,)))
    if len(node.args) > 2 and node.args[2] is not None:
        y = lo.b.add(y, lo.operand(node.args[2], out))
    return y
