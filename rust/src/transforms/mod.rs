//! Shardy's passes on the native program ([`Program`]), laid out as Shardy's
//! `shardy/dialect/sdy/transforms/{import,propagation,export}`: one pass per file.
//!
//! This is the start of the native pipeline: the passes here give, op for op, what the Python
//! passes of the same name (`python/shardwise/passes/`) give, and the tests compare the two on
//! the conformance corpus and on raw JAX programs. [`run`] runs a list of them.

pub mod canonicalize;
pub mod common;
pub mod export;
pub mod import;
pub mod op_properties;
pub mod propagation;

use crate::error::{Error, Result};
use crate::ir::Program;

/// Which Python warning class a pass warning becomes (`shardwise.errors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningKind {
    /// `PassWarning`.
    Pass,
    /// `UnknownOpWarning`: an op without a sharding rule in the registry.
    UnknownOp,
    /// `ShardingGroupWarning`: conflicting sharding groups.
    ShardingGroup,
    /// `ShardingOriginWarning`: propagated axes without a recorded origin.
    ShardingOrigin,
}

/// What a pass reads besides the program (its options) and reports besides it (Shardy's
/// warnings).
#[derive(Debug, Default)]
pub struct PassContext {
    pub warnings: Vec<(WarningKind, String)>,
    /// The options of the running pass, as written in the pipeline (`name=value`).
    pub options: Vec<(String, String)>,
}

impl PassContext {
    /// Records a `PassWarning`.
    pub fn warn(&mut self, message: String) {
        self.warnings.push((WarningKind::Pass, message));
    }

    /// The text of option `name`, if the pipeline gave it.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Boolean option `name` (`true`/`false`/`1`/`0`), `default` when not given. Errors on
    /// another value.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool> {
        match self.option(name).map(str::to_ascii_lowercase).as_deref() {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(v) => Err(Error::program(format!("option {name} takes true or false, got {v:?}"))),
        }
    }
}

/// A native pass.
pub type Pass = fn(&mut Program, &mut PassContext) -> Result<()>;

/// The options of the four propagation passes (Shardy's `PropagationOptions`).
const PROPAGATE_OPTIONS: &[&str] = &[
    "keep-sharding-rules",
    "module-dump-directory",
    "conservative-propagation",
    "debug-sharding-origins",
    "debug-propagation-edge-sharding",
    "propagation-strategy",
    "run-op-priority-propagation",
];

/// The passes that run natively, by their Shardy names, with the options each takes.
pub const PASSES: &[(&str, Pass, &[&str])] = &[
    ("symbol-dce", import::symbol_dce::run, &[]),
    ("sdy-lift-inlined-meshes", import::lift_inlined_meshes::run, &[]),
    ("sdy-inline-meshes", import::inline_meshes::run, &[]),
    ("sdy-remove-size-one-axes", import::remove_size_one_axes::run, &[]),
    ("sdy-propagate-sharding-from-func-to-call", import::propagate_sharding_from_func_to_call::run, &[]),
    ("sdy-constant-or-scalar-splitter", import::constant_or_scalar_splitter::run, &[]),
    ("sdy-explicit-gather-scatter-batching", import::explicit_gather_scatter_batching::run, &[]),
    ("sdy-manual-axes-cleanup", import::manual_axes_cleanup::run, &[]),
    ("sdy-save-module", save_module, &["module-dump-directory", "module-file-name", "dump-index"]),
    ("sdy-add-data-flow-edges", import::add_data_flow_edges::run, &[]),
    ("sdy-add-func-data-flow-edges", import::add_func_data_flow_edges::run, &[]),
    ("sdy-flatten-call-graph", import::flatten_call_graph::run, &[]),
    ("sdy-import-func-calls", import::import_func_calls::run, import::import_func_calls::OPTIONS),
    (
        "sdy-apply-sharding-constraints",
        import::apply_sharding_constraints::run,
        &["debug-sharding-origins", "debug-propagation-edge-sharding"],
    ),
    ("sdy-sharding-group-import", import::sharding_group_import::run, &[]),
    ("sdy-pre-order-funcs", import::pre_order_funcs::run, &[]),
    ("sdy-basic-propagate", propagation::basic, PROPAGATE_OPTIONS),
    ("sdy-aggressive-propagate", propagation::aggressive, PROPAGATE_OPTIONS),
    ("sdy-op-priority-propagate", propagation::op_priority, PROPAGATE_OPTIONS),
    ("sdy-user-priority-propagate", propagation::user_priority, PROPAGATE_OPTIONS),
    // Export passes: after-propagation passes of the call graph.
    ("sdy-export-named-computations", export::export_named_computations::run, &[]),
    ("sdy-propagate-to-func-results", export::propagate_to_func_results::run, &[]),
    ("sdy-unflatten-call-graph", export::unflatten_call_graph::run, &["dedup-functions-fully"]),
    ("sdy-insert-func-call-reshards", export::insert_func_call_reshards::run, &[]),
    // Export passes: the export pipeline's passes.
    ("sdy-constant-or-scalar-merger", export::constant_or_scalar_merger::run, &[]),
    ("sdy-sink-data-flow-edges", export::sink_data_flow_edges::run, export::sink_data_flow_edges::OPTIONS),
    ("sdy-sink-func-data-flow-edges", export::sink_func_data_flow_edges::run, &[]),
    ("sdy-remove-sharding-groups", export::remove_sharding_groups::run, &[]),
    ("sdy-sharding-constraint-to-reshard", export::sharding_constraint_to_reshard::run, &[]),
    ("sdy-update-non-divisible-input-output-shardings", export::update_non_divisible_input_output_shardings::run, &[]),
    ("sdy-remove-sub-axes-in-input-output-shardings", export::remove_sub_axes_in_input_output_shardings::run, &[]),
    ("sdy-close-shardings", export::close_shardings::run, &[]),
    ("sdy-insert-explicit-reshards", export::insert_explicit_reshards::run, &["enable-full-version"]),
    ("sdy-remove-propagation-debug-info", export::remove_propagation_debug_info::run, &[]),
    ("sdy-drop-sharding-rules", export::drop_sharding_rules::run, &[]),
    (
        "sdy-populate-op-sharding-rules",
        propagation::populate_op_sharding_rules::run,
        propagation::populate_op_sharding_rules::OPTIONS,
    ),
    // shardwise's own: removes the rules of users' rule functions set for the passes above.
    ("shardwise-drop-user-rules", propagation::drop_user_rules::run, &[]),
    // MLIR's canonicalizer with Shardy's collective patterns.
    ("canonicalize", canonicalize::run, canonicalize::OPTIONS),
];

/// `sdy-propagation-pipeline` with its default options, pass by pass in its order (Shardy's
/// `addPropagationPipeline`: import, user-priority propagation, the call-graph passes after
/// it, export). Every pass of it is native.
pub const PROPAGATION_PIPELINE: &[&str] = &[
    "symbol-dce",
    "sdy-lift-inlined-meshes",
    "sdy-remove-size-one-axes",
    "sdy-propagate-sharding-from-func-to-call",
    "sdy-constant-or-scalar-splitter",
    "symbol-dce",
    "sdy-manual-axes-cleanup",
    "sdy-save-module",
    "sdy-add-data-flow-edges",
    "sdy-flatten-call-graph",
    "symbol-dce",
    "sdy-import-func-calls",
    "symbol-dce",
    "sdy-apply-sharding-constraints",
    "sdy-sharding-group-import",
    "sdy-pre-order-funcs",
    "sdy-user-priority-propagate{keep-sharding-rules=true}",
    "sdy-export-named-computations",
    "sdy-propagate-to-func-results",
    "sdy-unflatten-call-graph",
    "symbol-dce",
    "sdy-insert-func-call-reshards",
    "sdy-constant-or-scalar-merger",
    "sdy-sink-data-flow-edges",
    "sdy-remove-sharding-groups",
    "sdy-sharding-constraint-to-reshard",
    "sdy-update-non-divisible-input-output-shardings",
    "sdy-remove-sub-axes-in-input-output-shardings",
    "sdy-close-shardings",
    "sdy-save-module",
    "sdy-insert-explicit-reshards",
    "canonicalize{enable-patterns={sdy-collective}}",
    "sdy-save-module",
    "sdy-drop-sharding-rules",
];

/// `sdy-save-module`: Shardy's debugging dump; does nothing without a dump directory (the
/// pipelines never give one).
fn save_module(_: &mut Program, _: &mut PassContext) -> Result<()> {
    Ok(())
}

/// The native pass named `name`, if there is one, with the options it takes.
pub fn pass(name: &str) -> Option<(Pass, &'static [&'static str])> {
    PASSES.iter().find(|(n, _, _)| *n == name).map(|&(_, p, o)| (p, o))
}

/// One step of a pass list: `name` or `name{key=value key=value}` (Shardy's option syntax;
/// a value may be quoted or braced).
fn parse_step(step: &str) -> Result<(String, Vec<(String, String)>)> {
    let step = step.trim();
    let Some(open) = step.find('{') else { return Ok((step.to_string(), Vec::new())) };
    let name = step[..open].trim().to_string();
    let body = step[open + 1..]
        .strip_suffix('}')
        .ok_or_else(|| Error::program(format!("pass {step:?}: expected options to end with '}}'")))?;
    let mut options = Vec::new();
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let key_start = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = body[key_start..i].to_string();
        let mut value = String::from("true");
        if i < b.len() && b[i] == b'=' {
            i += 1;
            let start = i;
            let mut depth = 0i32;
            let mut quoted = false;
            while i < b.len() {
                match b[i] {
                    b'"' => quoted = !quoted,
                    b'{' if !quoted => depth += 1,
                    b'}' if !quoted => depth -= 1,
                    c if c.is_ascii_whitespace() && !quoted && depth == 0 => break,
                    _ => {}
                }
                i += 1;
            }
            value = body[start..i].trim_matches('"').to_string();
        }
        options.push((key, value));
    }
    Ok((name, options))
}

/// Runs the passes `steps` (`name` or `name{options}`) in order on `p`; the warnings they
/// gave. An unknown pass or option is an error before anything runs.
pub fn run(p: &mut Program, steps: &[&str]) -> Result<Vec<(WarningKind, String)>> {
    let mut passes = Vec::new();
    for step in steps {
        let (name, options) = parse_step(step)?;
        let (pass, known) = pass(&name).ok_or_else(|| {
            let known: Vec<&str> = PASSES.iter().map(|(n, _, _)| *n).collect();
            Error::program(format!("no native pass {name:?}; native passes: {}", known.join(", ")))
        })?;
        if let Some((k, _)) = options.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            return Err(Error::program(format!("pass {name} has no option {k:?} (options: {})", known.join(", "))));
        }
        passes.push((pass, options));
    }
    let mut cx = PassContext::default();
    for (pass, options) in passes {
        cx.options = options;
        pass(p, &mut cx)?;
    }
    Ok(cx.warnings)
}
