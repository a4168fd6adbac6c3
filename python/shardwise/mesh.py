"""Logical device meshes (Shardonnay RFC "Basic structure", "Multiple logical meshes"; Shardy
``MeshAttr``). Immutable and hashable; every rule is checked in the Rust core."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from shardwise import _native
from shardwise.errors import MeshError, ShardingParseError

__all__ = ["Mesh", "MeshAxis"]


def text_error(text: str, e: UnicodeEncodeError, what: str) -> ShardingParseError:
    """The ``ShardingParseError`` (``.offset`` set) for ``text`` that cannot be encoded as
    UTF-8 (a lone surrogate, as from a non-UTF-8 command-line argument), which the Rust core
    cannot read: PyO3's ``UnicodeEncodeError`` escaped the parsers before."""
    shown = text if len(text) <= 80 else text[:77] + "..."
    err = ShardingParseError(
        f"expected {what}, got a character that is not valid Unicode ({text[e.start]!r}) at offset {e.start} of {shown!r}"
    )
    setattr(err, "offset", e.start)  # noqa: B010 - the attribute the Rust core sets
    return err


def check_name(name: str, what: str) -> None:
    """``MeshError`` for a ``name`` that cannot be encoded as UTF-8 (a lone surrogate)."""
    try:
        name.encode()
    except UnicodeEncodeError as e:
        raise MeshError(
            f"{what} {name[:80]!r} is not valid Unicode (character {name[e.start]!r} at offset {e.start})"
        ) from None


class MeshAxis:
    """One named axis of a mesh, ``"x"=4`` in sdy text."""

    __slots__ = ("name", "size")
    name: str
    size: int

    def __init__(self, name: str, size: int) -> None:
        if not isinstance(name, str):
            raise TypeError(f"mesh axis name must be a str, got {type(name).__name__} {name!r}")
        check_name(name, "mesh axis name")
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(f"mesh axis {name!r} size must be an int, got {type(size).__name__} {size!r}")
        if not -(2**63) <= size < 2**63:
            raise MeshError(f"mesh axis {name!r} size {size} does not fit in 64 bits")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "size", size)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("MeshAxis is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MeshAxis) and (self.name, self.size) == (other.name, other.size)

    def __hash__(self) -> int:
        return hash((MeshAxis, self.name, self.size))

    def __repr__(self) -> str:
        return f"MeshAxis({self.name!r}, {self.size})"


class Mesh:
    """A logical mesh: ordered named axes with sizes and an optional explicit device order.

    ``Mesh({"x": 2, "y": 4})``, ``Mesh([("x", 2), ("y", 4)], device_ids=[0, 2, 1, 3, 4, 6, 5, 7])``,
    ``Mesh.parse('#sdy.mesh<["x"=2, "y"=4]>')``, ``Mesh.empty()`` (``<[]>``) and
    ``Mesh.maximal(3)`` (``<[], device_ids=[3]>``, everything on device 3).

    Devices are laid out row-major over the axes; ``device_ids`` (when given) lists the device
    at each row-major position and must be a permutation of ``0..size``. Device ids equal to
    iota are dropped, as Shardy does. ``str()`` prints the sdy form.

    Raises ``MeshError`` for an axis size < 1, a duplicate axis name, negative or non-permutation
    device ids, or several device ids without axes.
    """

    __slots__ = ("_axes", "_core", "_device_ids", "_hash")
    _axes: tuple[MeshAxis, ...]
    _device_ids: tuple[int, ...]
    _hash: int
    #: The Rust core's mesh (``_native.Mesh``), what crosses the FFI.
    _core: _native.Mesh

    def __init__(
        self,
        axes: Mapping[str, int] | Iterable[MeshAxis | tuple[str, int]] = (),
        device_ids: Iterable[int] | None = None,
    ) -> None:
        items: list[tuple[str, int]] = []
        source = axes.items() if isinstance(axes, Mapping) else axes
        for a in source:
            if isinstance(a, MeshAxis):
                items.append((a.name, a.size))
            else:
                name, size = a
                ax = MeshAxis(name, size)  # type checks
                items.append((ax.name, ax.size))
        ids = [int(d) for d in device_ids] if device_ids is not None else []
        if any(not -(2**63) <= d < 2**63 for d in ids):
            raise MeshError(f"mesh device ids must fit in 64 bits, got {ids}")
        self._set(_native.Mesh(items, ids))

    def _set(self, core: _native.Mesh) -> None:
        object.__setattr__(self, "_core", core)
        object.__setattr__(self, "_axes", tuple(MeshAxis(n, s) for n, s in core.axes))
        object.__setattr__(self, "_device_ids", tuple(core.device_ids))
        object.__setattr__(self, "_hash", hash((Mesh, self._axes, self._device_ids)))

    @classmethod
    def _from_core(cls, core: _native.Mesh) -> Mesh:
        """The mesh of the Rust core's ``core`` (verified when it was made)."""
        m = cls.__new__(cls)
        m._set(core)
        return m

    @classmethod
    def parse(cls, text: str) -> Mesh:
        """Parses ``#sdy.mesh<["x"=2, "y"=4]>`` (also ``mesh<...>`` or the bare ``<...>``).

        Raises ``ShardingParseError`` for malformed text and ``MeshError`` for an invalid mesh,
        including explicit device ids equal to iota (Shardy's verifier rejects them).
        """
        try:
            return cls._from_core(_native.Mesh.parse(text))
        except UnicodeEncodeError as e:
            raise text_error(text, e, "a mesh") from None

    @classmethod
    def from_spec(cls, spec: Mesh | Mapping[str, int] | str) -> Mesh:
        """A mesh from what users write for one: a ``Mesh``; a mapping axis -> size
        (``{"data": 2, "model": 4}``); the short text ``data=2,model=4`` of the command line; or
        Shardy's text ``#sdy.mesh<["data"=2, "model"=4]>`` (also ``<[...]>``). The one parser
        of ``x=2,y=4`` for the CLI, ``partition`` and ``auto_shard``.

        Raises ``MeshError`` for short text that is not ``name=size`` pairs (naming the bad
        part) and for invalid meshes, ``ShardingParseError`` for malformed Shardy text."""
        if isinstance(spec, Mesh):
            return spec
        if isinstance(spec, Mapping):
            return cls(dict(spec))
        if not isinstance(spec, str):
            raise MeshError(
                f"a mesh must be a Mesh, a mapping axis -> size or text like x=2,y=4, got {type(spec).__name__}"
            )
        text = spec.strip()
        if text.startswith(("#sdy.mesh", "<", "mesh<")):
            return cls.parse(text)
        axes: list[tuple[str, int]] = []
        for part in (p.strip() for p in text.split(",")):
            name, eq, size = part.partition("=")
            if not eq or not name.strip() or not size.strip().lstrip("-").isdigit():
                shown = spec if len(spec) <= 80 else spec[:77] + "..."
                raise MeshError(
                    f"a mesh must look like x=2,y=4 (name=size pairs), got {shown!r} (bad part {part[:40]!r})"
                )
            axes.append((name.strip(), int(size)))
        return cls(axes)

    @classmethod
    def parse_op(cls, text: str) -> tuple[str, Mesh]:
        """Parses a module-level definition ``sdy.mesh @name = <["x"=2]>`` into (name, mesh)."""
        try:
            name, core = _native.Mesh.parse_op(text)
        except UnicodeEncodeError as e:
            raise text_error(text, e, "a mesh definition") from None
        return name, cls._from_core(core)

    @classmethod
    def empty(cls) -> Mesh:
        """The empty mesh ``<[]>`` (a placeholder with no devices)."""
        return cls()

    @classmethod
    def maximal(cls, device: int) -> Mesh:
        """The maximal mesh ``<[], device_ids=[device]>``: the tensor lives on one device."""
        return cls((), device_ids=[device])

    @property
    def axes(self) -> tuple[MeshAxis, ...]:
        return self._axes

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self._axes)

    @property
    def shape(self) -> dict[str, int]:
        """Axis name -> size, in mesh order."""
        return {a.name: a.size for a in self._axes}

    @property
    def device_ids(self) -> tuple[int, ...]:
        """The explicit device order; ``()`` when it is iota."""
        return self._device_ids

    @property
    def devices(self) -> tuple[int, ...]:
        """Every device id, in row-major mesh order."""
        if self._device_ids:
            return self._device_ids
        return tuple(range(self.size))

    @property
    def size(self) -> int:
        """Number of devices (1 for a maximal mesh, 0 for the empty mesh)."""
        if self.is_empty:
            return 0
        n = 1
        for a in self._axes:
            n *= a.size
        return n

    @property
    def is_empty(self) -> bool:
        return not self._axes and not self._device_ids

    @property
    def is_maximal(self) -> bool:
        return not self._axes and len(self._device_ids) == 1

    def axis_size(self, name: str) -> int:
        """Size of axis ``name``; ``KeyError`` naming the known axes if there is none."""
        for a in self._axes:
            if a.name == name:
                return a.size
        raise KeyError(f"mesh {self} has no axis {name!r}; axes: {list(self.axis_names)}")

    def __contains__(self, name: object) -> bool:
        return any(a.name == name for a in self._axes)

    def __iter__(self) -> Iterator[MeshAxis]:
        return iter(self._axes)

    def __len__(self) -> int:
        return len(self._axes)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("Mesh is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mesh) and (self._axes, self._device_ids) == (other._axes, other._device_ids)

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return str(self._core)

    def body(self) -> str:
        """The text after ``sdy.mesh @name = ``: ``<["x"=2]>``."""
        return str(self)[len("#sdy.mesh") :]

    def op_text(self, name: str) -> str:
        """The module-level definition ``sdy.mesh @name = <["x"=2]>`` (quoted name if needed)."""
        check_name(name, "mesh name")
        return self._core.print_op(name)

    def __repr__(self) -> str:
        ids = f", device_ids={list(self._device_ids)}" if self._device_ids else ""
        return f"Mesh({self.shape!r}{ids})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Mesh, ([(a.name, a.size) for a in self._axes], list(self._device_ids) or None))
