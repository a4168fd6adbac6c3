//! `stablehlo.custom_call` targets Shardy knows (Shardy `op_sharding_rule_registry.cc`):
//! pointwise targets (device placement, layout, erf, X64 split, SPMD-internal permutes, ...),
//! `Eigh`, `Qr`, `QrDecompositionBlock`, `ProductOfElementaryHouseholderReflectors`,
//! `mhlo.topk`, `ApproxTopK`, `PartialReduce` and `X64Combine`. Some targets (Python
//! callbacks, TPU custom calls) get no rule on purpose ([`NO_RULE_TARGETS`]).

use super::{tuple, OpDesc};
use crate::error::Result;
use crate::rule::{FactorKind, OpShardingRule, NULL_DIM};

const NEED: FactorKind = FactorKind::NeedReplication;
const PASS: FactorKind = FactorKind::PassThrough;

/// Targets Shardy deliberately leaves without a rule (and without a warning).
pub const NO_RULE_TARGETS: &[&str] = &[
    "sdy_testonly",
    "tpu_custom_call",
    "xla_python_cpu_callback",
    "xla_python_gpu_callback",
    "xla_ffi_python_cpu_callback",
    "xla_ffi_python_gpu_callback",
];

const POINTWISE_TARGETS: &[&str] = &[
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
    // SPMD-internal collective permutes: every result is sharded like the input.
    "_SPMDInternalOp_MultiPad",
    "_SPMDInternalOp_RotateRight",
    "_SPMDInternalOp_MultiRotate",
    "_SPMDInternalOp_MultiSlice",
    "_SPMDInternalOp_Wrap",
];

/// The targets with a rule (the pointwise ones, then the others).
pub fn custom_call_targets() -> Vec<&'static str> {
    let mut targets = POINTWISE_TARGETS.to_vec();
    targets.extend([
        "Eigh",
        "Qr",
        "QrDecompositionBlock",
        "ProductOfElementaryHouseholderReflectors",
        "mhlo.topk",
        "ApproxTopK",
        "PartialReduce",
        "X64Combine",
    ]);
    debug_assert!(targets.iter().all(|t| target_rule(t).is_some()));
    targets
}

type TargetRule = fn(&OpDesc, bool) -> Result<Option<OpShardingRule>>;

/// The rule function of custom-call `target`, if Shardy knows the target.
pub(super) fn target_rule(target: &str) -> Option<TargetRule> {
    let f: TargetRule = match target {
        t if POINTWISE_TARGETS.contains(&t) => |op, _| super::pointwise(op),
        "Eigh" => eigh,
        "Qr" | "QrDecompositionBlock" => qr,
        "ProductOfElementaryHouseholderReflectors" => householder,
        "mhlo.topk" => top_k,
        "ApproxTopK" | "PartialReduce" => approx_top_k,
        "X64Combine" => x64_combine,
        _ => return None,
    };
    Some(f)
}

fn counts(op: &OpDesc, operands: usize, results: usize, target: &str) -> Result<()> {
    if op.operands.len() != operands || op.results.len() != results {
        return Err(crate::error::Error::op_info(format!(
            "custom_call @{target}: expected {operands} operands and {results} results, got {} and {}",
            op.operands.len(),
            op.results.len()
        )));
    }
    Ok(())
}

/// Batch dimensions pointwise; the matrix dimensions correspond between the input and the
/// eigenvectors, and the last one also to the eigenvalues' only non-batch dimension.
fn eigh(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    counts(op, 1, 2, "Eigh")?;
    let ins = op.operand_shape(0, "")?;
    op.require_rank(&ins, 2, "operand")?;
    let (d1, d2) = (ins.len() - 2, ins.len() - 1);
    let mut b = op.builder();
    b.add_pointwise(&ins[..d1], |_| PASS, |_| false)?
        .add_factor(&[d1 as i64], &[d1 as i64, NULL_DIM], ins[d1], PASS, false)?
        .add_factor(&[d2 as i64], &[d2 as i64, d1 as i64], ins[d2], PASS, false)?;
    Ok(Some(b.build()))
}

/// Batch dimensions pointwise; the matrix dimensions of input and first result need
/// replication, and so does the second result's own non-batch dimension.
fn qr(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    counts(op, 1, 2, "Qr")?;
    let (ins, rhs) = (op.operand_shape(0, "")?, op.result_shape(1, "")?);
    op.require_rank(&ins, 2, "operand")?;
    let (d1, d2) = (ins.len() - 2, ins.len() - 1);
    op.require_rank(&rhs, d1 + 1, "second result")?;
    let mut b = op.builder();
    b.add_pointwise(&ins[..d1], |_| PASS, |_| false)?
        .add_factor(&[d1 as i64], &[d1 as i64, NULL_DIM], ins[d1], NEED, false)?
        .add_factor(&[d2 as i64], &[d2 as i64, NULL_DIM], ins[d2], NEED, false)?
        .add_factor(&[NULL_DIM], &[NULL_DIM, d1 as i64], rhs[d1], NEED, false)?;
    Ok(Some(b.build()))
}

/// Batch dimensions pointwise; the matrix dimensions of the first input and the result need
/// replication, and so does the taus' own non-batch dimension.
fn householder(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let (lhs, taus) = (op.operand_shape(0, "")?, op.operand_shape(1, "taus")?);
    op.require_rank(&lhs, 2, "first operand")?;
    let (d1, d2) = (lhs.len() - 2, lhs.len() - 1);
    op.require_rank(&taus, d1 + 1, "taus")?;
    let mut b = op.builder();
    b.add_pointwise(&lhs[..d1], |_| PASS, |_| false)?
        .add_factor(&[d1 as i64, NULL_DIM], &[d1 as i64], lhs[d1], NEED, false)?
        .add_factor(&[d2 as i64, NULL_DIM], &[d2 as i64], lhs[d2], NEED, false)?
        .add_factor(&[NULL_DIM, d1 as i64], &[NULL_DIM], taus[d1], NEED, false)?;
    Ok(Some(b.build()))
}

/// Pointwise between operand and both results; the top-k dimension needs replication and is
/// blocked.
fn top_k(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    counts(op, 1, 2, "mhlo.topk")?;
    super::slicing::with_mismatch(op, NEED, true)
}

/// Operands (operand, iota, init value, init index), results (values, indices). The reduced
/// dimension is a factor of the operand and iota and another, blocked and need-replication, of
/// the results.
fn approx_top_k(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    counts(op, 4, 2, "ApproxTopK")?;
    let (ins, outs) = (op.operand_shape(0, "")?, op.result_shape(0, "")?);
    if ins.len() != outs.len() {
        return Err(op.error(format_args!(
            "expected operand and result of equal rank, got {} and {}",
            tuple(&ins),
            tuple(&outs)
        )));
    }
    let mut b = op.builder();
    for (d, (&i, &o)) in ins.iter().zip(&outs).enumerate() {
        let d = d as i64;
        if i == o {
            b.add_factor_for_all(d, i, PASS, false)?;
        } else {
            b.add_factor(&[d, d, NULL_DIM, NULL_DIM], &[NULL_DIM, NULL_DIM], i, PASS, false)?;
            b.add_factor(&[NULL_DIM; 4], &[d, d], o, NEED, true)?;
        }
    }
    Ok(Some(b.build()))
}

/// Pointwise, except when an `rng_bit_generator` uses the result: its state must stay
/// replicated, so the one dimension needs replication and is blocked.
fn x64_combine(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    if op.results.iter().any(|r| r.users.iter().any(|u| u == "stablehlo.rng_bit_generator")) {
        let shape = op.result_shape(0, "")?;
        if shape.len() != 1 {
            return Err(crate::error::Error::op_info(format!(
                "custom_call @X64Combine: expected a rank-1 result, got shape {}",
                tuple(&shape)
            )));
        }
        let mut b = op.builder();
        b.add_factor_for_all(0, shape[0], NEED, true)?;
        return Ok(Some(b.build()));
    }
    super::pointwise(op)
}
