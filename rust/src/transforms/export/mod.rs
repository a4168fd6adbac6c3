//! Shardy's export passes on the native program (`shardy/dialect/sdy/transforms/export/`):
//! what `sdy-propagation-pipeline` runs after propagation, one pass per file, each giving what
//! the Python pass of the same name (`python/shardwise/passes/export_passes.py`,
//! `passes/data_flow.py`) gives.

pub mod constant_or_scalar_merger;
pub mod drop_sharding_rules;
pub mod export_named_computations;
pub mod insert_explicit_reshards;
pub mod insert_func_call_reshards;
pub mod propagate_to_func_results;
pub mod remove_propagation_debug_info;
pub mod unflatten_call_graph;
