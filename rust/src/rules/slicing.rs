//! Ops that cut, pad or join tensors along dimensions: `concatenate`, `pad`, `slice`,
//! `dynamic_slice`, `dynamic_update_slice` (Shardy `op_sharding_rule_registry.cc`).

use super::{attrs, tuple, OpDesc, ValueDesc};
use crate::error::Result;
use crate::rule::{FactorKind, OpShardingRule, NULL_DIM};

/// Ops Shardy treats as constants (`sdy.constant` and ops with MLIR's `ConstantLike` trait).
pub const CONSTANT_OPS: &[&str] =
    &["sdy.constant", "stablehlo.constant", "arith.constant", "mhlo.constant", "chlo.constant", "tosa.const"];

fn is_slice(v: &ValueDesc) -> bool {
    v.defining_op.as_ref().is_some_and(|d| d.name == "stablehlo.slice")
}

/// The sliced tensor when `v` is the result of a `slice`, else `v`.
fn before_slice(v: &ValueDesc) -> &ValueDesc {
    match &v.defining_op {
        Some(d) if d.name == "stablehlo.slice" && !d.operands.is_empty() => &d.operands[0],
        _ => v,
    }
}

/// Pointwise; the concatenated dimension is a permutation factor when the operands are all
/// slices, or all the same tensor or slices of it with at least one slice, else
/// need-replication. Conservative: no factor for it (each tensor gets its own size-1 factor).
pub(super) fn concatenate(op: &OpDesc, conservative: bool) -> Result<Option<OpShardingRule>> {
    let dim = attrs::int(op, "dimension", None)?;
    let out = op.result_shape(0, "")?;
    op.require_dim(dim, &out, "dimension")?;
    if op.operands.is_empty() {
        return Err(op.error("expected at least one operand, got none"));
    }
    let concat_kind = if op.operands.iter().all(is_slice) {
        FactorKind::Permutation
    } else {
        let same = before_slice(&op.operands[0]);
        if op.operands.iter().all(|v| before_slice(v).same_value(same)) && op.operands.iter().any(is_slice) {
            FactorKind::Permutation
        } else {
            FactorKind::NeedReplication
        }
    };
    let dim = dim as usize;
    let kind = |d: usize| if d == dim { concat_kind } else { FactorKind::PassThrough };
    let mut b = op.builder();
    b.add_pointwise_if(&out, |d| !conservative || d != dim, kind)?;
    Ok(Some(b.build()))
}

/// Pointwise sized by the operand; differing dimensions get `kind`, blocked when `blocked`.
pub(super) fn with_mismatch(op: &OpDesc, kind: FactorKind, blocked: bool) -> Result<Option<OpShardingRule>> {
    let (ins, outs) = (op.operand_shape(0, "")?, op.result_shape(0, "")?);
    if ins.len() != outs.len() {
        return Err(op.error(format_args!("expected shapes of equal rank, got {} and {}", tuple(&ins), tuple(&outs))));
    }
    let mut b = op.builder();
    b.add_pointwise_with_diff_type_for_mismatch(&ins, &outs, kind, blocked)?;
    Ok(Some(b.build()))
}

/// Padded dimensions are permutation factors, blocked when conservative.
pub(super) fn pad(op: &OpDesc, conservative: bool) -> Result<Option<OpShardingRule>> {
    with_mismatch(op, FactorKind::Permutation, conservative)
}

/// Sliced dimensions are permutation factors (static start indices let the data shift),
/// blocked when conservative.
pub(super) fn slice(op: &OpDesc, conservative: bool) -> Result<Option<OpShardingRule>> {
    with_mismatch(op, FactorKind::Permutation, conservative)
}

/// Sliced dimensions need replication and are blocked.
pub(super) fn dynamic_slice(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    with_mismatch(op, FactorKind::NeedReplication, true)
}

/// Unsliced dimensions are pointwise. A sliced dimension gets a pass-through factor for the
/// operand and result, and a factor of its own for the update, need-replication unless every
/// start index is a constant.
pub(super) fn dynamic_update_slice(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let (shape, update) = (op.operand_shape(0, "operand")?, op.operand_shape(1, "update")?);
    if shape.len() != update.len() {
        return Err(op.error(format_args!(
            "expected operand and update of equal rank, got {} and {}",
            tuple(&shape),
            tuple(&update)
        )));
    }
    let constant = op.operands[2..]
        .iter()
        .all(|v| v.defining_op.as_ref().is_some_and(|d| CONSTANT_OPS.contains(&d.name.as_str())));
    let mut b = op.builder();
    let mut dims = vec![NULL_DIM; op.operands.len()];
    for (d, (&size, &usize_)) in shape.iter().zip(&update).enumerate() {
        let d = d as i64;
        if size == usize_ {
            b.add_factor_for_all(d, size, FactorKind::PassThrough, false)?;
        } else {
            (dims[0], dims[1]) = (d, NULL_DIM);
            b.add_factor(&dims, &[d], size, FactorKind::PassThrough, false)?;
            (dims[0], dims[1]) = (NULL_DIM, d);
            let kind = if constant { FactorKind::PassThrough } else { FactorKind::NeedReplication };
            b.add_factor(&dims, &[NULL_DIM], usize_, kind, false)?;
        }
    }
    Ok(Some(b.build()))
}
