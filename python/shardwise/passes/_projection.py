"""A sharding projection (Shardy's ``ShardingProjection``,
``transforms/propagation/sharding_projection.cc``): the shardings of an op's operands and
results seen per factor of the op's sharding rule. Used by the export passes; the propagation
engine has its own."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shardwise.ir.sdy import make_sharding
from shardwise.mesh import Mesh
from shardwise.passes import _axes
from shardwise.rules.rule import OpShardingRule
from shardwise.sharding import AxisRef, DimSharding, TensorSharding

TensorMapping = tuple[tuple[int, ...], ...]


@dataclass
class FactorSharding:
    """The axes of one factor in one tensor (Shardy's ``FactorSharding``)."""

    axes: list[AxisRef] = field(default_factory=list)
    closed: bool = False
    minor_most: bool = False
    overflow: list[AxisRef] = field(default_factory=list)


@dataclass
class TensorFactorShardings:
    """The factor shardings of one tensor (Shardy's ``TensorFactorShardings``)."""

    factors: dict[int, FactorSharding] = field(default_factory=dict)
    replicated: tuple[AxisRef, ...] = ()
    unreduced: tuple[AxisRef, ...] = ()

    def axes_of(self, factor: int) -> list[AxisRef] | None:
        """The axes of ``factor`` in this tensor, ``None`` if the tensor lacks it."""
        f = self.factors.get(factor)
        return None if f is None else f.axes


def add_axis_or_merge(axes: list[AxisRef], a: AxisRef, mesh: Mesh) -> None:
    """Shardy's ``addAxisOrMerge``: appends ``a``, merged into the last axis when adjacent."""
    if axes and _axes.can_merge(axes[-1], a):
        axes[-1] = _axes.merge(axes[-1], a, mesh)
    else:
        axes.append(a)


def _info(axes: tuple[AxisRef, ...], i: int, mesh: Mesh) -> list[int | None] | None:
    if i >= len(axes):
        return None
    a = axes[i]
    return [_axes.size(a, mesh), a.pre_size]


def _sub(name: str, info: list[int | None], mesh: Mesh) -> AxisRef:
    size, pre = info
    assert size is not None
    if pre is None:
        return AxisRef(name)
    return AxisRef(name, pre, size)


def _add_remaining(
    out: list[AxisRef], info: list[int | None] | None, axes: tuple[AxisRef, ...], i: int, mesh: Mesh
) -> None:
    while info is not None:
        add_axis_or_merge(out, _sub(axes[i].name, info, mesh), mesh)
        i += 1
        info = _info(axes, i, mesh)


def build_tensor(
    mapping: TensorMapping,
    sharding: TensorSharding | None,
    factor_sizes: tuple[int, ...],
    mesh: Mesh,
    closed_if_missing: bool,
) -> TensorFactorShardings:
    """Shardy's ``buildTensorFactorShardings``."""
    out = TensorFactorShardings()
    for dim, factors in enumerate(mapping):
        axes = sharding.dims[dim].axes if sharding is not None else ()
        closed = sharding.dims[dim].closed if sharding is not None else closed_if_missing
        i = 0
        info = _info(axes, i, mesh)
        overflowed = False
        for k, f in enumerate(factors):
            fs = out.factors.setdefault(f, FactorSharding())
            fs.minor_most = k == len(factors) - 1
            if overflowed:
                fs.closed = True
                break
            fs.closed = closed
            remaining = factor_sizes[f]
            if fs.minor_most:
                _add_remaining(fs.axes, info, axes, i, mesh)
                break
            while info is not None:
                size = info[0]
                assert size is not None
                g = 1
                if size != 1:
                    g = math.gcd(remaining, size)
                    if g <= 1:
                        break
                name = axes[i].name
                if size > g:
                    pre = info[1] if info[1] is not None else 1
                    sub = AxisRef(name, pre, g)
                    info[1] = pre * g
                    info[0] = size // g
                    remaining //= g
                else:
                    sub = _sub(name, info, mesh)
                    remaining //= size
                    i += 1
                    info = _info(axes, i, mesh)
                fs.axes.append(sub)
            if remaining > 1 and info is not None:
                overflowed = True
                _add_remaining(fs.overflow, info, axes, i, mesh)
    if sharding is not None:
        out.replicated = sharding.replicated
        out.unreduced = sharding.unreduced
    return out


@dataclass
class Projection:
    """Operand and result factor shardings of an op (Shardy's ``ShardingProjection``)."""

    operands: list[TensorFactorShardings]
    results: list[TensorFactorShardings]

    @property
    def tensors(self) -> list[TensorFactorShardings]:
        """Operands then results."""
        return self.operands + self.results


def build(
    operands: list[TensorSharding | None],
    results: list[TensorSharding | None],
    rule: OpShardingRule,
    mesh: Mesh,
    closed_if_missing: bool = False,
) -> Projection:
    """Shardy's ``ShardingProjection::build``."""
    return Projection(
        [
            build_tensor(m, s, rule.factor_sizes, mesh, closed_if_missing)
            for s, m in zip(operands, rule.operand_mappings)
        ],
        [build_tensor(m, s, rule.factor_sizes, mesh, closed_if_missing) for s, m in zip(results, rule.result_mappings)],
    )


def create_sharding(
    t: TensorFactorShardings, mapping: TensorMapping, factor_sizes: tuple[int, ...], mesh_name: str, mesh: Mesh
) -> TensorSharding:
    """Shardy's ``TensorFactorShardings::createTensorShardingAttr``."""
    dims: list[DimSharding] = []
    for factors in mapping:
        closed = False
        axes: list[AxisRef] = []
        for f in factors:
            fs = t.factors[f]
            closed |= fs.closed
            sharded = 1
            for k, a in enumerate(fs.axes):
                sharded *= _axes.size(a, mesh)
                if k == 0:
                    add_axis_or_merge(axes, a, mesh)
                else:
                    axes.append(a)
            if fs.overflow:
                for k, a in enumerate(fs.overflow):
                    if k == 0:
                        add_axis_or_merge(axes, a, mesh)
                    else:
                        axes.append(a)
                break
            if sharded < factor_sizes[f]:
                break
        dims.append(DimSharding(axes, closed))
    return make_sharding((mesh_name, mesh), dims, t.replicated, t.unreduced)


def contains_overflow(p: Projection) -> tuple[list[bool], list[bool]]:
    """Shardy's ``tensorsContainOverflowAxes``: which operands/results have overflow axes."""
    return (
        [any(f.overflow for f in t.factors.values()) for t in p.operands],
        [any(f.overflow for f in t.factors.values()) for t in p.results],
    )


def update_sharding(
    p: Projection, factor: int, axes: list[AxisRef], overflow: list[AxisRef]
) -> tuple[list[bool], list[bool]]:
    """Shardy's ``ShardingProjection::updateSharding``: sets the factor's axes in every tensor
    that has it; which tensors changed."""

    def one(t: TensorFactorShardings) -> bool:
        fs = t.factors.get(factor)
        if fs is None or (fs.axes == axes and fs.overflow == overflow):
            return False
        fs.axes = list(axes)
        fs.overflow = list(overflow)
        return True

    return ([one(t) for t in p.operands], [one(t) for t in p.results])


def sharding_size(t: TensorFactorShardings, mesh: Mesh) -> int:
    """Shardy's ``TensorFactorShardings::getShardingSize``."""
    n = 1
    for fs in t.factors.values():
        for a in [*fs.axes, *fs.overflow]:
            n *= _axes.size(a, mesh)
    return n


def distribute_axes(
    shardings: list[FactorSharding], factor_sizes: list[int], all_axes: list[AxisRef], mesh: Mesh
) -> None:
    """Shardy's ``distributeAxesAcrossFactors``: each axis (or the largest fitting part of it)
    goes to the first factor with room; what fits nowhere becomes overflow of the last."""
    if not shardings:
        return
    remaining = list(factor_sizes)
    axes = tuple(all_axes)
    i = 0
    info = _info(axes, i, mesh)
    while info is not None:
        used = False
        for k, fs in enumerate(shardings):
            if remaining[k] <= 1:
                continue
            size = info[0]
            assert size is not None
            g = math.gcd(remaining[k], size)
            if g == 1 and size != 1:
                continue
            used = True
            name = axes[i].name
            if size > g:
                pre = info[1] if info[1] is not None else 1
                add_axis_or_merge(fs.axes, AxisRef(name, pre, g), mesh)
                info[1] = pre * g
                info[0] = size // g
                remaining[k] //= g
            else:
                add_axis_or_merge(fs.axes, _sub(name, info, mesh), mesh)
                remaining[k] //= size
                i += 1
                info = _info(axes, i, mesh)
                break
        if not used:
            _add_remaining(shardings[-1].overflow, info, axes, i, mesh)
            break


def greatest_common_prefix(a: list[AxisRef], b: list[AxisRef]) -> list[AxisRef]:
    """Shardy's ``getGreatestCommonPrefix`` of two axis lists."""
    out: list[AxisRef] = []
    for x, y in zip(a, b):
        if x == y:
            out.append(x)
            continue
        if _axes.can_coexist(x, y):
            if _prefix_of(x, y):
                out.append(x)
            elif _prefix_of(y, x):
                out.append(y)
        break
    return out


def _prefix_of(a: AxisRef, b: AxisRef) -> bool:
    return b.contains(a) and _axes.pre_size(a) == _axes.pre_size(b)


def common_prefix_axes(p: Projection, num_factors: int) -> list[list[AxisRef]]:
    """Shardy's ``getGreatestCommonPrefixAxes``."""
    out: list[list[AxisRef]] = [[] for _ in range(num_factors)]
    seen = [False] * num_factors
    for t in p.tensors:
        for f, fs in t.factors.items():
            if not seen[f]:
                out[f] = list(fs.axes)
                seen[f] = True
            else:
                out[f] = greatest_common_prefix(out[f], fs.axes)
    return out
