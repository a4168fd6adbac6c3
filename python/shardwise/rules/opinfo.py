"""The op description the rule registry reads (built by the program importer, or by hand).

It is deliberately small and independent of jaxlib: an op's name, its operand and result
values (shape and element type), its attributes as text exactly as MLIR prints them
(``str(attr)`` in jaxlib), and, where a rule looks at the producers of its operands (the
concatenate and dynamic_update_slice rules), at the users of its results (X64Combine) or at
its body (scatter), the defining op, value identities, user names and regions.

Values compare by identity. ``value_id`` says which values are the same SSA value (two
``ValueInfo`` objects with the same ``value_id`` describe one value seen from two ops);
``None`` means unknown, and such a value only equals itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["DYNAMIC", "BlockInfo", "OpInfo", "ValueInfo"]

#: A dynamic dimension in ``ValueInfo.shape``.
DYNAMIC = -1


@dataclass(frozen=True, eq=False, repr=False)
class ValueInfo:
    """One SSA value.

    ``shape``: the dimension sizes of a ranked tensor (``()`` for a scalar tensor), ``-1`` for
    a dynamic size. ``element_type``: the element type as MLIR prints it (``"f32"``,
    ``"ui64"``, ``"i1"``); for a value that is not a ranked tensor (``is_tensor=False``: a
    token, a tuple) the whole type (``"!stablehlo.token"``) and ``shape=()``.
    ``defining_op``: the op that produces it (``None`` for a block argument or when unknown).
    ``value_id``: identity of the SSA value (see the module docstring). ``users``: the names of
    the ops that use it (only the X64Combine rule reads them).
    """

    shape: tuple[int, ...]
    element_type: str = "f32"
    defining_op: OpInfo | None = None
    value_id: int | None = None
    is_tensor: bool = True
    users: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        shape = tuple(self.shape)
        for d in shape:
            if not isinstance(d, int) or isinstance(d, bool) or d < DYNAMIC:
                raise TypeError(f"ValueInfo shape must hold ints >= -1 (-1: dynamic), got {self.shape!r}")
        if not self.is_tensor and shape:
            raise TypeError(f"a ValueInfo that is not a tensor has shape (), got {self.shape!r}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "users", tuple(self.users))

    @property
    def rank(self) -> int:
        """Number of dimensions (0 for scalars and for values that are not tensors)."""
        return len(self.shape)

    def same_value(self, other: ValueInfo) -> bool:
        """Whether ``self`` and ``other`` describe the same SSA value."""
        return self is other or (self.value_id is not None and self.value_id == other.value_id)

    def __repr__(self) -> str:
        if not self.is_tensor:
            return f"ValueInfo({self.element_type})"
        dims = "x".join("?" if d == DYNAMIC else str(d) for d in self.shape)
        vid = "" if self.value_id is None else f", id={self.value_id}"
        return f"ValueInfo(tensor<{dims + 'x' if dims else ''}{self.element_type}>{vid})"


@dataclass(frozen=True, eq=False, repr=False)
class BlockInfo:
    """A block of a region: its arguments and its ops in order (the terminator last)."""

    arguments: tuple[ValueInfo, ...] = ()
    operations: tuple[OpInfo, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", tuple(self.arguments))
        object.__setattr__(self, "operations", tuple(self.operations))

    def __repr__(self) -> str:
        return f"BlockInfo({len(self.arguments)} arguments, {len(self.operations)} ops)"


@dataclass(frozen=True, eq=False, repr=False)
class OpInfo:
    """One operation: ``name`` (``"stablehlo.dot_general"``), ``operands``, ``results``,
    ``attributes`` (name -> the attribute's MLIR text, e.g. ``"array<i64: 1, 0>"``,
    ``"#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>"``,
    ``'"target_name"'``, ``"1 : i64"``) and ``regions`` (each a tuple of blocks; only the
    scatter rule reads them, to find its reduction)."""

    name: str
    operands: tuple[ValueInfo, ...] = ()
    results: tuple[ValueInfo, ...] = ()
    attributes: Mapping[str, str] = field(default_factory=dict)
    regions: tuple[tuple[BlockInfo, ...], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"OpInfo name must be a str, got {type(self.name).__name__} {self.name!r}")
        object.__setattr__(self, "operands", _values(self.operands, "operands"))
        object.__setattr__(self, "results", _values(self.results, "results"))
        attrs = dict(self.attributes)
        for k, v in attrs.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"OpInfo attributes map names to MLIR text (str -> str), got {k!r}: {v!r}")
        object.__setattr__(self, "attributes", MappingProxyType(attrs))
        object.__setattr__(self, "regions", tuple(tuple(r) for r in self.regions))

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    def __repr__(self) -> str:
        ins = ", ".join(repr(v) for v in self.operands)
        outs = ", ".join(repr(v) for v in self.results)
        return f"OpInfo({self.name}: ({ins}) -> ({outs}))"


def _values(values: Iterable[ValueInfo], what: str) -> tuple[ValueInfo, ...]:
    out = tuple(values)
    for v in out:
        if not isinstance(v, ValueInfo):
            raise TypeError(f"OpInfo {what} must be ValueInfo objects, got {type(v).__name__} {v!r}")
    return out
