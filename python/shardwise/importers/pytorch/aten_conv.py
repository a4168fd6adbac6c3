"""Convolutional networks: ``convolution`` (``stablehlo.convolution`` with PyTorch's NCHW / OIHW
layout, strides, padding, dilation and groups) and its backward (one group), batch norm in
inference (``_native_batch_norm_legit_no_training``: the running statistics) and in training
(``_native_batch_norm_legit_functional``: the batch's, and the running statistics' update).
Pooling is ``aten_pool``'s. The attribute forms are the ones JAX emits for
``lax.conv_general_dilated`` (StableHLO spec)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardwise.errors import ProgramError
from shardwise.importers.pytorch.lowering import Lowering, array_attr, ints, padding_attr
from shardwise.importers.pytorch.registry import aten
from shardwise.ir.core import Value, tensor_type
from shardwise.ir.types import TensorType


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
    sp = ", ".join(str(i) for i in range(n))
    y = _conv(
        lo,
        x,
        w,
        f"[b, f, {sp}]x[o, i, {sp}]->[b, f, {sp}]",
        out,
        strides=ints(stride, n),
        pads=[(p, p) for p in ints(padding, n)],
        lhs_dilation=[1] * n,
        rhs_dilation=ints(dilation, n),
        groups=int(groups),
    )
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


def _conv(
    lo: Lowering,
    lhs: Value,
    rhs: Value,
    numbers: str,
    out: TensorType,
    *,
    strides: Sequence[int],
    pads: Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int],
    rhs_dilation: Sequence[int],
    reverse: bool = False,
    groups: int = 1,
) -> Value:
    """``stablehlo.convolution`` of ``lhs`` and ``rhs`` with the attributes JAX emits for
    ``lax.conv_general_dilated`` (``numbers``: its dimension numbers)."""
    n = len(strides)
    attrs = {
        "dimension_numbers": f"#stablehlo.conv<{numbers}>",
        "window_strides": array_attr(strides),
        "padding": padding_attr(pads),
        "lhs_dilation": array_attr(lhs_dilation),
        "rhs_dilation": array_attr(rhs_dilation),
        "window_reversal": array_attr([reverse] * n, "i1"),
        "batch_group_count": "1 : i64",
        "feature_group_count": f"{groups} : i64",
        "precision_config": "[#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]",
    }
    return lo.b.op("stablehlo.convolution", [lhs, rhs], [out], attrs).result


@aten("convolution_backward.default")
def _convolution_backward(lo: Lowering, node: Any) -> tuple[Value | None, Value | None, Value | None]:
    # The gradients of y = conv(x, w) (stride s, padding p, dilation d, one group), as JAX's
    # transpose rules of conv_general_dilated form them: dx is the convolution of dy, dilated
    # by s, with w reversed and its features swapped; dw is the convolution of x with dy, the
    # batch as the contracted feature and dy dilated by s; db sums dy over all but its features.
    dy, x, w = lo.value(node.args[0]), lo.value(node.args[1]), lo.value(node.args[2])
    stride, padding, dilation, transposed, _output_padding, groups, mask = node.args[4:11]
    if transposed or int(groups) != 1:
        raise ProgramError(
            f"aten.convolution_backward (FX node {node.name}): expected a forward convolution of one group,"
            f" got transposed={transposed}, groups={groups}"
        )
    xt, wt, dyt = tensor_type(x), tensor_type(w), tensor_type(dy)
    n = wt.rank - 2
    s, p, d = ints(stride, n), ints(padding, n), ints(dilation, n)
    k = wt.shape[2:]
    sp = ", ".join(str(i) for i in range(n))
    dx = dw = db = None
    if mask[0]:
        lows = [d[i] * (k[i] - 1) - p[i] for i in range(n)]
        highs = [xt.shape[2 + i] - ((dyt.shape[2 + i] - 1) * s[i] + 1) - lows[i] + d[i] * (k[i] - 1) for i in range(n)]
        if min(lows + highs) < 0:
            raise ProgramError(f"aten.convolution_backward (FX node {node.name}): padding above the kernel's reach")
        dx = _conv(
            lo,
            dy,
            w,
            f"[b, f, {sp}]x[i, o, {sp}]->[b, f, {sp}]",
            lo.result_type_at(node, 0),
            strides=[1] * n,
            pads=list(zip(lows, highs)),
            lhs_dilation=s,
            rhs_dilation=d,
            reverse=True,
        )
    if mask[1]:
        # Rows of x past the last window are never read: sliced off, so no padding is negative.
        used = [(dyt.shape[2 + i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 for i in range(n)]
        highs = [used[i] - xt.shape[2 + i] - p[i] for i in range(n)]
        xs = x
        if min(highs) < 0:
            limit = list(xt.shape)
            for i in range(n):
                if highs[i] < 0:
                    limit[2 + i] += highs[i]
                    highs[i] = 0
            xs = lo.b.slice(x, [0] * xt.rank, limit)
        dw = _conv(
            lo,
            xs,
            dy,
            f"[f, b, {sp}]x[i, o, {sp}]->[f, b, {sp}]",
            lo.result_type_at(node, 1),
            strides=d,
            pads=[(p[i], highs[i]) for i in range(n)],
            lhs_dilation=[1] * n,
            rhs_dilation=s,
        )
    if mask[2]:
        db = lo.reduce(dy, [0, *range(2, dyt.rank)], "stablehlo.add", 0)
    return dx, dw, db


@aten("_native_batch_norm_legit_functional.default")
def _batch_norm_training(lo: Lowering, node: Any) -> tuple[Value, Value, Value, Value, Value]:
    # Training: normalize by the batch's mean and biased variance over all but dim 1; the
    # running statistics move by momentum towards the mean and the unbiased variance
    # (torch.nn.BatchNorm2d docs). Results: y, the mean, 1/sqrt(var + eps), the new running
    # mean and variance.
    x = lo.value(node.args[0])
    t = tensor_type(x)
    weight, bias, rmean, rvar = node.args[1:5]
    training, momentum, eps = bool(node.args[5]), float(node.args[6]), float(node.args[7])
    if not training:
        raise ProgramError(f"aten._native_batch_norm_legit_functional (FX node {node.name}): expected training=True")
    dims = [0, *range(2, t.rank)]
    count = 1
    for i in dims:
        count *= t.shape[i]
    c = t.shape[1]
    vec = TensorType((c,), t.element_type)

    def per_channel(v: Value) -> Value:
        return lo.b.broadcast_in_dim(v, t.shape, [1])

    mean = lo.b.divide(lo.reduce(x, dims, "stablehlo.add", 0), lo.const(count, t.element_type, (c,)))
    centred = lo.b.subtract(x, per_channel(mean))
    var = lo.b.divide(
        lo.reduce(lo.b.multiply(centred, centred), dims, "stablehlo.add", 0), lo.const(count, t.element_type, (c,))
    )
    rstd = lo.b.op("stablehlo.rsqrt", [lo.b.add(var, lo.const(eps, t.element_type, (c,)))], [vec]).result
    y = lo.b.multiply(centred, per_channel(rstd))
    if weight is not None:
        y = lo.b.multiply(y, per_channel(lo.value(weight)))
    if bias is not None:
        y = lo.b.add(y, per_channel(lo.value(bias)))

    def moved(old: Any, new: Value) -> Value:
        o = lo.convert(lo.value(old), t.element_type)
        kept = lo.b.multiply(o, lo.const(1.0 - momentum, t.element_type, (c,)))
        return lo.b.add(kept, lo.b.multiply(new, lo.const(momentum, t.element_type, (c,))))

    unbiased = lo.b.multiply(var, lo.const(count / max(count - 1, 1), t.element_type, (c,)))
    return y, mean, rstd, moved(rmean, mean), moved(rvar, unbiased)
