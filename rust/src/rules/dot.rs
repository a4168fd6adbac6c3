//! `dot_general` and `dot` (Shardy `op_sharding_rule_registry.cc`): batching dimensions, then
//! lhs and rhs non-contracting dimensions (all pass-through, in result order), then
//! contracting dimensions (reduction).

use super::{attrs, OpDesc};
use crate::error::Result;
use crate::rule::{FactorKind, OpShardingRule, NULL_DIM};

pub(super) fn dot_general(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let nums = attrs::structure(op, "dot_dimension_numbers", "dot")?;
    let lhs_batch = nums.list("lhs_batching_dimensions");
    let rhs_batch = nums.list("rhs_batching_dimensions");
    let lhs_contract = nums.list("lhs_contracting_dimensions");
    let rhs_contract = nums.list("rhs_contracting_dimensions");
    if lhs_batch.len() != rhs_batch.len() || lhs_contract.len() != rhs_contract.len() {
        return Err(
            op.error(format_args!("expected as many lhs as rhs batching and contracting dimensions, got {nums}"))
        );
    }
    let (lhs, rhs) = (op.operand_shape(0, "lhs")?, op.operand_shape(1, "rhs")?);
    for &d in lhs_batch.iter().chain(&lhs_contract) {
        if !(0..lhs.len() as i64).contains(&d) {
            return Err(op.error(format_args!("lhs dimension {d} out of range for shape {}", super::tuple(&lhs))));
        }
    }
    let mut b = op.builder();
    let mut out = 0;
    for (&ld, &rd) in lhs_batch.iter().zip(&rhs_batch) {
        b.add_factor(&[ld, rd], &[out], lhs[ld as usize], FactorKind::PassThrough, false)?;
        out += 1;
    }
    for (i, &size) in lhs.iter().enumerate() {
        let i = i as i64;
        if !lhs_contract.contains(&i) && !lhs_batch.contains(&i) {
            b.add_factor(&[i, NULL_DIM], &[out], size, FactorKind::PassThrough, false)?;
            out += 1;
        }
    }
    for (i, &size) in rhs.iter().enumerate() {
        let i = i as i64;
        if !rhs_contract.contains(&i) && !rhs_batch.contains(&i) {
            b.add_factor(&[NULL_DIM, i], &[out], size, FactorKind::PassThrough, false)?;
            out += 1;
        }
    }
    for (&ld, &rd) in lhs_contract.iter().zip(&rhs_contract) {
        b.add_factor(&[ld, rd], &[NULL_DIM], lhs[ld as usize], FactorKind::Reduction, false)?;
    }
    Ok(Some(b.build()))
}

pub(super) fn dot(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let (lhs, rhs) = (op.operand_shape(0, "lhs")?, op.operand_shape(1, "rhs")?);
    if rhs.is_empty() {
        return Err(op.error(format_args!("expected a rhs of rank 1 or 2, got shape {}", super::tuple(&rhs))));
    }
    let (lhs_matrix, rhs_matrix) = (lhs.len() == 2, rhs.len() == 2);
    let mut b = op.builder();
    if lhs_matrix {
        b.add_factor(&[0, NULL_DIM], &[0], lhs[0], FactorKind::PassThrough, false)?;
    }
    if rhs_matrix {
        b.add_factor(&[NULL_DIM, 1], &[i64::from(lhs_matrix)], rhs[1], FactorKind::PassThrough, false)?;
    }
    b.add_factor(&[i64::from(lhs_matrix), 0], &[NULL_DIM], rhs[0], FactorKind::Reduction, false)?;
    Ok(Some(b.build()))
}
