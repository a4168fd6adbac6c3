//! Linear algebra, FFT and the remaining structured ops: `cholesky`, `triangular_solve`,
//! `fft`, `batch_norm_inference`, `rng_bit_generator` (Shardy `op_sharding_rule_registry.cc`).

use super::{attrs, OpDesc};
use crate::error::Result;
use crate::rule::{FactorKind, OpShardingRule, NULL_DIM};

const NEED: FactorKind = FactorKind::NeedReplication;
const PASS: FactorKind = FactorKind::PassThrough;

/// Leading batch dimensions are pass-through; the two matrix dimensions need replication.
pub(super) fn cholesky(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let shape = op.operand_shape(0, "")?;
    let batch = shape.len() as i64 - 2;
    let mut b = op.builder();
    b.add_pointwise(&shape, |d| if (d as i64) < batch { PASS } else { NEED }, |_| false)?;
    Ok(Some(b.build()))
}

/// Batch dimensions are pointwise. Left side solves `op(a) @ x = b`, right side
/// `x @ op(a) = b`: a's non-contracting dimension is shared with b, the contracting one with
/// the result, the result's other dimension with b; all need replication.
pub(super) fn triangular_solve(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let (a, b_shape) = (op.operand_shape(0, "a")?, op.operand_shape(1, "b")?);
    op.require_rank(&a, 2, "a")?;
    op.require_rank(&b_shape, a.len(), "b")?;
    let transposed =
        matches!(attrs::enum_case(op, "transpose_a", Some("NO_TRANSPOSE"))?.as_str(), "TRANSPOSE" | "ADJOINT");
    let left_side = attrs::boolean(op, "left_side", None)?;
    let mut b = op.builder();
    b.add_pointwise(&a[..a.len() - 2], |_| PASS, |_| false)?;
    let (d1, d2) = (a.len() as i64 - 2, a.len() as i64 - 1);
    let at = |s: &[i64], d: i64| s[d as usize];
    if left_side {
        let (non_contracting, contracting) = if transposed { (d2, d1) } else { (d1, d2) };
        b.add_factor(&[non_contracting, d1], &[NULL_DIM], at(&a, non_contracting), NEED, false)?;
        b.add_factor(&[NULL_DIM, d2], &[d2], at(&b_shape, d2), NEED, false)?;
        b.add_factor(&[contracting, NULL_DIM], &[d1], at(&a, contracting), NEED, false)?;
    } else {
        let (non_contracting, contracting) = if transposed { (d1, d2) } else { (d2, d1) };
        b.add_factor(&[NULL_DIM, d1], &[d1], at(&b_shape, d1), NEED, false)?;
        b.add_factor(&[non_contracting, d2], &[NULL_DIM], at(&a, non_contracting), NEED, false)?;
        b.add_factor(&[contracting, NULL_DIM], &[d2], at(&a, contracting), NEED, false)?;
    }
    Ok(Some(b.build()))
}

/// Leading dimensions are batch dimensions; the transformed ones need replication, the last
/// one blocked when the result truncates or expands it (real FFTs).
pub(super) fn fft(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let (ins, outs) = (op.operand_shape(0, "")?, op.result_shape(0, "")?);
    op.require_rank(&ins, 1, "operand")?;
    op.require_rank(&outs, 1, "result")?;
    let length = attrs::ints(op, "fft_length", None)?.len();
    // Shardy's unsigned arithmetic: a length beyond the rank leaves no batch dimension.
    let first_fft = if length <= ins.len() { ins.len() - length } else { usize::MAX };
    let mut b = op.builder();
    let last_blocked = ins[ins.len() - 1] != outs[outs.len() - 1];
    for (d, &size) in ins.iter().enumerate() {
        let di = d as i64;
        if d < first_fft {
            b.add_factor_for_all(di, size, PASS, false)?;
        } else if d < ins.len() - 1 {
            b.add_factor_for_all(di, size, NEED, false)?;
        } else {
            b.add_factor_for_all(di, size, NEED, last_blocked)?;
        }
    }
    Ok(Some(b.build()))
}

/// Pointwise between operand and result; the feature dimension is also the only dimension of
/// scale, offset, mean and variance.
pub(super) fn batch_norm_inference(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let feature = attrs::int(op, "feature_index", None)?;
    let mut b = op.builder();
    for (d, &size) in op.operand_shape(0, "")?.iter().enumerate() {
        let d = d as i64;
        let mut dims = vec![if d == feature { 0 } else { NULL_DIM }; op.operands.len()];
        dims[0] = d;
        b.add_factor(&dims, &[d], size, PASS, false)?;
    }
    Ok(Some(b.build()))
}

/// The initial and output states need replication and do not propagate to each other; the
/// random output gets pass-through factors of its own.
pub(super) fn rng_bit_generator(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let state = op.operand_shape(0, "initial_state")?;
    let output = op.result_shape(1, "output")?;
    let mut b = op.builder();
    for (d, &size) in state.iter().enumerate() {
        let d = d as i64;
        b.add_factor(&[d], &[d, NULL_DIM], size, NEED, true)?;
    }
    for (d, &size) in output.iter().enumerate() {
        b.add_factor(&[NULL_DIM], &[NULL_DIM, d as i64], size, PASS, false)?;
    }
    Ok(Some(b.build()))
}
