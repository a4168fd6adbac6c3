"""The state of one translation from an exported PyTorch graph to the program IR: the
``Builder`` of ``@main``, the value of each FX node, and the StableHLO helpers every ATen
translation uses (constants, broadcasting to a result shape, element type conversion, compares,
reductions with a region). Shapes and element types come from each FX node's ``meta["val"]``
(the fake tensor ``torch.export`` records), so every translation knows its result type.

The StableHLO forms are those JAX emits for the same computation (StableHLO spec:
``broadcast_in_dim``, ``compare``, ``reduce``, ``select``); PyTorch's broadcasting and type
promotion (``torch.result_type``) are made explicit with ``broadcast_in_dim`` and ``convert``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from shardwise.errors import ProgramError
from shardwise.ir.builder import Builder
from shardwise.ir.core import Block, Op, Region, Value, tensor_type
from shardwise.ir.types import TensorType

#: torch dtype name (``str(torch.float32)`` less ``torch.``) to MLIR element type.
DTYPES = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "ui8",
    "bool": "i1",
}


def element_type(dtype: Any) -> str:
    """The MLIR element type of a torch dtype. Raises ``ProgramError`` for one StableHLO
    programs here do not carry (complex, quantized, float8)."""
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ProgramError(f"torch dtype {dtype}: expected one of {', '.join(DTYPES)}, got {name}")
    return DTYPES[name]


#: Bit patterns of +inf, -inf and NaN per float element type (MLIR's hexadecimal float form).
SPECIAL = {
    "f32": ("0x7F800000", "0xFF800000", "0x7FC00000"),
    "f64": ("0x7FF0000000000000", "0xFFF0000000000000", "0x7FF8000000000000"),
    "f16": ("0x7C00", "0xFC00", "0x7E00"),
    "bf16": ("0x7F80", "0xFF80", "0x7FC0"),
}


def float_literal(value: float, etype: str) -> str:
    """MLIR text of a float element of ``etype``: the shortest decimal of the value rounded to
    f32 for f32 (so the text is exact), with the ``.`` MLIR's float literals need; the bit
    patterns of :data:`SPECIAL` for infinities and NaN."""
    if math.isnan(value) or math.isinf(value):
        pos, neg, nan = SPECIAL[etype]
        return nan if math.isnan(value) else (pos if value > 0 else neg)
    s = repr(float(np.float32(value)) if etype == "f32" else float(value))
    if "." not in s:
        s = s.replace("e", ".0e") if "e" in s else s + ".0"
    return s


class Lowering:
    """One translation (module docstring): ``b``, the ``Builder`` of ``@main``, and ``env``,
    each FX node's value."""

    def __init__(self, builder: Builder) -> None:
        self.b = builder
        #: FX node -> its value (a tuple of values for ops with several results).
        self.env: dict[Any, Any] = {}

    # -------------------------------------------------------------- operands and results

    def value(self, arg: Any) -> Value:
        """The value of an FX node argument."""
        v = self.env[arg]
        if v is None:
            raise ProgramError(f"FX node {arg.name}: a result from_torch does not translate (max_pool2d's indices)")
        if isinstance(v, tuple):
            raise ProgramError(f"FX node {arg.name}: expected one tensor, got a tuple of {len(v)}")
        return v  # type: ignore[no-any-return]

    @staticmethod
    def result_type(node: Any) -> TensorType:
        """The tensor type ``torch.export`` recorded for ``node`` (``meta["val"]``)."""
        val = node.meta.get("val")
        if val is None or not hasattr(val, "shape"):
            raise ProgramError(f"FX node {node.name}: expected a tensor result in its meta, got {type(val).__name__}")
        return TensorType(tuple(int(d) for d in val.shape), element_type(val.dtype))

    @staticmethod
    def result_type_at(node: Any, i: int) -> TensorType:
        """The tensor type of result ``i`` of a node with several results."""
        val = node.meta.get("val")
        if not isinstance(val, (list, tuple)) or i >= len(val) or not hasattr(val[i], "shape"):
            raise ProgramError(f"FX node {node.name}: expected a tensor as result {i} in its meta")
        return TensorType(tuple(int(d) for d in val[i].shape), element_type(val[i].dtype))

    # -------------------------------------------------------------- helpers

    def const(self, value: float, etype: str, shape: Sequence[int] = ()) -> Value:
        """``value`` as a tensor of ``shape``: a scalar ``stablehlo.constant`` broadcast to it, as
        JAX emits (a splat of the full shape would be one unshardable tensor to the search's
        memory model)."""
        if len(shape):
            return self.b.broadcast_in_dim(self.const(value, etype), tuple(shape), [])
        t = TensorType((), etype)
        if etype == "i1":
            lit = "true" if value else "false"
        elif etype.startswith(("f", "bf")):
            lit = float_literal(float(value), etype)
        else:
            lit = str(int(value))
        return self.b.op("stablehlo.constant", [], [t], {"value": f"dense<{lit}> : {t}"}).result

    def convert(self, x: Value, etype: str) -> Value:
        """``x`` as ``etype`` (itself when it is already)."""
        return x if tensor_type(x).element_type == etype else self.b.convert(x, etype)

    def broadcast(self, x: Value, shape: Sequence[int]) -> Value:
        """``x`` broadcast to ``shape`` by PyTorch's rule (trailing dimensions aligned; itself
        when it has that shape already)."""
        t = tensor_type(x)
        if t.shape == tuple(shape):
            return x
        r, n = t.rank, len(shape)
        if r > n:
            raise ProgramError(f"cannot broadcast {t} to shape {tuple(shape)}")
        dims = list(range(n - r, n))
        if any(t.shape[i] not in (1, shape[d]) for i, d in enumerate(dims)):
            raise ProgramError(f"cannot broadcast {t} to shape {tuple(shape)}")
        # Size-1 dims that grow: broadcast_in_dim takes them as they are.
        return self.b.broadcast_in_dim(x, shape, dims)

    def operand(self, arg: Any, t: TensorType) -> Value:
        """An FX argument (node or Python scalar) as a value of type ``t`` (converted, broadcast)."""
        if isinstance(arg, (bool, int, float)):
            return self.const(arg, t.element_type, t.shape)
        return self.broadcast(self.convert(self.value(arg), t.element_type), t.shape)

    def compare(self, direction: str, x: Value, y: Value) -> Value:
        """``stablehlo.compare`` (``EQ``, ``NE``, ``LT``, ``LE``, ``GT``, ``GE``) of two values
        of one type; the result is ``i1`` of their shape."""
        t = tensor_type(x)
        kind = (
            "FLOAT"
            if t.element_type.startswith(("f", "bf"))
            else "UNSIGNED"
            if t.element_type.startswith("ui") or t.element_type == "i1"
            else "SIGNED"
        )
        attrs = {
            "comparison_direction": f"#stablehlo<comparison_direction {direction}>",
            "compare_type": f"#stablehlo<comparison_type {kind}>",
        }
        return self.b.op("stablehlo.compare", [x, y], [TensorType(t.shape, "i1")], attrs).result

    def reduce(self, x: Value, dims: Sequence[int], body: str, init: float | bool) -> Value:
        """``stablehlo.reduce`` of ``x`` over ``dims`` with the binary op ``body``
        (``stablehlo.add``, ``maximum``, ``or``, …) from ``init``; the reduced dims are gone."""
        t = tensor_type(x)
        dims = sorted(d % t.rank for d in dims) if t.rank else []
        scalar = TensorType((), t.element_type)
        init_v = self.const(init, t.element_type)
        block = Block([scalar, scalar])
        combined = block.append(Op(body, block.args, [scalar]))
        block.append(Op("stablehlo.return", [combined.result], []))
        shape = tuple(s for i, s in enumerate(t.shape) if i not in dims)
        attrs = {"dimensions": "array<i64" + (": " + ", ".join(map(str, dims)) if dims else "") + ">"}
        return self.b.op(
            "stablehlo.reduce", [x, init_v], [TensorType(shape, t.element_type)], attrs, [Region([block])]
        ).result

    def keep(self, x: Value, shape: Sequence[int]) -> Value:
        """``x`` reshaped to ``shape`` (itself when it has it): a reduction's kept dims."""
        return x if tensor_type(x).shape == tuple(shape) else self.b.reshape(x, shape)

    def reduce_window(
        self, x: Value, window: Sequence[int], pads: Sequence[tuple[int, int]], body: str, init: float | bool
    ) -> Value:
        """``stablehlo.reduce_window`` of ``x`` (unit strides and dilations) with the binary op
        ``body`` from ``init`` over ``pads`` (before, after) of ``init`` per dim."""
        t = tensor_type(x)
        scalar = TensorType((), t.element_type)
        block = Block([scalar, scalar])
        combined = block.append(Op(body, block.args, [scalar]))
        block.append(Op("stablehlo.return", [combined.result], []))
        out = tuple(s + a + c - w + 1 for s, (a, c), w in zip(t.shape, pads, window))
        attrs = {
            "base_dilations": array_attr([1] * t.rank),
            "padding": padding_attr(pads),
            "window_dilations": array_attr([1] * t.rank),
            "window_dimensions": array_attr(window),
            "window_strides": array_attr([1] * t.rank),
        }
        init_v = self.const(init, t.element_type)
        return self.b.op(
            "stablehlo.reduce_window", [x, init_v], [TensorType(out, t.element_type)], attrs, [Region([block])]
        ).result


def array_attr(values: Sequence[int], etype: str = "i64") -> str:
    """``array<i64: ...>`` (or ``array<i1: ...>``) as MLIR prints it."""
    if etype == "i1":
        return "array<i1" + (": " + ", ".join("true" if v else "false" for v in values) if len(values) else "") + ">"
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in values) if len(values) else "") + ">"


def ints(v: Any, n: int) -> list[int]:
    """An FX int or int list (one for all ``n``, or ``n`` of them) as ``n`` ints."""
    v = [v] if isinstance(v, int) else list(v)
    return [int(x) for x in (v * n if len(v) == 1 else v)]


def padding_attr(pairs: Sequence[tuple[int, int]]) -> str:
    """``dense<...> : tensor<Nx2xi64>`` of (before, after) pairs as MLIR prints it (a splat
    when every entry is equal)."""
    flat = [int(v) for p in pairs for v in p]
    t = f"tensor<{len(pairs)}x2xi64>"
    if flat and all(v == flat[0] for v in flat):
        return f"dense<{flat[0]}> : {t}"
    return "dense<[" + ", ".join(f"[{a}, {b}]" for a, b in pairs) + f"]> : {t}"
