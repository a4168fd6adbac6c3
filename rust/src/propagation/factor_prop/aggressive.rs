//! The aggressive strategy (Shardy `AggressiveFactorPropagation` in
//! `shardy/dialect/sdy/transforms/propagation/aggressive_factor_propagation.{h,cc}`).
//!
//! It differs from the basic strategy in two ways. First, the tensors along one factor need
//! not all get the same axes: each tensor takes the longest prefix of the factor's compatible
//! major axes that conflicts with nothing *in that tensor*. If a matmul's lhs shards its batch
//! factor along `["x", "y"]` and the rhs uses `"y"` for its contracting factor, the basic
//! strategy gives the batch factor only `["x"]` everywhere; here the result gets `["x", "y"]`
//! and only the rhs is limited to `["x"]`. Second, an axis wanted by several factors of one
//! tensor is not dropped from all of them: factors are served in order of preference, each
//! against the tensor's shardings as already updated for the factors served before it.
//! A factor is preferred when its source tensor (the largest tensor whose axes for the factor
//! are a prefix of what is propagated, since resharding the smaller tensor is usually cheaper)
//! is larger; then, for elementwise ops, when more axes are propagated along it; then by the
//! source tensor's index; then by the factor's index.

use std::cmp::Reverse;

use super::basic::{
    compatible_major_axes, compatible_prefix_no_conflicts_across_factors, compatible_prefix_no_conflicts_within_factor,
    truncate_axes_by_removing_conflicts,
};
use super::{check_factor_sizes, FactorPropagation, OpInfo, PropagationDirection};
use crate::axis::AxisRef;
use crate::error::Result;
use crate::mesh::Mesh;
use crate::propagation::axes::total_axes_size;
use crate::propagation::projection::{
    axis_list_prefix_status, is_strict_prefix, PrefixStatus, ShardingProjection, TensorFactorShardings,
    UpdateTensorShardings,
};

/// The aggressive factor propagation strategy (Shardy `AggressiveFactorPropagation`); see the
/// module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct AggressiveFactorPropagation;

/// The source tensor of a factor: index and size, `(-1, -1)` when there is none.
#[derive(Clone, Copy)]
struct Source {
    index: i64,
    size: i64,
}

/// For each factor with axes to propagate, the largest tensor whose axes for it are a prefix
/// of (or equal to) those axes; ties keep the first such tensor (Shardy's
/// `getFactorToSourceTensor`). A tensor's size is the product of the sizes of its factors.
fn factor_sources(
    projection: &ShardingProjection,
    factor_sizes: &[i64],
    axes_per_factor: &[Vec<AxisRef>],
) -> Vec<Source> {
    let mut sources = vec![Source { index: -1, size: -1 }; factor_sizes.len()];
    for (t, tensor) in projection.tensors().enumerate() {
        let size = tensor.iter().fold(1i64, |acc, (f, _)| acc.saturating_mul(factor_sizes[f]));
        for (f, s) in tensor.iter() {
            let axes = &axes_per_factor[f];
            let is_source = !axes.is_empty() && axis_list_prefix_status(axes, &s.axes) != PrefixStatus::NotAPrefix;
            if is_source && size > sources[f].size {
                sources[f] = Source { index: t as i64, size };
            }
        }
    }
    sources
}

/// The axes to propagate to `factor` of `tensor` (Shardy
/// `AggressiveFactorPropagation::getPropagatedFactorSharding`): the factor's compatible major
/// axes, truncated first by conflicts within the factor in this tensor, then (if they still
/// extend what the tensor has) by conflicts with the tensor's other factors as they are now.
/// Empty when nothing is to be propagated.
fn propagated_factor_axes(
    factor: usize,
    tensor: &TensorFactorShardings,
    axes_per_factor: &[Vec<AxisRef>],
    mesh: Option<&Mesh>,
    conservative: bool,
    factor_sizes: &[i64],
) -> Result<Vec<AxisRef>> {
    let Some(sharding) = tensor.get(factor) else { return Ok(Vec::new()) };
    let mut axes = axes_per_factor[factor].clone();
    truncate_axes_by_removing_conflicts(
        &mut axes,
        |axis, prev| {
            compatible_prefix_no_conflicts_within_factor(
                axis,
                &tensor.replicated,
                &tensor.unreduced,
                sharding,
                prev,
                factor_sizes[factor],
                mesh,
            )
        },
        mesh,
        conservative,
    )?;
    if !is_strict_prefix(&sharding.axes, &axes) {
        return Ok(Vec::new());
    }
    truncate_axes_by_removing_conflicts(
        &mut axes,
        |axis, _| Ok(compatible_prefix_no_conflicts_across_factors(axis, tensor, factor)),
        mesh,
        conservative,
    )?;
    Ok(axes)
}

impl FactorPropagation for AggressiveFactorPropagation {
    fn propagate_factor_shardings(
        &self,
        projection: &mut ShardingProjection,
        direction_along_factor: &dyn Fn(usize) -> PropagationDirection,
        factor_sizes: &[i64],
        mesh: Option<&Mesh>,
        conservative: bool,
        op: OpInfo,
    ) -> Result<UpdateTensorShardings> {
        check_factor_sizes(projection, factor_sizes)?;
        let mut updated = UpdateTensorShardings::new(projection.num_operands(), projection.num_results());

        // 1. The compatible major axes of each factor, ignoring conflicts.
        let axes_per_factor: Vec<Vec<AxisRef>> =
            (0..factor_sizes.len()).map(|f| compatible_major_axes(projection, f, direction_along_factor(f))).collect();
        if axes_per_factor.iter().all(Vec::is_empty) {
            return Ok(updated);
        }

        // 2. The order in which factors are served.
        let sources = factor_sources(projection, factor_sizes, &axes_per_factor);
        let sharded_sizes: Vec<i64> = if op.elementwise {
            axes_per_factor.iter().map(|a| total_axes_size(a, mesh)).collect::<Result<_>>()?
        } else {
            vec![0; factor_sizes.len()]
        };
        let mut order: Vec<usize> = (0..factor_sizes.len()).collect();
        order.sort_unstable_by_key(|&f| (Reverse(sources[f].size), Reverse(sharded_sizes[f]), sources[f].index, f));

        // 3. Results first, then operands; each tensor factor by factor in that order, each
        //    against the tensor as already updated for the factors before.
        for t in 0..projection.results.len() {
            let mut changed = false;
            for &f in &order {
                let axes = propagated_factor_axes(
                    f,
                    &projection.results[t],
                    &axes_per_factor,
                    mesh,
                    conservative,
                    factor_sizes,
                )?;
                if !axes.is_empty() {
                    changed |= projection.results[t].expand_sharding_axes(f, &axes);
                }
            }
            updated.results.set(t, changed);
        }
        for t in 0..projection.operands.len() {
            let mut changed = false;
            for &f in &order {
                let mut axes = propagated_factor_axes(
                    f,
                    &projection.operands[t],
                    &axes_per_factor,
                    mesh,
                    conservative,
                    factor_sizes,
                )?;
                if axes.is_empty() {
                    continue;
                }
                if op.elementwise {
                    // Sideways through operands only what some result already has: a result
                    // that is left replicated along the factor should not make one operand
                    // take another operand's axes.
                    for r in &projection.results {
                        if let Some(s) = r.get(f) {
                            if is_strict_prefix(&s.axes, &axes) {
                                axes.clone_from(&s.axes);
                            }
                        }
                    }
                }
                changed |= projection.operands[t].expand_sharding_axes(f, &axes);
            }
            updated.operands.set(t, changed);
        }
        Ok(updated)
    }

    fn cache_id(&self) -> Option<u8> {
        Some(1)
    }
}
