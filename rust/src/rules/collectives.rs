//! Collectives that change a dimension: `all_gather`, `all_to_all`, `reduce_scatter` (Shardy
//! `op_sharding_rule_registry.cc`). The shape-preserving collectives (`all_reduce`,
//! `collective_permute`, `collective_broadcast`) are pointwise, in `elementwise.rs`.

use super::{attrs, OpDesc};
use crate::error::Result;
use crate::rule::{FactorKind, OpShardingRule};

const NEED: FactorKind = FactorKind::NeedReplication;

/// The changed dimension gets one need-replication factor in the operands and another in the
/// results; the other dimensions are pointwise.
fn gather_or_scatter(op: &OpDesc, dim_attr: &str) -> Result<Option<OpShardingRule>> {
    let dim = attrs::int(op, dim_attr, None)?;
    let (ins, outs) = (op.operand_shape(0, "")?, op.result_shape(0, "")?);
    op.require_dim(dim, &ins, dim_attr)?;
    op.require_dim(dim, &outs, dim_attr)?;
    let mut b = op.builder();
    b.add_pointwise_if(&ins, |d| d as i64 != dim, |_| FactorKind::PassThrough)?
        .add_factor_for_all_operands(dim, ins[dim as usize], NEED, false)?
        .add_factor_for_all_results(dim, outs[dim as usize], NEED, false)?;
    Ok(Some(b.build()))
}

pub(super) fn all_gather(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    gather_or_scatter(op, "all_gather_dim")
}

pub(super) fn reduce_scatter(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    gather_or_scatter(op, "scatter_dimension")
}

pub(super) fn all_to_all(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let (split, concat) = (attrs::int(op, "split_dimension", None)?, attrs::int(op, "concat_dimension", None)?);
    let (ins, outs) = (op.operand_shape(0, "")?, op.result_shape(0, "")?);
    for (d, what) in [(split, "split_dimension"), (concat, "concat_dimension")] {
        op.require_dim(d, &ins, what)?;
        op.require_dim(d, &outs, what)?;
    }
    let mut b = op.builder();
    b.add_pointwise_if(&ins, |d| d as i64 != split && d as i64 != concat, |_| FactorKind::PassThrough)?
        .add_factor_for_all_operands(split, ins[split as usize], NEED, false)?
        .add_factor_for_all_results(split, outs[split as usize], NEED, false)?;
    if split != concat {
        b.add_factor_for_all_operands(concat, ins[concat as usize], NEED, false)?.add_factor_for_all_results(
            concat,
            outs[concat as usize],
            NEED,
            false,
        )?;
    }
    Ok(Some(b.build()))
}
