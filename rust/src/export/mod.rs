//! Export passes' decisions (Shardy's `shardy/dialect/sdy/transforms/export/`): what
//! `sdy-insert-explicit-reshards` inserts around each op ([`explicit_reshards`]), with the
//! common factor shardings Shardy's heuristic picks ([`common_axes`]). They work on the core's
//! shardings, meshes and rules, on the projection of [`crate::propagation::projection`].

pub mod common_axes;
pub mod explicit_reshards;

pub use common_axes::{find_common_axes, AxesPerFactor};
pub use explicit_reshards::{
    all_reduce_to_replicated, is_equivalent, plan_op, unreduced_collectives, OpReshards, OpShardings,
    UnreducedCollectives, Version,
};
