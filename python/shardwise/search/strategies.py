"""Sharding strategies of one op, enumerated from its factor rule (Shardonnay RFC "Operation
sharding rule"; MindSpore "Sharding Strategy": how many ways each dimension is split).

A strategy assigns every mesh axis either to one factor of the op's rule or to none; several
axes on one factor shard it by their product (in mesh order, major to minor). The operand and
result shardings follow from the rule's mappings: a dimension's axes are those of its factors,
major factor first. A strategy is kept when it is a valid sharding:

* every factor's size is divisible by the product of its axes' sizes (no padding);
* need-replication factors and factors whose propagation is blocked stay unsharded, and so
  do permutation factors unless ``allow_permutation`` (their sharding needs a
  collective-permute the op's cost does not model);
* in a compound dimension (several factors), a factor is sharded only when every factor major
  to it is fully sharded (product of axes == factor size), as a dimension sharding is one
  major-to-minor axis list;
* reduction factors may be sharded: the op then ends with an all-reduce over their axes
  (Shardy ``reduction`` factors; ``cost_model.op_cost``).

A user's sharding restricts them (:func:`allows`: a closed dimension as written, an open one
its axes then any more); inside an ``sdy.manual_computation`` only the free axes are used
(:func:`free_mesh`, :func:`manual_boundary`).

The count per op is capped (``max_strategies``): the replicated strategy always stays; the
others are ranked by how many devices share the work (product of all sharding axes, larger
first), then by fewer sharded reduction factors (no all-reduce first), then in enumeration
order, and the first ``max_strategies - 1`` are kept.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from shardwise.errors import SearchError
from shardwise.mesh import Mesh
from shardwise.rules.rule import OpShardingRule
from shardwise.sharding import DimSharding, TensorSharding

__all__ = [
    "DEFAULT_MAX_STRATEGIES",
    "Strategy",
    "allows",
    "enumerate_strategies",
    "free_mesh",
    "is_closed",
    "manual_boundary",
    "rebind",
    "replicated",
    "value_strategies",
    "with_manual",
]

#: Default cap on strategies per op (the replicated one included).
DEFAULT_MAX_STRATEGIES = 32


@dataclass(frozen=True)
class Strategy:
    """One way to shard an op (or a function argument).

    ``factor_axes[f]``: the mesh axes (names, mesh order) sharding factor ``f`` of the rule
    (empty for an argument's pseudo-rule-less strategy). ``operands`` / ``results``: the
    sharding each operand must have and each result gets (closed dimensions, ``@mesh_name``).
    ``reduction_axes``: the axes of sharded reduction factors (the op's all-reduce group).
    ``shards``: product of all sharding axes' sizes (devices sharing the op's work).
    ``scatter_dims``: empty, or per result the dimension that also takes ``reduction_axes``
    (major to minor, after the dimension's own axes): the op then ends with a reduce-scatter
    instead of an all-reduce and each device keeps its slice of the reduced result (XLA's and
    Alpa's reduce-scatter strategy; the partitioner fuses Shardy's ``all_reduce`` +
    ``all_slice`` into one ``reduce_scatter``, ``rust/src/transforms/canonicalize/``)."""

    factor_axes: tuple[tuple[str, ...], ...]
    operands: tuple[TensorSharding, ...]
    results: tuple[TensorSharding, ...]
    reduction_axes: tuple[str, ...]
    shards: int
    scatter_dims: tuple[int, ...] = ()

    @property
    def is_replicated(self) -> bool:
        return self.shards == 1

    def describe(self, names: str = "ijklmnopqrstuvwxyzabcdefgh") -> str:
        """Short text: sharded factors as ``i:data,k:model`` (factor letters as in Shardy's
        rule text) or, without factors, the result's dimension shardings; ``replicated``."""
        if self.factor_axes:
            parts = [f"{_factor_name(f, names)}:{'*'.join(a)}" for f, a in enumerate(self.factor_axes) if a]
            scatter = f" reduce-scatter to dim {','.join(map(str, self.scatter_dims))}" if self.scatter_dims else ""
            return (",".join(parts) if parts else "replicated") + scatter
        dims = self.results[0].dims if self.results else ()
        if not any(d.axes for d in dims):
            return "replicated"
        return "[" + ", ".join("*".join(a.name for a in d.axes) or "-" for d in dims) + "]"


def _factor_name(f: int, names: str) -> str:
    return names[f] if f < len(names) else f"z_{f - len(names) + 1}"


#: One object per distinct closed sharding the strategies use (``TensorSharding`` is
#: immutable). A program's strategies repeat a few shardings thousands of times: sharing them
#: skips re-validating each, and makes the reshard cache's key comparisons identity checks.
_INTERNED: dict[tuple[Mesh, str, tuple[tuple[str, ...], ...]], TensorSharding] = {}
_INTERNED_MAX = 200_000


def interned(mesh: Mesh, mesh_name: str, dims: tuple[tuple[str, ...], ...]) -> TensorSharding:
    """The closed sharding of ``mesh`` with ``dims`` (axis names per dimension), shared."""
    key = (mesh, mesh_name, dims)
    s = _INTERNED.get(key)
    if s is None:
        if len(_INTERNED) >= _INTERNED_MAX:
            _INTERNED.clear()
        s = _INTERNED[key] = TensorSharding(mesh, [list(d) for d in dims], mesh_name=mesh_name)
    return s


def _sharding(
    mesh: Mesh, mesh_name: str, mapping: Sequence[Sequence[int]], axes: Sequence[Sequence[str]]
) -> TensorSharding:
    return interned(mesh, mesh_name, tuple(tuple(a for f in dim for a in axes[f]) for dim in mapping))


def _size(mesh: Mesh, axes: Sequence[str]) -> int:
    n = 1
    for a in axes:
        n *= mesh.axis_size(a)
    return n


def _valid(rule: OpShardingRule, mesh: Mesh, axes: Sequence[Sequence[str]], forbidden: frozenset[int]) -> bool:
    for f, fa in enumerate(axes):
        if not fa:
            continue
        size = rule.factor_sizes[f]
        if f in forbidden or size <= 0 or size % _size(mesh, fa):
            return False
    for mapping in (*rule.operand_mappings, *rule.result_mappings):
        for dim in mapping:
            for i, f in enumerate(dim[1:], start=1):
                if axes[f] and any(_size(mesh, axes[g]) != rule.factor_sizes[g] for g in dim[:i]):
                    return False
    return True


def enumerate_strategies(
    rule: OpShardingRule,
    mesh: Mesh,
    *,
    mesh_name: str = "mesh",
    max_strategies: int = DEFAULT_MAX_STRATEGIES,
    allow_permutation: bool = False,
    axes: Mesh | None = None,
) -> list[Strategy]:
    """Every valid strategy of an op with ``rule`` on ``mesh`` (see the module docstring),
    the replicated one first, at most ``max_strategies`` (>= 1). ``axes``: a mesh of some of
    ``mesh``'s axes (:func:`free_mesh`), the only ones used (shardings still bound to ``mesh``).

    Work: ``(F + 1) ** A`` assignments for ``F`` factors and ``A`` mesh axes. Raises
    :class:`SearchError` for ``max_strategies < 1``."""
    if axes is not None and axes != mesh:
        found_on = enumerate_strategies(
            rule, axes, mesh_name=mesh_name, max_strategies=max_strategies, allow_permutation=allow_permutation
        )
        return rebind(found_on, mesh, mesh_name)
    if max_strategies < 1:
        raise SearchError(f"max_strategies: expected at least 1, got {max_strategies}")
    nf = len(rule.factor_sizes)
    forbidden = frozenset(rule.need_replication_factors) | frozenset(rule.blocked_propagation_factors)
    if not allow_permutation:
        forbidden |= frozenset(rule.permutation_factors)
    names = [a.name for a in mesh.axes if a.size > 1]
    found: list[tuple[tuple[int, int, int, int], Strategy]] = []
    for n, choice in enumerate(itertools.product(range(nf + 1), repeat=len(names))):
        by_factor: list[list[str]] = [[] for _ in range(nf)]
        for name, f in zip(names, choice):
            if f < nf:
                by_factor[f].append(name)
        if not _valid(rule, mesh, by_factor, forbidden):
            continue
        red = tuple(a for f in rule.reduction_factors for a in by_factor[f])
        s = Strategy(
            factor_axes=tuple(tuple(a) for a in by_factor),
            operands=tuple(_sharding(mesh, mesh_name, m, by_factor) for m in rule.operand_mappings),
            results=tuple(_sharding(mesh, mesh_name, m, by_factor) for m in rule.result_mappings),
            reduction_axes=tuple(a for a in names if a in red),
            shards=_size(mesh, [name for fa in by_factor for name in fa]),
        )
        nred = sum(1 for f in rule.reduction_factors if by_factor[f])
        found.append(((-s.shards, nred, n, 0), s))
        for k, v in enumerate(_scatter_variants(mesh, mesh_name, rule, s)):
            found.append(((-s.shards, nred, n, k + 1), v))
    rep = [s for _, s in found if s.is_replicated][:1]
    rest = [s for _, s in sorted(((k, s) for k, s in found if not s.is_replicated), key=lambda t: t[0])]
    return (rep + rest)[:max_strategies]


def _scatter_variants(mesh: Mesh, mesh_name: str, rule: OpShardingRule, s: Strategy) -> list[Strategy]:
    """The reduce-scatter variants of ``s`` (see :class:`Strategy`): for an op with one
    result and sharded reduction factors, one per result dimension whose size stays divisible
    once the reduction axes are added to its own."""
    if not s.reduction_axes or len(s.results) != 1:
        return []
    res = s.results[0]
    red = _size(mesh, s.reduction_axes)
    out = []
    for d, size in enumerate(rule_result_dims(rule, 0)):
        own = [a.name for a in res.dims[d].axes]
        if size <= 0 or size % (_size(mesh, own) * red):
            continue
        dims = [[a.name for a in dim.axes] for dim in res.dims]
        dims[d] = own + list(s.reduction_axes)
        sharded = TensorSharding(mesh, dims, mesh_name=mesh_name)
        out.append(Strategy(s.factor_axes, s.operands, (sharded,), s.reduction_axes, s.shards, (d,)))
    return out


def rule_result_dims(rule: OpShardingRule, result: int) -> list[int]:
    """The sizes of result ``result``'s dimensions under ``rule`` (product of each dimension's
    factor sizes)."""
    sizes = []
    for dim in rule.result_mappings[result]:
        n = 1
        for f in dim:
            n *= rule.factor_sizes[f]
        sizes.append(n)
    return sizes


def replicated(mesh: Mesh, mesh_name: str, rank: int) -> TensorSharding:
    """The fully replicated closed sharding of a rank-``rank`` tensor."""
    return interned(mesh, mesh_name, ((),) * rank)


def value_strategies(
    shape: Sequence[int],
    mesh: Mesh,
    *,
    mesh_name: str = "mesh",
    max_strategies: int = DEFAULT_MAX_STRATEGIES,
    axes: Mesh | None = None,
) -> list[Strategy]:
    """Strategies of a function argument of ``shape``: each mesh axis on one dimension or
    none, dimensions divisible by their axes' product (the identity rule of the value), with
    the same ranking and cap as :func:`enumerate_strategies`. ``axes``: a mesh of some of
    ``mesh``'s axes (:func:`free_mesh`), the only ones used (shardings still bound to ``mesh``)."""
    rule = OpShardingRule([int(d) for d in shape], [], [[[i] for i in range(len(shape))]])
    out = enumerate_strategies(rule, mesh, mesh_name=mesh_name, max_strategies=max_strategies, axes=axes)
    return [Strategy((), s.operands, s.results, (), s.shards) for s in out]


def rebind(strategies: Sequence[Strategy], mesh: Mesh, mesh_name: str) -> list[Strategy]:
    """``strategies`` enumerated on a mesh of some of ``mesh``'s axes (the free axes inside an
    ``sdy.manual_computation``) with their shardings bound to ``mesh`` itself, the mesh the
    module names (the same axes per dimension)."""

    def full(s: TensorSharding) -> TensorSharding:
        return interned(mesh, mesh_name, tuple(tuple(a.name for a in d.axes) for d in s.dims))

    return [
        Strategy(
            s.factor_axes,
            tuple(map(full, s.operands)),
            tuple(map(full, s.results)),
            s.reduction_axes,
            s.shards,
            s.scatter_dims,
        )
        for s in strategies
    ]


def allows(user: TensorSharding, s: TensorSharding) -> bool:
    """Whether the closed sharding ``s`` is one the user's sharding ``user`` allows (Shardy's
    open and closed dimensions): a closed dimension exactly as the user's, an open one the
    user's axes then any more (minor to them), and no axis the user replicated explicitly."""
    if len(user.dims) != len(s.dims):
        return False
    for ud, sd in zip(user.dims, s.dims):
        if ud.closed and sd.axes != ud.axes or sd.axes[: len(ud.axes)] != ud.axes:
            return False
    rep = {a.name for a in user.replicated}
    return not rep or all(a.name not in rep for d in s.dims for a in d.axes)


def is_closed(user: Sequence[TensorSharding | None]) -> bool:
    """Whether every dimension of the user's shardings is closed (the value is fixed: no
    search choice left to write back)."""
    return all(d.closed for u in user if u is not None for d in u.dims)


def free_mesh(mesh: Mesh, manual: Iterable[str]) -> Mesh:
    """The mesh of ``mesh``'s axes not in ``manual`` (in mesh order): the axes the body of an
    ``sdy.manual_computation`` may still shard along."""
    gone = set(manual)
    return Mesh([(a.name, a.size) for a in mesh.axes if a.name not in gone])


def with_manual(
    outer: TensorSharding, local: TensorSharding, manual: Collection[str], mesh: Mesh, mesh_name: str
) -> TensorSharding:
    """The global sharding of a manual computation's operand or result (closed dimensions):
    per dimension the manual axes of ``outer`` (its in- or out-sharding; manual axes are
    major, Shardy's rule) then the free axes of ``local`` (the body value's sharding), the
    manual axes ``outer`` replicates or leaves unreduced kept."""
    dims = [
        DimSharding([a for a in od.axes if a.name in manual] + list(ld.axes)) for od, ld in zip(outer.dims, local.dims)
    ]
    return TensorSharding(
        mesh,
        dims,
        replicated=[a for a in outer.replicated if a.name in manual],
        unreduced=[a for a in outer.unreduced if a.name in manual],
        reduction=outer.reduction,
        mesh_name=mesh_name,
    )


def manual_boundary(
    outer: TensorSharding,
    local_shape: Sequence[int],
    manual: Collection[str],
    side: str,
    mesh: Mesh,
    mesh_name: str,
    cap: int,
    free: Mesh,
) -> tuple[list[Strategy], bool]:
    """The strategies of a manual computation's operand (``side`` ``"in"``) or result
    (``"out"``): each sharding of the body value (type ``local_shape``) over the ``free`` axes
    that ``outer``'s closed dimensions allow (a closed dimension keeps exactly its free axes; an
    open one takes any), paired with the global sharding it makes with ``outer``'s manual axes
    (:func:`with_manual`). Configured (the user's) when every dimension of ``outer`` is closed."""
    user = TensorSharding(
        mesh,
        [DimSharding([a for a in od.axes if a.name not in manual], closed=od.closed) for od in outer.dims],
        replicated=[a for a in outer.replicated if a.name not in manual],
        mesh_name=mesh_name,
    )  # outer's free part: what it asks of the body value
    locals_ = [
        s.results[0] for s in value_strategies(local_shape, mesh, mesh_name=mesh_name, max_strategies=cap, axes=free)
    ]
    locals_ = [ls for ls in locals_ if allows(user, ls)]
    if not locals_:  # the user's free axes, as written
        locals_ = [TensorSharding(mesh, [DimSharding(d.axes) for d in user.dims], mesh_name=mesh_name)]
    out = []
    for ls in locals_:
        gs = with_manual(outer, ls, manual, mesh, mesh_name)
        out.append(Strategy((), (gs,), (ls,), (), 1) if side == "in" else Strategy((), (ls,), (gs,), (), 1))
    return out, is_closed([outer])
