//! The fixed-point solver: Shardy's propagation passes (`sdy-basic-propagate`,
//! `sdy-aggressive-propagate`, `sdy-op-priority-propagate`, `sdy-user-priority-propagate`;
//! `shardy/dialect/sdy/transforms/propagation/{basic,aggressive,op_priority,user_priority}_
//! propagation.cc`) over a frozen program.
//!
//! One [`Solver`] holds the shardings of a program and runs rounds of propagation to a fixed
//! point. A round ([`Solver::run_round`]) is Shardy's `BasicPropagationPassImpl::propagate`
//! with one factor propagation strategy and one direction policy: the function results of the
//! main function are propagated to its return values, then a worklist, seeded with every op in
//! program order, is drained: an op popped from it propagates the shardings of its operands and
//! results along its sharding rule's factors, and each changed value puts its neighbours back
//! on the worklist. The worklist is MLIR's greedy rewrite driver's, reproduced exactly (a stack
//! without duplicates; re-added ops and their ancestors go on top; users in use-list order;
//! ops whose results are unused and that have no side effects are erased when popped), since
//! the order in which conflicting shardings meet decides which one wins. The layers in
//! [`super::layers`] (basic < aggressive < op-priority < user-priority) decide which rounds
//! run, with which strategy and direction policy.
//!
//! With [`SolverInput::debug`], the solver also records where each propagated axis came from
//! (Shardy's `debug-sharding-origins` and `debug-propagation-edge-sharding`; see
//! [`super::debug`]): before anything else, the origins of the user shardings; then, after each
//! propagation step that changed a sharding, the axes that came to each tensor of the step, as
//! edges of the op and as origins of the tensor's value. The records come back in
//! [`SolverOutput::debug`].
//!
//! # Where shardings live
//!
//! The solver keeps one optional sharding per value, where the program stores it: function
//! arguments, op results (`sdy.sharding`, or the sharding of a `sdy.sharding_constraint` or a
//! `sdy.data_flow_edge`, or the out shardings of a manual or named computation) and the
//! body arguments of manual and named computations (their in shardings, manual axes included),
//! plus the result shardings of each function. As in Shardy (`getShardableValue` in
//! `ir/utils.cc`), other values read and write another value's sharding: an edge owner (a
//! result of a while, case or optimization barrier, or a body argument or result of a manual
//! or named computation) that has a `sdy.data_flow_edge` uses the edge's sharding; a while's
//! block arguments use their result's; a manual computation's body arguments see their in
//! sharding without the manual axes; block arguments of other region ops (reduce bodies, ...)
//! have none.
//!
//! # Files
//!
//! The solver's state and its public entry points are here; its methods are split by concern:
//! [`worklist`] (the greedy driver's worklist, notifications and erasures), [`edges`] (shardable
//! values and data-flow edges), [`tensors`] (reading and writing a step's tensors), [`step`] (one
//! propagation step), [`visit`] (op visits and rounds), [`records`] (debug records), [`groups`]
//! (sharding groups and manual computations) and [`priorities`] (user priorities).

#![warn(missing_docs)]

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use super::debug::{DebugOptions, ShardingDebug};
use super::direction_table::DirectionTable;
use super::explain::LayerTag;
use super::factor_prop::PropagationDirection;
use super::layers::SolveCaches;
use super::program::{OpKind, Program, ProgramFacts};
use super::step_cache::StepCache;
use super::step_memo::StepMemo;
use super::transforms::empty_axes;
use super::visit_cache::VisitCache;
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::graph::{Graph, NONE};
use crate::mesh::Mesh;
use crate::rule::OpShardingRule;
use crate::sharding::TensorSharding;

mod edges;
mod groups;
mod priorities;
mod records;
mod step;
mod tensors;
mod visit;
mod worklist;

use worklist::Worklist;

/// A stored sharding, shared between the solver, its recorded steps and the results of a
/// batch: copying one is a reference count, and comparing two that are the same allocation
/// is a pointer comparison.
pub(crate) type Shared = Arc<TensorSharding>;

/// Shared shardings as owned ones (moved out where nothing else holds them).
pub(crate) fn unshared(shardings: Vec<Option<Shared>>) -> Vec<Option<TensorSharding>> {
    shardings.into_iter().map(|s| s.map(Arc::unwrap_or_clone)).collect()
}

type Dir = PropagationDirection;

/// Decides in which direction an op may propagate along one of its factors (Shardy's
/// `GetDirectionToPropagateFn`).
pub trait DirectionPolicy {
    /// The direction for factor `factor` of op `op` (an index of the rule the op propagates
    /// with: its own rule, or the identity rule of a data flow edge).
    fn direction(&self, solver: &Solver<'_>, op: u32, factor: usize) -> Dir;

    /// The directions for factors `0..num_factors` of op `op`, each as
    /// [`DirectionPolicy::direction`] gives it (a policy overrides this where parts of the
    /// answer hold for the whole op).
    fn directions(&self, solver: &Solver<'_>, op: u32, num_factors: usize) -> Vec<Dir> {
        (0..num_factors).map(|f| self.direction(solver, op, f)).collect()
    }

    /// A name for the answer this policy gives `op`: two calls (of this policy or another)
    /// that give one op the same signature give it the same directions, as long as the live
    /// uses of its operands are the same (the solver keeps the answers by signature, see
    /// [`super::direction_table`]). Signature 0 means every factor both ways. `None`, the
    /// default, names nothing.
    fn signature(&self, _solver: &Solver<'_>, _op: u32) -> Option<u32> {
        None
    }

    /// A number naming this policy among those whose answer for an op follows from the
    /// program alone while no op is erased (the op's kind and rule, the uses values start
    /// with): policies that give the same number give every op the same directions then, so
    /// the solver keeps them per op for all solves of the program until an op is erased (see
    /// [`super::direction_table`]). `None`, the default, names nothing.
    fn initial_id(&self) -> Option<u8> {
        None
    }
}

/// Every op may propagate both ways (Shardy `propagateAny`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AnyDirection;

impl DirectionPolicy for AnyDirection {
    fn direction(&self, _: &Solver<'_>, _: u32, _: usize) -> Dir {
        Dir::Both
    }

    fn directions(&self, _: &Solver<'_>, _: u32, num_factors: usize) -> Vec<Dir> {
        vec![Dir::Both; num_factors]
    }

    fn signature(&self, _: &Solver<'_>, _: u32) -> Option<u32> {
        Some(0)
    }

    fn initial_id(&self) -> Option<u8> {
        Some(0)
    }
}

/// What the solver is given: the meshes, the stored shardings and the program facts.
#[derive(Debug, Clone, Default)]
pub struct SolverInput {
    /// The module's `sdy.mesh` definitions by name.
    pub meshes: HashMap<String, Mesh>,
    /// One optional sharding per value of the graph, as stored in the program (see the
    /// module documentation); values that store none are `None`.
    pub value_shardings: Vec<Option<TensorSharding>>,
    /// `(func op, one optional sharding per function result)` for each function.
    pub func_results: Vec<(u32, Vec<Option<TensorSharding>>)>,
    /// Facts held by op attributes.
    pub facts: ProgramFacts,
    /// Record where shardings came from (see [`super::debug`]); `None` records nothing.
    pub debug: Option<DebugOptions>,
}

/// Members of a sharding group whose shardings conflict (Shardy's
/// `ShardingGroupMap::syncGroupMemberShardings`): Shardy puts an open sharding constraint on
/// each member, which changes the program, so the solver reports them and propagates nothing;
/// the caller inserts the constraints (`sdy.sharding_constraint` of `fully open like
/// sharding`, right after each member) and runs again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConflict {
    /// The group's id (`group_id` of its `sdy.sharding_group` ops).
    pub group_id: i64,
    /// The members (values), in program order.
    pub members: Vec<u32>,
    /// The first member sharding found that is not fully open (the constraints take its mesh
    /// and rank).
    pub sharding: TensorSharding,
}

/// Counters of a solve.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SolverStats {
    /// Fixed-point rounds run.
    pub rounds: u32,
    /// Ops popped from the worklist and propagated through.
    pub visits: u64,
    /// Shardings changed by propagation (including sharding group members).
    pub updates: u64,
}

/// What a solve returns.
#[derive(Debug, Clone, Default)]
pub struct SolverOutput {
    /// The stored sharding of each value after propagation (same layout as the input).
    pub value_shardings: Vec<Option<TensorSharding>>,
    /// The function result shardings after propagation.
    pub func_results: Vec<(u32, Vec<Option<TensorSharding>>)>,
    /// Ops erased because their results were unused and they have no side effects.
    pub erased_ops: Vec<u32>,
    /// Ops that propagated with their sharding rule at least once (where Shardy sets the
    /// rule on the op; it keeps it with `keep-sharding-rules`).
    pub rule_ops: Vec<u32>,
    /// Conflicting sharding groups; when not empty nothing was propagated.
    pub group_conflicts: Vec<GroupConflict>,
    /// Counters.
    pub stats: SolverStats,
    /// What was recorded of where shardings came from, when [`SolverInput::debug`] asked for
    /// it (records of erased ops and their values dropped).
    pub debug: Option<ShardingDebug>,
}

/// Shardy `updateTensorSharding`'s test: `new` is stored unless it equals `old` or is empty
/// where there was nothing.
fn changed(old: Option<&TensorSharding>, new: &TensorSharding) -> bool {
    !((old.is_none() && empty_axes(new)) || old == Some(new))
}

/// One tensor of a propagation step: where its sharding is read and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tensor {
    /// A value, through its shardable value.
    Value(u32),
    /// The targets of a `sdy.data_flow_edge` (this op), seen from outside a manual computation.
    EdgeTarget(u32),
    /// Result `k` of a function.
    FuncResult(u32, u32),
}

/// A reference to a stored sharding that user priorities restore (Shardy
/// `ShardingReference`), with the original sharding.
pub type PriorityReference = (PriorityTarget, TensorSharding);

/// A value or a function result, whose sharding user priorities transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriorityTarget {
    /// A value (read and written through its shardable value).
    Value(u32),
    /// Result `k` of function op `f`: `FuncResult(f, k)`.
    FuncResult(u32, u32),
}

/// The solver state; see the module documentation.
pub struct Solver<'g> {
    prog: Arc<Program<'g>>,
    meshes: HashMap<String, Mesh>,
    /// The only mesh and its name, when there is one (most programs): found without hashing.
    only_mesh: Option<(String, Mesh)>,
    raw: Vec<Option<Shared>>,
    func_results: FastMap<u32, Vec<Option<Shared>>>,
    func_order: Vec<u32>,
    alive: Vec<bool>,
    live_uses: Vec<u32>,
    worklist: Worklist,
    current: Option<u32>,
    notify: bool,
    rule_used: Vec<bool>,
    erased: Vec<u32>,
    conservative: bool,
    stats: SolverStats,
    /// Values walked by the current `notify_users` (those marked with `seen_epoch`).
    seen: Vec<u32>,
    seen_epoch: u32,
    debug: Option<ShardingDebug>,
    layer: LayerTag,
    /// Visits that changed nothing, to skip their repeats (off while recording debug data).
    cache: VisitCache,
    /// Steps being recorded for other runs (see [`super::step_memo`]).
    memo_out: Option<StepMemo>,
    /// Steps of another run to replay.
    memo_in: Option<Arc<StepMemo>>,
    /// Outcomes of steps by content (see [`super::step_cache`]).
    step_cache: RefCell<StepCache>,
    /// Directions by op and signature (see [`super::direction_table`]).
    dir_table: RefCell<DirectionTable>,
    /// The initial id of the current round's direction policy
    /// ([`DirectionPolicy::initial_id`]).
    round_initial_id: Option<u8>,
    /// Per value, `(structure, shardable)`: what `shardable` found in epoch `structure`
    /// (`NONE` for none).
    shardable_memo: Vec<Cell<(u32, u32)>>,
    /// Epoch of the program's structure, counting erased ops from 1.
    structure: u32,
    /// The stack of `notify_users`, kept between calls.
    notify_stack: Vec<(u32, usize)>,
    /// The tensors of the op `visit_registered` visits, kept between calls.
    tensor_buf: Vec<Tensor>,
}

impl<'g> Solver<'g> {
    /// A solver over `graph` with the given shardings and facts. `conservative` is Shardy's
    /// `conservative-propagation` for ops propagated with their rule (the rules in the graph
    /// must be the conservative ones too).
    ///
    /// Errors (`ErrorKind::Invariant`, rules `propagation-*`): a sharding list of the wrong
    /// length, a function result list for an op that is no function or of the wrong length, an
    /// op result with a dynamic shape (Shardy propagates static shapes only), and bad facts
    /// (indices out of range, ops of the wrong kind, a value in two sharding groups).
    pub fn new(graph: &'g Graph, input: SolverInput, conservative: bool) -> Result<Solver<'g>> {
        let prog = Program::new(graph, &input.facts)?;
        Solver::with_program(Arc::new(prog), input, conservative)
    }

    /// A solver over `prog`, the program [`Program::new`] makes of a graph and the facts of
    /// `input` (which are not looked at again: solves of one program with different shardings
    /// share it). Errors as [`Solver::new`].
    pub fn with_program(prog: Arc<Program<'g>>, input: SolverInput, conservative: bool) -> Result<Solver<'g>> {
        Solver::with_caches(prog, input, conservative, SolveCaches::default())
    }

    /// [`Solver::with_program`], starting from what solves of the same program with the same
    /// meshes left (see [`SolveCaches`]). Errors as [`Solver::new`].
    pub fn with_caches(
        prog: Arc<Program<'g>>,
        input: SolverInput,
        conservative: bool,
        caches: SolveCaches,
    ) -> Result<Solver<'g>> {
        let graph: &'g Graph = prog.graph;
        let n_values = graph.num_values();
        let n_ops = graph.num_ops();
        if input.value_shardings.len() != n_values {
            return Err(Error::invariant(
                "propagation-sharding-count",
                format!("expected one optional sharding per value ({n_values}), got {}", input.value_shardings.len()),
            ));
        }
        for op in 0..n_ops {
            for &r in graph.results.row(op) {
                if !prog.non_tensor[r as usize] && graph.shape(r as usize).iter().any(|&d| d < 0) {
                    return Err(Error::invariant(
                        "propagation-dynamic-shape",
                        format!(
                            "result {} of op {op} ({}) has the dynamic shape {:?}; Shardy propagation only supports ranked tensors with a static shape",
                            prog.value_pos[r as usize],
                            graph.name(op),
                            graph.shape(r as usize)
                        ),
                    ));
                }
            }
        }
        let mut func_results = FastMap::default();
        let mut func_order = Vec::new();
        for (op, shardings) in input.func_results {
            if op as usize >= n_ops || prog.kind[op as usize] != OpKind::Func {
                return Err(Error::invariant(
                    "propagation-bad-func",
                    format!("function results given for op {op}, which is no func.func"),
                ));
            }
            func_order.push(op);
            func_results.insert(op, shardings.into_iter().map(|s| s.map(Arc::new)).collect());
        }
        if let Some(main) = prog.main_func {
            if prog.kind[main as usize] != OpKind::Func {
                return Err(Error::invariant(
                    "propagation-bad-func",
                    format!("main function op {main} is no func.func"),
                ));
            }
            if let Some(ret) = prog.terminator(main, 0) {
                let n = prog.operands(ret).len();
                let have = func_results.get(&main).map_or(0, Vec::len);
                if have != n {
                    return Err(Error::invariant(
                        "propagation-bad-func",
                        format!("the main function returns {n} values but {have} result shardings were given"),
                    ));
                }
            }
        }
        let mut live_uses = vec![0u32; n_values];
        for &v in &graph.operands.items {
            live_uses[v as usize] += 1;
        }
        let debug = input.debug;
        let mut solver = Solver {
            prog,
            only_mesh: match input.meshes.iter().next() {
                Some((name, mesh)) if input.meshes.len() == 1 => Some((name.clone(), mesh.clone())),
                _ => None,
            },
            meshes: input.meshes,
            raw: input.value_shardings.into_iter().map(|s| s.map(Arc::new)).collect(),
            func_results,
            func_order,
            alive: vec![true; n_ops],
            live_uses,
            worklist: Worklist::new(n_ops),
            current: None,
            notify: false,
            rule_used: vec![false; n_ops],
            erased: Vec::new(),
            conservative,
            stats: SolverStats::default(),
            seen: vec![0; n_values],
            seen_epoch: 0,
            debug: None,
            layer: LayerTag::default(),
            cache: {
                let mut visits = caches.visits;
                visits.reset(n_values, n_ops, debug.is_none());
                visits
            },
            memo_out: None,
            memo_in: None,
            step_cache: RefCell::new(caches.steps),
            dir_table: RefCell::new(caches.directions),
            round_initial_id: None,
            shardable_memo: vec![Cell::new((0, NONE)); n_values],
            structure: 1,
            notify_stack: Vec::new(),
            tensor_buf: Vec::new(),
        };
        if solver.prog.initial_shardable.get().is_none() {
            // Nothing is erased yet: what every solve of the program finds first.
            let initial: Vec<u32> = (0..n_values as u32).map(|v| solver.find_shardable(v).unwrap_or(NONE)).collect();
            let _ = solver.prog.initial_shardable.set(initial);
        }
        if let Some(options) = debug {
            solver.prepare_debug(options);
        }
        Ok(solver)
    }

    /// Records the propagation steps of this solve, to replay in other solves of the same
    /// graph with the same options (see [`super::step_memo`]); [`Solver::take_steps`] hands
    /// them over. Nothing is recorded while recording debugging data.
    pub fn record_steps(&mut self) {
        if self.debug.is_none() {
            self.memo_out = Some(StepMemo::new(self.alive.len()));
        }
    }

    /// The steps recorded since [`Solver::record_steps`].
    pub fn take_steps(&mut self) -> Option<StepMemo> {
        self.memo_out.take()
    }

    /// Replays the steps of `memo`, recorded by a solve of the same graph with the same
    /// options (`conservative`, meshes), where a step's inputs equal a remembered step's: the
    /// solve's result is the same as without it (see [`super::step_memo`]). Ignored while
    /// recording debugging data.
    pub fn replay_steps(&mut self, memo: Arc<StepMemo>) {
        if self.debug.is_none() {
            self.memo_in = Some(memo);
        }
    }

    /// What this solve and those before it found (see [`SolveCaches`]); the solver keeps
    /// nothing.
    pub fn take_caches(&mut self) -> SolveCaches {
        SolveCaches {
            steps: self.step_cache.take(),
            directions: self.dir_table.take(),
            visits: std::mem::take(&mut self.cache),
        }
    }

    /// The program the solver works on.
    pub fn program(&self) -> &Program<'g> {
        &self.prog
    }

    /// Number of live uses of `v` (ops erased as dead no longer count).
    pub fn use_count(&self, v: u32) -> u32 {
        self.live_uses[v as usize]
    }

    /// Counters so far.
    pub fn stats(&self) -> SolverStats {
        self.stats
    }

    /// The layer running the current round (see [`super::explain::LayerTag`]); each layer
    /// sets its part before running its inner layer. Only read when recording.
    pub fn layer(&self) -> LayerTag {
        self.layer
    }

    /// Sets the layer running the next rounds.
    pub fn set_layer(&mut self, layer: LayerTag) {
        self.layer = layer;
    }

    /// The solver's result.
    pub fn into_output(self) -> SolverOutput {
        let (mut out, values) = self.into_shared_output();
        out.value_shardings = unshared(values);
        out
    }

    /// The solver's result with the value shardings apart, as the solver holds them (the
    /// output's `value_shardings` is empty).
    pub(crate) fn into_shared_output(mut self) -> (SolverOutput, Vec<Option<Shared>>) {
        let debug = self.debug.take().map(|mut d| {
            let prog = &self.prog;
            let alive = &self.alive;
            d.forget(&self.erased, |v| {
                let op = prog.owning_op(v);
                op != NONE && !alive[op as usize]
            });
            d
        });
        let mut erased = self.erased;
        erased.sort_unstable();
        let func_results =
            self.func_order.iter().map(|f| (*f, unshared(self.func_results.remove(f).unwrap_or_default()))).collect();
        let out = SolverOutput {
            value_shardings: Vec::new(),
            func_results,
            erased_ops: erased,
            rule_ops: (0..self.rule_used.len() as u32).filter(|&op| self.rule_used[op as usize]).collect(),
            group_conflicts: Vec::new(),
            stats: self.stats,
            debug,
        };
        (out, self.raw)
    }

    /// The sharding rule of `op` in the graph (what Shardy finds on the op once it has
    /// propagated through it).
    pub fn rule(&self, op: u32) -> Option<&'g OpShardingRule> {
        let graph: &'g Graph = self.prog.graph;
        graph.rule(op as usize)
    }
}
