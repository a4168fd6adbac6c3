//! Sharding propagation (Shardy's propagation algorithm, `shardy/dialect/sdy/transforms/
//! propagation/`): projection of dimension shardings onto an op's factors ([`projection`]),
//! operations on axis lists it needs ([`axes`]), and the factor propagation strategies
//! ([`factor_prop`]). The fixed-point solver over a program comes later.

pub mod axes;
pub mod factor_prop;
pub mod projection;

pub use factor_prop::{
    direction_with_blocked_factors, AggressiveFactorPropagation, BasicFactorPropagation, FactorPropagation, OpInfo,
    PropagationDirection,
};
pub use projection::{
    axis_list_prefix_status, common_mesh_ref, distribute_axes_across_factors, is_strict_prefix, BitSet, FactorSharding,
    PrefixStatus, ShardingProjection, TensorFactorShardings, UpdateTensorShardings,
};
