"""Operation sharding rules (Shardonnay RFC "Operation sharding rule"; Shardy
``OpShardingRuleAttr`` in ``shardy/dialect/sdy/ir/attrs.td``) and their builder (Shardy
``OpShardingRuleBuilder`` in ``shardy/dialect/sdy/transforms/propagation/
op_sharding_rule_builder.cc``).

The data, the invariants, the text form and the builder's semantics live in the Rust core
(``rust/src/rule.rs`` and ``rust/src/rule/``); these classes wrap them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from shardwise import _native
from shardwise.rules.opinfo import OpInfo, ValueInfo

__all__ = ["DYNAMIC_SIZE", "NULL_DIM", "FactorKind", "OpShardingRule", "RuleBuilder"]

#: A dimension a factor does not map to (Shardy's ``kNullDim``).
NULL_DIM = -1
#: The factor size Shardy gives a dynamic dimension (MLIR ``ShapedType::kDynamic``).
DYNAMIC_SIZE = -(2**63)

TensorMapping = tuple[tuple[int, ...], ...]
Shape = Sequence[int] | None
#: ``OpShardingRule``'s fields, in the order of ``_set`` (and of ``_native.Rule``'s constructor).
_FIELDS = (
    "factor_sizes",
    "operand_mappings",
    "result_mappings",
    "reduction_factors",
    "need_replication_factors",
    "permutation_factors",
    "blocked_propagation_factors",
    "is_custom",
)


class FactorKind(enum.Enum):
    """How a factor behaves when sharded (Shardy ``FactorType``)."""

    #: No communication when sharded the same way in every tensor that has it.
    PASS_THROUGH = "pass_through"
    #: Sharding it leaves partial results to all-reduce (operands only; a contracting dim).
    REDUCTION = "reduction"
    #: Must be replicated (the sorted dimension of a sort).
    NEED_REPLICATION = "need_replication"
    #: Sharding it needs a collective permute (padded, sliced, concatenated dimensions).
    PERMUTATION = "permutation"


_KIND_FIELDS = {
    FactorKind.REDUCTION: "reduction_factors",
    FactorKind.NEED_REPLICATION: "need_replication_factors",
    FactorKind.PERMUTATION: "permutation_factors",
}


def _ints(values: Iterable[int], what: str) -> tuple[int, ...]:
    out = tuple(values)
    for v in out:
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{what} must be integers, got {v!r} in {out!r}")
    return out


def _mapping(m: Iterable[Iterable[int]], what: str) -> TensorMapping:
    if isinstance(m, (str, bytes)):
        raise TypeError(f"{what} must be a sequence of dimensions (each a sequence of factor indices), got {m!r}")
    return tuple(_ints(d, f"{what} factor indices") for d in m)


#: Rules parsed so far, by their text (``OpShardingRule.parse``), at most 4096.
_PARSED: dict[str, OpShardingRule] = {}


class OpShardingRule:
    """A sharding rule: ``factor_sizes[f]`` is the size of factor ``f``; each operand and
    result has a mapping, one tuple of factor indices per dimension (several factors make a
    compound dimension, major to minor); special factor lists (sorted indices) give the
    factors' kinds, the rest are pass-through; ``blocked_propagation_factors`` block
    propagation; ``is_custom`` marks a user's rule (printed ``, custom``).

    ``str()`` gives Shardy's text, e.g. ``#sdy.op_sharding_rule<([i, j], [j, k])->([i, k])
    {i=8, j=8, k=8} reduction={j}>``; ``OpShardingRule.parse`` reads it. Immutable, hashable,
    equal when the texts are equal. Construction and ``parse`` check the invariants that need
    no types and raise ``InvalidRuleError`` (``.rule`` names the broken invariant); ``validate``
    checks against operand and result shapes.
    """

    __slots__ = (
        "_core",
        "blocked_propagation_factors",
        "factor_sizes",
        "is_custom",
        "need_replication_factors",
        "operand_mappings",
        "permutation_factors",
        "reduction_factors",
        "result_mappings",
    )
    factor_sizes: tuple[int, ...]
    operand_mappings: tuple[TensorMapping, ...]
    result_mappings: tuple[TensorMapping, ...]
    reduction_factors: tuple[int, ...]
    need_replication_factors: tuple[int, ...]
    permutation_factors: tuple[int, ...]
    blocked_propagation_factors: tuple[int, ...]
    is_custom: bool
    #: The Rust core's rule (``_native.Rule``), made when first asked for (``_native_rule``).
    _core: _native.Rule | None

    def __init__(
        self,
        factor_sizes: Iterable[int],
        operand_mappings: Iterable[Iterable[Iterable[int]]],
        result_mappings: Iterable[Iterable[Iterable[int]]],
        *,
        reduction_factors: Iterable[int] = (),
        need_replication_factors: Iterable[int] = (),
        permutation_factors: Iterable[int] = (),
        blocked_propagation_factors: Iterable[int] = (),
        is_custom: bool = False,
    ) -> None:
        self._set(
            _ints(factor_sizes, "factor_sizes"),
            tuple(_mapping(m, f"operand mapping {i}") for i, m in enumerate(operand_mappings)),
            tuple(_mapping(m, f"result mapping {i}") for i, m in enumerate(result_mappings)),
            _ints(reduction_factors, "reduction_factors"),
            _ints(need_replication_factors, "need_replication_factors"),
            _ints(permutation_factors, "permutation_factors"),
            _ints(blocked_propagation_factors, "blocked_propagation_factors"),
            bool(is_custom),
        )
        self._native_rule().check_local()

    def _set(self, *values: Any) -> None:
        for name, value in zip(_FIELDS, values):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_core", None)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    @classmethod
    def _from_core(cls, core: _native.Rule) -> OpShardingRule:
        """The rule of the Rust core's ``core`` (not checked again)."""
        r = cls.__new__(cls)
        r._set(
            tuple(core.factor_sizes),
            tuple(tuple(tuple(d) for d in m) for m in core.operand_mappings),
            tuple(tuple(tuple(d) for d in m) for m in core.result_mappings),
            tuple(core.reduction_factors),
            tuple(core.need_replication_factors),
            tuple(core.permutation_factors),
            tuple(core.blocked_propagation_factors),
            core.is_custom,
        )
        object.__setattr__(r, "_core", core)
        return r

    def _native_rule(self) -> _native.Rule:
        """The Rust core's rule of this one (made once): what crosses the FFI."""
        core = self._core
        if core is None:
            core = _native.Rule(
                list(self.factor_sizes),
                [[list(d) for d in m] for m in self.operand_mappings],
                [[list(d) for d in m] for m in self.result_mappings],
                list(self.reduction_factors),
                list(self.need_replication_factors),
                list(self.permutation_factors),
                list(self.blocked_propagation_factors),
                self.is_custom,
            )
            object.__setattr__(self, "_core", core)
        return core

    @classmethod
    def parse(cls, text: str) -> OpShardingRule:
        """Parses Shardy's text ``#sdy.op_sharding_rule<...>`` (or the bare ``<...>``).
        Raises ``ShardingParseError`` (``.offset``) for malformed text and ``InvalidRuleError``
        for a rule that breaks an invariant (e.g. an unused factor)."""
        if not isinstance(text, str):
            raise TypeError(f"rule text must be a str, got {type(text).__name__}")
        # Rules are immutable and programs repeat a few rule texts on thousands of ops.
        rule = _PARSED.get(text)
        if rule is None:
            if len(_PARSED) >= 4096:
                _PARSED.clear()
            rule = _PARSED[text] = cls._from_core(_native.rule_parse(text))
        return rule

    @classmethod
    def from_einsum(
        cls,
        spec: str,
        operand_shapes: Sequence[Sequence[int]],
        result_shapes: Sequence[Sequence[int]],
        *,
        reduction_factors: Sequence[str] = (),
        need_replication_factors: Sequence[str] = (),
        permutation_factors: Sequence[str] = (),
        blocked_propagation_factors: Sequence[str] = (),
        factor_sizes: Mapping[str, int] | None = None,
    ) -> OpShardingRule:
        """A custom rule from JAX's einsum-like notation (``jax._src.
        custom_partitioning_sharding_rule``: ``"i j, j k -> i k"``, compound ``(i j)``,
        leading ``...``) bound to the given operand and result shapes, the way JAX's
        ``sdy_sharding_rule_to_mlir`` builds it. ``factor_sizes`` gives the sizes of factors
        that only appear in compound dimensions. Raises ``ShardingParseError`` for malformed
        notation and ``InvalidRuleError`` when the rule does not fit the shapes (see
        ``rust/src/rule/einsum.rs``)."""
        sizes = sorted((factor_sizes or {}).items())
        return cls._from_core(
            _native.rule_from_einsum(
                spec,
                [list(_ints(s, "operand shape")) for s in operand_shapes],
                [list(_ints(s, "result shape")) for s in result_shapes],
                list(reduction_factors),
                list(need_replication_factors),
                list(permutation_factors),
                list(blocked_propagation_factors),
                [(k, int(v)) for k, v in sizes],
            )
        )

    # ------------------------------------------------------------------ accessors

    @property
    def num_factors(self) -> int:
        return len(self.factor_sizes)

    @property
    def num_operands(self) -> int:
        return len(self.operand_mappings)

    @property
    def num_results(self) -> int:
        return len(self.result_mappings)

    @property
    def factor_symbols(self) -> tuple[str, ...]:
        """``("i", "j", ..., "z", "z_1", ...)``: Shardy's symbol of each factor."""
        return tuple(_native.factor_symbol(i) for i in range(self.num_factors))

    def factor_kind(self, factor: int) -> FactorKind:
        """The kind of factor ``factor`` (an index)."""
        self._check_index(factor)
        for kind, name in _KIND_FIELDS.items():
            if factor in getattr(self, name):
                return kind
        return FactorKind.PASS_THROUGH

    @property
    def factor_kinds(self) -> tuple[FactorKind, ...]:
        """The kind of every factor, by index."""
        return tuple(self.factor_kind(f) for f in range(self.num_factors))

    def factors_of_kind(self, kind: FactorKind) -> tuple[int, ...]:
        """The indices of the factors of ``kind``, sorted."""
        if kind is FactorKind.PASS_THROUGH:
            return tuple(f for f in range(self.num_factors) if self.factor_kind(f) is kind)
        return tuple(getattr(self, _KIND_FIELDS[kind]))

    def is_blocked(self, factor: int) -> bool:
        """Whether propagation along factor ``factor`` is blocked."""
        self._check_index(factor)
        return factor in self.blocked_propagation_factors

    def _check_index(self, factor: int) -> None:
        if not 0 <= factor < self.num_factors:
            raise IndexError(f"factor index must be in [0, {self.num_factors}), got {factor}")

    @property
    def has_compound_dims(self) -> bool:
        """Some dimension is mapped to several factors."""
        return any(len(d) > 1 for m in self.operand_mappings + self.result_mappings for d in m)

    def check(self) -> None:
        """Checks the invariants that need no types (the constructor and ``parse`` do this;
        ``RuleBuilder.build`` does not). Raises ``InvalidRuleError``."""
        self._native_rule().check_local()

    def validate(
        self, operand_shapes: Sequence[Shape], result_shapes: Sequence[Shape], *, exact_sizes: bool = False
    ) -> None:
        """Checks the rule against the op's operand and result shapes (``None`` for a value
        that is not a tensor): Shardy's verifier (one mapping per value, at least one operand
        and one result, static shapes, ranks) and no negative factor size. With
        ``exact_sizes``, also each dimension's factor sizes must multiply to its size (Shardy
        does not require this; its pad, slice, concatenate, gather... rules break it). Raises
        ``InvalidRuleError``."""
        self._native_rule().validate(
            [None if s is None else list(_ints(s, "operand shape")) for s in operand_shapes],
            [None if s is None else list(_ints(s, "result shape")) for s in result_shapes],
            exact_sizes,
        )

    def validate_for(self, op: OpInfo, *, exact_sizes: bool = False) -> None:
        """``validate`` with the shapes of ``op``'s operands and results."""
        self.validate(
            [v.shape if v.is_tensor else None for v in op.operands],
            [v.shape if v.is_tensor else None for v in op.results],
            exact_sizes=exact_sizes,
        )

    def replace(self, **changes: Any) -> OpShardingRule:
        """A copy with some fields changed (checked like the constructor)."""
        fields = {name: getattr(self, name) for name in _FIELDS}
        fields.update(changes)
        return OpShardingRule(
            fields.pop("factor_sizes"), fields.pop("operand_mappings"), fields.pop("result_mappings"), **fields
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpShardingRule) and self._native_rule() == other._native_rule()

    def __hash__(self) -> int:
        return hash((OpShardingRule, str(self)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, tuple(getattr(self, name) for name in _FIELDS))

    def __str__(self) -> str:
        return str(self._native_rule())

    def __repr__(self) -> str:
        return f"OpShardingRule.parse({str(self)!r})"


def _rebuilt(*fields: Any) -> OpShardingRule:
    """An unpickled rule: its fields as they were (not checked again, as ``RuleBuilder.build``'s
    rules are not)."""
    r = OpShardingRule.__new__(OpShardingRule)
    r._set(*fields)
    return r


def _rank(v: ValueInfo) -> int:
    return v.rank if v.is_tensor else 0


KindFn = Callable[[int], FactorKind]


class RuleBuilder:
    """Builds a rule step by step, with the semantics of Shardy's ``OpShardingRuleBuilder``
    (see ``rust/src/rule/builder.rs``): ``add_factor`` maps a new factor to one dimension per
    operand and result (``-1`` skips a value; a size-1 factor is not appended to a dimension
    that already has one); the ``*_for_all*`` variants map one dimension of every value of
    rank >= 1; ``build`` gives every dimension left without a factor a new size-1 factor.

    Dimension errors (wrong count, out of range) raise ``InvalidRuleError`` at ``build``.
    """

    __slots__ = ("_operand_ranks", "_result_ranks", "_steps")

    def __init__(self, operand_ranks: Sequence[int], result_ranks: Sequence[int]) -> None:
        self._operand_ranks = list(_ints(operand_ranks, "operand ranks"))
        self._result_ranks = list(_ints(result_ranks, "result ranks"))
        self._steps: list[_native.FactorStep] = []

    @classmethod
    def for_op(cls, op: OpInfo) -> RuleBuilder:
        """A builder for ``op``'s operands and results (values that are not tensors have rank
        0)."""
        return cls([_rank(v) for v in op.operands], [_rank(v) for v in op.results])

    @staticmethod
    def _dims(dims: int | Sequence[int]) -> list[int]:
        return [dims] if isinstance(dims, int) else list(dims)

    def add_factor(
        self,
        operand_dims: int | Sequence[int],
        result_dims: int | Sequence[int],
        size: int,
        kind: FactorKind = FactorKind.PASS_THROUGH,
        blocked: bool = False,
    ) -> RuleBuilder:
        """A factor of ``size`` mapped to ``operand_dims[i]`` of operand ``i`` and
        ``result_dims[j]`` of result ``j`` (an int stands for a one-element list)."""
        self._steps.append(
            _native.FactorStep.dims(self._dims(operand_dims), self._dims(result_dims), size, kind.value, blocked)
        )
        return self

    def add_factor_for_all(
        self, dim: int, size: int, kind: FactorKind = FactorKind.PASS_THROUGH, blocked: bool = False
    ) -> RuleBuilder:
        """A factor mapped to dimension ``dim`` of every operand and result of rank >= 1."""
        self._steps.append(_native.FactorStep.for_all(dim, size, kind.value, blocked))
        return self

    def add_factor_for_all_operands(
        self, dim: int, size: int, kind: FactorKind = FactorKind.PASS_THROUGH, blocked: bool = False
    ) -> RuleBuilder:
        """A factor mapped to dimension ``dim`` of every operand of rank >= 1."""
        self._steps.append(_native.FactorStep.for_all_operands(dim, size, kind.value, blocked))
        return self

    def add_factor_for_all_results(
        self, dim: int, size: int, kind: FactorKind = FactorKind.PASS_THROUGH, blocked: bool = False
    ) -> RuleBuilder:
        """A factor mapped to dimension ``dim`` of every result of rank >= 1."""
        self._steps.append(_native.FactorStep.for_all_results(dim, size, kind.value, blocked))
        return self

    def add_pointwise(
        self,
        shape: Sequence[int],
        kind: KindFn | None = None,
        blocked: bool | Callable[[FactorKind], bool] = False,
    ) -> RuleBuilder:
        """``add_factor_for_all`` for each dimension of ``shape``, of kind ``kind(dim)``,
        blocked when ``blocked(kind)`` (or ``blocked`` when a bool)."""
        for d, size in enumerate(shape):
            k = kind(d) if kind else FactorKind.PASS_THROUGH
            self.add_factor_for_all(d, size, k, blocked(k) if callable(blocked) else blocked)
        return self

    def add_pointwise_if(
        self, shape: Sequence[int], pred: Callable[[int], bool], kind: KindFn | None = None
    ) -> RuleBuilder:
        """``add_pointwise`` restricted to the dimensions where ``pred(dim)`` holds."""
        for d, size in enumerate(shape):
            if pred(d):
                self.add_factor_for_all(d, size, kind(d) if kind else FactorKind.PASS_THROUGH)
        return self

    def add_pointwise_with_diff_type_for_mismatch(
        self,
        in_shape: Sequence[int],
        out_shape: Sequence[int],
        mismatch_kind: FactorKind = FactorKind.NEED_REPLICATION,
        mismatch_blocked: bool = False,
    ) -> RuleBuilder:
        """A pointwise factor per dimension sized by ``in_shape``; where ``in_shape`` and
        ``out_shape`` differ the factor gets ``mismatch_kind`` and ``mismatch_blocked``."""
        if len(in_shape) != len(out_shape):
            raise ValueError(f"expected shapes of equal rank, got {tuple(in_shape)} and {tuple(out_shape)}")
        for d, (i, o) in enumerate(zip(in_shape, out_shape)):
            if i == o:
                self.add_factor_for_all(d, i)
            else:
                self.add_factor_for_all(d, i, mismatch_kind, mismatch_blocked)
        return self

    def build(self) -> OpShardingRule:
        """The rule (the builder can keep going afterwards). Like Shardy's builder, this does
        not verify the rule (a factor mapped nowhere, say, stays in it): call
        ``OpShardingRule.check`` or ``validate_for`` for that."""
        return OpShardingRule._from_core(_native.rule_build(self._operand_ranks, self._result_ranks, self._steps))

    @staticmethod
    def pointwise(operand_ranks: Sequence[int], result_ranks: Sequence[int], shape: Sequence[int]) -> OpShardingRule:
        """Shardy's ``buildPointwise``: factor ``d`` (size ``shape[d]``) is dimension ``d`` of
        every value."""
        return OpShardingRule._from_core(_native.rule_pointwise(list(operand_ranks), list(result_ranks), list(shape)))
