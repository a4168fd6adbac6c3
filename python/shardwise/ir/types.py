"""Types of IR values: ranked tensors (shape, element type) and opaque types kept as MLIR text
(``!stablehlo.token``, ``tuple<...>``, unranked tensors)."""

from __future__ import annotations

import re

__all__ = ["DYNAMIC", "OpaqueType", "TensorType", "Type", "parse_type"]

#: Size of a dynamic dimension (``?`` in MLIR).
DYNAMIC = -1

_TENSOR = re.compile(r"tensor<((?:(?:\d+|\?)x)*)([^,<>]+?|complex<[^<>]+>)(, .+)?>")


class TensorType:
    """A ranked tensor type ``tensor<8x16xf32>``: ``shape`` (-1 for a dynamic size) and
    ``element_type`` (MLIR spelling: ``f32``, ``bf16``, ``i1``, ``complex<f32>``, …); an
    ``encoding`` suffix is kept verbatim."""

    __slots__ = ("shape", "element_type", "encoding", "_hash", "_text")
    shape: tuple[int, ...]
    element_type: str
    encoding: str | None
    _hash: int
    _text: str | None

    def __init__(self, shape: tuple[int, ...] | list[int], element_type: str, encoding: str | None = None) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        object.__setattr__(self, "element_type", element_type)
        object.__setattr__(self, "encoding", encoding)
        object.__setattr__(self, "_hash", hash((self.shape, element_type, encoding)))
        object.__setattr__(self, "_text", None)
        if any(d < 0 and d != DYNAMIC for d in self.shape):
            raise ValueError(f"tensor dimension sizes must be >= 0 or -1 (dynamic), got {self.shape}")

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("TensorType is immutable")

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        # Printed once per type object (the MLIR writer prints every operand's type).
        text = self._text
        if text is None:
            dims = "".join(("?" if d == DYNAMIC else str(d)) + "x" for d in self.shape)
            enc = f", {self.encoding}" if self.encoding else ""
            text = f"tensor<{dims}{self.element_type}{enc}>"
            object.__setattr__(self, "_text", text)
        return text

    def __repr__(self) -> str:
        return f"TensorType({self.shape}, {self.element_type!r})"

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, TensorType)
            and self._hash == other._hash
            and (self.shape, self.element_type, self.encoding) == (other.shape, other.element_type, other.encoding)
        )

    def __hash__(self) -> int:
        return self._hash


class OpaqueType:
    """Any other type, kept as its MLIR text."""

    __slots__ = ("text",)
    text: str

    def __init__(self, text: str) -> None:
        object.__setattr__(self, "text", text)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("OpaqueType is immutable")

    @property
    def rank(self) -> int:
        return 0

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"OpaqueType({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpaqueType) and self.text == other.text

    def __hash__(self) -> int:
        return hash(self.text)


Type = TensorType | OpaqueType


def parse_type(text: str) -> Type:
    """``tensor<8x?xf32>`` -> ``TensorType((8, -1), "f32")``; anything else -> ``OpaqueType``.
    Equal texts give the same (immutable) object: programs repeat few types many times."""
    t = _PARSED.get(text)
    if t is None:
        if len(_PARSED) >= 65536:
            _PARSED.clear()
        t = _PARSED[text] = _parse_type(text)
    return t


_PARSED: dict[str, Type] = {}


def _parse_type(text: str) -> Type:
    m = _TENSOR.fullmatch(text.strip())
    if not m:
        return OpaqueType(text.strip())
    dims = [DYNAMIC if d == "?" else int(d) for d in m.group(1).split("x") if d]
    enc = m.group(3)[2:] if m.group(3) else None
    return TensorType(dims, m.group(2), enc)
