"""Convolutional networks: ``convolution`` (``stablehlo.convolution`` with PyTorch's NCHW / OIHW
layout, strides, padding, dilation and groups), batch norm in inference
(``_native_batch_norm_legit_no_training``: the running statistics) and ``max_pool2d_with_indices``
(``stablehlo.reduce_window`` over ``-inf`` padding; the indices are not translated). The
attribute forms are the ones JAX emits for ``lax.conv_general_dilated`` and
``lax.reduce_window`` (StableHLO spec)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardwise.errors import ProgramError
from shardwise.importers.pytorch.lowering import Lowering, padding_attr
from shardwise.importers.pytorch.registry import aten
from shardwise.ir.core import Block, Op, Region, Value, tensor_type
from shardwise.ir.types import TensorType


def _array(values: Sequence[int], etype: str = "i64") -> str:
    if etype == "i1":
        return "array<i1" + (": " + ", ".join("true" if v else "false" for v in values) if values else "") + ">"
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in values) if values else "") + ">"


def _ints(v: Any, n: int) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return [int(x) for x in (v * n if len(v) == 1 else v)]


@aten("convolution.default")
def _convolution(lo: Lowering, node: Any) -> Value:
    x, w = lo.value(node.args[0]), lo.value(node.args[1])
    bias, stride, padding, dilation, transposed, _output_padding, groups = node.args[2:9]
    if transposed:
        raise ProgramError(
            f"aten.convolution (FX node {node.name}): expected a forward convolution, got a transposed one"
        )
    out = lo.result_type(node)
    n = tensor_type(w).rank - 2
    spatial = ", ".join(str(i) for i in range(n))
    pads = _ints(padding, n)
    attrs = {
        "dimension_numbers": f"#stablehlo.conv<[b, f, {spatial}]x[o, i, {spatial}]->[b, f, {spatial}]>",
        "window_strides": _array(_ints(stride, n)),
        "padding": padding_attr([(p, p) for p in pads]),
        "lhs_dilation": _array([1] * n),
        "rhs_dilation": _array(_ints(dilation, n)),
        "window_reversal": _array([False] * n, "i1"),
        "batch_group_count": "1 : i64",
        "feature_group_count": f"{int(groups)} : i64",
        "precision_config": "[#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]",
    }
    y = lo.b.op("stablehlo.convolution", [x, w], [out], attrs).result
    if bias is not None:
        b = lo.value(bias)
        y = lo.b.add(y, lo.b.broadcast_in_dim(b, out.shape, [1]))
    return y


@aten("_native_batch_norm_legit_no_training.default")
def _batch_norm(lo: Lowering, node: Any) -> tuple[Value, Value, Value]:
    # (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c], channels on dim 1.
    x = lo.value(node.args[0])
    t = tensor_type(x)
    weight, bias, mean, var = node.args[1:5]
    eps = float(node.args[6])

    def per_channel(arg: Any) -> Value:
        return lo.b.broadcast_in_dim(lo.convert(lo.value(arg), t.element_type), t.shape, [1])

    v = lo.value(var)
    scale = lo.b.op(
        "stablehlo.rsqrt", [lo.b.add(v, lo.const(eps, t.element_type, tensor_type(v).shape))], [v.type]
    ).result
    y = lo.b.multiply(lo.b.subtract(x, per_channel(mean)), lo.b.broadcast_in_dim(scale, t.shape, [1]))
    if weight is not None:
        y = lo.b.multiply(y, per_channel(weight))
    if bias is not None:
        y = lo.b.add(y, per_channel(bias))
    # The saved statistics, empty in inference (their recorded shapes).
    rest = [lo.const(0, lo.result_type_at(node, i).element_type, lo.result_type_at(node, i).shape) for i in (1, 2)]
    return y, rest[0], rest[1]


@aten("max_pool2d_with_indices.default")
def _max_pool2d(lo: Lowering, node: Any) -> tuple[Value, None]:
    x = lo.value(node.args[0])
    t = tensor_type(x)
    args = list(node.args) + [None] * (6 - len(node.args))
    kernel = _ints(args[1], 2)
    stride = _ints(args[2], 2) if args[2] else kernel
    pad = _ints(args[3] if args[3] is not None else 0, 2)
    dilation = _ints(args[4] if args[4] is not None else 1, 2)
    if args[5]:
        raise ProgramError(f"aten.max_pool2d_with_indices (FX node {node.name}): expected ceil_mode=False, got True")
    out = lo.result_type_at(node, 0)
    lead = t.rank - 2
    scalar = TensorType((), t.element_type)
    block = Block([scalar, scalar])
    combined = block.append(Op("stablehlo.maximum", block.args, [scalar]))
    block.append(Op("stablehlo.return", [combined.result], []))
    attrs = {
        "base_dilations": _array([1] * t.rank),
        "padding": padding_attr([(0, 0)] * lead + [(p, p) for p in pad]),
        "window_dilations": _array([1] * lead + dilation),
        "window_dimensions": _array([1] * lead + kernel),
        "window_strides": _array([1] * lead + stride),
    }
    init = lo.const(float("-inf"), t.element_type)
    y = lo.b.op("stablehlo.reduce_window", [x, init], [out], attrs, [Region([block])]).result
    return y, None
