"""Axis references, dimension shardings and tensor shardings (Shardonnay RFC "Sharding
Representation"; Shardy ``AxisRefAttr``, ``DimensionShardingAttr``, ``TensorShardingAttr``).

Immutable, hashable values. Parsing, printing, every invariant and the per-device view are
computed by the Rust core (``rust/src/{axis,sharding,text}.rs``); conversions to other formats
live in ``shardwise.convert``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from shardwise import _native
from shardwise.convert import dtensor, hidet, hlo, jax_spec, mindspore
from shardwise.errors import InvalidShardingError, MeshError
from shardwise.mesh import Mesh, check_name, text_error
from shardwise.visualize import device_grid

if TYPE_CHECKING:
    from rich.console import RenderableType

__all__ = ["AxisRef", "DimSharding", "Meshes", "TensorSharding"]

AxisWire = tuple[str, tuple[int, int] | None]
DimWire = tuple[list[AxisWire], bool, int | None]
ShardingWire = tuple[
    str | None,
    tuple[list[tuple[str, int]], list[int]] | None,
    list[DimWire],
    list[AxisWire],
    list[AxisWire],
    str,
]
#: Where a sharding's named mesh is looked up: a mapping name -> Mesh, or one Mesh for any name.
Meshes = Mapping[str, Mesh] | Mesh | None


class _Frozen:
    __slots__ = ()

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _init(self, **fields: Any) -> None:
        for k, v in fields.items():
            object.__setattr__(self, k, v)


class AxisRef(_Frozen):
    """A full mesh axis ``"x"`` or a sub-axis ``"x":(m)k``: the size-``k`` middle factor of the
    reshape of axis ``x`` (size ``n``) into ``[m, k, n/(m*k)]``; ``m`` is the pre-size.

    ``AxisRef("x")``, ``AxisRef("x", 2, 4)``, ``AxisRef.parse('"x":(2)4')``. Relations
    (``contains``, ``overlaps``, ``can_merge``, ``merge``, …) follow Shardy's ``AxisRefAttr``.
    """

    __slots__ = ("name", "pre_size", "size")
    name: str
    pre_size: int | None
    size: int | None

    def __init__(self, name: str, pre_size: int | None = None, size: int | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"axis name must be a str, got {type(name).__name__} {name!r}")
        check_name(name, "axis name")
        if (pre_size is None) != (size is None):
            raise TypeError(f"sub-axis of {name!r} needs both pre_size and size, got ({pre_size}, {size})")
        self._init(name=name, pre_size=pre_size, size=size)
        _native.axis_op("check_local", self._wire())

    @classmethod
    def _from_wire(cls, w: AxisWire) -> AxisRef:
        r = cls.__new__(cls)
        name, sub = w
        r._init(name=name, pre_size=sub[0] if sub else None, size=sub[1] if sub else None)
        return r

    def _wire(self) -> AxisWire:
        return (self.name, None if self.pre_size is None or self.size is None else (self.pre_size, self.size))

    @classmethod
    def parse(cls, text: str) -> AxisRef:
        """Parses ``"x"`` or ``"x":(1)2``; raises ``ShardingParseError``."""
        try:
            return cls._from_wire(_native.axis_parse(text))
        except UnicodeEncodeError as e:
            raise text_error(text, e, "an axis reference") from None

    @property
    def is_sub_axis(self) -> bool:
        return self.pre_size is not None

    def full_size(self, mesh: Mesh) -> int:
        """Number of devices along this reference in ``mesh``."""
        return int(_native.axis_op("size", self._wire(), None, mesh._wire()))

    def next_pre_size(self, mesh: Mesh) -> int:
        """``pre_size * size`` of a sub-axis, the axis size of a full axis."""
        return int(_native.axis_op("next_pre_size", self._wire(), None, mesh._wire()))

    def check(self, mesh: Mesh) -> None:
        """Raises ``InvalidShardingError`` unless this reference is valid in ``mesh``."""
        _native.axis_op("check", self._wire(), None, mesh._wire())

    def contains(self, other: AxisRef) -> bool:
        return bool(_native.axis_op("contains", self._wire(), other._wire()))

    def strictly_contains(self, other: AxisRef) -> bool:
        return bool(_native.axis_op("strictly_contains", self._wire(), other._wire()))

    def prefix_of(self, other: AxisRef) -> bool:
        """This is the major part of ``other``."""
        return bool(_native.axis_op("prefix_of", self._wire(), other._wire()))

    def suffix_of(self, other: AxisRef, mesh: Mesh) -> bool:
        """This is the minor part of ``other``."""
        return bool(_native.axis_op("suffix_of", self._wire(), other._wire(), mesh._wire()))

    def overlaps(self, other: AxisRef) -> bool:
        return bool(_native.axis_op("overlaps", self._wire(), other._wire()))

    def can_merge(self, other: AxisRef) -> bool:
        """``self`` and ``other`` are adjacent sub-axes of one axis, ``self`` major."""
        return bool(_native.axis_op("can_merge", self._wire(), other._wire()))

    def merge(self, other: AxisRef, mesh: Mesh) -> AxisRef:
        """Merges adjacent sub-axes (the full axis when they cover it); raises
        ``InvalidShardingError`` (rule ``cannot-merge``) unless ``can_merge``."""
        return AxisRef._from_wire(_native.axis_op("merge", self._wire(), other._wire(), mesh._wire()))

    def overlap(self, other: AxisRef) -> AxisRef | None:
        """The common part of two references to one axis, or None."""
        w = _native.axis_op("overlap", self._wire(), other._wire())
        return None if w is None else AxisRef._from_wire(w)

    @staticmethod
    def sorted(refs: Iterable[AxisRef | str], mesh: Mesh) -> tuple[AxisRef, ...]:
        """``refs`` in mesh order (Shardy's mesh comparator): by axis position, then sub-axes by
        pre-size."""
        wires = [_axis(r)._wire() for r in refs]
        return tuple(AxisRef._from_wire(w) for w in _native.axes_sorted(wires, mesh._wire()))

    @staticmethod
    def sort_and_merge(refs: Iterable[AxisRef | str], mesh: Mesh) -> tuple[AxisRef, ...]:
        """``refs`` in mesh order with adjacent sub-axes of one axis merged (Shardy's
        ``sortAndMergeAxes``, ``shardy/dialect/sdy/ir/utils.cc``); ``MeshError`` for an axis
        ``mesh`` lacks."""
        wires = [_axis(r)._wire() for r in refs]
        return tuple(AxisRef._from_wire(w) for w in _native.axes_sort_and_merge(wires, mesh._wire()))

    @staticmethod
    def set_diff(a: Iterable[AxisRef | str], b: Iterable[AxisRef | str], mesh: Mesh) -> tuple[AxisRef, ...]:
        """The parts of the references ``a`` that none of ``b`` covers, in the order of ``a``
        (Shardy's ``getAxisSetDiff``, ``shardy/dialect/sdy/ir/utils.cc``): ``["x"]`` minus
        ``["x":(1)2]`` is ``["x":(2)2]`` on ``x=4``. ``MeshError`` for an axis ``mesh`` lacks."""
        wa, wb = [_axis(r)._wire() for r in a], [_axis(r)._wire() for r in b]
        return tuple(AxisRef._from_wire(w) for w in _native.axes_set_diff(wa, wb, mesh._wire()))

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, AxisRef)
            and self.name == other.name
            and self.pre_size == other.pre_size
            and self.size == other.size
        )

    def __hash__(self) -> int:
        return hash((AxisRef, self.name, self.pre_size, self.size))

    def __str__(self) -> str:
        return str(_native.axis_print(self._wire()))

    def __repr__(self) -> str:
        if self.pre_size is None:
            return f"AxisRef({self.name!r})"
        return f"AxisRef({self.name!r}, {self.pre_size}, {self.size})"


def _axis(a: AxisRef | str) -> AxisRef:
    if isinstance(a, AxisRef):
        return a
    if isinstance(a, str):
        return AxisRef(a)
    raise TypeError(f"expected an axis name or AxisRef, got {type(a).__name__} {a!r}")


class DimSharding(_Frozen):
    """The sharding of one dimension: axes major to minor, closed (final) or open (``?``,
    propagation may add minor axes), and an optional priority ``pN`` (0 is the highest).

    ``DimSharding(["x", "y"])`` is ``{"x", "y"}``; ``DimSharding(["x"], closed=False, priority=1)``
    is ``{"x", ?}p1``.
    """

    __slots__ = ("axes", "closed", "priority")
    axes: tuple[AxisRef, ...]
    closed: bool
    priority: int | None

    def __init__(self, axes: Iterable[AxisRef | str] = (), closed: bool = True, priority: int | None = None) -> None:
        if isinstance(axes, (str, AxisRef)):
            axes = (axes,)
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise TypeError(f"priority must be an int or None, got {priority!r}")
        self._init(axes=tuple(_axis(a) for a in axes), closed=bool(closed), priority=priority)

    @classmethod
    def _from_wire(cls, w: DimWire) -> DimSharding:
        d = cls.__new__(cls)
        d._init(axes=tuple(AxisRef._from_wire(a) for a in w[0]), closed=w[1], priority=w[2])
        return d

    def _wire(self) -> DimWire:
        return ([a._wire() for a in self.axes], self.closed, self.priority)

    @property
    def is_open(self) -> bool:
        return not self.closed

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, DimSharding)
            and self.closed == other.closed
            and self.priority == other.priority
            and self.axes == other.axes
        )

    def __hash__(self) -> int:
        return hash((DimSharding, self.axes, self.closed, self.priority))

    def __str__(self) -> str:
        inner = ", ".join([str(a) for a in self.axes] + ([] if self.closed else ["?"]))
        return "{" + inner + "}" + ("" if self.priority is None else f"p{self.priority}")

    def __repr__(self) -> str:
        args = [repr([a.name if not a.is_sub_axis else a for a in self.axes])]
        if not self.closed:
            args.append("closed=False")
        if self.priority is not None:
            args.append(f"priority={self.priority}")
        return f"DimSharding({', '.join(args)})"


DimLike = DimSharding | Sequence[AxisRef | str] | AxisRef | str | None


def _dim(d: DimLike) -> DimSharding:
    if isinstance(d, DimSharding):
        return d
    if d is None:
        return DimSharding()
    return DimSharding(d)  # type: ignore[arg-type]


_DEFAULT_NAME = "mesh"

#: Shardings already found valid (``TensorSharding._check``), at most ``_CHECKED_MAX``.
_CHECKED: set[TensorSharding] = set()
_CHECKED_MAX = 65536


class TensorSharding(_Frozen):
    """How a tensor is split over a mesh: one ``DimSharding`` per dimension, explicitly
    replicated axes, unreduced axes (partial sums along those axes), all bound to a mesh.

    ``TensorSharding(mesh, [["x"], None])`` is ``#sdy.sharding<@mesh, [{"x"}, {}]>``. The
    ``mesh`` is a ``Mesh`` (bound by the name ``mesh_name``, default ``"mesh"``, or inlined
    with ``inline=True``) or just a mesh name (then operations that need the mesh take
    ``meshes=``). Replicated and unreduced axes are stored in mesh order; ``reduction`` (sum,
    max or min) says how unreduced axes combine and is "sum" when there are none. Every invariant of
    the RFC is checked when the mesh is known (``InvalidShardingError`` with a ``rule``);
    ``validate(shape)`` adds the shape checks.
    """

    __slots__ = ("mesh_name", "mesh", "dims", "replicated", "unreduced", "reduction", "_hash")
    mesh_name: str | None
    mesh: Mesh | None
    dims: tuple[DimSharding, ...]
    replicated: tuple[AxisRef, ...]
    unreduced: tuple[AxisRef, ...]
    reduction: str
    _hash: int

    def __init__(
        self,
        mesh: Mesh | str,
        dims: Iterable[DimLike] = (),
        *,
        replicated: Iterable[AxisRef | str] = (),
        unreduced: Iterable[AxisRef | str] = (),
        reduction: str = "sum",
        mesh_name: str = _DEFAULT_NAME,
        inline: bool = False,
    ) -> None:
        if isinstance(mesh, Mesh):
            name: str | None = None if inline else mesh_name
            resolved: Mesh | None = mesh
        elif isinstance(mesh, str):
            name, resolved = mesh.removeprefix("@"), None
        else:
            raise TypeError(f"mesh must be a Mesh or a mesh name, got {type(mesh).__name__} {mesh!r}")
        rep = tuple(_axis(a) for a in replicated)
        unr = tuple(_axis(a) for a in unreduced)
        if reduction not in ("sum", "max", "min"):
            err = InvalidShardingError(f"reduction must be sum, max or min, got {reduction!r}")
            err.rule = "unknown-reduction"  # type: ignore[attr-defined]
            raise err
        if not unr:
            reduction = "sum"  # the reduction of no unreduced axes means nothing (and is not printed)
        if resolved is not None:
            rep, unr = AxisRef.sorted(rep, resolved), AxisRef.sorted(unr, resolved)
        self._set(name, resolved, tuple(_dim(d) for d in dims), rep, unr, reduction)
        self._check()

    def _set(
        self,
        name: str | None,
        mesh: Mesh | None,
        dims: tuple[DimSharding, ...],
        rep: tuple[AxisRef, ...],
        unr: tuple[AxisRef, ...],
        reduction: str,
    ) -> None:
        self._init(mesh_name=name, mesh=mesh, dims=dims, replicated=rep, unreduced=unr, reduction=reduction)
        self._init(_hash=hash((TensorSharding, name, mesh, dims, rep, unr, reduction)))

    def _check(self) -> None:
        # Equal shardings are equally valid: programs repeat a few shardings many times, so
        # each distinct one is validated once (the set is bounded and then starts over).
        if self in _CHECKED:
            return
        if self.mesh is not None:
            _native.sharding_validate(self._wire(), self.mesh._wire(), None, False)
        else:
            _native.sharding_check_local(self._wire())
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED.add(self)

    @classmethod
    def _from_wire(cls, w: ShardingWire, mesh: Mesh | None) -> TensorSharding:
        t = cls.__new__(cls)
        name, inline, dims, rep, unr, reduction = w
        if inline is not None:
            mesh = Mesh._from_wire(inline)
        t._set(
            name,
            mesh,
            tuple(DimSharding._from_wire(d) for d in dims),
            tuple(AxisRef._from_wire(a) for a in rep),
            tuple(AxisRef._from_wire(a) for a in unr),
            reduction,
        )
        return t

    def _wire(self) -> ShardingWire:
        inline = self.mesh._wire() if self.mesh_name is None and self.mesh is not None else None
        return (
            self.mesh_name,
            inline,
            [d._wire() for d in self.dims],
            [a._wire() for a in self.replicated],
            [a._wire() for a in self.unreduced],
            self.reduction,
        )

    # ------------------------------------------------------------------ text

    @classmethod
    def parse(cls, text: str, meshes: Meshes = None) -> TensorSharding:
        """Parses ``#sdy.sharding<@mesh, [{"x", ?}p1, {}], replicated={"z"}>`` (or the stripped
        ``<...>`` form). With ``meshes`` a named sharding is bound to its mesh and validated (a
        single ``Mesh`` binds any name; an inlined mesh is kept).

        Raises ``ShardingParseError`` (malformed text, with ``.offset``), ``InvalidShardingError``
        (an invariant, with ``.rule``), ``MeshError`` (unknown mesh name).
        """
        try:
            wire_meshes, single = _mesh_table(meshes)
            if single is not None:
                t = cls._from_wire(_native.sharding_parse(text, None), None)
                return t if t.mesh is not None else t.bind(single)
            w = _native.sharding_parse(text, wire_meshes)
        except UnicodeEncodeError as e:
            raise text_error(text, e, "a sharding") from None
        return cls._from_wire(w, _lookup(meshes, w[0]))

    @classmethod
    def parse_per_value(cls, text: str, meshes: Meshes = None) -> tuple[TensorSharding, ...]:
        """Parses ``#sdy.sharding_per_value<[<@mesh, [...]>, ...]>`` (or the stripped ``[...]``)."""
        try:
            wire_meshes, single = _mesh_table(meshes)
            if single is not None:
                ts = (cls._from_wire(w, None) for w in _native.sharding_per_value_parse(text, None))
                return tuple(t if t.mesh is not None else t.bind(single) for t in ts)
            wires = _native.sharding_per_value_parse(text, wire_meshes)
        except UnicodeEncodeError as e:
            raise text_error(text, e, "shardings") from None
        return tuple(cls._from_wire(w, _lookup(meshes, w[0])) for w in wires)

    @staticmethod
    def print_per_value(shardings: Iterable[TensorSharding]) -> str:
        """``#sdy.sharding_per_value<[<...>, ...]>`` of several shardings (one per op result)."""
        return str(_native.sharding_per_value_print([s._wire() for s in shardings]))

    def __str__(self) -> str:
        return str(_native.sharding_print(self._wire()))

    def body(self) -> str:
        """The stripped form ``<@mesh, [...]>`` used by ``sdy.sharding_constraint`` and lists."""
        return str(self)[len("#sdy.sharding") :]

    def __repr__(self) -> str:
        return f"TensorSharding.parse({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorSharding) and self._key() == other._key()

    def _key(self) -> tuple[Any, ...]:
        return (self.mesh_name, self.mesh, self.dims, self.replicated, self.unreduced, self.reduction)

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickle, (str(self), self.mesh))

    # ------------------------------------------------------------------ structure

    @classmethod
    def replicated_on(
        cls, mesh: Mesh, rank: int, *, open: bool = False, mesh_name: str = _DEFAULT_NAME
    ) -> TensorSharding:
        """All dims ``{}`` (closed) or ``{?}`` (open) on ``mesh``."""
        return cls(mesh, [DimSharding((), closed=not open) for _ in range(rank)], mesh_name=mesh_name)

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_fully_replicated(self) -> bool:
        """No dimension is sharded and nothing is unreduced."""
        return all(not d.axes for d in self.dims) and not self.unreduced

    @property
    def axis_refs(self) -> tuple[AxisRef, ...]:
        """Every axis reference: dimensions (major to minor), replicated, unreduced."""
        return tuple(a for d in self.dims for a in d.axes) + self.replicated + self.unreduced

    def bind(self, mesh: Mesh, *, mesh_name: str | None = None) -> TensorSharding:
        """The same sharding bound to ``mesh`` (validated against it); its name is kept unless
        ``mesh_name`` is given."""
        t = TensorSharding.__new__(TensorSharding)
        name = mesh_name if mesh_name is not None else self.mesh_name
        t._set(name, mesh, self.dims, self.replicated, self.unreduced, self.reduction)
        t._check()
        return t

    def resolve_mesh(self, meshes: Meshes = None) -> Mesh:
        """The mesh of this sharding: its own, else looked up in ``meshes``; ``MeshError`` if none."""
        if self.mesh is not None:
            return self.mesh
        if isinstance(meshes, Mesh):
            return meshes
        if meshes is not None and self.mesh_name in meshes:
            return meshes[self.mesh_name]  # type: ignore[index]
        raise MeshError(
            f"sharding {self} is bound to mesh @{self.mesh_name}, which is not known here; "
            f"pass meshes={{'{self.mesh_name}': Mesh(...)}}"
        )

    def validate(self, shape: Sequence[int] | None = None, *, meshes: Meshes = None, user: bool = False) -> None:
        """Checks every invariant against the mesh and, when given, the tensor ``shape`` (-1 for a
        dynamic size), as Shardy's verifier does: rank, known axes, each axis used once, sub-axes
        valid, non-overlapping and merged, replicated/unreduced axes in mesh order, no priority on
        an empty closed dim.

        ``user=True`` adds the RFC's rules for users' own annotations, which Shardy's propagation
        does not keep: full axes only (no sub-axes), no sharded size-0 dim, and no dim sharded
        further once exhausted (``[{"x"}, {"y", "z"}]`` is invalid for ``tensor<1x4>`` on
        ``x=2, y=4, z=2``). Raises ``InvalidShardingError`` whose ``.rule`` names the invariant.
        """
        mesh = self.resolve_mesh(meshes)
        _native.sharding_validate(self._wire(), mesh._wire(), None if shape is None else _shape(shape), user)

    # ------------------------------------------------------------------ per-device view

    def local_shape(self, shape: Sequence[int], *, meshes: Meshes = None) -> tuple[int, ...]:
        """Per-device shape: a dim of size ``d`` split ``n`` ways holds ``ceil(d / n)`` elements
        (the last shards are padded when ``n`` does not divide ``d``)."""
        mesh = self.resolve_mesh(meshes)
        return tuple(_native.sharding_local_shape(self._wire(), mesh._wire(), _shape(shape)))

    def device_ranges(self, shape: Sequence[int], device: int, *, meshes: Meshes = None) -> tuple[tuple[int, int], ...]:
        """``[start, stop)`` per dimension of the global tensor held by ``device`` (empty ranges
        for shards that lie wholly in the padding). ``MeshError`` if the device is not in the mesh."""
        mesh = self.resolve_mesh(meshes)
        dims = _shape(shape)
        if isinstance(device, int) and not 0 <= device < 2**63:
            raise MeshError(f"device {device} is not in the mesh (devices 0..{mesh.size})")
        return tuple(_native.sharding_device_ranges(self._wire(), mesh._wire(), dims, device))

    def device_slices(self, shape: Sequence[int], device: int, *, meshes: Meshes = None) -> tuple[slice, ...]:
        """``device_ranges`` as slices, to index a numpy array: ``x[s.device_slices(x.shape, d)]``."""
        return tuple(slice(a, b) for a, b in self.device_ranges(shape, device, meshes=meshes))

    def visualize(self, shape: Sequence[int], *, meshes: Meshes = None) -> RenderableType:
        """A rich table of which devices hold which block of a rank-1 or rank-2 tensor, like
        ``jax.debug.visualize_array_sharding``; ``print(ts.visualize(shape))`` draws it."""
        return device_grid(self, shape, self.resolve_mesh(meshes))

    # ------------------------------------------------------------------ conversions

    def to_hlo_sharding(self, meshes: Meshes = None, *, strict: bool = True) -> str:
        """XLA HLO sharding text, equal to ``str(NamedSharding(...)._to_xla_hlo_sharding(rank))``.
        See ``shardwise.convert.hlo``."""
        return hlo.to_hlo_sharding(self, self.resolve_mesh(meshes), strict=strict)

    @classmethod
    def from_hlo_sharding(
        cls, text: str, rank: int, mesh: Mesh | None = None, *, mesh_name: str | None = _DEFAULT_NAME
    ) -> TensorSharding:
        """A sharding from XLA HLO sharding text; see ``shardwise.convert.hlo``."""
        return hlo.from_hlo_sharding(cls, text, rank, mesh, mesh_name=mesh_name)

    def to_partition_spec(self, *, strict: bool = True) -> Any:
        """``jax.sharding.PartitionSpec``; see ``shardwise.convert.jax_spec``."""
        return jax_spec.to_partition_spec(self, strict=strict)

    @classmethod
    def from_partition_spec(
        cls, spec: Any, mesh: Mesh, rank: int | None = None, *, mesh_name: str | None = _DEFAULT_NAME
    ) -> TensorSharding:
        """From a ``PartitionSpec`` (or a sequence of None / axis name / tuple of names); see
        ``shardwise.convert.jax_spec``."""
        return jax_spec.from_partition_spec(cls, DimSharding, spec, mesh, rank, mesh_name=mesh_name)

    def to_mindspore_layout(
        self, meshes: Meshes = None, *, strict: bool = True
    ) -> tuple[tuple[int, ...], tuple[Any, ...]]:
        """MindSpore ``(device_matrix, tensor_map)``; see ``shardwise.convert.mindspore``."""
        return mindspore.to_layout(self, self.resolve_mesh(meshes), strict=strict)

    @classmethod
    def from_mindspore_layout(
        cls,
        device_matrix: Sequence[int],
        tensor_map: Sequence[Any],
        mesh: Mesh | None = None,
        *,
        mesh_name: str | None = _DEFAULT_NAME,
    ) -> TensorSharding:
        return mindspore.from_layout(cls, device_matrix, tensor_map, mesh, mesh_name=mesh_name)

    def to_mindspore_strategy(self, meshes: Meshes = None) -> tuple[int, ...]:
        """MindSpore sharding strategy of this tensor: the number of shards per dimension."""
        return mindspore.to_strategy(self, self.resolve_mesh(meshes))

    @classmethod
    def from_mindspore_strategy(
        cls, strategy: Sequence[int], device_num: int, *, mesh_name: str | None = _DEFAULT_NAME
    ) -> TensorSharding:
        return mindspore.from_strategy(cls, strategy, device_num, mesh_name=mesh_name)

    def to_hidet(self, meshes: Meshes = None, *, strict: bool = True) -> list[set[int]]:
        """hidet ``TensorShardSpec.mesh_axis_per_dim``; see ``shardwise.convert.hidet``."""
        return hidet.to_mesh_axis_per_dim(self, self.resolve_mesh(meshes), strict=strict)

    @classmethod
    def from_hidet(
        cls, mesh_axis_per_dim: Sequence[Iterable[int]], mesh: Mesh, *, mesh_name: str | None = _DEFAULT_NAME
    ) -> TensorSharding:
        return hidet.from_mesh_axis_per_dim(cls, mesh_axis_per_dim, mesh, mesh_name=mesh_name)

    def to_dtensor_placements(self, meshes: Meshes = None, *, strict: bool = True) -> tuple[tuple[Any, ...], ...]:
        """PyTorch DTensor placements as plain tuples; see ``shardwise.convert.dtensor``."""
        return dtensor.to_placements(self, self.resolve_mesh(meshes), strict=strict)

    @classmethod
    def from_dtensor_placements(
        cls, placements: Sequence[Any], mesh: Mesh, rank: int, *, mesh_name: str | None = _DEFAULT_NAME
    ) -> TensorSharding:
        return dtensor.from_placements(cls, placements, mesh, rank, mesh_name=mesh_name)


def _shape(shape: Sequence[int]) -> list[int]:
    """``shape`` as a list for the Rust core; ``InvalidShardingError`` (rule ``invalid-shape``)
    for a size that does not fit in 64 bits, which raised ``OverflowError`` from inside
    before (``shardwise show --shape 99999999999999999999,8``)."""
    dims = list(shape)
    for i, d in enumerate(dims):
        if isinstance(d, int) and not -(2**63) <= d < 2**63:
            shown = str(dims) if len(dims) <= 16 else str(dims[:16])[:-1] + ", ...]"
            err = InvalidShardingError(
                f"dim {i} of shape {shown[:200]} has size {str(d)[:40]}, which does not fit in 64 bits"
            )
            setattr(err, "rule", "invalid-shape")  # noqa: B010 - the attribute the Rust core sets
            raise err
    return dims


def _mesh_table(meshes: Meshes) -> tuple[dict[str, Any] | None, Mesh | None]:
    if meshes is None:
        return None, None
    if isinstance(meshes, Mesh):
        return None, meshes
    return {k: m._wire() for k, m in meshes.items()}, None


def _lookup(meshes: Meshes, name: str | None) -> Mesh | None:
    if name is None or meshes is None or isinstance(meshes, Mesh):
        return None
    return meshes.get(name)


def _unpickle(text: str, mesh: Mesh | None) -> TensorSharding:
    t = TensorSharding.parse(text)
    return t if mesh is None or t.mesh is not None else t.bind(mesh)
