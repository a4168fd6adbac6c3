//! Shardy's four propagation passes on the native program (`sdy-basic-propagate`,
//! `sdy-aggressive-propagate`, `sdy-op-priority-propagate`, `sdy-user-priority-propagate`;
//! Shardy's `transforms/propagation/`): the program is frozen for the solver
//! ([`freeze`]), solved ([`crate::propagation::propagate`]) and the result written back
//! ([`write_back`]), as `shardwise.propagation.run_propagation_pass` does on the Python IR.
//!
//! Conflicting sharding groups get an open sharding constraint after each member (Shardy's
//! `syncGroupMemberShardings`) and the program is solved again. With the debugging options
//! (`debug-sharding-origins`, `debug-propagation-edge-sharding`) the solver records where each
//! axis came from and the records are written onto the program ([`source_sharding`]).

pub mod candidates;
pub mod drop_user_rules;
pub mod freeze;
pub mod populate_op_sharding_rules;
pub mod source_sharding;
pub mod write_back;

use super::{PassContext, WarningKind};
use crate::error::{Error, Result};
use crate::ir::clone::Uses;
use crate::ir::values::set_result_sharding;
use crate::ir::values::ValueIndex;
use crate::ir::Program;
use crate::propagation::layers::propagate_shared;
use crate::propagation::{DebugOptions, Pass, PassOptions, ShardingDebug, StrategyKind};
use crate::sharding::{DimSharding, TensorSharding};
use freeze::{check_types, freeze, solver_input};

pub fn basic(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    run(p, cx, Pass::Basic)
}

pub fn aggressive(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    run(p, cx, Pass::Aggressive)
}

pub fn op_priority(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    run(p, cx, Pass::OpPriority)
}

pub fn user_priority(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    run(p, cx, Pass::UserPriority)
}

/// What a pass's options ask for.
struct Options {
    solver: PassOptions,
    keep_rules: bool,
    /// `debug-sharding-origins`.
    origins: bool,
    /// `debug-propagation-edge-sharding`.
    edges: bool,
}

/// The pass options of `cx` (Shardy's defaults where not given).
fn options(cx: &PassContext, pass: Pass) -> Result<Options> {
    let name = cx.option("propagation-strategy").unwrap_or("aggressive");
    let strategy = StrategyKind::from_name(name).ok_or_else(|| {
        Error::program(format!(
            "unknown propagation strategy {name:?}; expected \"basic\", \"aggressive\" or \"basic-then-aggressive\""
        ))
    })?;
    let solver = PassOptions {
        pass,
        strategy,
        conservative: cx.flag("conservative-propagation", false)?,
        run_op_priority: cx.flag("run-op-priority-propagation", true)?,
    };
    Ok(Options {
        solver,
        keep_rules: cx.flag("keep-sharding-rules", false)?,
        origins: cx.flag("debug-sharding-origins", false)?,
        edges: cx.flag("debug-propagation-edge-sharding", false)?,
    })
}

fn run(p: &mut Program, cx: &mut PassContext, pass: Pass) -> Result<()> {
    let o = options(cx, pass)?;
    check_types(p)?;
    let first_step = if o.origins || o.edges { source_sharding::max_step(p) + 1 } else { 0 };
    let mut forward: Vec<u32> = Vec::new();
    for attempt in 0..2 {
        let frozen = freeze(p, o.solver.conservative, cx)?;
        let mut input = solver_input(p, &frozen, &forward)?;
        if o.origins || o.edges {
            // Shardy numbers the user shardings before it inserts the constraints of
            // conflicting sharding groups: those are no user shardings.
            let owners = if forward.is_empty() { Vec::new() } else { p.value_owners() };
            let skip_ops = forward.iter().filter_map(|&v| frozen.op(*owners.get(v as usize)?)).collect();
            input.debug =
                Some(DebugOptions { origins: o.origins, edges: o.edges, first_step, skip_ops, explain: false });
        }
        let before = write_back::Stored::of(&input.value_shardings, &input.func_results);
        let (out, values) = propagate_shared(&frozen.graph, input, &o.solver)?;
        if out.group_conflicts.is_empty() {
            write_back::write_back(p, &frozen, &before, &out, &values, o.keep_rules)?;
            if let Some(debug) = &out.debug {
                save_debug(p, source_sharding::native_records(debug, &frozen), cx)?;
            }
            return Ok(());
        }
        if attempt == 1 {
            break;
        }
        // Unknown ops warn again on the second freeze in Python too (each freeze asks).
        insert_group_constraints(p, &frozen, &out.group_conflicts, &mut forward, cx)?;
    }
    Err(Error::program("sharding groups still conflict after adding open sharding constraints"))
}

/// Writes the solver's records `debug` (indexed by native values and ops) onto `p`, after the
/// write back; warns (`ShardingOriginWarning`) of propagated axes without a recorded origin.
fn save_debug(p: &mut Program, debug: ShardingDebug, cx: &mut PassContext) -> Result<()> {
    if debug.options.origins && !debug.missing_origins.is_empty() {
        let mut names: Vec<String> =
            debug.missing_origins.iter().map(|(_, a)| crate::text::print_axis_ref(a)).collect();
        names.sort();
        names.dedup();
        cx.warnings.push((
            WarningKind::ShardingOrigin,
            format!(
                "debug-sharding-origins: {} propagated axes ({}) came from shardings that are no user sharding (set \
                 on an op result, or given to a sharding group member) and have no origin; none is written for them \
                 (Shardy's behaviour is undefined there)",
                debug.missing_origins.len(),
                names.join(", ")
            ),
        ));
    }
    let mut values = ValueIndex::new(p);
    let uses = Uses::new(p, 0);
    source_sharding::save(p, &mut values, &uses, &debug)
}

/// Shardy's answer to conflicting sharding groups (`syncGroupMemberShardings`): an open
/// sharding constraint right after each member (at the start of its block for a block
/// argument), which replaces the member in every other use.
fn insert_group_constraints(
    p: &mut Program,
    frozen: &freeze::Frozen,
    conflicts: &[crate::propagation::GroupConflict],
    forward: &mut Vec<u32>,
    cx: &mut PassContext,
) -> Result<()> {
    let mut uses = Uses::new(p, 0);
    let owners = p.value_owners();
    let parents = p.parents(0);
    let mut arg_block: crate::fast_hash::FastMap<u32, u32> = crate::fast_hash::FastMap::default();
    for b in 0..p.blocks.len() as u32 {
        for v in p.block_args(b) {
            arg_block.insert(v, b);
        }
    }
    let loc = p.intern("loc(unknown)");
    for c in conflicts {
        cx.warnings.push((
            WarningKind::ShardingGroup,
            format!(
                "The initial operand shardings on the sharding groups of groupID: {} do not match. Inserting an open \
                 sharding constraint to all constrained values. This can be caused when shardings from different \
                 values are grouped (e.g. from jax.shard_alike) but have separate inconsistent sharding constraints \
                 on them.",
                c.group_id
            ),
        ));
        let open = TensorSharding {
            dims: vec![DimSharding { axes: vec![], closed: false, priority: None }; c.sharding.dims.len()],
            replicated: vec![],
            unreduced: vec![],
            ..c.sharding.clone()
        };
        for &m in &c.members {
            let member = frozen.values[m as usize];
            let users: Vec<u32> = uses.users(member);
            let ty = p.value_types[member as usize];
            let constraint = p.new_op("sdy.sharding_constraint", &[member], &[ty], &[], loc);
            set_result_sharding(p, constraint, 0, &open)?;
            let new = p.op_results(constraint).start;
            let (block, at) = match owners.get(member as usize).copied().filter(|&o| o != u32::MAX) {
                Some(def) => {
                    let block = parents
                        .get(&def)
                        .map(|w| w.block)
                        .ok_or_else(|| Error::program(format!("{}: in no block", p.op_where(def))))?;
                    let at = p.block_ops(block).iter().position(|&o| o == def).map_or(0, |k| k + 1);
                    (block, at)
                }
                None => {
                    let block = arg_block
                        .get(&member)
                        .copied()
                        .ok_or_else(|| Error::program(format!("value {member} is no result and no block argument")))?;
                    (block, 0)
                }
            };
            let mut list = p.block_ops(block).to_vec();
            list.insert(at, constraint);
            p.set_block_ops(block, &list);
            uses.add(p, constraint);
            for user in users {
                let slots: Vec<usize> =
                    p.op_operands(user).iter().enumerate().filter(|&(_, &x)| x == member).map(|(k, _)| k).collect();
                for k in slots {
                    uses.set_operand(p, user, k, new);
                }
            }
            forward.push(new);
        }
    }
    Ok(())
}
