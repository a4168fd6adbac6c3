"""Pooling: ``max_pool2d_with_indices`` (``stablehlo.reduce_window`` max over ``-inf``
padding; the indices are not translated) and its backward (``select_and_scatter``, as JAX's
gradient of ``reduce_window`` max), ``avg_pool2d`` (a window sum over zero padding divided by
PyTorch's divisor: the window's elements inside the padded input with ``count_include_pad``,
inside the input without, or ``divisor_override``) and its backward (the window sum's transpose:
the gradient dilated by the stride and summed over the window, as JAX's transpose of
``reduce_window`` add), ``_adaptive_avg_pool2d`` (PyTorch's windows ``[floor(i n / o),
ceil((i + 1) n / o))`` per spatial dim: a strided window mean when ``o`` divides ``n``, else one
mean per output index, concatenated) and its backward (the transpose of the same, dim by dim).

``ceil_mode``: PyTorch's output size (``pooling_output_shape`` in ATen's ``Pool.h``: rounded up,
less one when the last window would start past the input and its left padding), the missing
elements padded after the input (``-inf`` for max; for the mean outside every divisor).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardwise.errors import ProgramError
from shardwise.importers.pytorch.lowering import Lowering, array_attr, ints, padding_attr
from shardwise.importers.pytorch.registry import aten
from shardwise.ir.core import Block, Op, Region, Value, tensor_type
from shardwise.ir.types import TensorType


def _out_size(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    # ATen's pooling_output_shape.
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


def _extra(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    # Padding after the input that ceil_mode's last window needs.
    return max((_out_size(n, k, s, p, d, ceil) - 1) * s + d * (k - 1) + 1 - (n + 2 * p), 0)


def _window_attrs(
    lead: int, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int], pads: Sequence[tuple[int, int]]
) -> dict[str, str]:
    return {
        "base_dilations": array_attr([1] * (lead + len(kernel))),
        "padding": padding_attr(pads),
        "window_dilations": array_attr([1] * lead + list(dilation)),
        "window_dimensions": array_attr([1] * lead + list(kernel)),
        "window_strides": array_attr([1] * lead + list(stride)),
    }


class _Window:
    """The spatial window of a 2-D pooling node's arguments: kernel, stride (the kernel when
    empty), padding, dilation and ceil_mode; for an input of ``shape``, its spatial sizes, the
    output's, and the padding before and after each dim (batch and channel dims unpadded)."""

    def __init__(self, node: Any, shape: Sequence[int], args: Sequence[Any], *, dilation: Any = 1) -> None:
        kernel, stride, pad, ceil = args
        self.kernel = ints(kernel, 2)
        self.stride = ints(stride, 2) if stride else self.kernel
        self.pad = ints(pad if pad is not None else 0, 2)
        self.dilation = ints(dilation if dilation is not None else 1, 2)
        self.lead = len(shape) - 2
        if self.lead not in (1, 2):
            raise ProgramError(f"{node.target} (FX node {node.name}): expected a 3-D or 4-D input, got shape {shape}")
        self.spatial = [int(n) for n in shape[self.lead :]]
        dims = list(zip(self.spatial, self.kernel, self.stride, self.pad, self.dilation))
        self.out = [_out_size(n, k, s, p, d, bool(ceil)) for n, k, s, p, d in dims]
        self.pads = [(0, 0)] * self.lead + [(p, p + _extra(n, k, s, p, d, bool(ceil))) for n, k, s, p, d in dims]

    def attrs(self) -> dict[str, str]:
        return _window_attrs(self.lead, self.kernel, self.stride, self.dilation, self.pads)


def _body(name: str, etype: str) -> Region:
    scalar = TensorType((), etype)
    block = Block([scalar, scalar])
    combined = block.append(Op(name, block.args, [scalar]))
    block.append(Op("stablehlo.return", [combined.result], []))
    return Region([block])


def _reduce_window(lo: Lowering, x: Value, out: TensorType, attrs: dict[str, str], body: str, init: float) -> Value:
    etype = tensor_type(x).element_type
    return lo.b.op("stablehlo.reduce_window", [x, lo.const(init, etype)], [out], attrs, [_body(body, etype)]).result


def _pad(lo: Lowering, x: Value, value: float, pads: Sequence[tuple[int, int]], interior: Sequence[int]) -> Value:
    t = tensor_type(x)
    shape = tuple(s + a + b + max(s - 1, 0) * i for s, (a, b), i in zip(t.shape, pads, interior))
    return lo.b.op(
        "stablehlo.pad",
        [x, lo.const(value, t.element_type)],
        [TensorType(shape, t.element_type)],
        {
            "edge_padding_low": array_attr([a for a, _ in pads]),
            "edge_padding_high": array_attr([b for _, b in pads]),
            "interior_padding": array_attr(list(interior)),
        },
    ).result


def _checked(node: Any, w: _Window, out: TensorType) -> None:
    if list(out.shape[w.lead :]) != w.out:
        raise ProgramError(
            f"{node.target} (FX node {node.name}): expected an output of spatial shape {w.out}, got {list(out.shape)}"
        )


@aten("max_pool2d_with_indices.default")
def _max_pool2d(lo: Lowering, node: Any) -> tuple[Value, None]:
    x = lo.value(node.args[0])
    t = tensor_type(x)
    args = list(node.args) + [None] * (6 - len(node.args))
    w = _Window(node, t.shape, [args[1], args[2], args[3], args[5]], dilation=args[4])
    out = lo.result_type_at(node, 0)
    _checked(node, w, out)
    return _reduce_window(lo, x, out, w.attrs(), "stablehlo.maximum", float("-inf")), None


@aten("max_pool2d_with_indices_backward.default")
def _max_pool2d_backward(lo: Lowering, node: Any) -> Value:
    # Each window's gradient goes to its first maximum (the element torch's indices name):
    # stablehlo.select_and_scatter with a GE select (keeps the earlier of equal elements) over
    # the input padded with -inf, then the padding sliced off.
    dy, x = lo.value(node.args[0]), lo.value(node.args[1])
    t = tensor_type(x)
    w = _Window(node, t.shape, [node.args[2], node.args[3], node.args[4], node.args[6]], dilation=node.args[5])
    if w.dilation != [1, 1]:
        raise ProgramError(f"{node.target} (FX node {node.name}): expected dilation 1, got {w.dilation}")
    padded = _pad(lo, x, float("-inf"), w.pads, [0] * t.rank)
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
    attrs = {
        "padding": padding_attr([(0, 0)] * t.rank),
        "window_dimensions": array_attr([1] * w.lead + w.kernel),
        "window_strides": array_attr([1] * w.lead + w.stride),
    }
    grad = lo.b.op(
        "stablehlo.select_and_scatter",
        [padded, lo.convert(dy, t.element_type), lo.const(0.0, t.element_type)],
        [pt],
        attrs,
        [Region([select]), _body("stablehlo.add", t.element_type)],
    ).result
    return lo.b.slice(grad, [a for a, _ in w.pads], [s + a for s, (a, _) in zip(t.shape, w.pads)])


def _avg_window(node: Any, shape: Sequence[int], args: Sequence[Any]) -> tuple[_Window, bool, Any]:
    # avg_pool2d's arguments after the input (its backward's after the gradient and the input):
    # kernel, stride=[], padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None.
    a = list(args) + [None] * (6 - len(args))
    w = _Window(node, shape, [a[0], a[1], a[2], a[3]])
    return w, True if a[4] is None else bool(a[4]), a[5]


def _divisor(lo: Lowering, w: _Window, shape: Sequence[int], etype: str, include_pad: bool, override: Any) -> Value:
    """PyTorch's divisor of each output element (ATen's ``avg_pool2d`` kernels): the window's
    elements inside the input padded symmetrically (``include_pad``) or inside the input, a
    window sum of ones, broadcast to the output ``shape``; else ``override``."""
    if override:
        return lo.const(float(override), etype, shape)
    ones = lo.const(1.0, etype, w.spatial)
    pads = w.pads[w.lead :]
    if include_pad:
        ones = _pad(lo, ones, 1.0, [(p, p) for p in w.pad], [0, 0])
        pads = [(0, b - p) for p, (_, b) in zip(w.pad, pads)]
    attrs = _window_attrs(0, w.kernel, w.stride, [1, 1], pads)
    counts = _reduce_window(lo, ones, TensorType(tuple(w.out), etype), attrs, "stablehlo.add", 0.0)
    return lo.b.broadcast_in_dim(counts, tuple(shape), [len(shape) - 2, len(shape) - 1])


@aten("avg_pool2d.default")
def _avg_pool2d(lo: Lowering, node: Any) -> Value:
    x = lo.value(node.args[0])
    t = tensor_type(x)
    w, include_pad, override = _avg_window(node, t.shape, node.args[1:])
    out = lo.result_type(node)
    _checked(node, w, out)
    total = _reduce_window(lo, lo.convert(x, out.element_type), out, w.attrs(), "stablehlo.add", 0.0)
    return lo.b.divide(total, _divisor(lo, w, out.shape, out.element_type, include_pad, override))


@aten("avg_pool2d_backward.default")
def _avg_pool2d_backward(lo: Lowering, node: Any) -> Value:
    # The transpose of the window sum (JAX's reduce_window add transpose): the gradient over
    # the divisor, dilated by the stride (stride - 1 zeros between elements), padded by
    # kernel - 1 before and up to the padded input's size + kernel - 1 after, summed over
    # windows of the kernel at unit stride: the padded input's gradient; the padding sliced off.
    dy, x = lo.value(node.args[0]), lo.value(node.args[1])
    t = tensor_type(x)
    w, include_pad, override = _avg_window(node, t.shape, node.args[2:])
    if any(d != 1 for d in w.dilation):
        raise ProgramError(f"{node.target} (FX node {node.name}): expected dilation 1")
    g = tensor_type(dy)
    dy = lo.b.divide(dy, _divisor(lo, w, g.shape, g.element_type, include_pad, override))
    padded_in = [n + a + b for n, (a, b) in zip(w.spatial, w.pads[w.lead :])]
    pads = [(0, 0)] * w.lead + [
        (k - 1, m - ((o - 1) * s + 1)) for k, m, o, s in zip(w.kernel, padded_in, w.out, w.stride)
    ]
    spread = _pad(lo, dy, 0.0, pads, [0] * w.lead + [s - 1 for s in w.stride])
    grad_t = TensorType(tuple(t.shape[: w.lead]) + tuple(padded_in), g.element_type)
    attrs = _window_attrs(w.lead, w.kernel, [1, 1], [1, 1], [(0, 0)] * t.rank)
    grad = _reduce_window(lo, spread, grad_t, attrs, "stablehlo.add", 0.0)
    lows = [a for a, _ in w.pads]
    return lo.b.slice(grad, lows, [n + a for n, a in zip(t.shape, lows)])


def _adaptive_windows(n: int, o: int) -> list[tuple[int, int]]:
    # ATen's adaptive pooling windows: [floor(i n / o), ceil((i + 1) n / o)).
    return [((i * n) // o, -(-((i + 1) * n) // o)) for i in range(o)]


def _adaptive_mean(lo: Lowering, x: Value, dim: int, o: int) -> Value:
    """The mean of each adaptive window of ``dim`` (``o`` of them)."""
    t = tensor_type(x)
    n = t.shape[dim]
    if n == o:
        return x
    shape = list(t.shape)
    shape[dim] = o
    if n % o == 0:  # equal windows: one strided window sum
        k = n // o
        lead, kernel = dim, [k] + [1] * (t.rank - dim - 1)
        attrs = _window_attrs(lead, kernel, kernel, [1] * len(kernel), [(0, 0)] * t.rank)
        total = _reduce_window(lo, x, TensorType(tuple(shape), t.element_type), attrs, "stablehlo.add", 0.0)
        return lo.b.divide(total, lo.const(float(k), t.element_type, shape))
    parts = []
    one = list(t.shape)
    one[dim] = 1
    for a, b in _adaptive_windows(n, o):
        start, limit = [0] * t.rank, list(t.shape)
        start[dim], limit[dim] = a, b
        total = lo.keep(lo.reduce(lo.b.slice(x, start, limit), [dim], "stablehlo.add", 0), one)
        parts.append(lo.b.divide(total, lo.const(float(b - a), t.element_type, one)))
    return lo.b.concatenate(parts, dim)


def _adaptive_mean_transpose(lo: Lowering, g: Value, dim: int, n: int) -> Value:
    """The transpose of :func:`_adaptive_mean` along ``dim`` (back to ``n`` elements): each
    output's gradient over its window's length, spread over the window."""
    t = tensor_type(g)
    o = t.shape[dim]
    if n == o:
        return g
    shape = list(t.shape)
    shape[dim] = n
    if n % o == 0:
        k = n // o
        g = lo.b.divide(g, lo.const(float(k), t.element_type, t.shape))
        split = list(t.shape[: dim + 1]) + [k] + list(t.shape[dim + 1 :])
        dims = [d if d <= dim else d + 1 for d in range(t.rank)]
        return lo.b.reshape(lo.b.broadcast_in_dim(g, split, dims), shape)
    total = None
    for i, (a, b) in enumerate(_adaptive_windows(n, o)):
        start, limit = [0] * t.rank, list(t.shape)
        start[dim], limit[dim] = i, i + 1
        piece = lo.b.slice(g, start, limit)
        piece = lo.b.divide(piece, lo.const(float(b - a), t.element_type, tensor_type(piece).shape))
        wide = list(t.shape)
        wide[dim] = b - a
        piece = lo.b.broadcast_in_dim(piece, wide, list(range(t.rank)))
        pads = [(0, 0)] * t.rank
        pads[dim] = (a, n - b)
        piece = _pad(lo, piece, 0.0, pads, [0] * t.rank)
        total = piece if total is None else lo.b.add(total, piece)
    assert total is not None
    return total


@aten("_adaptive_avg_pool2d.default")
def _adaptive_avg_pool2d(lo: Lowering, node: Any) -> Value:
    out = lo.result_type(node)
    x = lo.convert(lo.value(node.args[0]), out.element_type)
    t = tensor_type(x)
    size = ints(node.args[1], 2)
    if t.rank not in (3, 4) or list(out.shape[-2:]) != size:
        raise ProgramError(f"{node.target} (FX node {node.name}): expected a 3-D or 4-D input pooled to {size}")
    return _adaptive_mean(lo, _adaptive_mean(lo, x, t.rank - 2, size[0]), t.rank - 1, size[1])


@aten("_adaptive_avg_pool2d_backward.default")
def _adaptive_avg_pool2d_backward(lo: Lowering, node: Any) -> Value:
    dy, x = lo.value(node.args[0]), lo.value(node.args[1])
    t = tensor_type(x)
    g = _adaptive_mean_transpose(lo, dy, t.rank - 1, t.shape[-1])
    return _adaptive_mean_transpose(lo, g, t.rank - 2, t.shape[-2])
