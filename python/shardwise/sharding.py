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

    __slots__ = ("_core", "name", "pre_size", "size")
    name: str
    pre_size: int | None
    size: int | None
    #: The Rust core's axis (``_native.Axis``), what crosses the FFI.
    _core: _native.Axis

    def __init__(self, name: str, pre_size: int | None = None, size: int | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"axis name must be a str, got {type(name).__name__} {name!r}")
        check_name(name, "axis name")
        if (pre_size is None) != (size is None):
            raise TypeError(f"sub-axis of {name!r} needs both pre_size and size, got ({pre_size}, {size})")
        sub = None if pre_size is None or size is None else (pre_size, size)
        self._init(name=name, pre_size=pre_size, size=size, _core=_native.Axis(name, sub))

    @classmethod
    def _from_core(cls, core: _native.Axis) -> AxisRef:
        """The axis of the Rust core's ``core`` (checked when it was made)."""
        r = cls.__new__(cls)
        sub = core.sub
        r._init(name=core.name, pre_size=sub[0] if sub else None, size=sub[1] if sub else None, _core=core)
        return r

    @classmethod
    def parse(cls, text: str) -> AxisRef:
        """Parses ``"x"`` or ``"x":(1)2``; raises ``ShardingParseError``."""
        try:
            return cls._from_core(_native.Axis.parse(text))
        except UnicodeEncodeError as e:
            raise text_error(text, e, "an axis reference") from None

    @property
    def is_sub_axis(self) -> bool:
        return self.pre_size is not None

    def full_size(self, mesh: Mesh) -> int:
        """Number of devices along this reference in ``mesh``."""
        return self._core.size(mesh._core)

    def next_pre_size(self, mesh: Mesh) -> int:
        """``pre_size * size`` of a sub-axis, the axis size of a full axis."""
        return self._core.next_pre_size(mesh._core)

    def check(self, mesh: Mesh) -> None:
        """Raises ``InvalidShardingError`` unless this reference is valid in ``mesh``."""
        self._core.check(mesh._core)

    def contains(self, other: AxisRef) -> bool:
        return self._core.contains(other._core)

    def strictly_contains(self, other: AxisRef) -> bool:
        return self._core.strictly_contains(other._core)

    def prefix_of(self, other: AxisRef) -> bool:
        """This is the major part of ``other``."""
        return self._core.prefix_of(other._core)

    def suffix_of(self, other: AxisRef, mesh: Mesh) -> bool:
        """This is the minor part of ``other``."""
        return self._core.suffix_of(other._core, mesh._core)

    def overlaps(self, other: AxisRef) -> bool:
        return self._core.overlaps(other._core)

    def can_merge(self, other: AxisRef) -> bool:
        """``self`` and ``other`` are adjacent sub-axes of one axis, ``self`` major."""
        return self._core.can_merge(other._core)

    def merge(self, other: AxisRef, mesh: Mesh) -> AxisRef:
        """Merges adjacent sub-axes (the full axis when they cover it); raises
        ``InvalidShardingError`` (rule ``cannot-merge``) unless ``can_merge``."""
        return AxisRef._from_core(self._core.merge(other._core, mesh._core))

    def overlap(self, other: AxisRef) -> AxisRef | None:
        """The common part of two references to one axis, or None."""
        core = self._core.overlap(other._core)
        return None if core is None else AxisRef._from_core(core)

    @staticmethod
    def sorted(refs: Iterable[AxisRef | str], mesh: Mesh) -> tuple[AxisRef, ...]:
        """``refs`` in mesh order (Shardy's mesh comparator): by axis position, then sub-axes by
        pre-size."""
        cores = _native.Axis.sorted([_axis(r)._core for r in refs], mesh._core)
        return tuple(AxisRef._from_core(c) for c in cores)

    @staticmethod
    def sort_and_merge(refs: Iterable[AxisRef | str], mesh: Mesh) -> tuple[AxisRef, ...]:
        """``refs`` in mesh order with adjacent sub-axes of one axis merged (Shardy's
        ``sortAndMergeAxes``, ``shardy/dialect/sdy/ir/utils.cc``); ``MeshError`` for an axis
        ``mesh`` lacks."""
        cores = _native.Axis.sort_and_merge([_axis(r)._core for r in refs], mesh._core)
        return tuple(AxisRef._from_core(c) for c in cores)

    @staticmethod
    def set_diff(a: Iterable[AxisRef | str], b: Iterable[AxisRef | str], mesh: Mesh) -> tuple[AxisRef, ...]:
        """The parts of the references ``a`` that none of ``b`` covers, in the order of ``a``
        (Shardy's ``getAxisSetDiff``, ``shardy/dialect/sdy/ir/utils.cc``): ``["x"]`` minus
        ``["x":(1)2]`` is ``["x":(2)2]`` on ``x=4``. ``MeshError`` for an axis ``mesh`` lacks."""
        ca, cb = [_axis(r)._core for r in a], [_axis(r)._core for r in b]
        return tuple(AxisRef._from_core(c) for c in _native.Axis.set_diff(ca, cb, mesh._core))

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
        return str(self._core)

    def __reduce__(self) -> tuple[Any, ...]:
        return (AxisRef, (self.name, self.pre_size, self.size))

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

    __slots__ = ("_core", "axes", "closed", "priority")
    axes: tuple[AxisRef, ...]
    closed: bool
    priority: int | None
    #: The Rust core's dimension (``_native.Dim``), made when first asked for (``_native_dim``).
    _core: _native.Dim | None

    def __init__(self, axes: Iterable[AxisRef | str] = (), closed: bool = True, priority: int | None = None) -> None:
        if isinstance(axes, (str, AxisRef)):
            axes = (axes,)
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise TypeError(f"priority must be an int or None, got {priority!r}")
        self._init(axes=tuple(_axis(a) for a in axes), closed=bool(closed), priority=priority, _core=None)

    @classmethod
    def _from_core(cls, core: _native.Dim) -> DimSharding:
        d = cls.__new__(cls)
        d._init(
            axes=tuple(AxisRef._from_core(a) for a in core.axes), closed=core.closed, priority=core.priority, _core=core
        )
        return d

    def _native_dim(self) -> _native.Dim:
        """The Rust core's dimension of this one (made once)."""
        core = self._core
        if core is None:
            core = _native.Dim([a._core for a in self.axes], self.closed, self.priority)
            object.__setattr__(self, "_core", core)
        return core

    def __reduce__(self) -> tuple[Any, ...]:
        return (DimSharding, (self.axes, self.closed, self.priority))

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

    __slots__ = ("_core", "_hash", "dims", "mesh", "mesh_name", "reduction", "replicated", "unreduced")
    mesh_name: str | None
    mesh: Mesh | None
    dims: tuple[DimSharding, ...]
    replicated: tuple[AxisRef, ...]
    unreduced: tuple[AxisRef, ...]
    reduction: str
    _hash: int
    #: The Rust core's sharding (``_native.Sharding``), made when first asked for (``_native_sharding``).
    _core: _native.Sharding | None

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
        self._init(_hash=hash((TensorSharding, name, mesh, dims, rep, unr, reduction)), _core=None)

    def _check(self) -> None:
        # Equal shardings are equally valid: programs repeat a few shardings many times, so
        # each distinct one is validated once (the set is bounded and then starts over).
        if self in _CHECKED:
            return
        if self.mesh is not None:
            self._native_sharding().validate(self.mesh._core)
        else:
            self._native_sharding().check_local()
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED.add(self)

    @classmethod
    def _from_core(cls, core: _native.Sharding, mesh: Mesh | None) -> TensorSharding:
        """The sharding of the Rust core's ``core``, bound to ``mesh`` (its inlined mesh when it
        has one); not checked again."""
        t = cls.__new__(cls)
        inline = core.inline_mesh
        if inline is not None:
            mesh = Mesh._from_core(inline)
        t._set(
            core.mesh_name,
            mesh,
            tuple(DimSharding._from_core(d) for d in core.dims),
            tuple(AxisRef._from_core(a) for a in core.replicated),
            tuple(AxisRef._from_core(a) for a in core.unreduced),
            core.reduction,
        )
        object.__setattr__(t, "_core", core)
        return t

    def _native_sharding(self) -> _native.Sharding:
        """The Rust core's sharding of this one (made once): what crosses the FFI."""
        core = self._core
        if core is None:
            inline = self.mesh._core if self.mesh_name is None and self.mesh is not None else None
            core = _native.Sharding(
                self.mesh_name,
                inline,
                [d._native_dim() for d in self.dims],
                [a._core for a in self.replicated],
                [a._core for a in self.unreduced],
                self.reduction,
            )
            object.__setattr__(self, "_core", core)
        return core

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
            core_meshes, single = _mesh_table(meshes)
            if single is not None:
                t = cls._from_core(_native.Sharding.parse(text, None), None)
                return t if t.mesh is not None else t.bind(single)
            core = _native.Sharding.parse(text, core_meshes)
        except UnicodeEncodeError as e:
            raise text_error(text, e, "a sharding") from None
        return cls._from_core(core, _lookup(meshes, core.mesh_name))

    @classmethod
    def parse_per_value(cls, text: str, meshes: Meshes = None) -> tuple[TensorSharding, ...]:
        """Parses ``#sdy.sharding_per_value<[<@mesh, [...]>, ...]>`` (or the stripped ``[...]``)."""
        try:
            core_meshes, single = _mesh_table(meshes)
            if single is not None:
                ts = (cls._from_core(c, None) for c in _native.Sharding.parse_per_value(text, None))
                return tuple(t if t.mesh is not None else t.bind(single) for t in ts)
            cores = _native.Sharding.parse_per_value(text, core_meshes)
        except UnicodeEncodeError as e:
            raise text_error(text, e, "shardings") from None
        return tuple(cls._from_core(c, _lookup(meshes, c.mesh_name)) for c in cores)

    @staticmethod
    def print_per_value(shardings: Iterable[TensorSharding]) -> str:
        """``#sdy.sharding_per_value<[<...>, ...]>`` of several shardings (one per op result)."""
        return _native.Sharding.print_per_value([s._native_sharding() for s in shardings])

    def __str__(self) -> str:
        return str(self._native_sharding())

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
        self._native_sharding().validate(mesh._core, None if shape is None else _shape(shape), user)

    # ------------------------------------------------------------------ per-device view

    def local_shape(self, shape: Sequence[int], *, meshes: Meshes = None) -> tuple[int, ...]:
        """Per-device shape: a dim of size ``d`` split ``n`` ways holds ``ceil(d / n)`` elements
        (the last shards are padded when ``n`` does not divide ``d``)."""
        mesh = self.resolve_mesh(meshes)
        return tuple(self._native_sharding().local_shape(mesh._core, _shape(shape)))

    def device_ranges(self, shape: Sequence[int], device: int, *, meshes: Meshes = None) -> tuple[tuple[int, int], ...]:
        """``[start, stop)`` per dimension of the global tensor held by ``device`` (empty ranges
        for shards that lie wholly in the padding). ``MeshError`` if the device is not in the mesh."""
        mesh = self.resolve_mesh(meshes)
        dims = _shape(shape)
        if isinstance(device, int) and not 0 <= device < 2**63:
            raise MeshError(f"device {device} is not in the mesh (devices 0..{mesh.size})")
        return tuple(self._native_sharding().device_ranges(mesh._core, dims, device))

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
    return {k: m._core for k, m in meshes.items()}, None


def _lookup(meshes: Meshes, name: str | None) -> Mesh | None:
    if name is None or meshes is None or isinstance(meshes, Mesh):
        return None
    return meshes.get(name)


def _unpickle(text: str, mesh: Mesh | None) -> TensorSharding:
    t = TensorSharding.parse(text)
    return t if mesh is None or t.mesh is not None else t.bind(mesh)
