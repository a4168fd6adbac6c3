//! The propagation layers, each a strategy plugged into the [`Solver`]: which fixed-point
//! rounds run, with which factor propagation strategy and which direction policy. Each layer
//! extends the one below it, as Shardy's pass classes extend each other:
//!
//! * [`FactorLayer`]: one round per factor propagation strategy. With the basic strategy it is
//!   `sdy-basic-propagate` (Shardy `BasicPropagationPassImpl`); with the aggressive one, or
//!   basic then aggressive, `sdy-aggressive-propagate` (`AggressivePropagationPassImpl`,
//!   option `propagation-strategy`).
//! * [`OpPriorityLayer`]: the factor layer five times, op heuristics allowing more directions
//!   each time (`sdy-op-priority-propagate`, `OpPriorityPropagationPassImpl`: elementwise and
//!   other pass-through ops first, forward through multi-use values later, broadcasts
//!   backward before forward).
//! * [`UserPriorityLayer`]: the op-priority layer once per user priority `p0, p1, ...`, the
//!   dimension shardings of lower priorities hidden until their round
//!   (`sdy-user-priority-propagate`, `UserPriorityPropagationPassImpl`).
//!
//! [`propagate`] runs a whole pass: the sharding group sync, then the pass's layer.

#![warn(missing_docs)]

use super::direction_table::DirectionTable;
use super::explain::{LayerTag, StrategyTag};
use super::factor_prop::{
    AggressiveFactorPropagation, BasicFactorPropagation, FactorPropagation, PropagationDirection,
};
use super::program::{OpKind, Program};
use super::solver::{unshared, AnyDirection, DirectionPolicy, Shared, Solver, SolverInput, SolverOutput};
use super::step_cache::StepCache;
use super::step_memo::StepMemo;
use super::visit_cache::VisitCache;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::rule::FactorKind;
use std::sync::Arc;

type Dir = PropagationDirection;

/// A propagation layer: runs rounds on the solver, each op's directions limited by `outer`.
pub trait Layer {
    /// Runs the layer's rounds.
    fn propagate(&self, solver: &mut Solver<'_>, outer: &dyn DirectionPolicy) -> Result<()>;
}

/// Which factor propagation strategies the factor layer runs, in order (Shardy
/// `PropagationStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StrategyKind {
    /// [`BasicFactorPropagation`] only.
    Basic,
    /// [`AggressiveFactorPropagation`] only (the default of the aggressive pass and above).
    #[default]
    Aggressive,
    /// A basic round, then an aggressive one.
    BasicThenAggressive,
}

impl StrategyKind {
    /// `"basic"`, `"aggressive"` or `"basic-then-aggressive"` (Shardy's option values).
    pub fn from_name(name: &str) -> Option<StrategyKind> {
        match name {
            "basic" => Some(StrategyKind::Basic),
            "aggressive" => Some(StrategyKind::Aggressive),
            "basic-then-aggressive" => Some(StrategyKind::BasicThenAggressive),
            _ => None,
        }
    }
}

/// One fixed-point round per strategy (see the module documentation).
#[derive(Debug, Clone, Copy, Default)]
pub struct FactorLayer {
    /// The strategies to run.
    pub strategy: StrategyKind,
}

impl Layer for FactorLayer {
    fn propagate(&self, solver: &mut Solver<'_>, outer: &dyn DirectionPolicy) -> Result<()> {
        let basic = BasicFactorPropagation;
        let aggressive = AggressiveFactorPropagation;
        let strategies: &[&dyn FactorPropagation] = match self.strategy {
            StrategyKind::Basic => &[&basic],
            StrategyKind::Aggressive => &[&aggressive],
            StrategyKind::BasicThenAggressive => &[&basic, &aggressive],
        };
        let tags = match self.strategy {
            StrategyKind::Basic => &[StrategyTag::Basic][..],
            StrategyKind::Aggressive => &[StrategyTag::Aggressive][..],
            StrategyKind::BasicThenAggressive => &[StrategyTag::Basic, StrategyTag::Aggressive][..],
        };
        for (s, &tag) in strategies.iter().zip(tags) {
            solver.set_layer(LayerTag { strategy: tag, ..solver.layer() });
            solver.run_round(*s, outer)?;
        }
        Ok(())
    }
}

/// Shardy's order of directions: `NONE < FORWARD < BACKWARD < BOTH`.
fn rank(d: Dir) -> u8 {
    match d {
        Dir::None => 0,
        Dir::Forward => 1,
        Dir::Backward => 2,
        Dir::Both => 3,
    }
}

/// `d1 ∪ d2` (Shardy `unionOfPropagationDirections`): forward and backward give both,
/// otherwise the larger.
pub fn union(d1: Dir, d2: Dir) -> Dir {
    match (d1, d2) {
        (Dir::Forward, Dir::Backward) | (Dir::Backward, Dir::Forward) => Dir::Both,
        _ if rank(d1) >= rank(d2) => d1,
        _ => d2,
    }
}

/// `d1 ∩ d2` (Shardy `intersectionOfPropagationDirections`): forward and backward give none,
/// otherwise the smaller.
pub fn intersection(d1: Dir, d2: Dir) -> Dir {
    match (d1, d2) {
        (Dir::Forward, Dir::Backward) | (Dir::Backward, Dir::Forward) => Dir::None,
        _ if rank(d1) <= rank(d2) => d1,
        _ => d2,
    }
}

/// Number of op heuristics in the op-priority schedule.
pub const OP_PRIORITY_STEPS: usize = 5;

/// The op-priority direction policy at step `step` (Shardy `getOpBasedDirectionToPropagate`):
/// the union of the first `step + 1` heuristics, intersected with `outer`.
pub struct OpPriorityDirection<'a> {
    /// The step of the schedule, 0 to 4 (Shardy's op priority).
    pub step: usize,
    /// The policy of the layer above (user priorities: any direction).
    pub outer: &'a dyn DirectionPolicy,
}

/// Both ways unless an operand other than a scalar has several uses (Shardy
/// `getDirectionBasedOnUses`); always both when `allow_multi_use`.
fn direction_by_uses(s: &Solver<'_>, op: u32, allow_multi_use: bool) -> Dir {
    if allow_multi_use {
        return Dir::Both;
    }
    let p = s.program();
    let multi = p.operands(op).iter().any(|&v| s.use_count(v) != 1 && !p.is_scalar(v));
    if multi {
        Dir::None
    } else {
        Dir::Both
    }
}

/// Shardy `isPassThroughOp`: elementwise ops, host offloading, reshapes, transposes and data
/// flow edges, by their uses; dynamic slices and updates forward only.
fn pass_through(s: &Solver<'_>, op: u32, allow_multi_use: bool) -> Dir {
    let p = s.program();
    let kind = p.kind[op as usize];
    if p.elementwise[op as usize]
        || p.offload[op as usize]
        || matches!(kind, OpKind::Reshape | OpKind::Transpose | OpKind::DataFlowEdge | OpKind::FuncDataFlowEdge)
    {
        return direction_by_uses(s, op, allow_multi_use);
    }
    if matches!(kind, OpKind::DynamicSlice | OpKind::DynamicUpdateSlice) {
        return intersection(direction_by_uses(s, op, allow_multi_use), Dir::Forward);
    }
    Dir::None
}

/// Heuristic `step` of the schedule for `op` along `factor`.
fn heuristic(s: &Solver<'_>, step: usize, op: u32, factor: usize) -> Dir {
    let broadcast = s.program().kind[op as usize] == OpKind::BroadcastInDim;
    match step {
        0 => pass_through(s, op, false),
        1 => pass_through(s, op, true),
        2 => {
            // Shardy `onlyPassThroughFactorsBroadcastBackward`; an op without a rule (a data
            // flow edge) counts as having the identity rule.
            let non_pass_through = s
                .rule(op)
                .is_some_and(|r| i64::try_from(factor).is_ok_and(|f| r.factor_kind(f) != FactorKind::PassThrough));
            if non_pass_through {
                Dir::None
            } else if broadcast {
                Dir::Backward
            } else {
                Dir::Both
            }
        }
        3 => {
            if broadcast {
                Dir::Backward
            } else {
                Dir::Both
            }
        }
        _ => Dir::Both,
    }
}

impl DirectionPolicy for OpPriorityDirection<'_> {
    /// The union of heuristics `0..=step`, computed without the heuristics that cannot add to
    /// it: `union` is the join of the lattice None < Forward, Backward < Both; heuristic 0 is
    /// never above heuristic 1 (the same pass-through test, with fewer uses allowed), and
    /// heuristics 3 and 4 give Both (but 3 on a broadcast), above everything.
    fn direction(&self, solver: &Solver<'_>, op: u32, factor: usize) -> Dir {
        let last = self.step.min(OP_PRIORITY_STEPS - 1);
        let broadcast = solver.program().kind[op as usize] == OpKind::BroadcastInDim;
        let acc = if last >= 4 || (last == 3 && !broadcast) {
            Dir::Both
        } else {
            let first = usize::from(last >= 1);
            (first..=last).fold(Dir::None, |acc, step| union(acc, heuristic(solver, step, op, factor)))
        };
        intersection(acc, self.outer.direction(solver, op, factor))
    }

    /// As [`OpPriorityDirection::direction`] for each factor, with the heuristics that do not
    /// depend on the factor (all but heuristic 2) computed once.
    fn directions(&self, solver: &Solver<'_>, op: u32, num_factors: usize) -> Vec<Dir> {
        let last = self.step.min(OP_PRIORITY_STEPS - 1);
        let broadcast = solver.program().kind[op as usize] == OpKind::BroadcastInDim;
        let mut outer = self.outer.directions(solver, op, num_factors);
        if last >= 4 || (last == 3 && !broadcast) {
            return outer;
        }
        let first = usize::from(last >= 1);
        let op_level = (first..=last)
            .filter(|&step| step != 2)
            .fold(Dir::None, |acc, step| union(acc, heuristic(solver, step, op, 0)));
        for (f, d) in outer.iter_mut().enumerate() {
            let acc = if last >= 2 { union(op_level, heuristic(solver, 2, op, f)) } else { op_level };
            *d = intersection(acc, *d);
        }
        outer
    }

    /// Under an outer policy of every factor both ways (initial id 0): `1 + step` (steps from
    /// 4 on are step 4). The heuristics read the op's kind and rule and the live uses of its
    /// operands, which change only when an op is erased.
    fn initial_id(&self) -> Option<u8> {
        (self.outer.initial_id()? == 0).then(|| 1 + self.step.min(OP_PRIORITY_STEPS - 1) as u8)
    }

    /// Under an outer policy of every factor both ways (signature 0): 0 when every factor
    /// propagates both ways, else the op-level union of heuristics and whether the
    /// per-factor heuristic 2 applies. With those, the directions follow from the op's kind
    /// and rule alone (see [`OpPriorityDirection::directions`]).
    fn signature(&self, solver: &Solver<'_>, op: u32) -> Option<u32> {
        if self.outer.signature(solver, op)? != 0 {
            return None;
        }
        let last = self.step.min(OP_PRIORITY_STEPS - 1);
        let broadcast = solver.program().kind[op as usize] == OpKind::BroadcastInDim;
        if last >= 4 || (last == 3 && !broadcast) {
            return Some(0);
        }
        let first = usize::from(last >= 1);
        let op_level = (first..=last)
            .filter(|&step| step != 2)
            .fold(Dir::None, |acc, step| union(acc, heuristic(solver, step, op, 0)));
        if op_level == Dir::Both {
            return Some(0);
        }
        Some(1 + 2 * u32::from(rank(op_level)) + u32::from(last >= 2))
    }
}

/// The op-priority layer (see the module documentation); with `enabled` false it is its inner
/// layer (Shardy's `run-op-priority-propagation=false`).
#[derive(Debug, Clone, Copy)]
pub struct OpPriorityLayer {
    /// The layer run at each step.
    pub inner: FactorLayer,
    /// Whether to run the schedule at all.
    pub enabled: bool,
}

impl Layer for OpPriorityLayer {
    fn propagate(&self, solver: &mut Solver<'_>, outer: &dyn DirectionPolicy) -> Result<()> {
        if !self.enabled {
            return self.inner.propagate(solver, outer);
        }
        for step in 0..OP_PRIORITY_STEPS {
            solver.set_layer(LayerTag { op_priority: Some(step as u8), ..solver.layer() });
            self.inner.propagate(solver, &OpPriorityDirection { step, outer })?;
        }
        Ok(())
    }
}

/// The user-priority layer (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct UserPriorityLayer {
    /// The layer run for each priority.
    pub inner: OpPriorityLayer,
}

impl Layer for UserPriorityLayer {
    fn propagate(&self, solver: &mut Solver<'_>, outer: &dyn DirectionPolicy) -> Result<()> {
        let per_priority = solver.init_user_priorities()?;
        solver.set_layer(LayerTag { user_priority: Some(0), ..solver.layer() });
        self.inner.propagate(solver, outer)?;
        for (priority, refs) in &per_priority {
            solver.set_layer(LayerTag { user_priority: Some(*priority), ..solver.layer() });
            solver.apply_priority(refs, *priority);
            self.inner.propagate(solver, outer)?;
        }
        Ok(())
    }
}

/// Which of Shardy's four propagation passes to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Pass {
    /// `sdy-basic-propagate`.
    #[default]
    Basic,
    /// `sdy-aggressive-propagate`.
    Aggressive,
    /// `sdy-op-priority-propagate`.
    OpPriority,
    /// `sdy-user-priority-propagate`.
    UserPriority,
}

impl Pass {
    /// `"basic"`, `"aggressive"`, `"op-priority"` or `"user-priority"`.
    pub fn from_name(name: &str) -> Option<Pass> {
        match name {
            "basic" => Some(Pass::Basic),
            "aggressive" => Some(Pass::Aggressive),
            "op-priority" => Some(Pass::OpPriority),
            "user-priority" => Some(Pass::UserPriority),
            _ => None,
        }
    }
}

/// The options of a pass (Shardy `PropagationOptions` and the passes' own options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PassOptions {
    /// The pass.
    pub pass: Pass,
    /// `propagation-strategy` of the aggressive pass and above (ignored by the basic pass).
    pub strategy: StrategyKind,
    /// `conservative-propagation`: no sub-axes, no non-divisible axes (the graph's rules must
    /// be the conservative ones).
    pub conservative: bool,
    /// `run-op-priority-propagation` of the op- and user-priority passes.
    pub run_op_priority: bool,
}

impl Default for PassOptions {
    fn default() -> PassOptions {
        PassOptions {
            pass: Pass::Basic,
            strategy: StrategyKind::Aggressive,
            conservative: false,
            run_op_priority: true,
        }
    }
}

impl PassOptions {
    /// The layer that implements the pass.
    pub fn layer(&self) -> Box<dyn Layer> {
        let factor = FactorLayer { strategy: self.strategy };
        let op_priority = OpPriorityLayer { inner: factor, enabled: self.run_op_priority };
        match self.pass {
            Pass::Basic => Box::new(FactorLayer { strategy: StrategyKind::Basic }),
            Pass::Aggressive => Box::new(factor),
            Pass::OpPriority => Box::new(op_priority),
            Pass::UserPriority => Box::new(UserPriorityLayer { inner: op_priority }),
        }
    }
}

/// Runs a propagation pass over `graph` (Shardy's `runOnOperation` of the pass, less the
/// removal of sharding rules, which the caller does on its program): synchronises sharding
/// groups, then runs the pass's layer. When some sharding group has conflicting shardings,
/// returns them in [`SolverOutput::group_conflicts`] without propagating (see
/// [`super::solver::GroupConflict`]).
///
/// Errors: what [`Solver::new`] rejects; invalid shardings met during propagation (axes
/// unknown to their mesh, unknown meshes); and, as Shardy's verifier after the pass, a manual
/// computation left with a manual axis after a free one (rule `manual-axis-after-free-axis`).
pub fn propagate(graph: &Graph, input: SolverInput, options: &PassOptions) -> Result<SolverOutput> {
    let prog = Arc::new(Program::new(graph, &input.facts)?);
    propagate_with_steps(&prog, input, options, None, false, None).map(|(out, _)| out)
}

/// [`propagate`] with the value shardings as the solver holds them (shared: a sharding many
/// values got is one allocation) and the output's `value_shardings` empty, for a caller that
/// only reads them (the native pass's write-back): no copy of each value's sharding at the
/// pass's peak of memory.
pub(crate) fn propagate_shared(
    graph: &Graph,
    input: SolverInput,
    options: &PassOptions,
) -> Result<(SolverOutput, Vec<Option<Shared>>)> {
    let prog = Arc::new(Program::new(graph, &input.facts)?);
    solve_shared(&prog, input, options, None, false, None).map(|(out, values, _)| (out, values))
}

/// What solves of one program (with the same meshes) leave for the next ones: step outcomes
/// by content ([`super::step_cache`]) and directions by op and signature
/// ([`super::direction_table`]), and the visit memo's lists, to reuse their memory
/// (`visit_cache`; emptied for each solve). None changes a solve's result.
#[derive(Debug, Clone, Default)]
pub struct SolveCaches {
    /// Step outcomes by what they read.
    pub steps: StepCache,
    /// Directions by op and signature.
    pub directions: DirectionTable,
    /// The last solve's visit memo (only its allocations are reused).
    pub(crate) visits: VisitCache,
}

/// [`propagate`], replaying the steps of `replay` where their inputs recur and, with `record`,
/// recording this solve's steps (see [`super::step_memo`]): the output is what [`propagate`]
/// gives, and the recorded steps come with it (`None` without `record`, or when debugging
/// data is recorded). `prog` is the program of the graph and `input`'s facts (see
/// [`Solver::with_program`]). `replay` must come from a solve of the same graph with the same
/// options and meshes. With `caches`, the solve starts from what solves of the same program
/// with the same meshes left there, and leaves its own (see [`SolveCaches`]). Errors as
/// [`propagate`].
pub fn propagate_with_steps(
    prog: &Arc<Program<'_>>,
    input: SolverInput,
    options: &PassOptions,
    replay: Option<Arc<StepMemo>>,
    record: bool,
    caches: Option<&mut SolveCaches>,
) -> Result<(SolverOutput, Option<StepMemo>)> {
    let (mut out, values, steps) = solve_shared(prog, input, options, replay, record, caches)?;
    out.value_shardings = unshared(values);
    Ok((out, steps))
}

/// [`propagate_with_steps`] with the value shardings apart, as the solver holds them (the
/// output's `value_shardings` is empty).
pub(crate) fn solve_shared(
    prog: &Arc<Program<'_>>,
    input: SolverInput,
    options: &PassOptions,
    replay: Option<Arc<StepMemo>>,
    record: bool,
    mut caches: Option<&mut SolveCaches>,
) -> Result<(SolverOutput, Vec<Option<Shared>>, Option<StepMemo>)> {
    let mut solver = match caches.as_deref_mut() {
        Some(caches) => Solver::with_caches(prog.clone(), input, options.conservative, std::mem::take(caches))?,
        None => Solver::with_program(prog.clone(), input, options.conservative)?,
    };
    if record {
        solver.record_steps();
    }
    if let Some(memo) = replay {
        solver.replay_steps(memo);
    }
    let conflicts = solver.sync_sharding_groups();
    if !conflicts.is_empty() {
        if let Some(caches) = caches {
            *caches = solver.take_caches();
        }
        let steps = solver.take_steps();
        let (mut out, values) = solver.into_shared_output();
        out.group_conflicts = conflicts;
        return Ok((out, values, steps));
    }
    options.layer().propagate(&mut solver, &AnyDirection)?;
    solver.verify_manual_computations()?;
    let steps = solver.take_steps();
    if let Some(caches) = caches {
        *caches = solver.take_caches();
    }
    let (out, values) = solver.into_shared_output();
    Ok((out, values, steps))
}

/// The direction named `name` (`"NONE"`, `"FORWARD"`, `"BACKWARD"`, `"BOTH"`, as Shardy's
/// `allowed_direction` prints it).
pub fn direction_from_name(name: &str) -> Result<Dir> {
    match name {
        "NONE" => Ok(Dir::None),
        "FORWARD" => Ok(Dir::Forward),
        "BACKWARD" => Ok(Dir::Backward),
        "BOTH" => Ok(Dir::Both),
        _ => Err(Error::invariant(
            "propagation-bad-direction",
            format!("expected a propagation direction NONE, FORWARD, BACKWARD or BOTH, got {name:?}"),
        )),
    }
}
