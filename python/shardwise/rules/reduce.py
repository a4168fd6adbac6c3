"""Reductions and windowed ops: ``reduce``, ``reduce_window``, ``select_and_scatter``,
``sort`` (Shardy ``op_sharding_rule_registry.cc``)."""

from __future__ import annotations

from shardwise.rules._util import builtin, operand_shape, result_shape
from shardwise.rules.attrs import attr_dense_ints, attr_int, attr_ints
from shardwise.rules.exceptions import OpInfoError
from shardwise.rules.opinfo import OpInfo
from shardwise.rules.rule import FactorKind, OpShardingRule, RuleBuilder


@builtin("stablehlo.reduce")
def _reduce(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Reduced dimensions are reduction factors of the inputs; the others map input to result
    dimensions in order. Init values (scalars) get no factor."""
    n = len(op.operands) // 2
    if n == 0 or len(op.operands) != 2 * n or len(op.results) != n:
        raise OpInfoError(
            f"{op.name}: expected N inputs, N init values and N results, got {len(op.operands)} operands, {len(op.results)} results"
        )
    reduced = attr_ints(op, "dimensions")
    shape = operand_shape(op, 0)
    b = RuleBuilder.for_op(op)
    out = 0
    for d, size in enumerate(shape):
        operands = [d] * n + [-1] * n
        if d in reduced:
            b.add_factor(operands, [-1] * n, size, FactorKind.REDUCTION)
        else:
            b.add_factor(operands, [out] * n, size)
            out += 1
    return b.build()


def _window_passthrough(op: OpInfo, window: tuple[int, ...], strides: tuple[int, ...], dim: int) -> bool:
    """A window dimension maps input to output one to one: size 1, stride 1, no padding."""
    if "padding" in op.attributes:
        _, pad = attr_dense_ints(op, "padding")
        if 2 * dim + 1 >= len(pad):
            raise OpInfoError(
                f"{op.name}: attribute 'padding' has no entry for dimension {dim}: {op.attributes['padding']!r}"
            )
        if pad[2 * dim] != 0 or pad[2 * dim + 1] != 0:
            return False
    for values, name in ((strides, "window_strides"), (window, "window_dimensions")):
        if values and dim >= len(values):
            raise OpInfoError(f"{op.name}: attribute {name!r} has no entry for dimension {dim}: {list(values)}")
    return (not strides or strides[dim] == 1) and (not window or window[dim] == 1)


@builtin("stablehlo.reduce_window")
def _reduce_window(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Pointwise sized by the result (the number of windows); a dimension is a permutation
    factor unless its window is trivial, blocked when conservative."""
    window = attr_ints(op, "window_dimensions", ())
    strides = attr_ints(op, "window_strides", ())
    out = result_shape(op, 0)

    def kind(d: int) -> FactorKind:
        return FactorKind.PASS_THROUGH if _window_passthrough(op, window, strides, d) else FactorKind.PERMUTATION

    return (
        RuleBuilder.for_op(op).add_pointwise(out, kind, lambda k: conservative and k is FactorKind.PERMUTATION).build()
    )


@builtin("stablehlo.select_and_scatter")
def _select_and_scatter(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Trivial window dimensions are pointwise. Otherwise the source dimension gets a
    need-replication factor and the operand/result dimension a permutation factor, both
    blocked when conservative."""
    window = attr_ints(op, "window_dimensions", ())
    strides = attr_ints(op, "window_strides", ())
    out = result_shape(op, 0)
    source = operand_shape(op, 1, "source")
    if len(source) != len(out):
        raise OpInfoError(f"{op.name}: expected source and result of equal rank, got {source} and {out}")
    b = RuleBuilder.for_op(op)
    for d, size in enumerate(out):
        if _window_passthrough(op, window, strides, d):
            b.add_factor_for_all(d, size)
            continue
        b.add_factor([-1, d, -1], -1, source[d], FactorKind.NEED_REPLICATION, conservative)
        b.add_factor([d, -1, -1], d, size, FactorKind.PERMUTATION, conservative)
    return b.build()


@builtin("stablehlo.sort")
def _sort(op: OpInfo, conservative: bool) -> OpShardingRule:
    """The sorted dimension needs replication (blocked when every other dimension has size
    1); the others are batch dimensions."""
    dim = attr_int(op, "dimension", -1)  # StableHLO's default; Shardy compares the raw value
    shape = operand_shape(op, 0)
    blocked = all(d == dim or size == 1 for d, size in enumerate(shape))
    b = RuleBuilder.for_op(op)
    for d, size in enumerate(shape):
        if d == dim:
            b.add_factor_for_all(d, size, FactorKind.NEED_REPLICATION, blocked)
        else:
            b.add_factor_for_all(d, size)
    return b.build()
