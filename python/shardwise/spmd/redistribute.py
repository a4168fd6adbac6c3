"""Tensor redistribution (``connect``): the cheapest sequence of collectives that turns a
tensor sharded one way into the same tensor sharded another way on one mesh.

The planner is in Rust (``rust/src/redistribution/``); this module gives it a Python face.
Collectives and their semantics are Shardy's (``sdy.all_gather``, ``sdy.all_slice``,
``sdy.all_to_all``, ``sdy.collective_permute``, ``sdy.all_reduce``, ``sdy.reduce_scatter``;
``shardy/dialect/sdy/ir/ops.td``); sources: issue 6 "Redistribution", the hidet RFC
("Parameter Sharding and Communication Op Injection", ``connect``), MindSpore "Tensor
Redistribution", the Shardonnay RFC "SPMD Partitioner".

Cost model (alpha-beta per mesh axis; standard ring volumes, Thakur, Rabenseifner and Gropp,
IJHPCA 2005). ``s`` is the bytes of the local (padded) buffer each device holds *before* the
collective and ``n`` the group size (product of the sizes of the axes involved):

* all-gather: ``(n-1)*s`` bytes sent per device (``(n-1)/n`` of the gathered size ``n*s``);
* all-slice: 0 (a local dynamic slice);
* all-to-all: ``(n-1)/n*s`` (``(n-1)/n**2`` of the group's ``n*s``);
* collective-permute: ``s``;
* all-reduce: ``2*(n-1)/n*s``;
* reduce-scatter: ``(n-1)/n*s`` (``s`` the unscattered input).

Seconds = latency + bytes / (bandwidth of the slowest axis involved); latency is
``sum(alpha_a * (n_a - 1))`` over the (sub-)axes ``a`` of sizes ``n_a`` in the group (twice that
for all-reduce; one ``max(alpha_a)`` for a collective-permute).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shardwise import _native
from shardwise.errors import ShardwiseError
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef, TensorSharding

DEFAULT_BANDWIDTH = 100e9
"""Default link bandwidth in bytes per second (100 GB/s)."""

DEFAULT_LATENCY = 5e-6
"""Default per-message latency alpha in seconds (5 us)."""

COLLECTIVES = ("all_gather", "all_slice", "all_to_all", "collective_permute", "all_reduce", "reduce_scatter")
"""The collective kinds, as Shardy names its ops (``sdy.<kind>``)."""


@dataclass(frozen=True)
class Link:
    """A mesh axis' links: ``bandwidth`` in bytes per second (> 0) and ``latency`` alpha in
    seconds per message (>= 0)."""

    bandwidth: float = DEFAULT_BANDWIDTH
    latency: float = DEFAULT_LATENCY

    def __post_init__(self) -> None:
        if not (isinstance(self.bandwidth, (int, float)) and self.bandwidth > 0 and self.bandwidth != float("inf")):
            raise ShardwiseError(f"Link bandwidth must be a finite number of bytes/s > 0, got {self.bandwidth!r}")
        if not (isinstance(self.latency, (int, float)) and 0 <= self.latency < float("inf")):
            raise ShardwiseError(f"Link latency must be a finite number of seconds >= 0, got {self.latency!r}")


@dataclass(frozen=True)
class CostModel:
    """Per-axis alpha-beta costs: ``default`` for every axis, ``axes`` overriding by mesh axis
    name (e.g. ``CostModel(axes={"dp": Link(25e9, 10e-6)})`` for a slower data-parallel axis).
    Defaults: 100 GB/s and 5 us (``DEFAULT_BANDWIDTH``, ``DEFAULT_LATENCY``)."""

    default: Link = field(default_factory=Link)
    axes: Mapping[str, Link] = field(default_factory=dict)

    def link(self, axis: str) -> Link:
        """The link of mesh axis ``axis``."""
        return self.axes.get(axis, self.default)

    def _native_model(self) -> _native.CostModel:
        def link(x: Link) -> _native.Link:
            return _native.Link(float(x.bandwidth), float(x.latency))

        return _native.CostModel(link(self.default), [(name, link(x)) for name, x in self.axes.items()])

    def cost(self, kind: str, mesh: Mesh, axes: Sequence[AxisRef | str], local_bytes: float) -> tuple[float, float]:
        """``(bytes sent per device, seconds)`` of collective ``kind`` (one of ``COLLECTIVES``)
        over the group of ``axes`` of ``mesh`` on a local buffer of ``local_bytes`` per device
        before the collective (formulas in the module docstring; the same Rust function the
        planner uses). Raises ``ShardwiseError`` for an unknown kind or negative bytes,
        ``InvalidShardingError`` for an axis the mesh lacks, ``MeshError`` when an override
        names an axis the mesh lacks."""
        refs = [a if isinstance(a, AxisRef) else AxisRef(a) for a in axes]
        b, s = _native.collective_cost(
            kind, mesh._core, [a._core for a in refs], float(local_bytes), self._native_model()
        )
        return float(b), float(s)


@dataclass(frozen=True)
class ReshardStep:
    """One collective of a plan.

    ``kind``: one of ``COLLECTIVES``. ``dim_axes``: per tensor dimension, the axes gathered
    (all_gather), sliced (all_slice) or reduce-scattered (reduce_scatter); empty otherwise.
    ``axes``: the axes moved by an all_to_all (from ``src_dim`` to ``tgt_dim``), reduced by an
    all_reduce, or whose place changes in a collective_permute. ``reduction``: "sum", "max" or
    "min" for all_reduce / reduce_scatter. ``out``: the sharding after the step. ``bytes``:
    bytes each device sends; ``seconds``: under the cost model. ``text``: Shardy's op syntax
    without operand and type."""

    kind: str
    dim_axes: tuple[tuple[AxisRef, ...], ...]
    axes: tuple[AxisRef, ...]
    src_dim: int | None
    tgt_dim: int | None
    reduction: str | None
    out: TensorSharding
    bytes: float
    seconds: float
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class ReshardPlan:
    """Ordered steps from the source to the target sharding. ``bytes`` / ``seconds``: totals
    per device; ``naive_bytes`` / ``naive_seconds``: those of gathering everything (after
    reducing partial axes) and slicing the target, which the plan never exceeds in bytes."""

    steps: tuple[ReshardStep, ...]
    bytes: float
    seconds: float
    naive_bytes: float
    naive_seconds: float

    @property
    def text(self) -> str:
        """One step per line, in Shardy's collective syntax."""
        return "\n".join(s.text for s in self.steps)

    def __str__(self) -> str:
        return self.text or "(no collectives)"

    def __len__(self) -> int:
        return len(self.steps)


_DTYPE_BYTES = {
    "i1": 1, "bool": 1, "i8": 1, "ui8": 1, "int8": 1, "uint8": 1, "f8e4m3fn": 1, "f8e5m2": 1,
    "i16": 2, "ui16": 2, "int16": 2, "uint16": 2, "f16": 2, "bf16": 2, "float16": 2, "bfloat16": 2,
    "i32": 4, "ui32": 4, "int32": 4, "uint32": 4, "f32": 4, "float32": 4,
    "i64": 8, "ui64": 8, "int64": 8, "uint64": 8, "f64": 8, "float64": 8, "complex64": 8,
    "complex<f32>": 8, "complex128": 16, "complex<f64>": 16,
}  # fmt: skip


def dtype_bytes(dtype: Any) -> int:
    """Bytes per element of ``dtype``: an int (bytes itself), an MLIR or numpy type name
    (``"f32"``, ``"bf16"``, ``"float32"``) or anything with an ``itemsize`` (numpy dtypes).
    Raises ``ShardwiseError`` for anything else."""
    if isinstance(dtype, bool):
        raise ShardwiseError(f"dtype must be a type name, an itemsize or a byte count, got {dtype!r}")
    if isinstance(dtype, int):
        if dtype < 1:
            raise ShardwiseError(f"dtype byte count must be at least 1, got {dtype}")
        return dtype
    if isinstance(dtype, str):
        if dtype in _DTYPE_BYTES:
            return _DTYPE_BYTES[dtype]
        raise ShardwiseError(f"unknown dtype {dtype!r}; expected one of {sorted(_DTYPE_BYTES)} or a byte count")
    size = getattr(dtype, "itemsize", None)
    if isinstance(size, int) and size >= 1:
        return size
    raise ShardwiseError(f"dtype must be a type name, an itemsize or a byte count, got {dtype!r}")


def plan_reshard(
    mesh: Mesh,
    shape: Sequence[int],
    dtype: Any,
    src: TensorSharding,
    tgt: TensorSharding,
    model: CostModel | None = None,
) -> ReshardPlan:
    """The cheapest plan (by seconds under ``model``, default ``CostModel()``; ties broken by
    bytes) that redistributes a tensor of static ``shape`` and element type ``dtype`` (see
    ``dtype_bytes``) from sharding ``src`` to ``tgt`` on ``mesh``.

    Handles sub-axes, axes reordered within or moved between dimensions, replicated <-> sharded,
    partial (unreduced) -> replicated or sharded (all-reduce / reduce-scatter), and dimensions
    not divisible by their shard count (padded shards of ``ceil(d / n)``; bytes count the
    padding). The plan never sends more bytes per device than ``naive_bytes``.

    Raises ``MeshError`` (a sharding on another mesh; a cost-model axis the mesh lacks),
    ``InvalidShardingError`` (an invalid sharding for ``mesh`` / ``shape``, a rank mismatch,
    a dynamic dimension (rule ``dynamic-dim``), target unreduced axes the source does not have
    (rule ``unreduced-target``), a reduction mismatch), ``ShardwiseError`` (bad ``dtype``).
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a Mesh, got {type(mesh).__name__}")
    for name, t in (("src", src), ("tgt", tgt)):
        if not isinstance(t, TensorSharding):
            raise TypeError(f"{name} must be a TensorSharding, got {type(t).__name__}")
    model = CostModel() if model is None else model
    plan = _native.redistribution_plan(
        mesh._core,
        [int(s) for s in shape],
        dtype_bytes(dtype),
        src._native_sharding(),
        tgt._native_sharding(),
        model._native_model(),
    )
    steps = tuple(
        ReshardStep(
            kind=step.kind,
            dim_axes=tuple(tuple(AxisRef._from_core(a) for a in d) for d in step.dim_axes),
            axes=tuple(AxisRef._from_core(a) for a in step.axes),
            src_dim=step.src_dim,
            tgt_dim=step.tgt_dim,
            reduction=step.reduction,
            out=TensorSharding._from_core(step.out, mesh),
            bytes=step.bytes,
            seconds=step.seconds,
            text=step.text,
        )
        for step in plan.steps
    )
    return ReshardPlan(steps, plan.bytes, plan.seconds, plan.naive_bytes, plan.naive_seconds)


__all__ = [
    "COLLECTIVES",
    "DEFAULT_BANDWIDTH",
    "DEFAULT_LATENCY",
    "CostModel",
    "Link",
    "ReshardPlan",
    "ReshardStep",
    "dtype_bytes",
    "plan_reshard",
]
