//! Shardy's export passes on the native program (`shardy/dialect/sdy/transforms/export/`):
//! what `sdy-propagation-pipeline` runs after propagation, one pass per file, each compared
//! with jaxlib's pass of the same name (`tests/python/test_passes.py`).

pub mod close_shardings;
pub mod constant_or_scalar_merger;
pub mod drop_sharding_rules;
pub mod export_named_computations;
pub mod insert_explicit_reshards;
pub mod insert_func_call_reshards;
pub mod propagate_to_func_results;
pub mod remove_propagation_debug_info;
pub mod remove_sharding_groups;
pub mod remove_sub_axes_in_input_output_shardings;
pub mod sharding_constraint_to_reshard;
pub mod sink_data_flow_edges;
pub mod sink_func_data_flow_edges;
pub mod unflatten_call_graph;
pub mod update_non_divisible_input_output_shardings;
