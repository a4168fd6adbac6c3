"""Parsers for the MLIR attribute text the IR keeps on each op (``Op.attributes``), as jaxlib
prints it: integers (``1 : i64``), booleans, ``array<i64: 1, 2>``, ``dense<...> : tensor<...>``
elements (nested lists, splats, hex strings and hex bit patterns), StableHLO enums
(``#stablehlo<comparison_direction GE>``), structured dimension numbers (``#stablehlo.dot<...>``,
``#stablehlo.gather<...>``, ``#stablehlo.scatter<...>``, ``#stablehlo.conv<...>``).

Formats follow MLIR's builtin attribute syntax (mlir.llvm.org/docs/Dialects/Builtin) and the
StableHLO specification (github.com/openxla/stablehlo/blob/main/docs/spec.md). Every parser
raises ``ProgramError`` naming the text, what was expected and what was got.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from shardwise.errors import ProgramError
from shardwise.execute.dtypes import numpy_dtype
from shardwise.ir.core import Op
from shardwise.ir.types import TensorType, parse_type

__all__ = [
    "ConvDims",
    "attr",
    "parse_array",
    "parse_bool",
    "parse_conv_dims",
    "parse_dense",
    "parse_enum",
    "parse_int",
    "parse_struct",
]

_INT = re.compile(r"\s*(-?\d+)\s*(?::\s*\w+)?\s*")
_ARRAY = re.compile(r"\s*array<(\w+)(?::(.*))?>\s*", re.DOTALL)
_ENUM = re.compile(r"\s*#stablehlo<\s*\w+\s+(\w+)\s*>\s*")
_DENSE = re.compile(r"\s*dense<(.*)>\s*:\s*(tensor<.*>)\s*", re.DOTALL)


def attr(op: Op, name: str, default: str | None = None) -> str:
    """The text of attribute ``name`` of ``op``; ``ProgramError`` if missing and no default."""
    text = op.attributes.get(name, default)
    if text is None:
        raise ProgramError(f"{op.where()}: missing attribute {name!r}; has {sorted(op.attributes)}")
    return text


def parse_int(text: str) -> int:
    """``3 : i64`` or ``3`` -> 3."""
    m = _INT.fullmatch(text)
    if not m:
        raise ProgramError(f"expected an integer attribute like '3 : i64', got {text!r}")
    return int(m.group(1))


def parse_bool(text: str) -> bool:
    """``true`` / ``false`` / ``unit`` (a present unit attribute is true)."""
    t = text.strip()
    if t in ("true", "unit"):
        return True
    if t == "false":
        return False
    raise ProgramError(f"expected a boolean attribute (true/false/unit), got {text!r}")


def parse_array(text: str) -> tuple[int, ...]:
    """``array<i64: 1, 2>`` -> (1, 2); ``array<i64>`` -> (); ``array<i1: true, false>`` -> (1, 0)."""
    m = _ARRAY.fullmatch(text)
    if not m:
        # Older printers used a dense or bracketed list for the same attributes.
        if text.strip().startswith("dense<"):
            return tuple(int(v) for v in parse_dense(text).reshape(-1).tolist())
        raise ProgramError(f"expected a dense array attribute like 'array<i64: 1, 2>', got {text!r}")
    body = (m.group(2) or "").strip()
    if not body:
        return ()
    out = []
    for item in body.split(","):
        item = item.strip()
        out.append(1 if item == "true" else 0 if item == "false" else int(item))
    return tuple(out)


def parse_enum(text: str) -> str:
    """``#stablehlo<comparison_direction GE>`` -> ``"GE"``."""
    m = _ENUM.fullmatch(text)
    if not m:
        raise ProgramError(
            f"expected a StableHLO enum attribute like '#stablehlo<comparison_direction GE>', got {text!r}"
        )
    return m.group(1)


def parse_dense(text: str) -> np.ndarray:
    """``dense<...> : tensor<2x3xf32>`` -> a numpy array of that shape and element type.

    Accepts splats (``dense<1.0>``), nested lists, booleans, complex pairs ``(re, im)``, the
    hex-string form (``dense<"0x...">``, raw little-endian element bytes, a splat when it holds
    one element) and hex bit patterns of floats (``dense<0xFF800000>`` is -inf for f32).
    """
    m = _DENSE.fullmatch(text)
    if not m:
        raise ProgramError(f"expected a dense elements attribute like 'dense<...> : tensor<...>', got {text[:120]!r}")
    body, type_text = m.group(1).strip(), m.group(2)
    t = parse_type(type_text)
    if not isinstance(t, TensorType) or any(d < 0 for d in t.shape):
        raise ProgramError(f"dense attribute needs a static tensor type, got {type_text!r}")
    dtype = numpy_dtype(t.element_type)
    shape = t.shape
    count = int(np.prod(shape, dtype=np.int64))
    if not body:
        if count:
            raise ProgramError(f"empty dense attribute for type {type_text} of {count} elements")
        return np.zeros(shape, dtype=dtype)
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        store = np.dtype(np.uint8) if dtype == np.bool_ else dtype
        flat = np.frombuffer(raw, dtype=store).astype(dtype)
        if flat.size == 1:
            return np.full(shape, flat[0], dtype=dtype)
        if flat.size != count:
            raise ProgramError(f"hex dense attribute holds {flat.size} elements, type {type_text} needs {count}")
        return flat.reshape(shape).copy()
    values = _Elements(body, dtype).parse()
    arr = _to_array(values, dtype)
    if arr.ndim == 0 or (arr.size == 1 and count != 1 and not body.startswith("[")):
        return np.full(shape, arr.reshape(()), dtype=dtype)
    if arr.size != count:
        raise ProgramError(f"dense attribute holds {arr.size} elements, type {type_text} needs {count}")
    return arr.reshape(shape)


def _to_array(values: Any, dtype: np.dtype[Any]) -> np.ndarray:
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return np.asarray(values, dtype=np.float64).astype(dtype)
    return np.asarray(values, dtype=dtype)


class _Elements:
    """A tiny recursive-descent parser for the element list of ``dense<...>``."""

    _TOKEN = re.compile(
        r"\s*(\[|\]|,|\(|\)|true|false|[-+]?0x[0-9A-Fa-f]+|[-+]?(?:inf|nan)|[-+]?[\d.]+(?:[eE][-+]?\d+)?)"
    )

    def __init__(self, text: str, dtype: np.dtype[Any]) -> None:
        self.tokens = [m.group(1) for m in self._TOKEN.finditer(text)]
        joined = "".join(self.tokens)
        if joined != re.sub(r"\s+", "", text):
            raise ProgramError(f"cannot read dense elements {text[:120]!r}")
        self.i = 0
        self.dtype = dtype

    def parse(self) -> Any:
        v = self.value()
        if self.i != len(self.tokens):
            raise ProgramError(f"trailing tokens in dense elements: {self.tokens[self.i :][:5]}")
        return v

    def value(self) -> Any:
        tok = self.tokens[self.i]
        self.i += 1
        if tok == "[":
            items: list[Any] = []
            while self.tokens[self.i] != "]":
                items.append(self.value())
                if self.tokens[self.i] == ",":
                    self.i += 1
            self.i += 1
            return items
        if tok == "(":
            re_part = self.value()
            self.i += 1  # ","
            im_part = self.value()
            self.i += 1  # ")"
            return complex(re_part, im_part)
        return self.scalar(tok)

    def scalar(self, tok: str) -> Any:
        if tok in ("true", "false"):
            return tok == "true"
        if "0x" in tok.lower():
            bits = int(tok, 16)
            if self.dtype.kind in "fc" or self.dtype.name == "bfloat16":
                # A float written as its bit pattern.
                store = (
                    np.dtype(f"u{self.dtype.itemsize}")
                    if self.dtype.kind != "c"
                    else np.dtype(f"u{self.dtype.itemsize // 2}")
                )
                return float(
                    np.array([bits], dtype=store).view(
                        self.dtype if self.dtype.kind != "c" else np.dtype(f"f{store.itemsize}")
                    )[0]
                )
            return bits
        if self.dtype.kind in "iub":
            return int(tok)
        return float(tok)


_STRUCT = re.compile(r"\s*#stablehlo\.(\w+)<(.*)>\s*", re.DOTALL)


def parse_struct(text: str, kind: str) -> dict[str, Any]:
    """``#stablehlo.dot<lhs_contracting_dimensions = [1], ...>`` (``kind="dot"``) -> a dict of
    field -> list of ints or int. Missing list fields are absent (callers default them to [])."""
    m = _STRUCT.fullmatch(text)
    if not m or m.group(1) != kind:
        raise ProgramError(f"expected a #stablehlo.{kind}<...> attribute, got {text[:120]!r}")
    out: dict[str, Any] = {}
    for fm in re.finditer(r"(\w+)\s*=\s*(\[[^\]]*\]|-?\d+)", m.group(2)):
        v = fm.group(2)
        out[fm.group(1)] = [int(x) for x in v[1:-1].split(",") if x.strip()] if v.startswith("[") else int(v)
    return out


class ConvDims:
    """Convolution dimension numbers: batch/feature/spatial dims of the input (lhs), output
    feature/input feature/spatial dims of the kernel (rhs), and batch/feature/spatial of the
    output, from ``#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>``."""

    __slots__ = (
        "lhs_batch",
        "lhs_feature",
        "lhs_spatial",
        "rhs_in",
        "rhs_out",
        "rhs_spatial",
        "out_batch",
        "out_feature",
        "out_spatial",
    )

    def __init__(self, lhs: list[str], rhs: list[str], out: list[str]) -> None:
        self.lhs_batch, self.lhs_feature, self.lhs_spatial = _layout(lhs, "b", "f")
        self.rhs_out, self.rhs_in, self.rhs_spatial = _layout(rhs, "o", "i")
        self.out_batch, self.out_feature, self.out_spatial = _layout(out, "b", "f")


def _layout(dims: list[str], a: str, b: str) -> tuple[int, int, list[int]]:
    try:
        spatial = sorted((int(d), i) for i, d in enumerate(dims) if d not in (a, b))
        return dims.index(a), dims.index(b), [i for _, i in spatial]
    except ValueError:
        raise ProgramError(f"convolution layout {dims} lacks {a!r} or {b!r}") from None


def parse_conv_dims(text: str) -> ConvDims:
    """``#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>`` -> ``ConvDims``."""
    m = re.fullmatch(r"\s*#stablehlo\.conv<\[([^\]]*)\]x\[([^\]]*)\]->\[([^\]]*)\]>\s*", text)
    if not m:
        raise ProgramError(
            f"expected convolution dimension numbers like '#stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>', got {text!r}"
        )
    parts = [[d.strip() for d in g.split(",")] for g in m.groups()]
    return ConvDims(parts[0], parts[1], parts[2])
