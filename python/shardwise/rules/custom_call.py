"""``stablehlo.custom_call`` targets Shardy knows (Shardy ``op_sharding_rule_registry.cc``):
pointwise targets (device placement, layout, erf, X64 split, SPMD-internal permutes, ...),
``Eigh``, ``Qr``, ``QrDecompositionBlock``, ``ProductOfElementaryHouseholderReflectors``,
``mhlo.topk``, ``ApproxTopK``, ``PartialReduce`` and ``X64Combine``. Some targets (Python
callbacks, TPU custom calls) get no rule on purpose; any other target gets none and an
``UnknownOpWarning``.

Users add targets with ``shardwise.rules.register_rule``."""

from __future__ import annotations

from shardwise.rules._util import RuleFunction, operand_shape, pointwise, require_rank, result_shape
from shardwise.rules.exceptions import OpInfoError
from shardwise.rules.opinfo import OpInfo
from shardwise.rules.rule import FactorKind, OpShardingRule, RuleBuilder

__all__ = ["CUSTOM_CALL_RULES", "NO_RULE_TARGETS"]

NEED = FactorKind.NEED_REPLICATION

#: Targets Shardy deliberately leaves without a rule (and without a warning).
NO_RULE_TARGETS = frozenset(
    {
        "sdy_testonly",
        "tpu_custom_call",
        "xla_python_cpu_callback",
        "xla_python_gpu_callback",
        "xla_ffi_python_cpu_callback",
        "xla_ffi_python_gpu_callback",
    }
)

POINTWISE_TARGETS = (
    "annotate_device_placement",
    "Cholesky",
    "CompactWyHelper",
    "InspectSharding",
    "InvertDiagBlocksLowerTriangular",
    "InvertDiagBlocksUpperTriangular",
    "LayoutConstraint",
    "mhlo.erf",
    "MoveToDevice",
    "MoveToHost",
    "X64SplitHigh",
    "X64SplitLow",
    "xla.megascale.provide_metadata",
    # SPMD-internal collective permutes: every result is sharded like the input.
    "_SPMDInternalOp_MultiPad",
    "_SPMDInternalOp_RotateRight",
    "_SPMDInternalOp_MultiRotate",
    "_SPMDInternalOp_MultiSlice",
    "_SPMDInternalOp_Wrap",
)


def _counts(op: OpInfo, operands: int, results: int, target: str) -> None:
    if len(op.operands) != operands or len(op.results) != results:
        raise OpInfoError(
            f"custom_call @{target}: expected {operands} operands and {results} results, got {len(op.operands)} and {len(op.results)}"
        )


def _pointwise(op: OpInfo, conservative: bool) -> OpShardingRule | None:
    return pointwise(op)


def _eigh(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Batch dimensions pointwise; the matrix dimensions correspond between the input and the
    eigenvectors, and the last one also to the eigenvalues' only non-batch dimension."""
    _counts(op, 1, 2, "Eigh")
    ins = operand_shape(op, 0)
    require_rank(op, ins, 2, "operand")
    d1, d2 = len(ins) - 2, len(ins) - 1
    return (
        RuleBuilder.for_op(op)
        .add_pointwise(ins[:-2])
        .add_factor(d1, [d1, -1], ins[d1])
        .add_factor(d2, [d2, d1], ins[d2])
        .build()
    )


def _qr(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Batch dimensions pointwise; the matrix dimensions of input and first result need
    replication, and so does the second result's own non-batch dimension."""
    _counts(op, 1, 2, "Qr")
    ins, rhs = operand_shape(op, 0), result_shape(op, 1)
    require_rank(op, ins, 2, "operand")
    d1, d2 = len(ins) - 2, len(ins) - 1
    require_rank(op, rhs, d1 + 1, "second result")
    return (
        RuleBuilder.for_op(op)
        .add_pointwise(ins[:-2])
        .add_factor(d1, [d1, -1], ins[d1], NEED)
        .add_factor(d2, [d2, -1], ins[d2], NEED)
        .add_factor(-1, [-1, d1], rhs[d1], NEED)
        .build()
    )


def _householder(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Batch dimensions pointwise; the matrix dimensions of the first input and the result
    need replication, and so does the taus' own non-batch dimension."""
    lhs, taus = operand_shape(op, 0), operand_shape(op, 1, "taus")
    require_rank(op, lhs, 2, "first operand")
    d1, d2 = len(lhs) - 2, len(lhs) - 1
    require_rank(op, taus, d1 + 1, "taus")
    return (
        RuleBuilder.for_op(op)
        .add_pointwise(lhs[:-2])
        .add_factor([d1, -1], d1, lhs[d1], NEED)
        .add_factor([d2, -1], d2, lhs[d2], NEED)
        .add_factor([-1, d1], -1, taus[d1], NEED)
        .build()
    )


def _top_k(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Pointwise between operand and both results; the top-k dimension needs replication and
    is blocked."""
    _counts(op, 1, 2, "mhlo.topk")
    return (
        RuleBuilder.for_op(op)
        .add_pointwise_with_diff_type_for_mismatch(operand_shape(op, 0), result_shape(op, 0), NEED, True)
        .build()
    )


def _approx_top_k(op: OpInfo, conservative: bool) -> OpShardingRule:
    """Operands (operand, iota, init value, init index), results (values, indices). The
    reduced dimension is a factor of the operand and iota and another, blocked and
    need-replication, of the results."""
    _counts(op, 4, 2, "ApproxTopK")
    ins, outs = operand_shape(op, 0), result_shape(op, 0)
    if len(ins) != len(outs):
        raise OpInfoError(f"{op.name}: expected operand and result of equal rank, got {ins} and {outs}")
    b = RuleBuilder.for_op(op)
    for d, (i, o) in enumerate(zip(ins, outs)):
        if i == o:
            b.add_factor_for_all(d, i)
        else:
            b.add_factor([d, d, -1, -1], [-1, -1], i)
            b.add_factor([-1, -1, -1, -1], [d, d], o, NEED, True)
    return b.build()


def _x64_combine(op: OpInfo, conservative: bool) -> OpShardingRule | None:
    """Pointwise, except when an ``rng_bit_generator`` uses the result: its state must stay
    replicated, so the one dimension needs replication and is blocked."""
    if any("stablehlo.rng_bit_generator" in r.users for r in op.results):
        shape = result_shape(op, 0)
        if len(shape) != 1:
            raise OpInfoError(f"custom_call @X64Combine: expected a rank-1 result, got shape {shape}")
        return RuleBuilder.for_op(op).add_factor_for_all(0, shape[0], NEED, True).build()
    return pointwise(op)


#: Target name -> rule, for the targets Shardy knows.
CUSTOM_CALL_RULES: dict[str, RuleFunction] = {
    **{t: _pointwise for t in POINTWISE_TARGETS},
    "Eigh": _eigh,
    "Qr": _qr,
    "QrDecompositionBlock": _qr,
    "ProductOfElementaryHouseholderReflectors": _householder,
    "mhlo.topk": _top_k,
    "ApproxTopK": _approx_top_k,
    "PartialReduce": _approx_top_k,
    "X64Combine": _x64_combine,
}
