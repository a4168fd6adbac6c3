"""Reductions and the normalizations built on them: ``sum``, ``mean``, ``amax``, ``amin``,
``any``, ``cumsum``, ``_softmax``, ``_log_softmax`` and ``native_layer_norm`` (its three results: the
normalized tensor, the mean and the reciprocal standard deviation, PyTorch's definition with the
biased variance). Softmax subtracts the maximum first, as PyTorch and JAX do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardwise.errors import ProgramError
from shardwise.importers.pytorch.lowering import Lowering
from shardwise.importers.pytorch.registry import aten
from shardwise.ir.core import Value, tensor_type
from shardwise.ir.types import TensorType


def _dims(x: Value, dims: Any) -> list[int]:
    rank = tensor_type(x).rank
    if dims is None or (isinstance(dims, Sequence) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({int(d) % rank for d in dims}) if rank else []


def _count(x: Value, dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= tensor_type(x).shape[d]
    return n


@aten("sum.dim_IntList", "sum.default")
def _sum(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    x = lo.convert(lo.value(node.args[0]), out.element_type)
    dims = _dims(x, node.args[1] if len(node.args) > 1 else None)
    return lo.keep(lo.reduce(x, dims, "stablehlo.add", 0), out.shape)


@aten("mean.dim", "mean.default")
def _mean(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    x = lo.convert(lo.value(node.args[0]), out.element_type)
    dims = _dims(x, node.args[1] if len(node.args) > 1 else None)
    s = lo.keep(lo.reduce(x, dims, "stablehlo.add", 0), out.shape)
    return lo.b.divide(s, lo.const(_count(x, dims), out.element_type, out.shape))


@aten("amax.default", "amin.default")
def _amax(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    x = lo.value(node.args[0])
    big = str(node.target).startswith("aten.amax")
    init = float("-inf") if big else float("inf")
    if not out.element_type.startswith(("f", "bf")):
        raise ProgramError(f"{node.target} of {out.element_type}: expected a float tensor")
    body = "stablehlo.maximum" if big else "stablehlo.minimum"
    return lo.keep(lo.reduce(x, _dims(x, node.args[1] if len(node.args) > 1 else None), body, init), out.shape)


@aten("any.dim", "any.dims", "any.default")
def _any(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    x = lo.convert(lo.value(node.args[0]), "i1")
    return lo.keep(
        lo.reduce(x, _dims(x, node.args[1] if len(node.args) > 1 else None), "stablehlo.or", False), out.shape
    )


def _softmax_parts(lo: Lowering, node: Any) -> tuple[Value, Value, TensorType, list[int]]:
    out = lo.result_type(node)
    x = lo.convert(lo.value(node.args[0]), out.element_type)
    dim = int(node.args[1]) % out.rank
    kept = tuple(1 if i == dim else s for i, s in enumerate(out.shape))
    m = lo.broadcast(lo.keep(lo.reduce(x, [dim], "stablehlo.maximum", float("-inf")), kept), out.shape)
    shifted = lo.b.subtract(x, m)
    e = lo.b.exp(shifted)
    total = lo.broadcast(lo.keep(lo.reduce(e, [dim], "stablehlo.add", 0), kept), out.shape)
    return shifted, total, out, [dim]


@aten("_softmax.default")
def _softmax(lo: Lowering, node: Any) -> Value:
    shifted, total, _out, _ = _softmax_parts(lo, node)
    return lo.b.divide(lo.b.exp(shifted), total)


@aten("_log_softmax.default")
def _log_softmax(lo: Lowering, node: Any) -> Value:
    shifted, total, out, _ = _softmax_parts(lo, node)
    return lo.b.subtract(shifted, lo.b.op("stablehlo.log", [total], [out]).result)


@aten("native_layer_norm.default")
def _layer_norm(lo: Lowering, node: Any) -> tuple[Value, Value, Value]:
    x = lo.value(node.args[0])
    t = tensor_type(x)
    k = len(node.args[1])
    weight, bias, eps = node.args[2], node.args[3], float(node.args[4])
    dims = list(range(t.rank - k, t.rank))
    kept = tuple(1 if i in dims else s for i, s in enumerate(t.shape))
    n = lo.const(_count(x, dims), t.element_type, kept)
    mean = lo.b.divide(lo.keep(lo.reduce(x, dims, "stablehlo.add", 0), kept), n)
    centred = lo.b.subtract(x, lo.broadcast(mean, t.shape))
    var = lo.b.divide(lo.keep(lo.reduce(lo.b.multiply(centred, centred), dims, "stablehlo.add", 0), kept), n)
    rstd = lo.b.op("stablehlo.rsqrt", [lo.b.add(var, lo.const(eps, t.element_type, kept))], [var.type]).result
    y = lo.b.multiply(centred, lo.broadcast(rstd, t.shape))
    if weight is not None:
        y = lo.b.multiply(y, lo.operand(weight, t))
    if bias is not None:
        y = lo.b.add(y, lo.operand(bias, t))
    return y, mean, rstd


@aten("cumsum.default")
def _cumsum(lo: Lowering, node: Any) -> Value:
    # A window of the whole dim over n - 1 zeros of padding before it: out[j] = sum x[..j].
    out = lo.result_type(node)
    x = lo.convert(lo.value(node.args[0]), out.element_type)
    dim = int(node.args[1]) % out.rank
    n = out.shape[dim]
    window = [n if d == dim else 1 for d in range(out.rank)]
    pads = [(n - 1, 0) if d == dim else (0, 0) for d in range(out.rank)]
    return lo.reduce_window(x, window, pads, "stablehlo.add", 0)
