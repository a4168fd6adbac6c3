//! Shardy's passes on the native program ([`Program`]), laid out as Shardy's
//! `shardy/dialect/sdy/transforms/{import,propagation,export}`: one pass per file.
//!
//! This is the start of the native pipeline: the passes here give, op for op, what the Python
//! passes of the same name (`python/shardwise/passes/`) give, and the tests compare the two on
//! the conformance corpus and on raw JAX programs. [`run`] runs a list of them.

pub mod common;
pub mod import;
pub mod op_properties;

use crate::error::{Error, Result};
use crate::ir::Program;

/// What passes report besides the program: Shardy's warnings (Python's `PassWarning`).
#[derive(Debug, Default)]
pub struct PassContext {
    pub warnings: Vec<String>,
}

/// A native pass.
pub type Pass = fn(&mut Program, &mut PassContext) -> Result<()>;

/// The passes that run natively, by their Shardy names.
pub const PASSES: &[(&str, Pass)] = &[
    ("symbol-dce", import::symbol_dce::run),
    ("sdy-lift-inlined-meshes", import::lift_inlined_meshes::run),
    ("sdy-remove-size-one-axes", import::remove_size_one_axes::run),
    ("sdy-propagate-sharding-from-func-to-call", import::propagate_sharding_from_func_to_call::run),
    ("sdy-constant-or-scalar-splitter", import::constant_or_scalar_splitter::run),
    ("sdy-manual-axes-cleanup", import::manual_axes_cleanup::run),
    ("sdy-save-module", save_module),
    ("sdy-add-data-flow-edges", import::add_data_flow_edges::run),
    ("sdy-flatten-call-graph", import::flatten_call_graph::run),
    ("sdy-import-func-calls", import::import_func_calls::run),
    ("sdy-apply-sharding-constraints", import::apply_sharding_constraints::run),
    ("sdy-sharding-group-import", import::sharding_group_import::run),
    ("sdy-pre-order-funcs", import::pre_order_funcs::run),
];

/// `sdy-save-module`: Shardy's debugging dump; does nothing without a dump directory (the
/// pipelines never give one).
fn save_module(_: &mut Program, _: &mut PassContext) -> Result<()> {
    Ok(())
}

/// The native pass named `name`, if there is one.
pub fn pass(name: &str) -> Option<Pass> {
    PASSES.iter().find(|(n, _)| *n == name).map(|&(_, p)| p)
}

/// Runs the passes `names` in order on `p`; the warnings they gave. An unknown name is an
/// error before anything runs.
pub fn run(p: &mut Program, names: &[&str]) -> Result<Vec<String>> {
    let passes: Vec<Pass> = names
        .iter()
        .map(|n| {
            pass(n).ok_or_else(|| {
                let known: Vec<&str> = PASSES.iter().map(|(n, _)| *n).collect();
                Error::program(format!("no native pass {n:?}; native passes: {}", known.join(", ")))
            })
        })
        .collect::<Result<_>>()?;
    let mut cx = PassContext::default();
    for pass in passes {
        pass(p, &mut cx)?;
    }
    Ok(cx.warnings)
}
