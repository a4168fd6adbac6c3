"""Convolutional networks: ``convolution`` (``stablehlo.convolution`` with PyTorch's NCHW / OIHW
layout, strides, padding, dilation and groups) and its backward (one group), batch norm in
inference (``_native_batch_norm_legit_no_training``: the running statistics) and in training
(``_native_batch_norm_legit_functional``: the batch's, and the running statistics' update),
``max_pool2d_with_indices`` (``stablehlo.reduce_window`` over ``-inf`` padding; the indices are
not translated) and its backward (``select_and_scatter``, as JAX's gradient of
``reduce_window`` max). The
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
    sp = ", ".join(str(i) for i in range(n))
    y = _conv(
        lo,
        x,
        w,
        f"[b, f, {sp}]x[o, i, {sp}]->[b, f, {sp}]",
        out,
        strides=_ints(stride, n),
        pads=[(p, p) for p in _ints(padding, n)],
        lhs_dilation=[1] * n,
        rhs_dilation=_ints(dilation, n),
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
        "window_strides": _array(strides),
        "padding": padding_attr(pads),
        "lhs_dilation": _array(lhs_dilation),
        "rhs_dilation": _array(rhs_dilation),
        "window_reversal": _array([reverse] * n, "i1"),
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
    s, p, d = _ints(stride, n), _ints(padding, n), _ints(dilation, n)
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


@aten("max_pool2d_with_indices_backward.default")
def _max_pool2d_backward(lo: Lowering, node: Any) -> Value:
    # Each window's gradient goes to its first maximum (the element torch's indices name):
    # stablehlo.select_and_scatter with a GE select (keeps the earlier of equal elements) over
    # the input padded with -inf, then the padding sliced off.
    dy, x = lo.value(node.args[0]), lo.value(node.args[1])
    t = tensor_type(x)
    kernel = _ints(node.args[2], 2)
    stride = _ints(node.args[3], 2) if node.args[3] else kernel
    pad = _ints(node.args[4], 2)
    dilation = _ints(node.args[5], 2)
    if bool(node.args[6]) or dilation != [1, 1]:
        raise ProgramError(
            f"aten.max_pool2d_with_indices_backward (FX node {node.name}): expected ceil_mode=False, dilation 1"
        )
    lead = t.rank - 2
    pads = [(0, 0)] * lead + [(q, q) for q in pad]
    padded = lo.b.op(
        "stablehlo.pad",
        [x, lo.const(float("-inf"), t.element_type)],
        [TensorType(tuple(s + a + b for s, (a, b) in zip(t.shape, pads)), t.element_type)],
        {
            "edge_padding_low": _array([a for a, _ in pads]),
            "edge_padding_high": _array([b for _, b in pads]),
            "interior_padding": _array([0] * t.rank),
        },
    ).result
    pt = tensor_type(padded)
    scalar = TensorType((), t.element_type)
    select = Block([scalar, scalar])
    ge = select.append(
        Op(
            "stablehlo.compare",
            select.args,
            [TensorType((), "i1")],
            {
                "comparison_direction": "#stablehlo<comparison_direction GE>",
                "compare_type": "#stablehlo<comparison_type FLOAT>",
            },
        )
    )
    select.append(Op("stablehlo.return", [ge.result], []))
    scatter = Block([scalar, scalar])
    added = scatter.append(Op("stablehlo.add", scatter.args, [scalar]))
    scatter.append(Op("stablehlo.return", [added.result], []))
    attrs = {
        "padding": padding_attr([(0, 0)] * t.rank),
        "window_dimensions": _array([1] * lead + kernel),
        "window_strides": _array([1] * lead + stride),
    }
    grad = lo.b.op(
        "stablehlo.select_and_scatter",
        [padded, lo.convert(dy, t.element_type), lo.const(0.0, t.element_type)],
        [pt],
        attrs,
        [Region([select]), Region([scatter])],
    ).result
    return lo.b.slice(grad, [a for a, _ in pads], [s + a for s, (a, _) in zip(t.shape, pads)])
