"""Linear algebra, FFT and the remaining structured ops: ``cholesky``, ``triangular_solve``,
``fft``, ``batch_norm_inference``, ``rng_bit_generator`` (Shardy
``op_sharding_rule_registry.cc``)."""

from __future__ import annotations

from shardwise.rules._util import builtin, operand_shape, require_rank, result_shape
from shardwise.rules.attrs import attr_bool, attr_enum, attr_int, attr_ints
from shardwise.rules.opinfo import OpInfo
from shardwise.rules.rule import FactorKind, OpShardingRule, RuleBuilder

NEED = FactorKind.NEED_REPLICATION


@builtin("stablehlo.cholesky")
def _cholesky(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Leading batch dimensions are pass-through; the two matrix dimensions need
    replication."""
    shape = operand_shape(op, 0)
    batch = len(shape) - 2
    return RuleBuilder.for_op(op).add_pointwise(shape, lambda d: FactorKind.PASS_THROUGH if d < batch else NEED).build()


@builtin("stablehlo.triangular_solve")
def _triangular_solve(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Batch dimensions are pointwise. Left side solves ``op(a) @ x = b``, right side
    ``x @ op(a) = b``: a's non-contracting dimension is shared with b, the contracting one
    with the result, the result's other dimension with b; all need replication."""
    a, b_shape = operand_shape(op, 0, "a"), operand_shape(op, 1, "b")
    require_rank(op, a, 2, "a")
    require_rank(op, b_shape, len(a), "b")
    b = RuleBuilder.for_op(op).add_pointwise(a[:-2])
    d1, d2 = len(a) - 2, len(a) - 1
    transposed = attr_enum(op, "transpose_a", "NO_TRANSPOSE") in ("TRANSPOSE", "ADJOINT")
    if attr_bool(op, "left_side"):
        non_contracting, contracting = (d2, d1) if transposed else (d1, d2)
        b.add_factor([non_contracting, d1], -1, a[non_contracting], NEED)
        b.add_factor([-1, d2], d2, b_shape[d2], NEED)
        b.add_factor([contracting, -1], d1, a[contracting], NEED)
    else:
        non_contracting, contracting = (d1, d2) if transposed else (d2, d1)
        b.add_factor([-1, d1], d1, b_shape[d1], NEED)
        b.add_factor([non_contracting, d2], -1, a[non_contracting], NEED)
        b.add_factor([contracting, -1], d2, a[contracting], NEED)
    return b.build()


@builtin("stablehlo.fft")
def _fft(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Leading dimensions are batch dimensions; the transformed ones need replication, the
    last one blocked when the result truncates or expands it (real FFTs)."""
    ins, outs = operand_shape(op, 0), result_shape(op, 0)
    require_rank(op, ins, 1, "operand")
    require_rank(op, outs, 1, "result")
    length = len(attr_ints(op, "fft_length"))
    first_fft = len(ins) - length if length <= len(ins) else 2**64  # Shardy's unsigned arithmetic
    b = RuleBuilder.for_op(op)
    for d, size in enumerate(ins):
        if d < first_fft:
            b.add_factor_for_all(d, size)
        elif d < len(ins) - 1:
            b.add_factor_for_all(d, size, NEED)
        else:
            b.add_factor_for_all(d, size, NEED, ins[-1] != outs[-1])
    return b.build()


@builtin("stablehlo.batch_norm_inference")
def _batch_norm_inference(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Pointwise between operand and result; the feature dimension is also the only
    dimension of scale, offset, mean and variance."""
    feature = attr_int(op, "feature_index")
    b = RuleBuilder.for_op(op)
    for d, size in enumerate(operand_shape(op, 0)):
        dims = [0 if d == feature else -1] * len(op.operands)
        dims[0] = d
        b.add_factor(dims, d, size)
    return b.build()


@builtin("stablehlo.rng_bit_generator")
def _rng_bit_generator(op: OpInfo, conservative: bool) -> OpShardingRule:
    """The initial and output states need replication and do not propagate to each other;
    the random output gets pass-through factors of its own."""
    b = RuleBuilder.for_op(op)
    for d, size in enumerate(operand_shape(op, 0, "initial_state")):
        b.add_factor(d, [d, -1], size, NEED, True)
    for d, size in enumerate(result_shape(op, 1, "output")):
        b.add_factor(-1, [-1, d], size)
    return b.build()
