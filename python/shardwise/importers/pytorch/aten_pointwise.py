"""Elementwise ops: arithmetic (``add``, ``sub``, ``mul``, ``div`` with tensors or Python
scalars, ``alpha`` included), unary math, activations (``relu``, ``gelu`` exact and tanh,
``sigmoid``, ``silu``), compares, logical ops, ``where`` and constant tensors (``full``,
``full_like``, ``zeros_like``, ``ones_like``, ``scalar_tensor``, ``arange``), ``clamp`` and
``hardtanh`` (ReLU6). Operands are converted to the result's element type and broadcast to its
shape (PyTorch's type promotion and broadcasting, ``Lowering.operand``); the formulas of
``gelu`` are PyTorch's (``torch.nn.GELU`` docs)."""

from __future__ import annotations

import math
from typing import Any

from shardwise.errors import ProgramError
from shardwise.importers.pytorch.lowering import Lowering
from shardwise.importers.pytorch.registry import aten
from shardwise.ir.core import Value, tensor_type
from shardwise.ir.types import TensorType

_BINARY = {
    "add": "stablehlo.add",
    "sub": "stablehlo.subtract",
    "rsub": "stablehlo.subtract",
    "mul": "stablehlo.multiply",
    "div": "stablehlo.divide",
    "maximum": "stablehlo.maximum",
    "minimum": "stablehlo.minimum",
    "pow": "stablehlo.power",
    "logical_and": "stablehlo.and",
    "logical_or": "stablehlo.or",
    "bitwise_and": "stablehlo.and",
    "bitwise_or": "stablehlo.or",
}


def _binary(lo: Lowering, node: Any) -> Value:
    op = str(node.target).split(".")[1]
    out = lo.result_type(node)
    if op == "div" and node.kwargs.get("rounding_mode") is not None:
        raise ProgramError(
            f"aten.div with rounding_mode={node.kwargs['rounding_mode']!r}: expected none (true division)"
        )
    work = (
        out
        if not op.startswith(("logical_", "bitwise_"))
        else TensorType(out.shape, "i1" if op.startswith("logical_") else out.element_type)
    )
    x, y = lo.operand(node.args[0], work), lo.operand(node.args[1], work)
    if op == "rsub":
        x, y = y, x
    alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
    if op in ("add", "sub", "rsub") and alpha != 1:
        y = lo.b.op("stablehlo.multiply", [y, lo.const(alpha, work.element_type, work.shape)], [work]).result
    if op == "pow" and isinstance(node.args[1], (int, float)) and float(node.args[1]) == 2.0:
        return lo.b.op("stablehlo.multiply", [x, x], [work]).result
    return lo.b.op(_BINARY[op], [x, y], [work]).result


for _op in _BINARY:
    for _overload in ("Tensor", "Scalar", "default", "Tensor_Scalar", "Tensor_Tensor"):
        aten(f"{_op}.{_overload}")(_binary)

_UNARY = {
    "neg": "stablehlo.negate",
    "exp": "stablehlo.exponential",
    "log": "stablehlo.log",
    "tanh": "stablehlo.tanh",
    "sqrt": "stablehlo.sqrt",
    "rsqrt": "stablehlo.rsqrt",
    "abs": "stablehlo.abs",
    "sin": "stablehlo.sine",
    "cos": "stablehlo.cosine",
    "sigmoid": "stablehlo.logistic",
    "erf": "chlo.erf",
    "floor": "stablehlo.floor",
    "ceil": "stablehlo.ceil",
    "logical_not": "stablehlo.not",
    "bitwise_not": "stablehlo.not",
}


@aten(*(f"{name}.default" for name in _UNARY))
def _unary(lo: Lowering, node: Any) -> Value:
    op = str(node.target).split(".")[1]
    out = lo.result_type(node)
    x = lo.operand(node.args[0], out)
    return lo.b.op(_UNARY[op], [x], [out]).result


@aten("relu.default")
def _relu(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    x = lo.operand(node.args[0], out)
    return lo.b.op("stablehlo.maximum", [x, lo.const(0, out.element_type, out.shape)], [out]).result


@aten("silu.default")
def _silu(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    x = lo.operand(node.args[0], out)
    return lo.b.op("stablehlo.multiply", [x, lo.b.op("stablehlo.logistic", [x], [out]).result], [out]).result


@aten("gelu.default")
def _gelu(lo: Lowering, node: Any) -> Value:
    # none: x/2 (1 + erf(x / sqrt 2)); tanh: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    out = lo.result_type(node)
    x = lo.operand(node.args[0], out)
    approximate = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    e, shape = out.element_type, out.shape

    def mul(a: Value, c: Value) -> Value:
        return lo.b.op("stablehlo.multiply", [a, c], [out]).result

    if approximate == "tanh":
        cube = mul(mul(x, x), x)
        inner = lo.b.op("stablehlo.add", [x, mul(cube, lo.const(0.044715, e, shape))], [out]).result
        core = lo.b.op("stablehlo.tanh", [mul(inner, lo.const(math.sqrt(2.0 / math.pi), e, shape))], [out]).result
    elif approximate == "none":
        core = lo.b.op("chlo.erf", [mul(x, lo.const(math.sqrt(0.5), e, shape))], [out]).result
    else:
        raise ProgramError(f"aten.gelu approximate={approximate!r}: expected 'none' or 'tanh'")
    one_plus = lo.b.op("stablehlo.add", [core, lo.const(1.0, e, shape)], [out]).result
    return mul(mul(x, lo.const(0.5, e, shape)), one_plus)


def _compute_type(lo: Lowering, args: list[Any], shape: tuple[int, ...]) -> TensorType:
    """PyTorch's promotion of a compare's operands: a float tensor's type, else f32 for a
    float scalar, else the first tensor's."""
    tensors = [tensor_type(lo.value(a)).element_type for a in args if not isinstance(a, (bool, int, float))]
    floats = [t for t in tensors if t.startswith(("f", "bf"))]
    if floats:
        return TensorType(shape, floats[0])
    if any(isinstance(a, float) for a in args):
        return TensorType(shape, "f32")
    return TensorType(shape, tensors[0] if tensors else "i64")


_COMPARE = {"eq": "EQ", "ne": "NE", "lt": "LT", "le": "LE", "gt": "GT", "ge": "GE"}


@aten(*(f"{name}.{overload}" for name in _COMPARE for overload in ("Scalar", "Tensor")))
def _compare(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    work = _compute_type(lo, list(node.args[:2]), out.shape)
    x, y = lo.operand(node.args[0], work), lo.operand(node.args[1], work)
    return lo.compare(_COMPARE[str(node.target).split(".")[1]], x, y)


@aten("where.self")
def _where(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    cond = lo.operand(node.args[0], TensorType(out.shape, "i1"))
    x, y = lo.operand(node.args[1], out), lo.operand(node.args[2], out)
    return lo.b.op("stablehlo.select", [cond, x, y], [out]).result


@aten("full.default", "full_like.default", "scalar_tensor.default")
def _full(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    value = node.args[0] if str(node.target) == "aten.scalar_tensor.default" else node.args[1]
    return lo.const(value, out.element_type, out.shape)


@aten("zeros_like.default", "zeros.default")
def _zeros(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    return lo.const(0, out.element_type, out.shape)


@aten("ones_like.default", "ones.default")
def _ones(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    return lo.const(1, out.element_type, out.shape)


@aten("arange.start_step", "arange.start", "arange.default")
def _arange(lo: Lowering, node: Any) -> Value:
    # start + step * iota, in the result's element type.
    out = lo.result_type(node)
    args = list(node.args)
    start, step = (0, 1) if len(args) == 1 else (args[0], args[2] if len(args) > 2 else 1)
    y = lo.b.op("stablehlo.iota", [], [out], {"iota_dimension": "0 : i64"}).result
    if step != 1:
        y = lo.b.multiply(y, lo.const(step, out.element_type, out.shape))
    if start != 0:
        y = lo.b.add(y, lo.const(start, out.element_type, out.shape))
    return y


@aten("clamp.default", "clamp.Tensor", "clamp_min.default", "clamp_max.default", "hardtanh.default")
def _clamp(lo: Lowering, node: Any) -> Value:
    # max(x, min) then min(., max), each bound optional; hardtanh (ReLU6: 0, 6) is a clamp
    # with bounds min_val=-1, max_val=1 by default.
    out = lo.result_type(node)
    op = str(node.target)
    x = lo.operand(node.args[0], out)
    if op.startswith("aten.hardtanh"):
        args = list(node.args) + [-1.0, 1.0]
        low, high = node.kwargs.get("min_val", args[1]), node.kwargs.get("max_val", args[2])
    elif op.startswith("aten.clamp_min"):
        low, high = node.args[1], None
    elif op.startswith("aten.clamp_max"):
        low, high = None, node.args[1]
    else:
        args = list(node.args) + [None, None]
        low, high = node.kwargs.get("min", args[1]), node.kwargs.get("max", args[2])
    if low is not None:
        x = lo.b.op("stablehlo.maximum", [x, lo.operand(low, out)], [out]).result
    if high is not None:
        x = lo.b.op("stablehlo.minimum", [x, lo.operand(high, out)], [out]).result
    return x
