//! The basic strategy (Shardy `BasicFactorPropagation` in
//! `shardy/dialect/sdy/transforms/propagation/basic_factor_propagation.{h,cc}`): along each
//! factor, propagate to every tensor the longest list of major axes that is compatible with all
//! tensors and conflicts with nothing.
//!
//! The building blocks are public so that other strategies (the aggressive one) reuse them.

use super::{check_factor_sizes, FactorPropagation, OpInfo, PropagationDirection};
use crate::axis::{AxisRef, SubAxis};
use crate::error::Result;
use crate::mesh::Mesh;
use crate::propagation::axes::{axis_size, gcd, prefix_without_overlap_list_in_place};
use crate::propagation::projection::{
    FactorSharding, ShardingProjection, TensorFactorShardings, UpdateTensorShardings,
};

/// The basic factor propagation strategy (Shardy `BasicFactorPropagation`): for each factor,
/// [`compatible_major_sharding_axes`], then [`ShardingProjection::expand_sharding`].
#[derive(Debug, Clone, Copy, Default)]
pub struct BasicFactorPropagation;

impl FactorPropagation for BasicFactorPropagation {
    fn propagate_factor_shardings(
        &self,
        projection: &mut ShardingProjection,
        direction_along_factor: &dyn Fn(usize) -> PropagationDirection,
        factor_sizes: &[i64],
        mesh: Option<&Mesh>,
        conservative: bool,
        _op: OpInfo,
    ) -> Result<UpdateTensorShardings> {
        check_factor_sizes(projection, factor_sizes)?;
        let mut updated = UpdateTensorShardings::new(projection.num_operands(), projection.num_results());
        for (f, &size) in factor_sizes.iter().enumerate() {
            let axes =
                compatible_major_sharding_axes(projection, f, direction_along_factor(f), size, mesh, conservative)?;
            updated |= &projection.expand_sharding(f, &axes);
        }
        Ok(updated)
    }

    fn cache_id(&self) -> Option<u8> {
        Some(0)
    }
}

/// Merges the axes `new_axes` of one more tensor into the compatible major axes `result`
/// found so far (Shardy's `getCompatibleMajorAxesInternal`), in place. Returns whether the
/// merged list may still be extended by later tensors.
///
/// For example, with `can_expand`, `["x"]` then `["x", "y"]` merge to `["x", "y"]`, `["x", "y"]`
/// then `["x", "z"]` to `["x"]` (which may then no longer grow), and `["x":(1)2]` then
/// `["x":(1)8]` to `["x":(1)8]`. Without `can_expand` the result never grows.
fn merge_compatible_major_axes(result: &mut Vec<AxisRef>, new_axes: &[AxisRef], can_expand: bool) -> bool {
    let n = result.len().min(new_axes.len());
    for i in 0..n {
        let (old, new) = (&result[i], &new_axes[i]);
        if old.name != new.name {
            result.truncate(i);
            return false;
        }
        if old.sub == new.sub {
            continue;
        }
        if new.prefix_of(old) {
            if i + 1 < new_axes.len() {
                // A further new axis would conflict with the rest of the old one.
                result[i] = new.clone();
                result.truncate(i + 1);
                return false;
            }
            // The old (longer) axis extends the new list; keep it.
        } else if old.prefix_of(new) {
            if !can_expand || i + 1 < result.len() {
                result.truncate(i + 1);
                return false;
            }
            result[i] = new.clone();
        } else {
            // Two different parts of one axis.
            result.truncate(i);
            return false;
        }
    }
    if can_expand && new_axes.len() > n {
        result.extend_from_slice(&new_axes[n..]);
    }
    can_expand
}

/// The longest list of axes sharding `factor` such that every tensor that has the factor
/// either has that list as its axes for the factor, or a prefix of it and nothing further,
/// ignoring conflicts with other factors and with replicated or unreduced axes (Shardy
/// `BasicFactorPropagation::getCompatibleMajorAxes`).
///
/// With [`PropagationDirection::Forward`] only operands may extend the list (results only cut
/// it where they conflict); with [`PropagationDirection::Backward`] only results; with
/// [`PropagationDirection::None`] the list is empty.
pub fn compatible_major_axes(
    projection: &ShardingProjection,
    factor: usize,
    direction: PropagationDirection,
) -> Vec<AxisRef> {
    let (first, second) = match direction {
        PropagationDirection::None => return Vec::new(),
        PropagationDirection::Both | PropagationDirection::Forward => (&projection.operands, &projection.results),
        PropagationDirection::Backward => (&projection.results, &projection.operands),
    };
    let mut result = Vec::new();
    let mut can_expand = true;
    for t in first {
        if let Some(s) = t.get(factor) {
            can_expand = merge_compatible_major_axes(&mut result, &s.axes, can_expand);
        }
    }
    if direction != PropagationDirection::Both {
        can_expand = false;
    }
    for t in second {
        if let Some(s) = t.get(factor) {
            can_expand = merge_compatible_major_axes(&mut result, &s.axes, can_expand);
        }
    }
    result
}

/// Shrinks `axis` to its largest prefix that overlaps neither the axes nor the overflow axes of
/// any factor of `tensor` other than `factor` (Shardy
/// `BasicFactorPropagation::compatiblePrefixNoConflictsAcrossFactors`). Returns `false` when
/// no prefix is left. Only `axis.sub` changes.
pub fn compatible_prefix_no_conflicts_across_factors(
    axis: &mut AxisRef,
    tensor: &TensorFactorShardings,
    factor: usize,
) -> bool {
    tensor.iter().filter(|&(f, _)| f != factor).all(|(_, s)| {
        prefix_without_overlap_list_in_place(axis, &s.overflow_axes)
            && prefix_without_overlap_list_in_place(axis, &s.axes)
    })
}

/// Shrinks `axis` to its largest prefix compatible with a tensor's sharding of the factor
/// (Shardy `BasicFactorPropagation::compatiblePrefixNoConflictsWithinFactor`): not replicated
/// (`replicated`), not unreduced (`unreduced`), and either already within the factor's axes,
/// or addable to them: the factor is open, has no overflow axes, and is minor-most or still
/// divisible (`prev_sharded_size`, the product of the axes before `axis`, times the prefix
/// divides `factor_size`; the prefix may be a sub-axis of size gcd). Failing that, the factor's
/// last axis when it is a prefix of `axis`. Without `mesh`, divisibility is not checked.
///
/// Returns `Ok(false)` when no prefix is left; errors only when a full axis is unknown to
/// `mesh`. Only `axis.sub` changes.
pub fn compatible_prefix_no_conflicts_within_factor(
    axis: &mut AxisRef,
    replicated: &[AxisRef],
    unreduced: &[AxisRef],
    sharding: &FactorSharding,
    prev_sharded_size: i64,
    factor_size: i64,
    mesh: Option<&Mesh>,
) -> Result<bool> {
    if !prefix_without_overlap_list_in_place(axis, replicated) || !prefix_without_overlap_list_in_place(axis, unreduced)
    {
        return Ok(false);
    }
    if sharding.axes.iter().any(|a| a.contains(axis)) {
        return Ok(true);
    }
    if !sharding.closed && sharding.overflow_axes.is_empty() {
        if sharding.minor_most {
            return Ok(true);
        }
        let Some(mesh) = mesh else { return Ok(true) };
        if prev_sharded_size != 0 && factor_size.checked_rem(prev_sharded_size) == Some(0) {
            let size = axis_size(axis, Some(mesh))?;
            let common = gcd(factor_size / prev_sharded_size, size);
            if common == size {
                return Ok(true);
            }
            if common != 1 {
                axis.sub = Some(SubAxis { pre_size: axis.pre_size(), size: common });
                return Ok(true);
            }
        }
    }
    // The whole prefix cannot be added; the factor's own last axis may still be kept.
    match sharding.axes.last() {
        Some(last) if last.prefix_of(axis) => {
            axis.sub = last.sub;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Truncates `axes` at the first conflict (Shardy
/// `BasicFactorPropagation::truncateAxesByRemovingConflicts`). For each axis in turn,
/// `remove_conflicts(axis, prev_sharded_size)` shrinks it to its compatible prefix (returning
/// `false` when none is left), where `prev_sharded_size` is the product of the sizes of the
/// axes before it (1 throughout without `mesh`). No prefix left, or a sub-axis in
/// `conservative` mode: the axis and all after it are dropped. A shorter prefix: it replaces
/// the axis and all after it are dropped. Otherwise the next axis is checked.
pub fn truncate_axes_by_removing_conflicts(
    axes: &mut Vec<AxisRef>,
    mut remove_conflicts: impl FnMut(&mut AxisRef, i64) -> Result<bool>,
    mesh: Option<&Mesh>,
    conservative: bool,
) -> Result<()> {
    let mut prev_sharded_size = 1i64;
    for i in 0..axes.len() {
        let original = axes[i].sub;
        let kept = remove_conflicts(&mut axes[i], prev_sharded_size)?;
        if !kept || (conservative && axes[i].sub.is_some()) {
            axes.truncate(i);
            return Ok(());
        }
        if axes[i].sub != original {
            axes.truncate(i + 1);
            return Ok(());
        }
        if mesh.is_some() {
            prev_sharded_size = prev_sharded_size.saturating_mul(axis_size(&axes[i], mesh)?);
        }
    }
    Ok(())
}

/// Shrinks `axis` against every tensor of `projection`: conflicts with other factors in all of
/// them, and conflicts within the factor in those that have it (Shardy's two
/// `BasicFactorPropagation::compatiblePrefix` overloads).
fn compatible_prefix(
    axis: &mut AxisRef,
    projection: &ShardingProjection,
    factor: usize,
    prev_sharded_size: i64,
    factor_size: i64,
    mesh: Option<&Mesh>,
) -> Result<bool> {
    for t in projection.tensors() {
        if !compatible_prefix_no_conflicts_across_factors(axis, t, factor) {
            return Ok(false);
        }
        // A tensor without the factor only conflicts through its other factors; its
        // (implicitly or explicitly) replicated and unreduced axes do not matter.
        if let Some(s) = t.get(factor) {
            if !compatible_prefix_no_conflicts_within_factor(
                axis,
                &t.replicated,
                &t.unreduced,
                s,
                prev_sharded_size,
                factor_size,
                mesh,
            )? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// The axes to propagate along `factor` to every tensor (Shardy
/// `BasicFactorPropagation::getCompatibleMajorShardingAxes`): the [`compatible_major_axes`],
/// truncated at the first axis that conflicts with any tensor. An axis conflicts when it
/// overlaps the axes or overflow axes of another factor of any tensor, or, in a tensor that has
/// the factor, its replicated or unreduced axes, or when such a tensor does not yet have it and
/// cannot take it (closed, overflow axes, or a non-minor-most factor it would not divide).
///
/// Absent other conflicts: tensors with `["x", "y"]` and `["x", "z"]` give `["x"]`; `[]`,
/// `["x", "y", "u"]`, `["x"]` and `["x", "y", "v"]` give `["x", "y"]`; `["x":(1)4]` and
/// `["x":(1)2]` give `["x":(1)4]`; `["x":(1)4]` and `["x":(1)2, "y"]` give `["x":(1)2]`.
pub fn compatible_major_sharding_axes(
    projection: &ShardingProjection,
    factor: usize,
    direction: PropagationDirection,
    factor_size: i64,
    mesh: Option<&Mesh>,
    conservative: bool,
) -> Result<Vec<AxisRef>> {
    let mut axes = compatible_major_axes(projection, factor, direction);
    truncate_axes_by_removing_conflicts(
        &mut axes,
        |axis, prev| compatible_prefix(axis, projection, factor, prev, factor_size, mesh),
        mesh,
        conservative,
    )?;
    Ok(axes)
}
