"""Small StableHLO op constructors for the local programs (generic attribute text, as jaxlib
prints it), appended to the op list the local step is building."""

from __future__ import annotations

from collections.abc import Sequence

from shardwise.ir.core import Block, Op, Region, Value
from shardwise.ir.types import TensorType

__all__ = ["Emitter", "zero_text"]

_REDUCE_OPS = {
    "add": "stablehlo.add",
    "mul": "stablehlo.multiply",
    "max": "stablehlo.maximum",
    "min": "stablehlo.minimum",
    "and": "stablehlo.and",
    "or": "stablehlo.or",
}


def _i64s(v: Sequence[int]) -> str:
    return "array<i64" + (": " + ", ".join(str(int(x)) for x in v) if len(v) else "") + ">"


def _dense_i64(rows: Sequence[Sequence[int]]) -> str:
    if not rows or not rows[0]:
        return "dense<> : tensor<0x0xi64>"
    body = "[" + ", ".join("[" + ", ".join(str(int(x)) for x in r) + "]" for r in rows) + "]"
    return f"dense<{body}> : tensor<{len(rows)}x{len(rows[0])}xi64>"


def zero_text(element_type: str) -> str:
    """The MLIR literal of zero for an element type."""
    if element_type == "i1":
        return "false"
    if element_type.startswith(("i", "ui", "si")):
        return "0"
    if element_type.startswith("complex"):
        return "(0.000000e+00,0.000000e+00)"
    return "0.000000e+00"


class Emitter:
    """Creates ops at the end of ``sink`` (the op list of the block the local step rebuilds,
    where they land before the op it is converting, or after it), with ``anchor``'s location;
    ``channel`` numbers collectives (each gets a fresh ``channel_handle``, type 1 = device to
    device). Appending instead of inserting before an op in its block keeps the local step
    linear in the block's length (one position search per new op made it quadratic)."""

    def __init__(self) -> None:
        self.anchor: Op | None = None
        self.sink: list[Op] = []
        self.channel = 0

    def _put(self, op: Op) -> Value:
        assert self.anchor is not None
        op.location = self.anchor.location
        self.sink.append(op)
        return op.results[0]

    def _channel(self) -> str:
        self.channel += 1
        return f"#stablehlo.channel_handle<handle = {self.channel}, type = 1>"

    @staticmethod
    def _with_dim(t: TensorType, dim: int, size: int) -> TensorType:
        shape = list(t.shape)
        shape[dim] = size
        return TensorType(shape, t.element_type)

    def constant(self, text: str, t: TensorType) -> Value:
        """``stablehlo.constant dense<text> : t``."""
        return self._put(Op("stablehlo.constant", [], [t], {"value": f"dense<{text}> : {t}"}))

    def slice(self, x: Value, dim: int, start: int, stop: int) -> Value:
        t = x.type
        assert isinstance(t, TensorType)
        lo = [0] * t.rank
        hi = list(t.shape)
        lo[dim], hi[dim] = start, stop
        attrs = {"start_indices": _i64s(lo), "limit_indices": _i64s(hi), "strides": _i64s([1] * t.rank)}
        return self._put(Op("stablehlo.slice", [x], [self._with_dim(t, dim, stop - start)], attrs))

    def pad_high(self, x: Value, dim: int, amount: int, fill: Value) -> Value:
        t = x.type
        assert isinstance(t, TensorType)
        hi = [0] * t.rank
        hi[dim] = amount
        attrs = {
            "edge_padding_low": _i64s([0] * t.rank),
            "edge_padding_high": _i64s(hi),
            "interior_padding": _i64s([0] * t.rank),
        }
        return self._put(Op("stablehlo.pad", [x, fill], [self._with_dim(t, dim, t.shape[dim] + amount)], attrs))

    def window(self, x: Value, dim: int, start: int, length: int) -> Value:
        """``x[start : start+length]`` along ``dim``, zero-padded past the end of ``x``."""
        t = x.type
        assert isinstance(t, TensorType)
        size = t.shape[dim]
        lo, hi = min(start, size), min(start + length, size)
        y = x if (lo, hi) == (0, size) else self.slice(x, dim, lo, hi)
        if hi - lo < length:
            y = self.pad_high(
                y, dim, length - (hi - lo), self.constant(zero_text(t.element_type), TensorType((), t.element_type))
            )
        return y

    def concatenate(self, xs: Sequence[Value], dim: int) -> Value:
        t = xs[0].type
        assert isinstance(t, TensorType)
        size = 0
        for x in xs:
            assert isinstance(x.type, TensorType)
            size += x.type.shape[dim]
        return self._put(
            Op("stablehlo.concatenate", list(xs), [self._with_dim(t, dim, size)], {"dimension": f"{dim} : i64"})
        )

    def add(self, x: Value, y: Value) -> Value:
        return self._put(Op("stablehlo.add", [x, y], [x.type]))

    def binary(self, name: str, x: Value, y: Value) -> Value:
        """``stablehlo.<name>`` of two values of one type (``subtract``, ``and``, ...)."""
        return self._put(Op(f"stablehlo.{name}", [x, y], [x.type]))

    def compare(self, x: Value, y: Value, direction: str) -> Value:
        """``stablehlo.compare`` (``LT``, ``GE``, ...; signed comparison of integers)."""
        t = x.type
        assert isinstance(t, TensorType)
        attrs = {"comparison_direction": f"#stablehlo<comparison_direction {direction}>"}
        return self._put(Op("stablehlo.compare", [x, y], [TensorType(t.shape, "i1")], attrs))

    def broadcast_in_dim(self, x: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
        t = x.type
        assert isinstance(t, TensorType)
        return self._put(
            Op(
                "stablehlo.broadcast_in_dim",
                [x],
                [TensorType(tuple(shape), t.element_type)],
                {"broadcast_dimensions": _i64s(dims)},
            )
        )

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        t = x.type
        assert isinstance(t, TensorType)
        return self._put(Op("stablehlo.reshape", [x], [TensorType(tuple(shape), t.element_type)]))

    def select(self, pred: Value, on_true: Value, on_false: Value) -> Value:
        return self._put(Op("stablehlo.select", [pred, on_true, on_false], [on_true.type]))

    def _body(self, kind: str, element_type: str) -> Region:
        scalar = TensorType((), element_type)
        block = Block([scalar, scalar])
        r = Op(_REDUCE_OPS[kind], list(block.args), [scalar])
        block.append(r)
        block.append(Op("stablehlo.return", [r.results[0]]))
        return Region([block])

    def all_gather(self, x: Value, dim: int, groups: list[list[int]]) -> Value:
        t = x.type
        assert isinstance(t, TensorType)
        attrs = {
            "all_gather_dim": f"{dim} : i64",
            "replica_groups": _dense_i64(groups),
            "channel_handle": self._channel(),
            "use_global_device_ids": "unit",
        }
        return self._put(
            Op("stablehlo.all_gather", [x], [self._with_dim(t, dim, t.shape[dim] * len(groups[0]))], attrs)
        )

    def all_reduce(self, x: Value, kind: str, groups: list[list[int]]) -> Value:
        t = x.type
        assert isinstance(t, TensorType)
        attrs = {
            "replica_groups": _dense_i64(groups),
            "channel_handle": self._channel(),
            "use_global_device_ids": "unit",
        }
        return self._put(Op("stablehlo.all_reduce", [x], [t], attrs, [self._body(kind, t.element_type)]))

    def reduce_scatter(self, x: Value, dim: int, kind: str, groups: list[list[int]]) -> Value:
        t = x.type
        assert isinstance(t, TensorType)
        attrs = {
            "scatter_dimension": f"{dim} : i64",
            "replica_groups": _dense_i64(groups),
            "channel_handle": self._channel(),
            "use_global_device_ids": "unit",
        }
        out = self._with_dim(t, dim, t.shape[dim] // len(groups[0]))
        return self._put(Op("stablehlo.reduce_scatter", [x], [out], attrs, [self._body(kind, t.element_type)]))

    def all_to_all(self, x: Value, split: int, concat: int, groups: list[list[int]]) -> Value:
        t = x.type
        assert isinstance(t, TensorType)
        n = len(groups[0])
        out = self._with_dim(
            self._with_dim(t, split, t.shape[split] // n),
            concat,
            t.shape[concat] * n if split != concat else t.shape[concat],
        )
        attrs = {
            "split_dimension": f"{split} : i64",
            "concat_dimension": f"{concat} : i64",
            "split_count": f"{n} : i64",
            "replica_groups": _dense_i64(groups),
            "channel_handle": self._channel(),
        }
        return self._put(Op("stablehlo.all_to_all", [x], [out], attrs))

    def collective_permute(self, x: Value, pairs: list[tuple[int, int]]) -> Value:
        attrs = {"source_target_pairs": _dense_i64([list(p) for p in pairs]), "channel_handle": self._channel()}
        return self._put(Op("stablehlo.collective_permute", [x], [x.type], attrs))
