"""The common sharding of an op's factors that Shardy's explicit-reshard insertion picks when
its operands and results disagree (``findCommonAxes`` and its heuristic in
``transforms/export/explicit_reshards_util.cc``, over ``AxisListRef`` of
``shardy/dialect/sdy/ir/axis_list_ref.cc``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shardwise.mesh import Mesh
from shardwise.passes import _axes
from shardwise.passes._projection import Projection, TensorFactorShardings, add_axis_or_merge, sharding_size
from shardwise.rules.rule import OpShardingRule
from shardwise.sharding import AxisRef

AxesPerFactor = list[list[AxisRef]]


def _prefix_of(a: AxisRef, b: AxisRef) -> bool:
    return b.contains(a) and _axes.pre_size(a) == _axes.pre_size(b)


def _list_key(axes: list[AxisRef]) -> tuple[object, ...]:
    return (len(axes), tuple(_axes.key(a) for a in axes))


def strict_prefix_of(a: list[AxisRef], b: list[AxisRef]) -> bool:
    """``AxisListRef::strictPrefixOf``: ``a`` is a strict prefix of ``b`` (its last axis
    possibly a prefix sub-axis of ``b``'s axis there)."""
    if not a:
        return bool(b)
    if len(a) > len(b):
        return False
    if any(x != y for x, y in zip(a[:-1], b[: len(a) - 1])):
        return False
    tail = a[-1]
    if len(a) == len(b):
        return tail != b[-1] and _prefix_of(tail, b[-1])
    return _prefix_of(tail, b[len(a) - 1])


def _size(axes: list[AxisRef], mesh: Mesh) -> int:
    n = 1
    for a in axes:
        n *= _axes.size(a, mesh)
    return n


def _prefix_without_overlap(a: AxisRef, others: list[AxisRef], mesh: Mesh) -> AxisRef | None:
    result: AxisRef | None = a
    for o in others:
        assert result is not None
        result = _axes.prefix_without_overlap(result, o, mesh)
        if result is None:
            return None
    return result


def truncate_without_overlap(axes: list[AxisRef], other: list[AxisRef], mesh: Mesh) -> bool:
    """``AxisListRef::truncateWithoutOverlap`` in place; whether ``axes`` changed."""
    for i, a in enumerate(axes):
        prefix = _prefix_without_overlap(a, other, mesh)
        if prefix != a:
            del axes[i:]
            if prefix is not None:
                axes.append(prefix)
            return True
    return False


def _precedence(rule: OpShardingRule, f: int) -> int:
    if f in rule.reduction_factors:
        return 2
    if f in rule.need_replication_factors:
        return 0
    if f in rule.permutation_factors:
        return 1
    return 3


@dataclass
class _Candidate:
    factor: int
    axes: list[AxisRef]
    total: int = 0
    precedence: int = 0
    size: int = 0

    def key(self) -> tuple[object, ...]:
        return (self.total, self.precedence, self.size, self.factor, _list_key(self.axes))


@dataclass
class _Bag:
    mesh: Mesh
    deps: dict[int, set[int]] = field(default_factory=dict)
    candidates: list[_Candidate] = field(default_factory=list)

    def valid(self, c: _Candidate) -> bool:
        d = self.deps.get(c.factor)
        return d is None or not d

    def best(self) -> _Candidate | None:
        best: _Candidate | None = None
        for c in self.candidates:
            if self.valid(c) and (best is None or best.key() < c.key()):
                best = c
        return best


def _candidates(proj: Projection, rule: OpShardingRule, sizes: list[int], mesh: Mesh) -> _Bag:
    bag = _Bag(mesh)
    for mapping in [*rule.operand_mappings, *rule.result_mappings]:
        for factors in mapping:
            for k in range(1, len(factors)):
                bag.deps.setdefault(factors[k], set()).add(factors[k - 1])
    pairs: dict[tuple[int, tuple[AxisRef, ...]], None] = {}
    for t in proj.tensors:
        for f, fs in t.factors.items():
            axes = list(fs.axes)
            while axes:
                pairs.setdefault((f, tuple(axes)), None)
                axes = axes[:-1]
    for f, axes_t in pairs:
        axes = list(axes_t)
        bag.candidates.append(_Candidate(f, axes, 0, _precedence(rule, f), _size(axes, mesh)))
    for size, t in zip(sizes, proj.tensors):
        for f, fs in t.factors.items():
            for c in bag.candidates:
                if c.factor == f and (c.axes == fs.axes or strict_prefix_of(c.axes, fs.axes)):
                    c.total += size
    return bag


def _heuristic(proj: Projection, rule: OpShardingRule, sizes: list[int], mesh: Mesh) -> AxesPerFactor:
    assigned: AxesPerFactor = [[] for _ in rule.factor_sizes]
    bag = _candidates(proj, rule, sizes, mesh)
    while bag.candidates:
        best = bag.best()
        if best is None:
            return assigned
        factor, best_axes = best.factor, list(best.axes)
        assigned[factor] = best_axes
        if _size(best_axes, mesh) == rule.factor_sizes[factor]:
            for d in bag.deps.values():
                d.discard(factor)
        i = 0
        while i < len(bag.candidates):
            c = bag.candidates[i]
            if c.factor == factor:
                if not strict_prefix_of(best_axes, c.axes):
                    bag.candidates[i] = bag.candidates[-1]
                    bag.candidates.pop()
                else:
                    c.size = _size(c.axes, mesh) // _size(best_axes, mesh)
                    i += 1
                continue
            if truncate_without_overlap(c.axes, best_axes, mesh):
                if c.axes == assigned[c.factor]:
                    bag.candidates[i] = bag.candidates[-1]
                    bag.candidates.pop()
                else:
                    c.size = _size(c.axes, mesh) // _size(assigned[c.factor], mesh)
                    i += 1
                continue
            c.size = _size(c.axes, mesh)
            i += 1
    return assigned


def _compatible(proj: Projection, f: int) -> list[AxisRef] | None:
    found: list[AxisRef] | None = None
    for t in proj.tensors:
        fs = t.factors.get(f)
        if fs is None:
            continue
        if found is not None and fs.axes != found:
            return None
        if found is None:
            found = fs.axes
    return list(found) if found is not None else []


def _compatible_all(proj: Projection, rule: OpShardingRule) -> AxesPerFactor | None:
    out: AxesPerFactor = [[] for _ in rule.factor_sizes]
    seen: list[AxisRef] = []
    for f in range(len(rule.factor_sizes)):
        c = _compatible(proj, f)
        if c is None:
            return None
        if f in rule.need_replication_factors:
            if c:
                return None
            continue
        if any(_axes.overlaps(a, b) for a in c for b in seen):
            return None
        out[f] = c
        seen.extend(c)
    return out


def _non_scalar(rule: OpShardingRule) -> list[int]:
    return [i for i, m in enumerate([*rule.operand_mappings, *rule.result_mappings]) if len(m) > 0]


def _has_sharded_permutation(t: TensorFactorShardings, rule: OpShardingRule) -> bool:
    return any(f in rule.permutation_factors and fs.axes for f, fs in t.factors.items())


def _truncate_by_overlaps(axes: list[AxisRef], others: list[AxisRef], mesh: Mesh) -> None:
    """Shardy's ``truncateAxesByRemovingOverlaps``."""
    for i, a in enumerate(axes):
        new = _prefix_without_overlap(a, others, mesh)
        if new is None:
            del axes[i:]
            return
        if new != a:
            axes[i] = new
            del axes[i + 1 :]
            return


def _unary(proj: Projection, rule: OpShardingRule, sizes: list[int], mesh: Mesh) -> AxesPerFactor:
    lhs, rhs = _non_scalar(rule)[:2]
    tensors = proj.tensors

    def pref(i: int) -> tuple[bool, int, int]:
        return (not _has_sharded_permutation(tensors[i], rule), sizes[i], sharding_size(tensors[i], mesh))

    preferred, other = (lhs, rhs) if pref(lhs) >= pref(rhs) else (rhs, lhs)
    out: AxesPerFactor = [[] for _ in rule.factor_sizes]
    in_preferred: list[AxisRef] = []
    for f, fs in tensors[preferred].factors.items():
        out[f] = list(fs.axes)
        in_preferred.extend(fs.axes)
    for f, fs in tensors[other].factors.items():
        if f not in tensors[preferred].factors:
            out[f] = list(fs.axes)
            _truncate_by_overlaps(out[f], in_preferred, mesh)
    return out


def _in_all_non_scalar(rule: OpShardingRule, f: int) -> bool:
    return all(any(f in d for d in m) for m in [*rule.operand_mappings, *rule.result_mappings] if len(m) > 0)


def _batching_factors(rule: OpShardingRule) -> list[int]:
    special = set(rule.reduction_factors) | set(rule.need_replication_factors) | set(rule.permutation_factors)
    return [f for f in range(len(rule.factor_sizes)) if f not in special and _in_all_non_scalar(rule, f)]


def _distribute_to_batching(axes: list[AxisRef], rule: OpShardingRule, mesh: Mesh, common: AxesPerFactor) -> None:
    todo = list(axes)
    for f in _batching_factors(rule):
        size = rule.factor_sizes[f]
        if size == 0:
            continue
        sharded = _size(common[f], mesh)
        if size % sharded != 0:
            continue
        capacity = size // sharded
        while todo:
            a = todo[0]
            asize = _axes.size(a, mesh)
            if capacity % asize != 0:
                break
            add_axis_or_merge(common[f], a, mesh)
            capacity //= asize
            todo.pop(0)
        if not todo:
            break


def find_common_axes(proj: Projection, rule: OpShardingRule, sizes: list[int], mesh: Mesh) -> AxesPerFactor:
    """Shardy's ``findCommonAxes``: the factor shardings when all tensors agree; for an op
    with two non-scalar tensors, no factor needing replication and no compound dimension, the
    preferred tensor's shardings; otherwise the greedy heuristic (then axes of factors that
    need replication moved to batching factors)."""
    compatible = _compatible_all(proj, rule)
    if compatible is not None:
        return compatible
    compound = any(len(d) > 1 for m in [*rule.operand_mappings, *rule.result_mappings] for d in m)
    if len(_non_scalar(rule)) == 2 and not rule.need_replication_factors and not compound:
        return _unary(proj, rule, sizes, mesh)
    common = _heuristic(proj, rule, sizes, mesh)
    for f in rule.need_replication_factors:
        axes = common[f]
        common[f] = []
        if _in_all_non_scalar(rule, f) and axes:
            _distribute_to_batching(axes, rule, mesh, common)
    return common
