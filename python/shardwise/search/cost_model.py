"""What a strategy costs: compute seconds, its own collectives, memory per device, and the
resharding cost of an edge (the device model of the auto-sharding search).

Formulas (``shards`` = product of the sizes of all mesh axes a strategy uses; every kept
strategy divides its factors exactly, ``strategies.py``):

* ``dot_general`` / ``convolution``: ``2 · Π(all factor sizes) / shards`` FLOPs (one multiply
  and one add per point of the iteration space; Alpa / the hidet RFC count matmuls the same way);
* ``reduce`` / ``reduce_window``: ``Σ elements of the reduced inputs per device`` (one
  combine per input element);
* data movement (:data:`ZERO_FLOP_OPS`: reshape, transpose, broadcast, slice, constant, …): 0;
* every other op (elementwise and the rest): ``Σ elements of its results per device``;
* compute seconds = FLOPs per device / ``DeviceModel.flop_rate``;
* an op whose strategy shards reduction factors ends with an all-reduce over those axes of
  each result's local bytes: ``CostModel.cost("all_reduce", ...)`` (``spmd/redistribute.py``,
  alpha-beta ring volumes; the same function the partitioner charges);
* memory per device = bytes of the op's results per device (an argument: its own bytes);
  operands regathered for one op are transient and not counted;
* edge cost = ``plan_reshard(mesh, shape, dtype, producer's result, consumer's operand).seconds``,
  the redistribution planner's cheapest collective sequence (MindSpore "Tensor
  Redistribution"; hidet RFC ``connect``);
* overlap (``DeviceModel.overlap`` = ``α``, default 0: none): the collectives next to a
  matmul or convolution (the reshards of its operands, its own all-reduce or reduce-scatter)
  run in pieces beside pieces of its compute, as a collective matmul does (Wang et al.,
  "Overlap Communication with Dependent Computation via Decomposition in Large Deep Learning
  Models", ASPLOS 2023; XLA's windowed einsum). Its compute ``p`` is shared equally by the
  ``k`` tensor operands' reshards and its own collective: each communication term ``c`` next
  to it costs ``c − min(c, α · p / (k + 1))`` (``OpCost.hide`` = ``α · p / (k + 1)``), so at
  most ``α · p`` seconds are hidden per op and a term never goes below 0. Bytes are unchanged.

Costs enter the strategy graph as integer picoseconds (:data:`PS`), memory as bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from shardwise.errors import ProgramError, SearchError, ShardwiseError
from shardwise.ir.core import Op, Value
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.rules.rule import OpShardingRule
from shardwise.search.strategies import Strategy
from shardwise.sharding import TensorSharding
from shardwise.spmd.redistribute import CostModel, ReshardPlan, dtype_bytes, plan_reshard

__all__ = ["DEFAULT_FLOP_RATE", "PS", "DeviceModel", "OpCost", "ReshardCache", "op_cost", "value_bytes"]

#: Default device FLOP rate: 100 TFLOP/s (the order of one current accelerator's dense bf16 rate).
DEFAULT_FLOP_RATE = 100e12
#: Picoseconds per second: costs in the strategy graph are integer picoseconds.
PS = 1e12

#: Ops counted as 0 FLOPs (they only move or create data).
ZERO_FLOP_OPS = frozenset(
    "stablehlo." + n
    for n in (
        "constant", "iota", "reshape", "transpose", "broadcast_in_dim", "broadcast", "slice", "dynamic_slice",
        "dynamic_update_slice", "concatenate", "pad", "reverse", "bitcast_convert", "get_tuple_element", "tuple",
        "optimization_barrier", "copy",
    )
) | frozenset({"sdy.sharding_constraint", "sdy.reshard", "sdy.propagation_barrier"})  # fmt: skip

_MATMUL_OPS = frozenset({"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"})
_REDUCE_OPS = frozenset({"stablehlo.reduce", "stablehlo.reduce_window"})


@dataclass(frozen=True)
class DeviceModel:
    """One device of the mesh: ``flop_rate`` (FLOP/s, default :data:`DEFAULT_FLOP_RATE`),
    ``cost_model`` (per-axis alpha-beta links, default ``CostModel()``: 100 GB/s, 5 us) and
    ``memory`` (bytes per device, ``None`` for no limit; ``auto_shard``'s ``memory_budget``
    overrides it), ``overlap`` (share of a matmul's compute its adjacent collectives hide
    behind, 0 to 1). Raises :class:`SearchError` for a rate that is not finite and > 0, a
    negative memory or an overlap outside [0, 1]."""

    flop_rate: float = DEFAULT_FLOP_RATE
    cost_model: CostModel = field(default_factory=CostModel)
    memory: int | None = None
    #: Share (0 to 1) of a matmul's or convolution's compute that its adjacent collectives can
    #: hide behind (module docstring: collective matmul); 0 charges them in full.
    overlap: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.flop_rate, (int, float)) and 0 < self.flop_rate < float("inf")):
            raise SearchError(f"DeviceModel.flop_rate: expected a finite FLOP/s > 0, got {self.flop_rate!r}")
        if (
            isinstance(self.overlap, bool)
            or not isinstance(self.overlap, (int, float))
            or not 0.0 <= self.overlap <= 1.0
        ):
            raise SearchError(f"DeviceModel.overlap: expected a share from 0 to 1, got {self.overlap!r}")
        if self.memory is not None and (
            isinstance(self.memory, bool) or not isinstance(self.memory, int) or self.memory < 0
        ):
            raise SearchError(f"DeviceModel.memory: expected bytes >= 0 (an int) or None, got {self.memory!r}")


@dataclass(frozen=True)
class OpCost:
    """A strategy's own costs: ``flops`` per device, ``compute_seconds``, ``comm_bytes`` /
    ``comm_seconds`` of its all-reduce (0 without sharded reduction factors), ``memory`` bytes
    per device of its results, ``hide``: the seconds of compute each adjacent communication
    term may hide behind (``DeviceModel.overlap``; 0 for ops that are not matmuls)."""

    flops: float
    compute_seconds: float
    comm_bytes: float
    comm_seconds: float
    memory: int
    hide: float = 0.0

    @property
    def hidden_seconds(self) -> float:
        """Seconds of the own collective hidden behind the compute."""
        return min(self.comm_seconds, self.hide)

    @property
    def seconds(self) -> float:
        return self.compute_seconds + self.comm_seconds - self.hidden_seconds

    def exposed(self, seconds: float) -> float:
        """What an adjacent reshard of ``seconds`` costs once hidden behind this op's compute."""
        return seconds - min(seconds, self.hide)


def _local_elements(v: Value, sharding: TensorSharding, mesh: Mesh) -> int:
    t = v.type
    if not isinstance(t, TensorType):
        return 0
    n = 1
    for size, dim in zip(t.shape, sharding.dims):
        split = 1
        for a in dim.axes:
            split *= a.full_size(mesh)
        n *= -(-max(size, 0) // split)
    return n


def value_bytes(v: Value) -> int:
    """Bytes per element of ``v`` (0 for a non-tensor value). Raises :class:`ProgramError`
    naming the value for an element type without a known size."""
    t = v.type
    if not isinstance(t, TensorType):
        return 0
    try:
        return dtype_bytes(t.element_type)
    except ShardwiseError as e:
        raise ProgramError(f"{v}: cannot size element type {t.element_type!r} for the cost model: {e}") from None


def local_bytes(v: Value, sharding: TensorSharding, mesh: Mesh) -> int:
    """Bytes of ``v`` each device holds under ``sharding`` (padded up when not divisible)."""
    return _local_elements(v, sharding, mesh) * value_bytes(v)


def _flops(op: Op, rule: OpShardingRule | None, s: Strategy, mesh: Mesh) -> float:
    if op.name in ZERO_FLOP_OPS:
        return 0.0
    if op.name in _MATMUL_OPS and rule is not None:
        total = 2.0
        for size in rule.factor_sizes:
            total *= max(size, 0)
        return total / s.shards
    if op.name in _REDUCE_OPS:
        inputs = op.operands[: len(op.operands) // 2]
        return float(sum(_local_elements(v, sh, mesh) for v, sh in zip(inputs, s.operands)))
    return float(sum(_local_elements(v, sh, mesh) for v, sh in zip(op.results, s.results)))


def op_cost(op: Op, rule: OpShardingRule | None, s: Strategy, mesh: Mesh, device: DeviceModel) -> OpCost:
    """The costs of ``op`` under strategy ``s`` (formulas in the module docstring)."""
    flops = _flops(op, rule, s, mesh)
    memory = sum(local_bytes(v, sh, mesh) for v, sh in zip(op.results, s.results))
    cb = cs = 0.0
    if s.reduction_axes:
        kind = "reduce_scatter" if s.scatter_dims else "all_reduce"
        for v, sh in zip(op.results, s.results):
            # Both collectives are charged on the bytes each device holds before the reduction
            # (a reduce-scatter's result is that divided by the reduction axes' product).
            before = local_bytes(v, sh, mesh) * (_axes_size(mesh, s.reduction_axes) if s.scatter_dims else 1)
            b, sec = device.cost_model.cost(kind, mesh, s.reduction_axes, before)
            cb += b
            cs += sec
    compute = flops / device.flop_rate
    hide = 0.0
    if device.overlap and op.name in _MATMUL_OPS:
        tensors = sum(1 for v in op.operands if isinstance(v.type, TensorType))
        hide = device.overlap * compute / (tensors + 1)
    return OpCost(flops, compute, cb, cs, memory, hide)


def _axes_size(mesh: Mesh, axes: Sequence[str]) -> int:
    n = 1
    for a in axes:
        n *= mesh.axis_size(a)
    return n


class ReshardCache:
    """``plan_reshard`` memoised by (shape, dtype, source, target): a program repeats a few
    shapes and shardings on many edges."""

    def __init__(self, mesh: Mesh, cost_model: CostModel) -> None:
        self.mesh = mesh
        self.cost_model = cost_model
        self._plans: dict[tuple[tuple[int, ...], str, TensorSharding, TensorSharding], ReshardPlan] = {}

    def plan(self, shape: Sequence[int], dtype: str, src: TensorSharding, tgt: TensorSharding) -> ReshardPlan:
        key = (tuple(shape), dtype, src, tgt)
        p = self._plans.get(key)
        if p is None:
            p = plan_reshard(self.mesh, shape, dtype, src, tgt, self.cost_model)
            self._plans[key] = p
        return p

    def __len__(self) -> int:
        return len(self._plans)
