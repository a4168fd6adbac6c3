//! Import passes (Shardy's `transforms/import/`, and MLIR's `symbol-dce` that the pipelines
//! run between them).

pub mod add_data_flow_edges;
pub mod add_func_data_flow_edges;
pub mod apply_sharding_constraints;
pub mod constant_or_scalar_splitter;
pub mod explicit_gather_scatter_batching;
pub mod flatten_call_graph;
pub mod import_func_calls;
pub mod inline_meshes;
pub mod lift_inlined_meshes;
pub mod manual_axes_cleanup;
pub mod pre_order_funcs;
pub mod propagate_sharding_from_func_to_call;
pub mod remove_size_one_axes;
pub mod sharding_group_import;
pub mod symbol_dce;

pub(crate) use crate::transforms::common::{mesh_of, mesh_ops};
