//! Factor propagation strategies (Shardy `FactorPropagation` in
//! `shardy/dialect/sdy/transforms/propagation/factor_propagation.h`): given the
//! [`ShardingProjection`] of an op, decide which axes to propagate along each factor and expand
//! the factor shardings of the op's tensors in place.
//!
//! Two strategies: [`BasicFactorPropagation`] propagates along each factor the same axes to
//! every tensor, only those compatible with all of them; [`AggressiveFactorPropagation`]
//! resolves conflicts, possibly giving different tensors different axes along one factor.

mod aggressive;
mod basic;

pub use aggressive::AggressiveFactorPropagation;
pub use basic::{
    compatible_major_axes, compatible_major_sharding_axes, compatible_prefix_no_conflicts_across_factors,
    compatible_prefix_no_conflicts_within_factor, truncate_axes_by_removing_conflicts, BasicFactorPropagation,
};

use super::projection::{ShardingProjection, UpdateTensorShardings};
use crate::error::{Error, Result};
use crate::mesh::Mesh;
use crate::rule::OpShardingRule;

/// In which direction shardings may propagate along a factor (Shardy `PropagationDirection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PropagationDirection {
    /// Not at all.
    None,
    /// From operands to results: only operands may extend the axes, results are checked for
    /// conflicts.
    Forward,
    /// From results to operands: only results may extend the axes, operands are checked for
    /// conflicts.
    Backward,
    /// Both ways.
    #[default]
    Both,
}

/// What a strategy may want to know about the op it propagates through (Shardy passes the
/// `Operation*` itself, possibly null). Default: nothing special.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OpInfo {
    /// The op is elementwise (Shardy `isElementwise`: unary/binary elementwise stablehlo ops).
    /// The aggressive strategy then prefers more sharded factors and does not propagate
    /// sideways to operands beyond what results already have.
    pub elementwise: bool,
}

/// A strategy for propagating factor shardings (Shardy `FactorPropagation`).
pub trait FactorPropagation {
    /// Propagates the factor shardings of `projection` in place and returns which operands and
    /// results changed (Shardy `propagateFactorShardings`).
    ///
    /// * `direction_along_factor(f)` says in which direction factor `f` may propagate;
    /// * `factor_sizes[f]` is the size of factor `f`; every factor of the projection needs one;
    /// * `mesh` gives the sizes of full axes. Without a mesh (as in Shardy's unit tests)
    ///   divisibility of non-minor-most factors is not checked;
    /// * `conservative` forbids propagating sub-axes: a sub-axis in the result, and any axis
    ///   after it, is dropped;
    /// * `op` describes the op for strategies that care.
    ///
    /// Errors when the projection has a factor without a size, or a full axis must be sized
    /// and `mesh` lacks it (or is `None`). Blocked-propagation factors are the caller's to map
    /// to [`PropagationDirection::None`], as Shardy's caller does; see
    /// [`direction_with_blocked_factors`].
    fn propagate_factor_shardings(
        &self,
        projection: &mut ShardingProjection,
        direction_along_factor: &dyn Fn(usize) -> PropagationDirection,
        factor_sizes: &[i64],
        mesh: Option<&Mesh>,
        conservative: bool,
        op: OpInfo,
    ) -> Result<UpdateTensorShardings>;

    /// An id that is the same for two strategies exactly when they propagate alike, so that
    /// the solver may reuse what it learnt of one visit with this strategy for another (see
    /// `propagation::visit_cache`); `None` (the default) lets it reuse nothing.
    fn cache_id(&self) -> Option<u8> {
        None
    }
}

/// `direction(f)`, except [`PropagationDirection::None`] for the factors `rule` blocks (what
/// Shardy's `propagateTensorShardings` in `basic_propagation.cc` wraps around the direction it
/// is given).
pub fn direction_with_blocked_factors<'a>(
    rule: &'a OpShardingRule,
    direction: impl Fn(usize) -> PropagationDirection + 'a,
) -> impl Fn(usize) -> PropagationDirection + 'a {
    move |f| {
        if i64::try_from(f).is_ok_and(|f| rule.is_blocked(f)) {
            PropagationDirection::None
        } else {
            direction(f)
        }
    }
}

/// Checks that every factor of `projection` has a size in `factor_sizes`.
pub(crate) fn check_factor_sizes(projection: &ShardingProjection, factor_sizes: &[i64]) -> Result<()> {
    let bound = projection.factor_bound();
    if bound > factor_sizes.len() {
        return Err(Error::invariant(
            "propagation-factor-out-of-range",
            format!(
                "the projection has factor index {} but only {} factor sizes were given",
                bound - 1,
                factor_sizes.len()
            ),
        ));
    }
    Ok(())
}
