//! Pointwise ops and their near relatives: every element-wise StableHLO op Shardy's registry
//! lists, `sdy.sharding_constraint`, `clamp`, `select`, `reverse` and `bitcast_convert`
//! (Shardy `op_sharding_rule_registry.cc`).

use super::{attrs, OpDesc};
use crate::error::Result;
use crate::rule::{FactorKind, OpShardingRule, NULL_DIM};

/// Ops whose rule is Shardy's pointwise rule: factor `d` is dimension `d` of every operand
/// and result (the collectives that keep shapes included).
pub const POINTWISE_OPS: &[&str] = &[
    "sdy.sharding_constraint",
    "stablehlo.abs",
    "stablehlo.add",
    "stablehlo.all_reduce",
    "stablehlo.and",
    "stablehlo.atan2",
    "stablehlo.cbrt",
    "stablehlo.ceil",
    "stablehlo.count_leading_zeros",
    "stablehlo.collective_broadcast",
    "stablehlo.collective_permute",
    "stablehlo.compare",
    "stablehlo.complex",
    "stablehlo.convert",
    "stablehlo.cosine",
    "stablehlo.cross-replica-sum",
    "stablehlo.divide",
    "stablehlo.exponential",
    "stablehlo.exponential_minus_one",
    "stablehlo.floor",
    "stablehlo.imag",
    "stablehlo.is_finite",
    "stablehlo.log_plus_one",
    "stablehlo.log",
    "stablehlo.logistic",
    "stablehlo.maximum",
    "stablehlo.minimum",
    "stablehlo.multiply",
    "stablehlo.negate",
    "stablehlo.not",
    "stablehlo.or",
    "stablehlo.popcnt",
    "stablehlo.power",
    "stablehlo.real",
    "stablehlo.reduce_precision",
    "stablehlo.remainder",
    "stablehlo.round_nearest_even",
    "stablehlo.round_nearest_afz",
    "stablehlo.rsqrt",
    "stablehlo.shift_left",
    "stablehlo.shift_right_arithmetic",
    "stablehlo.shift_right_logical",
    "stablehlo.sign",
    "stablehlo.sine",
    "stablehlo.sqrt",
    "stablehlo.subtract",
    "stablehlo.tan",
    "stablehlo.tanh",
    "stablehlo.xor",
];

pub(super) fn pointwise(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    super::pointwise(op)
}

fn pass_through(_: usize) -> FactorKind {
    FactorKind::PassThrough
}

fn never(_: FactorKind) -> bool {
    false
}

/// Operands (min, operand, max); min and max may be scalars. Sized by `operand`.
pub(super) fn clamp(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let shape = op.operand_shape(1, "operand")?;
    Ok(Some(op.builder().add_pointwise(&shape, pass_through, never)?.build()))
}

/// A scalar predicate is skipped (rank 0); otherwise all three operands are pointwise.
pub(super) fn select(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let shape = op.result_shape(0, "")?;
    Ok(Some(op.builder().add_pointwise(&shape, pass_through, never)?.build()))
}

/// Reversed dimensions are permutation factors.
pub(super) fn reverse(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let dims = attrs::ints(op, "dimensions", None)?;
    let shape = op.result_shape(0, "")?;
    let kind = |d: usize| if dims.contains(&(d as i64)) { FactorKind::Permutation } else { FactorKind::PassThrough };
    Ok(Some(op.builder().add_pointwise(&shape, kind, never)?.build()))
}

/// The extra minor dimension of the narrower element type cannot be sharded.
pub(super) fn bitcast_convert(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let (ins, outs) = (op.operand_shape(0, "")?, op.result_shape(0, "")?);
    let mut b = op.builder();
    b.add_pointwise(if ins.len() < outs.len() { &ins } else { &outs }, pass_through, never)?;
    if ins.len() < outs.len() {
        let last = outs.len() - 1;
        b.add_factor(&[NULL_DIM], &[last as i64], outs[last], FactorKind::NeedReplication, false)?;
    } else if ins.len() > outs.len() {
        let last = ins.len() - 1;
        b.add_factor(&[last as i64], &[NULL_DIM], ins[last], FactorKind::NeedReplication, false)?;
    }
    Ok(Some(b.build()))
}
