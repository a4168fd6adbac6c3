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

#![warn(missing_docs)]

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use super::debug::{step_edges, DebugOptions, EdgeNode, EdgeNodeKind, Origin, OriginKind, ShardingDebug};
use super::explain::{diagnose, Conflict, Hop, LayerTag, StepRecord, VisitInfo};
use super::factor_prop::{FactorPropagation, OpInfo, PropagationDirection};
use super::program::{Effects, OpKind, Program, ProgramFacts};
use super::projection::ShardingProjection;
use super::direction_table::DirectionTable;
use super::layers::SolveCaches;
use super::step_cache::{StepCache, StepContext, StepOutcome};
use super::step_memo::{Step, StepMemo, Stored};
use super::visit_cache::VisitCache;
use super::transforms::{
    add_free_axes, empty_axes, erase_manual_axes, fully_open, initialized_for_priorities, is_fully_open,
    nonzero_priorities, updated_for_priority,
};
use crate::error::{Error, Result};
use crate::graph::{Graph, NONE};
use crate::mesh::Mesh;
use crate::rule::OpShardingRule;
use crate::sharding::{MeshRef, TensorSharding};

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

/// MLIR's greedy-driver worklist: a stack without duplicates.
#[derive(Debug, Default)]
struct Worklist {
    list: Vec<u32>,
    pos: Vec<u32>,
}

impl Worklist {
    fn new(n: usize) -> Worklist {
        Worklist { list: Vec::new(), pos: vec![NONE; n] }
    }

    fn push(&mut self, op: u32) {
        if self.pos[op as usize] != NONE {
            return;
        }
        self.pos[op as usize] = self.list.len() as u32;
        self.list.push(op);
    }

    fn pop(&mut self) -> Option<u32> {
        loop {
            let op = self.list.pop()?;
            if op == NONE {
                continue;
            }
            self.pos[op as usize] = NONE;
            while self.list.last() == Some(&NONE) {
                self.list.pop();
            }
            return Some(op);
        }
    }

    fn remove(&mut self, op: u32) {
        let p = self.pos[op as usize];
        if p != NONE {
            self.list[p as usize] = NONE;
            self.pos[op as usize] = NONE;
        }
    }
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
    func_results: HashMap<u32, Vec<Option<Shared>>>,
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
    pub fn with_caches(prog: Arc<Program<'g>>, input: SolverInput, conservative: bool, caches: SolveCaches) -> Result<Solver<'g>> {
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
        let mut func_results = HashMap::new();
        let mut func_order = Vec::new();
        for (op, shardings) in input.func_results {
            if op as usize >= n_ops || prog.kind[op as usize] != OpKind::Func {
                return Err(Error::invariant("propagation-bad-func", format!("function results given for op {op}, which is no func.func")));
            }
            func_order.push(op);
            func_results.insert(op, shardings.into_iter().map(|s| s.map(Arc::new)).collect());
        }
        if let Some(main) = prog.main_func {
            if prog.kind[main as usize] != OpKind::Func {
                return Err(Error::invariant("propagation-bad-func", format!("main function op {main} is no func.func")));
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
        SolveCaches { steps: self.step_cache.take(), directions: self.dir_table.take(), visits: std::mem::take(&mut self.cache) }
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
        let func_results = self
            .func_order
            .iter()
            .map(|f| {
                (*f, unshared(self.func_results.remove(f).unwrap_or_default()))
            })
            .collect();
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

    // ------------------------------------------------------------------ where shardings live

    fn is_alive(&self, op: u32) -> bool {
        self.alive[op as usize]
    }

    /// The `sdy.data_flow_edge` whose input is `owner`: its only (live) user (Shardy
    /// `getDataFlowEdgeUser`).
    fn edge_of(&self, owner: u32) -> Option<u32> {
        if self.live_uses[owner as usize] != 1 {
            return None;
        }
        let (user, _) = *self.prog.uses[owner as usize].iter().find(|(u, _)| self.is_alive(*u))?;
        (self.prog.kind[user as usize] == OpKind::DataFlowEdge).then_some(user)
    }

    /// The edge owner of a data flow target (Shardy `getEdgeOwnerFromTarget`), when the
    /// owning op is a shardable data flow op.
    fn edge_owner_from_target(&self, v: u32) -> Option<u32> {
        let owner_op = self.prog.owning_op(v);
        if owner_op == NONE {
            return None;
        }
        match self.prog.kind[owner_op as usize] {
            OpKind::While => {
                if self.prog.def(v).is_some() {
                    return Some(v);
                }
                let results = self.prog.results(owner_op);
                let n = results.len();
                (n > 0).then(|| results[self.prog.value_pos[v as usize] as usize % n])
            }
            OpKind::Case | OpKind::OptimizationBarrier => self.prog.def(v).map(|_| v),
            OpKind::ManualComputation | OpKind::NamedComputation => Some(v),
            _ => None,
        }
    }

    /// The edge whose targets include `v` (Shardy `DataFlowEdgeOp::lookup(Value)`).
    fn edge_of_target(&self, v: u32) -> Option<u32> {
        let owner = self.edge_owner_from_target(v)?;
        self.edge_of(owner)
    }

    /// The value whose stored sharding `v` reads and writes (Shardy `getShardableValue`), or
    /// `None` when `v` has none.
    #[inline]
    fn shardable(&self, v: u32) -> Option<u32> {
        // It depends on which ops are alive and on use counts, which change only when an op is
        // erased; the answers of the current `structure` epoch are kept.
        if self.structure == 1 {
            if let Some(initial) = self.prog.initial_shardable.get() {
                let known = initial[v as usize];
                return (known != NONE).then_some(known);
            }
        }
        self.shardable_after_erasures(v)
    }

    /// [`Solver::shardable`] once an op was erased.
    #[inline(never)]
    fn shardable_after_erasures(&self, v: u32) -> Option<u32> {
        let slot = &self.shardable_memo[v as usize];
        let (epoch, known) = slot.get();
        if epoch == self.structure {
            return (known != NONE).then_some(known);
        }
        let found = self.find_shardable(v);
        slot.set((self.structure, found.unwrap_or(NONE)));
        found
    }

    fn find_shardable(&self, v: u32) -> Option<u32> {
        if let Some(edge) = self.edge_of_target(v) {
            return self.prog.results(edge).first().copied();
        }
        if self.prog.def(v).is_some() {
            return Some(v);
        }
        let owner = self.prog.block_owner(v)?;
        match self.prog.kind[owner as usize] {
            OpKind::Func => Some(v),
            OpKind::While | OpKind::Case | OpKind::OptimizationBarrier | OpKind::ManualComputation | OpKind::NamedComputation => {
                self.edge_owner_from_target(v)
            }
            OpKind::AsyncStart => self.prog.operands(owner).get(self.prog.value_pos[v as usize] as usize).copied(),
            _ => None,
        }
    }

    /// The manual axes when `slot` is a body argument of a manual computation.
    fn manual_arg_axes(&self, slot: u32) -> Option<&[String]> {
        let owner = self.prog.block_owner(slot)?;
        if self.prog.kind[owner as usize] != OpKind::ManualComputation {
            return None;
        }
        Some(self.prog.manual_axes.get(&owner).map_or(&[][..], Vec::as_slice))
    }

    /// The sharding of `v` (Shardy `getSharding`).
    fn get_sharding(&self, v: u32) -> Option<TensorSharding> {
        let slot = self.shardable(v)?;
        let raw = self.raw[slot as usize].as_ref()?;
        match self.manual_arg_axes(slot) {
            Some(manual) => Some(erase_manual_axes(raw, manual)),
            None => Some(TensorSharding::clone(raw)),
        }
    }

    /// Sets the sharding of `v` (Shardy `setSharding`). Per-value shardings of an op's results
    /// (or of a named computation's body arguments) are all or nothing: the others become fully
    /// open on the same mesh when they had none.
    fn set_sharding(&mut self, v: u32, s: Shared) {
        let Some(slot) = self.shardable(v) else { return };
        if let Some(manual) = self.manual_arg_axes(slot) {
            let new = match &self.raw[slot as usize] {
                Some(outer) => Arc::new(add_free_axes(outer, &s, manual)),
                None => s,
            };
            self.raw[slot as usize] = Some(new);
            self.cache.wrote(slot);
            return;
        }
        let prog = &*self.prog;
        let siblings: &[u32] = if let Some(d) = prog.def(slot) {
            prog.results(d)
        } else if let Some(o) = prog.block_owner(slot).filter(|&o| prog.kind[o as usize] == OpKind::NamedComputation) {
            prog.block_args.row(o as usize)
        } else {
            &[]
        };
        for &sib in siblings {
            if sib != slot && self.raw[sib as usize].is_none() {
                let rank = if prog.non_tensor[sib as usize] { 0 } else { prog.shape(sib).len() };
                self.raw[sib as usize] = Some(Arc::new(fully_open(&s.mesh, rank)));
                self.cache.wrote(sib);
            }
        }
        self.raw[slot as usize] = Some(s);
        self.cache.wrote(slot);
    }

    /// The owner of the targets of edge `edge` and, when the owner belongs to a manual
    /// computation, its manual axes.
    fn edge_manual(&self, edge: u32) -> Option<(u32, &[String])> {
        let owner = *self.prog.operands(edge).first()?;
        let op = self.prog.owning_op(owner);
        if op == NONE || self.prog.kind[op as usize] != OpKind::ManualComputation {
            return None;
        }
        Some((owner, self.prog.manual_axes.get(&op).map_or(&[][..], Vec::as_slice)))
    }

    fn edge_result(&self, edge: u32) -> u32 {
        self.prog.results(edge)[0]
    }

    /// The sharding of an edge's targets as seen by propagation (Shardy
    /// `transformTargetSharding(..., kBeforeEdgePropagation)`).
    fn edge_target_get(&self, edge: u32) -> Option<TensorSharding> {
        let s = self.raw[self.edge_result(edge) as usize].as_ref()?;
        match self.edge_manual(edge) {
            None => Some(TensorSharding::clone(s)),
            Some((owner, manual)) => {
                if self.prog.def(owner).is_none() {
                    Some(match &self.raw[owner as usize] {
                        Some(in_sharding) => add_free_axes(in_sharding, s, manual),
                        None => TensorSharding::clone(s),
                    })
                } else {
                    Some(erase_manual_axes(s, manual))
                }
            }
        }
    }

    /// Stores a propagated target sharding on the edge (`kAfterEdgePropagation`).
    fn edge_target_set(&mut self, edge: u32, s: Shared) {
        let new = match self.edge_manual(edge) {
            None => s,
            Some((owner, manual)) => {
                if self.prog.def(owner).is_none() {
                    Arc::new(erase_manual_axes(&s, manual))
                } else {
                    match &self.raw[owner as usize] {
                        Some(out_sharding) => Arc::new(add_free_axes(out_sharding, &s, manual)),
                        None => s,
                    }
                }
            }
        };
        let r = self.edge_result(edge);
        self.raw[r as usize] = Some(new);
        self.cache.wrote(r);
    }

    /// The sources of the edge whose input is `owner` (Shardy `getEdgeSources`).
    fn edge_sources(&self, owner: u32) -> Vec<u32> {
        let op = self.prog.owning_op(owner);
        if op == NONE {
            return Vec::new();
        }
        let k = self.prog.value_pos[owner as usize] as usize;
        let operand_of = |term: Option<u32>| term.and_then(|t| self.prog.operands(t).get(k).copied());
        let is_result = self.prog.def(owner).is_some();
        match self.prog.kind[op as usize] {
            OpKind::While if is_result => {
                let mut s: Vec<u32> = self.prog.operands(op).get(k).copied().into_iter().collect();
                s.extend(operand_of(self.prog.body_terminator(op)));
                s
            }
            OpKind::Case if is_result => {
                self.prog.terminators.row(op as usize).iter().filter_map(|&t| self.prog.operands(t).get(k).copied()).collect()
            }
            OpKind::OptimizationBarrier if is_result => self.prog.operands(op).get(k).copied().into_iter().collect(),
            OpKind::ManualComputation | OpKind::NamedComputation => {
                if is_result {
                    operand_of(self.prog.body_terminator(op)).into_iter().collect()
                } else {
                    self.prog.operands(op).get(k).copied().into_iter().collect()
                }
            }
            _ => Vec::new(),
        }
    }

    /// Targets of the edge whose input is `owner` other than the owner (Shardy
    /// `getNonEdgeOwnerTargets`: a while's block arguments).
    fn non_owner_targets(&self, owner: u32) -> Vec<u32> {
        let op = self.prog.owning_op(owner);
        if op == NONE || self.prog.kind[op as usize] != OpKind::While || self.prog.def(owner).is_none() {
            return Vec::new();
        }
        let n = self.prog.results(op).len();
        let k = self.prog.value_pos[owner as usize] as usize;
        let args = self.prog.block_args.row(op as usize);
        [k, n + k].iter().filter_map(|&i| args.get(i).copied()).collect()
    }

    // ------------------------------------------------------------------ notifications

    /// Puts `op` and its ancestors back on the worklist (MLIR's `addToWorklist`), unless it
    /// is the op being propagated through.
    fn notify_op(&mut self, op: u32) {
        if !self.notify || self.current == Some(op) {
            return;
        }
        self.add_to_worklist(op);
    }

    fn add_to_worklist(&mut self, op: u32) {
        let mut cur = Some(op);
        while let Some(o) = cur {
            self.worklist.push(o);
            cur = self.prog.parent(o);
        }
    }

    /// The edge a use feeds (Shardy `DataFlowEdgeOp::lookup(OpOperand&)`).
    fn edge_of_source(&self, user: u32, operand: u32) -> Option<u32> {
        let is_term = self.prog.kind[user as usize].is_terminator();
        let op = if is_term { self.prog.parent(user)? } else { user };
        let k = operand as usize;
        let owner = match self.prog.kind[op as usize] {
            OpKind::While | OpKind::Case | OpKind::OptimizationBarrier => self.prog.results(op).get(k).copied()?,
            OpKind::ManualComputation | OpKind::NamedComputation => {
                if is_term {
                    self.prog.results(op).get(k).copied()?
                } else {
                    self.prog.operands(op).get(k).copied()?
                }
            }
            _ => return None,
        };
        self.edge_of(owner)
    }

    /// Shardy `notifyUsersModified`: puts the users of `root` back on the worklist, looking
    /// through data flow edges, terminators (to the parent op, or from a function's return
    /// to the results of its calls) and calls (to the callee's arguments), depth first in
    /// use-list order. A value reached twice is not walked again: walking it again would only
    /// push ops already pushed (Shardy recurses, without end where calls form a cycle).
    fn notify_users(&mut self, root: u32) {
        if !self.notify {
            return;
        }
        self.seen_epoch = self.seen_epoch.wrapping_add(1);
        if self.seen_epoch == 0 {
            self.seen.iter_mut().for_each(|e| *e = 0);
            self.seen_epoch = 1;
        }
        let mut stack = std::mem::take(&mut self.notify_stack);
        stack.clear();
        stack.push((root, 0));
        while let Some(top) = stack.last_mut() {
            let (v, i) = *top;
            if i == 0 {
                if self.seen[v as usize] == self.seen_epoch {
                    stack.pop();
                    continue;
                }
                self.seen[v as usize] = self.seen_epoch;
            }
            let Some(&(user, k)) = self.prog.uses[v as usize].get(i) else {
                stack.pop();
                continue;
            };
            top.1 = i + 1;
            if !self.is_alive(user) {
                continue;
            }
            if let Some(edge) = self.edge_of_source(user, k) {
                self.notify_op(edge);
                continue;
            }
            let kind = self.prog.kind[user as usize];
            if kind.is_terminator() {
                let Some(parent) = self.prog.parent(user) else { continue };
                if kind != OpKind::FuncReturn {
                    self.notify_op(parent);
                    continue;
                }
                let callers = self.prog.callers.get(&parent).map_or(&[][..], Vec::as_slice);
                if callers.is_empty() && !self.prog.symbol_used[parent as usize] {
                    self.notify_op(parent);
                    continue;
                }
                let next: Vec<u32> =
                    callers.iter().filter_map(|&call| self.prog.results(call).get(k as usize).copied()).collect();
                stack.extend(next.into_iter().rev().map(|r| (r, 0)));
                continue;
            }
            if kind == OpKind::Call {
                let arg = self.prog.callee.get(&user).and_then(|&f| self.prog.block_args.row(f as usize).get(k as usize).copied());
                if let Some(arg) = arg {
                    stack.push((arg, 0));
                }
                continue;
            }
            self.notify_op(user);
        }
        self.notify_stack = stack;
    }

    /// Shardy `notifyShardingModified`.
    fn notify_sharding_modified(&mut self, v: u32) {
        if !self.notify {
            return;
        }
        if let Some(d) = self.prog.def(v) {
            if self.prog.kind[d as usize] == OpKind::DataFlowEdge {
                if let Some(&owner) = self.prog.operands(d).first() {
                    for t in self.non_owner_targets(owner) {
                        self.notify_users(t);
                    }
                }
            }
            self.notify_op(d);
        } else if let Some(o) = self.prog.block_owner(v) {
            self.notify_op(o);
        }
        self.notify_users(v);
    }

    // ------------------------------------------------------------------ one propagation step

    fn tensor_get(&self, t: Tensor) -> Option<TensorSharding> {
        match t {
            Tensor::Value(v) => self.get_sharding(v),
            Tensor::EdgeTarget(e) => self.edge_target_get(e),
            Tensor::FuncResult(f, k) => self.func_results.get(&f).and_then(|r| r.get(k as usize)?.as_deref().cloned()),
        }
    }

    /// `tensor_get` without a copy where the stored sharding is the tensor's sharding (no
    /// manual axes to erase or add).
    fn tensor_cow(&self, t: Tensor) -> Option<Cow<'_, TensorSharding>> {
        match t {
            Tensor::Value(v) => {
                let slot = self.shardable(v)?;
                let raw = self.raw[slot as usize].as_ref()?;
                match self.manual_arg_axes(slot) {
                    Some(manual) => Some(Cow::Owned(erase_manual_axes(raw, manual))),
                    None => Some(Cow::Borrowed(raw)),
                }
            }
            Tensor::EdgeTarget(e) if self.edge_manual(e).is_none() => self.raw[self.edge_result(e) as usize].as_deref().map(Cow::Borrowed),
            _ => self.tensor_get(t).map(Cow::Owned),
        }
    }

    fn tensor_set(&mut self, t: Tensor, s: Shared) {
        match t {
            Tensor::Value(v) => self.set_sharding(v, s),
            Tensor::EdgeTarget(e) => self.edge_target_set(e, s),
            Tensor::FuncResult(f, k) => {
                if let Some(slot) = self.func_results.get_mut(&f).and_then(|r| r.get_mut(k as usize)) {
                    *slot = Some(s);
                }
                if Some(f) == self.prog.main_func {
                    self.cache.wrote_func_result(k);
                }
            }
        }
    }

    /// Calls `f` with each value whose stored sharding reading `t` reads; `false` when it
    /// reads a function result sharding (not a value's).
    fn for_each_read(&self, t: Tensor, mut f: impl FnMut(u32)) -> bool {
        match t {
            Tensor::Value(v) => {
                if let Some(slot) = self.shardable(v) {
                    f(slot);
                }
            }
            Tensor::EdgeTarget(e) => {
                f(self.edge_result(e));
                if let Some((owner, _)) = self.edge_manual(e) {
                    f(owner);
                }
            }
            Tensor::FuncResult(..) => return false,
        }
        true
    }

    /// Calls `f` with each stored sharding reading `t` reads: where it is stored, and what.
    fn for_each_stored(&self, t: Tensor, mut f: impl FnMut(Stored, Option<&Shared>)) {
        if let Tensor::FuncResult(func, k) = t {
            let s = self.func_results.get(&func).and_then(|r| r.get(k as usize)).and_then(Option::as_ref);
            f(Stored::FuncResult(func, k), s);
        } else {
            self.for_each_read(t, |slot| f(Stored::Value(slot), self.raw[slot as usize].as_ref()));
        }
    }

    /// Tells the visit memo which stored shardings reading `t` reads.
    fn record_read(&mut self, t: Tensor) {
        let mut slots = [0u32; 2];
        let mut n = 0;
        let tracked = self.for_each_read(t, |s| {
            slots[n] = s;
            n += 1;
        });
        if !tracked {
            self.cache.read_untracked();
        }
        for &s in &slots[..n] {
            self.cache.read(s);
        }
    }

    /// Whether reading `t` finds a sharding.
    fn has_sharding(&self, t: Tensor) -> bool {
        match t {
            Tensor::Value(v) => self.shardable(v).is_some_and(|slot| self.raw[slot as usize].is_some()),
            Tensor::EdgeTarget(e) => self.raw[self.edge_result(e) as usize].is_some(),
            Tensor::FuncResult(f, k) => self.func_results.get(&f).and_then(|r| r.get(k as usize)).is_some_and(Option::is_some),
        }
    }

    /// Starts a step through `operands` and `results` (before [`Solver::propagate_tensors`]):
    /// tells the visit memo what the step reads, and returns whether any of them has a
    /// sharding. A step where none has one stores nothing (Shardy's `getCommonMeshName` finds
    /// no mesh), and its caller returns before finding its directions.
    fn begin_step(&mut self, operands: &[Tensor], results: &[Tensor]) -> bool {
        if !self.cache.recording() {
            return operands.iter().chain(results).any(|&t| self.has_sharding(t));
        }
        let mut any = false;
        for &t in operands.iter().chain(results) {
            // `record_read` and `has_sharding` in one, for values (most tensors).
            if let Tensor::Value(v) = t {
                if let Some(slot) = self.shardable(v) {
                    self.cache.read(slot);
                    any |= self.raw[slot as usize].is_some();
                }
            } else {
                self.record_read(t);
                any |= self.has_sharding(t);
            }
        }
        any
    }

    /// A remembered step of `action` with the same inputs as this one (see
    /// [`super::step_memo`]).
    fn find_step<'m>(&self, memo: &'m StepMemo, action: u32, id: u8, operands: &[Tensor], results: &[Tensor], dirs: &[Dir]) -> Option<&'m Step> {
        memo.steps(action, results).iter().find(|step| {
            let n = step.num_operands as usize;
            if step.strategy != id
                || n != operands.len()
                || step.tensors[..n] != *operands
                || step.tensors[n..] != *results
                || step.dirs.len() != dirs.len()
                || step.dirs.iter().zip(dirs).any(|(r, d)| r.is_some_and(|r| r != *d))
            {
                return false;
            }
            let mut i = 0;
            let mut same = true;
            for &t in operands.iter().chain(results) {
                self.for_each_stored(t, |slot, now| {
                    same &= step.reads.get(i).is_some_and(|(s, v)| *s == slot && v.as_ref() == now);
                    i += 1;
                });
                if !same {
                    return false;
                }
            }
            i == step.reads.len()
        })
    }

    /// The value whose change is announced (Shardy's `getShardableValue(tensor)`).
    fn modified_value(&self, t: Tensor) -> Option<u32> {
        match t {
            Tensor::Value(v) => self.shardable(v),
            Tensor::EdgeTarget(e) => Some(self.edge_result(e)),
            Tensor::FuncResult(..) => None,
        }
    }

    /// The mesh the shardings share (Shardy `getCommonMeshName`): the first sharding's,
    /// unless it is the empty mesh, which any other replaces; `None` when two non-empty meshes
    /// differ or no sharding is given. Errors when a sharding names an unknown mesh.
    fn common_mesh(&self, shardings: &[Option<&TensorSharding>]) -> Result<Option<(MeshRef, Mesh)>> {
        // The first non-empty mesh is kept by reference (shardings naming the same mesh resolve
        // to the same entry, so most comparisons are pointer comparisons) and cloned once.
        let mut chosen: Option<(&MeshRef, &Mesh)> = None;
        for s in shardings.iter().filter_map(|s| *s) {
            let m = self.resolve_mesh(s)?;
            match chosen {
                None => chosen = Some((&s.mesh, m)),
                Some((_, cm)) if cm.is_empty() => chosen = Some((&s.mesh, m)),
                Some(_) if m.is_empty() => {}
                Some((_, cm)) => {
                    if !std::ptr::eq(cm, m) && cm != m {
                        return Ok(None);
                    }
                }
            }
        }
        Ok(chosen.map(|(r, m)| (r.clone(), m.clone())))
    }

    /// The mesh `s` is bound to (as [`TensorSharding::resolve_mesh`] finds it among the
    /// program's meshes).
    fn resolve_mesh<'s>(&'s self, s: &'s TensorSharding) -> Result<&'s Mesh> {
        if let (MeshRef::Named(name), Some((only, mesh))) = (&s.mesh, &self.only_mesh) {
            if name.as_str() == only {
                return Ok(mesh);
            }
        }
        s.resolve_mesh(&self.meshes)
    }

    /// Shardy `propagateTensorShardings`: projects the shardings of `operands` and `results`
    /// onto `rule`, propagates along its factors with `strategy` in the directions `dirs`, and
    /// stores (and announces) the shardings that changed. Returns whether any did. Called once
    /// [`Solver::begin_step`] found a sharding to propagate.
    #[allow(clippy::too_many_arguments)]
    fn propagate_tensors(
        &mut self,
        action: u32,
        operands: &[Tensor],
        results: &[Tensor],
        rule: &OpShardingRule,
        dirs: &[Dir],
        strategy: &dyn FactorPropagation,
        conservative: bool,
        elementwise: bool,
    ) -> Result<bool> {
        let direction = |f: usize| {
            if i64::try_from(f).is_ok_and(|f| rule.is_blocked(f)) {
                Dir::None
            } else {
                dirs.get(f).copied().unwrap_or(Dir::None)
            }
        };
        let memo_id = strategy.cache_id().filter(|_| self.debug.is_none());
        if let Some((id, memo)) = memo_id.and_then(|id| Some((id, self.memo_in.take()?))) {
            let found = self.find_step(&memo, action, id, operands, results, dirs);
            if let Some(step) = found {
                // The step's directions are `dirs` where they mattered (`find_step`).
                self.cache.relevant_directions(&step.dirs);
                for (t, new) in &step.updates {
                    self.store_update(*t, new.clone());
                }
                let any = !step.updates.is_empty();
                self.memo_in = Some(memo);
                return Ok(any);
            }
            self.memo_in = Some(memo);
        }
        let memo_reads = match (memo_id, self.memo_out.is_some()) {
            (Some(_), true) => {
                let mut reads = Vec::new();
                for &t in operands.iter().chain(results) {
                    self.for_each_stored(t, |slot, s| reads.push((slot, s.cloned())));
                }
                Some(reads)
            }
            _ => None,
        };
        // The current shardings are read in place; the changed ones are collected first and
        // stored after (each compared with the sharding read before any store, as Shardy does).
        let recording = self.cache.recording() || memo_reads.is_some();
        // Steps through an op with its own rule, outside debugging, are looked up by content
        // (see `step_cache`).
        let rule_index = self.prog.graph.op_rule.get(action as usize).copied().filter(|&k| {
            k != NONE && std::ptr::eq(&self.prog.graph.rules[k as usize], rule) && self.prog.kind[action as usize] != OpKind::PropagationBarrier
        });
        let context = match (rule_index, strategy.cache_id(), self.debug.is_none()) {
            (Some(rule), Some(strategy), true) => Some(StepContext { rule, strategy, conservative, elementwise, dirs }),
            _ => None,
        };
        let (debug_state, updates, relevant) = 'step: {
            let held: Vec<Option<Cow<'_, TensorSharding>>> = operands.iter().chain(results).map(|&t| self.tensor_cow(t)).collect();
            let all: Vec<Option<&TensorSharding>> = held.iter().map(|s| s.as_deref()).collect();
            let (op_refs, res_refs) = all.split_at(operands.len());
            let Some((mesh_ref, mesh)) = self.common_mesh(&all)? else { return Ok(false) };
            if mesh.is_maximal() {
                return Ok(false);
            }
            let tensor_at = |p: usize| if p < operands.len() { operands[p] } else { results[p - operands.len()] };
            let hash = context.map(|c| StepCache::hash(&c, &all));
            if let (Some(c), Some(h)) = (&context, hash) {
                if let Some(hit) = self.step_cache.borrow().get(h, c, &all) {
                    let updates: Vec<(Tensor, Shared)> = hit.updates.iter().map(|(p, s)| (tensor_at(*p as usize), s.clone())).collect();
                    let relevant = if recording { hit.relevant.clone() } else { Vec::new() };
                    break 'step (None, updates, relevant);
                }
            }
            let mut projection = ShardingProjection::build_on_mesh(op_refs, res_refs, rule, &mesh, false)?;
            let before = self.debug.is_some().then(|| projection.clone());
            // The factors whose directions matter: those some tensor has axes for (the others
            // propagate nothing in any direction). A barrier's directions are its own.
            let mut relevant = Vec::new();
            if (recording || context.is_some()) && self.prog.kind[action as usize] != OpKind::PropagationBarrier {
                relevant.resize(rule.factor_sizes.len(), false);
                for t in projection.tensors() {
                    for (f, s) in t.iter() {
                        if !s.axes.is_empty() {
                            relevant[f] = true;
                        }
                    }
                }
            }
            let updated = strategy.propagate_factor_shardings(
                &mut projection,
                &direction,
                &rule.factor_sizes,
                Some(&mesh),
                conservative,
                OpInfo { elementwise },
            )?;
            // The changed shardings, by position among the operands then the results.
            let mut changes: Vec<(u32, Shared)> = Vec::new();
            for i in updated.operands.ones() {
                let new = projection.operands[i].to_tensor_sharding(&rule.operand_mappings[i], &rule.factor_sizes, &mesh_ref, &mesh)?;
                if changed(op_refs[i], &new) {
                    changes.push((i as u32, Arc::new(new)));
                }
            }
            for i in updated.results.ones() {
                let new = projection.results[i].to_tensor_sharding(&rule.result_mappings[i], &rule.factor_sizes, &mesh_ref, &mesh)?;
                if changed(res_refs[i], &new) {
                    changes.push(((operands.len() + i) as u32, Arc::new(new)));
                }
            }
            let updates: Vec<(Tensor, Shared)> = match (context, hash) {
                (Some(c), Some(h)) => {
                    let updates = changes.iter().map(|(p, s)| (tensor_at(*p as usize), s.clone())).collect();
                    self.step_cache.borrow_mut().insert(h, c, &all, StepOutcome { updates: changes, relevant: relevant.clone() });
                    updates
                }
                _ => changes.into_iter().map(|(p, s)| (tensor_at(p as usize), s)).collect(),
            };
            (before.map(|b| (mesh, projection, b)), updates, relevant)
        };
        if self.cache.recording() {
            self.cache.directions(dirs, &relevant);
        }
        if let (Some(id), Some(reads), Some(memo)) = (memo_id, memo_reads, self.memo_out.as_mut()) {
            let step = Step {
                strategy: id,
                num_operands: operands.len() as u32,
                tensors: operands.iter().chain(results).copied().collect(),
                dirs: dirs.iter().enumerate().map(|(f, &d)| relevant.get(f).copied().unwrap_or(false).then_some(d)).collect(),
                reads,
                updates: updates.clone(),
            };
            memo.insert(action, step);
        }
        let any = !updates.is_empty();
        for (t, new) in updates {
            self.store_update(t, new);
        }
        if let Some((mesh, projection, before)) = debug_state {
            let step = self.debug.as_ref().map_or(0, |d| d.next_step);
            if any {
                self.record_step(action, operands, results, &before, &projection, rule, &mesh)?;
            }
            let info = VisitInfo {
                factor_sizes: &rule.factor_sizes,
                direction: &direction,
                blocked: &|f| i64::try_from(f).is_ok_and(|f| rule.is_blocked(f)),
                mesh: &mesh,
                conservative,
                strategy: self.layer.strategy,
                elementwise,
            };
            self.record_conflicts(action, operands, results, &before, &projection, &info, any.then_some(step))?;
        }
        Ok(any)
    }

    /// Shardy `updateTensorSharding`, once `changed` said `new` differs: stores it, announces
    /// it and gives it to the value's sharding group.
    fn store_update(&mut self, t: Tensor, new: Shared) {
        self.stats.updates += 1;
        let modified = self.modified_value(t);
        let group = modified.filter(|_| !self.prog.groups.is_empty()).and_then(|m| self.prog.group_of.get(&m).copied());
        if group.is_none() {
            self.tensor_set(t, new);
            if let Some(modified) = modified {
                self.notify_sharding_modified(modified);
            }
            return;
        }
        self.tensor_set(t, new.clone());
        let Some(modified) = modified else { return };
        self.notify_sharding_modified(modified);
        if let Some(g) = group {
            let members = self.prog.groups[g].1.clone();
            for m in members {
                if m == modified {
                    continue;
                }
                self.stats.updates += 1;
                self.set_sharding(m, new.clone());
                self.notify_sharding_modified(m);
            }
        }
    }

    /// The directions `policy` (the current round's) gives `op`'s `num_factors` factors, from
    /// the direction table when the policy names its answer (see [`super::direction_table`]);
    /// debug builds check every answer taken from the table against a fresh one.
    fn directions(&self, policy: &dyn DirectionPolicy, op: u32, num_factors: usize) -> Arc<[Dir]> {
        // Before any erasure, a policy with an initial id gives what it gave in every solve
        // of the program before.
        let initial = if self.structure == 1 { self.round_initial_id } else { None };
        if let Some(id) = initial {
            if let Some(dirs) = self.dir_table.borrow().initial(id, op, num_factors) {
                debug_assert_eq!(*dirs, *policy.directions(self, op, num_factors), "initial id {id} of op {op}");
                return dirs;
            }
        }
        let dirs = self.directions_by_signature(policy, op, num_factors);
        if let Some(id) = initial {
            self.dir_table.borrow_mut().put_initial(id, op, dirs.clone());
        }
        dirs
    }

    /// The directions `policy` gives `op`, kept by signature (see [`super::direction_table`]).
    fn directions_by_signature(&self, policy: &dyn DirectionPolicy, op: u32, num_factors: usize) -> Arc<[Dir]> {
        let Some(signature) = policy.signature(self, op) else { return policy.directions(self, op, num_factors).into() };
        if let Some(dirs) = self.dir_table.borrow().get(op, signature, num_factors) {
            debug_assert_eq!(*dirs, *policy.directions(self, op, num_factors), "signature {signature} of op {op}");
            return dirs;
        }
        let dirs: Arc<[Dir]> = policy.directions(self, op, num_factors).into();
        self.dir_table.borrow_mut().put(op, signature, dirs.clone());
        dirs
    }

    /// Shardy's `PropagateRegisteredOp`: through an op with a sharding rule.
    fn visit_registered(&mut self, op: u32, strategy: &dyn FactorPropagation, policy: &dyn DirectionPolicy) -> Result<bool> {
        let graph: &'g Graph = self.prog.graph;
        let Some(rule) = graph.rule(op as usize) else { return Ok(false) };
        self.rule_used[op as usize] = true;
        let operands = graph.operands.row(op as usize);
        let mut tensors = std::mem::take(&mut self.tensor_buf);
        tensors.clear();
        tensors.extend(operands.iter().chain(graph.results.row(op as usize)).map(|&v| Tensor::Value(v)));
        let (operands, results) = tensors.split_at(operands.len());
        let done = if self.begin_step(operands, results) {
            let dirs = self.directions(policy, op, rule.num_factors());
            let elementwise = self.prog.elementwise[op as usize];
            self.propagate_tensors(op, operands, results, rule, &dirs, strategy, self.conservative, elementwise)
        } else {
            Ok(false)
        };
        self.tensor_buf = tensors;
        done
    }

    /// Shardy's `PropagateDataFlowEdgeOp`: between the sources and the targets of an edge.
    fn visit_edge(&mut self, edge: u32, strategy: &dyn FactorPropagation, policy: &dyn DirectionPolicy) -> Result<bool> {
        let (Some(&owner), Some(&result)) = (self.prog.operands(edge).first(), self.prog.results(edge).first()) else {
            return Ok(false);
        };
        if !self.prog.is_static_tensor(result) {
            return Ok(false);
        }
        let sources = self.edge_sources(owner);
        let operands: Vec<Tensor> = sources.iter().map(|&v| Tensor::Value(v)).collect();
        if !self.begin_step(&operands, &[Tensor::EdgeTarget(edge)]) {
            return Ok(false);
        }
        let rule = self.prog.identity_rule(result, sources.len());
        let dirs = self.directions(policy, edge, rule.num_factors());
        self.propagate_tensors(edge, &operands, &[Tensor::EdgeTarget(edge)], &rule, &dirs, strategy, false, false)
    }

    /// Shardy's `PropagateFuncDataFlowEdgeOp`: between a function argument and the operands
    /// of its calls, or a call result and the callee's return value. A function argument of a
    /// function nobody calls counts as done.
    fn visit_func_edge(&mut self, edge: u32, strategy: &dyn FactorPropagation, policy: &dyn DirectionPolicy) -> Result<bool> {
        let (Some(&input), Some(&result)) = (self.prog.operands(edge).first(), self.prog.results(edge).first()) else {
            return Ok(false);
        };
        if !self.prog.is_static_tensor(result) {
            return Ok(false);
        }
        let k = self.prog.value_pos[input as usize] as usize;
        let sources: Vec<u32> = if self.prog.block_owner(input).is_some() {
            let Some(func) = self.prog.enclosing_func(edge) else { return Ok(false) };
            let callers = self.prog.callers.get(&func).cloned().unwrap_or_default();
            let s: Vec<u32> = callers.iter().filter_map(|&c| self.prog.operands(c).get(k).copied()).collect();
            if s.is_empty() {
                return Ok(true);
            }
            s
        } else {
            let Some(call) = self.prog.def(input) else { return Ok(false) };
            let Some(&func) = self.prog.callee.get(&call) else { return Ok(false) };
            match self.prog.terminator(func, 0) {
                Some(ret) if self.prog.kind[ret as usize] == OpKind::FuncReturn => {
                    self.prog.operands(ret).get(k).copied().into_iter().collect()
                }
                _ => Vec::new(),
            }
        };
        let operands: Vec<Tensor> = sources.iter().map(|&v| Tensor::Value(v)).collect();
        if !self.begin_step(&operands, &[Tensor::Value(result)]) {
            return Ok(false);
        }
        let rule = self.prog.identity_rule(result, sources.len());
        let dirs = self.directions(policy, edge, rule.num_factors());
        self.propagate_tensors(edge, &operands, &[Tensor::Value(result)], &rule, &dirs, strategy, false, false)
    }

    /// Shardy's `PropagatePropagationBarrier`: only in the barrier's allowed direction.
    fn visit_barrier(&mut self, op: u32, strategy: &dyn FactorPropagation) -> Result<bool> {
        let (Some(&input), Some(&result)) = (self.prog.operands(op).first(), self.prog.results(op).first()) else {
            return Ok(false);
        };
        if !self.begin_step(&[Tensor::Value(input)], &[Tensor::Value(result)]) {
            return Ok(false);
        }
        let dir = self.prog.barrier_direction.get(&op).copied().unwrap_or(Dir::None);
        let rule = self.prog.identity_rule(result, 1);
        let dirs = vec![dir; rule.num_factors()];
        self.propagate_tensors(op, &[Tensor::Value(input)], &[Tensor::Value(result)], &rule, &dirs, strategy, false, true)
    }

    /// Visits `op`, or skips the visit when the memo knows it would change nothing (see
    /// [`super::visit_cache`]).
    fn visit(&mut self, op: u32, strategy: &dyn FactorPropagation, policy: &dyn DirectionPolicy) -> Result<()> {
        self.stats.visits += 1;
        let id = strategy.cache_id();
        if self.same_as_remembered(op, id, policy) {
            return Ok(());
        }
        let updates = self.stats.updates;
        self.cache.begin(op);
        match self.visit_op(op, strategy, policy) {
            Ok(()) => {
                self.cache.end(op, id, self.stats.updates != updates);
                Ok(())
            }
            Err(e) => {
                self.cache.abort();
                Err(e)
            }
        }
    }

    /// Whether the memo holds a visit of `op` with this strategy that read nothing written
    /// since and had the directions `policy` gives now.
    fn same_as_remembered(&self, op: u32, id: Option<u8>, policy: &dyn DirectionPolicy) -> bool {
        let Some((counts, dirs)) = self.cache.lookup(op, id) else { return false };
        if dirs.iter().all(Option::is_none) {
            return true;
        }
        let now = self.directions(policy, op, counts.iter().copied().max().unwrap_or(0) as usize);
        let mut i = 0;
        for &n in counts {
            for &d in &now[..n as usize] {
                if dirs[i].is_some_and(|was| was != d) {
                    return false;
                }
                i += 1;
            }
        }
        true
    }

    fn visit_op(&mut self, op: u32, strategy: &dyn FactorPropagation, policy: &dyn DirectionPolicy) -> Result<()> {
        let done = match self.prog.kind[op as usize] {
            OpKind::DataFlowEdge => self.visit_edge(op, strategy, policy)?,
            OpKind::FuncDataFlowEdge => self.visit_func_edge(op, strategy, policy)?,
            OpKind::PropagationBarrier => self.visit_barrier(op, strategy)?,
            _ => false,
        };
        if !done {
            self.visit_registered(op, strategy, policy)?;
        }
        Ok(())
    }

    /// Shardy `propagateFuncResults`: between the main function's return values and its
    /// result shardings, both ways, without announcing anything.
    fn propagate_func_results(&mut self, strategy: &dyn FactorPropagation) -> Result<()> {
        let Some(main) = self.prog.main_func else { return Ok(()) };
        let Some(ret) = self.prog.terminator(main, 0) else { return Ok(()) };
        if self.prog.kind[ret as usize] != OpKind::FuncReturn {
            return Ok(());
        }
        let values = self.prog.operands(ret).to_vec();
        self.notify = false;
        for (k, v) in values.into_iter().enumerate() {
            if !self.prog.is_static_tensor(v) {
                continue;
            }
            // The step reads the returned value's stored sharding and the result sharding only
            // (its directions are fixed): skipped when it changed nothing before and neither
            // was written since (see `visit_cache`).
            let (id, slot) = (strategy.cache_id(), self.shardable(v));
            if self.cache.func_result_fresh(k as u32, id, slot) {
                continue;
            }
            let updates = self.stats.updates;
            let tensors = [Tensor::Value(v), Tensor::FuncResult(main, k as u32)];
            if self.begin_step(&tensors[..1], &tensors[1..]) {
                let rule = self.prog.identity_rule(v, 1);
                let dirs = vec![Dir::Both; rule.num_factors()];
                self.propagate_tensors(main, &tensors[..1], &tensors[1..], &rule, &dirs, strategy, false, false)?;
            }
            self.cache.func_result_done(k as u32, id, slot, self.stats.updates != updates);
        }
        Ok(())
    }

    // ------------------------------------------------------------------ the driver

    /// Whether `op` would be erased when popped (MLIR `isOpTriviallyDead`).
    fn is_trivially_dead(&self, op: u32) -> bool {
        if self.prog.kind[op as usize].is_terminator() || self.prog.results(op).iter().any(|&r| self.live_uses[r as usize] > 0) {
            return false;
        }
        let mut stack = vec![op];
        while let Some(o) = stack.pop() {
            match self.prog.effects[o as usize] {
                Effects::None => {}
                Effects::Recursive => stack.extend(self.prog.children.row(o as usize).iter().filter(|&&c| self.is_alive(c))),
                Effects::Some => return false,
            }
        }
        true
    }

    /// Erases `op` and the ops nested in it, last first (MLIR `RewriterBase::eraseOp`), putting
    /// the producers of their operands back on the worklist where one user at most remains.
    fn erase_tree(&mut self, op: u32) {
        let children = self.prog.children.row(op as usize).to_vec();
        for &c in children.iter().rev() {
            if self.is_alive(c) {
                self.erase_tree(c);
            }
        }
        // MLIR `addOperandsToWorklist`.
        for i in 0..self.prog.operands(op).len() {
            let v = self.prog.operands(op)[i];
            let Some(d) = self.prog.def(v) else { continue };
            let mut other: Option<u32> = None;
            let mut more = false;
            for &(u, _) in &self.prog.uses[v as usize] {
                if u == op || !self.is_alive(u) || Some(u) == other {
                    continue;
                }
                if other.is_none() {
                    other = Some(u);
                    continue;
                }
                more = true;
                break;
            }
            if !more && self.is_alive(d) {
                self.add_to_worklist(d);
            }
        }
        self.worklist.remove(op);
        self.alive[op as usize] = false;
        self.structure += 1;
        self.cache.structure_changed();
        for i in 0..self.prog.operands(op).len() {
            let v = self.prog.operands(op)[i];
            self.live_uses[v as usize] -= 1;
        }
        self.erased.push(op);
    }

    /// One round: Shardy's `BasicPropagationPassImpl::propagate` with `strategy` and `policy`.
    pub fn run_round(&mut self, strategy: &dyn FactorPropagation, policy: &dyn DirectionPolicy) -> Result<()> {
        self.stats.rounds += 1;
        // Every visit of the round asks `policy` (see `Solver::directions`).
        self.round_initial_id = policy.initial_id();
        self.propagate_func_results(strategy)?;
        let n = self.alive.len() as u32;
        for op in (0..n).rev() {
            if self.is_alive(op) {
                self.worklist.push(op);
            }
        }
        // Propagation only adds axes, so it converges; the cap turns a bug into an error
        // rather than an endless loop.
        let cap = 1000u64.saturating_mul(self.alive.len() as u64 + self.raw.len() as u64 + 16);
        let start = self.stats.visits;
        while let Some(op) = self.worklist.pop() {
            if !self.is_alive(op) {
                continue;
            }
            if self.stats.visits - start > cap {
                return Err(Error::invariant(
                    "propagation-no-fixed-point",
                    format!("propagation did not reach a fixed point after {cap} op visits in one round"),
                ));
            }
            if self.is_trivially_dead(op) {
                self.erase_tree(op);
                continue;
            }
            self.current = Some(op);
            self.notify = true;
            let r = self.visit(op, strategy, policy);
            self.current = None;
            self.notify = false;
            r?;
        }
        self.propagate_func_results(strategy)
    }

    // ------------------------------------------------------------------ debugging records

    /// Ops in MLIR's post-order walk (an op after the ops nested in it).
    fn post_order(&self) -> Vec<u32> {
        let n = self.alive.len() as u32;
        let mut out = Vec::with_capacity(n as usize);
        let mut stack: Vec<(u32, usize)> = Vec::new();
        for root in (0..n).filter(|&op| self.prog.parent(op).is_none()) {
            stack.push((root, 0));
            while let Some(top) = stack.last_mut() {
                let (op, i) = *top;
                match self.prog.children.row(op as usize).get(i) {
                    Some(&c) => {
                        top.1 += 1;
                        stack.push((c, 0));
                    }
                    None => {
                        out.push(op);
                        stack.pop();
                    }
                }
            }
        }
        out
    }

    /// Shardy `SourceShardingHandler::prepareHandler`: the origins of the user shardings, in
    /// Shardy's order (the first recorded origin of an axis wins): sharding constraints (their
    /// sharding on their result and, if it has one, their operand's on the operand), manual
    /// computations (each in sharding on the edge of its body argument and on its operand,
    /// each out sharding on the edge of its result), then each function's arguments and
    /// results (on the returned values). And an empty edge list per function result.
    fn prepare_debug(&mut self, options: DebugOptions) {
        let mut d = ShardingDebug::new(options);
        let n = self.alive.len() as u32;
        if d.options.origins {
            let mut id = 0i64;
            for op in 0..n {
                if self.prog.kind[op as usize] != OpKind::ShardingConstraint || d.options.skip_ops.contains(&op) {
                    continue;
                }
                let origin = Origin { kind: OriginKind::Constraint, index: 0, source_id: id };
                id += 1;
                d.origin_names.push((op, origin.to_string()));
                if let Some(&r) = self.prog.results(op).first() {
                    if let (Some(s), Some(slot)) = (&self.raw[r as usize], self.shardable(r)) {
                        d.save_origins(slot, s.dims.iter().flat_map(|dim| &dim.axes), origin);
                    }
                }
                if let Some(&x) = self.prog.operands(op).first() {
                    if let (Some(s), Some(slot)) = (self.get_sharding(x), self.shardable(x)) {
                        d.save_origins(slot, s.dims.iter().flat_map(|dim| &dim.axes), origin);
                    }
                }
            }
            let mut id = 0i64;
            for op in self.post_order() {
                if self.prog.kind[op as usize] != OpKind::ManualComputation {
                    continue;
                }
                for (i, &arg) in self.prog.block_args.row(op as usize).iter().enumerate() {
                    let origin = Origin { kind: OriginKind::ManualInput, index: i as i64, source_id: id };
                    let (Some(s), Some(edge)) = (&self.raw[arg as usize], self.edge_of(arg)) else { continue };
                    d.save_origins(self.edge_result(edge), s.dims.iter().flat_map(|dim| &dim.axes), origin);
                    if let Some(&x) = self.prog.operands(op).get(i) {
                        if let (Some(s), Some(slot)) = (self.get_sharding(x), self.shardable(x)) {
                            d.save_origins(slot, s.dims.iter().flat_map(|dim| &dim.axes), origin);
                        }
                    }
                }
                for (i, &r) in self.prog.results(op).iter().enumerate() {
                    let origin = Origin { kind: OriginKind::ManualOutput, index: i as i64, source_id: id };
                    if let (Some(s), Some(edge)) = (&self.raw[r as usize], self.edge_of(r)) {
                        d.save_origins(self.edge_result(edge), s.dims.iter().flat_map(|dim| &dim.axes), origin);
                    }
                }
                d.origin_names.push((op, format!("mc_{id}")));
                id += 1;
            }
        }
        for func in 0..n {
            if self.prog.kind[func as usize] != OpKind::Func || self.prog.parent(func).is_some() {
                continue;
            }
            let results = self.func_results.get(&func).cloned().unwrap_or_default();
            if d.options.edges {
                d.func_result_edges.push((func, vec![Default::default(); results.len()]));
            }
            if !d.options.origins {
                continue;
            }
            for (i, &arg) in self.prog.block_args.row(func as usize).iter().enumerate() {
                let origin = Origin { kind: OriginKind::Input, index: i as i64, source_id: 0 };
                if let Some(s) = self.get_sharding(arg) {
                    d.save_origins(arg, s.dims.iter().flat_map(|dim| &dim.axes), origin);
                }
            }
            let Some(ret) = self.prog.terminator(func, 0).filter(|&t| self.prog.kind[t as usize] == OpKind::FuncReturn) else {
                continue;
            };
            for (k, &v) in self.prog.operands(ret).iter().enumerate() {
                let origin = Origin { kind: OriginKind::Output, index: k as i64, source_id: 0 };
                if let (Some(Some(s)), Some(slot)) = (results.get(k), self.shardable(v)) {
                    d.save_origins(slot, s.dims.iter().flat_map(|dim| &dim.axes), origin);
                }
            }
        }
        self.debug = Some(d);
    }

    /// The value whose origins a tensor of a step has (Shardy `getShardableValue` of the
    /// tensor; for a function result, of the returned value).
    fn origin_slot(&self, t: Tensor) -> Option<u32> {
        match t {
            Tensor::Value(v) => self.shardable(v),
            Tensor::EdgeTarget(e) => Some(self.edge_result(e)),
            Tensor::FuncResult(f, k) => {
                let ret = self.prog.terminator(f, 0)?;
                self.shardable(*self.prog.operands(ret).get(k as usize)?)
            }
        }
    }

    /// Shardy `SourceShardingHandler::operator()`: after a step through `action` that changed
    /// some sharding, the axes that came to each tensor (see [`step_edges`]) are recorded as
    /// edges of the op (of the function's result 0 for a function result) and as origins of
    /// the tensor's value, looked up in the source tensor's origins.
    #[allow(clippy::too_many_arguments)]
    fn record_step(
        &mut self,
        action: u32,
        operands: &[Tensor],
        results: &[Tensor],
        before: &ShardingProjection,
        after: &ShardingProjection,
        rule: &OpShardingRule,
        mesh: &Mesh,
    ) -> Result<()> {
        let Some(mut d) = self.debug.take() else { return Ok(()) };
        let step = d.next_step;
        d.next_step += 1;
        let edges = match step_edges(before, after, rule, mesh, step) {
            Ok(e) => e,
            Err(e) => {
                self.debug = Some(d);
                return Err(e);
            }
        };
        let is_func = self.prog.kind[action as usize] == OpKind::Func;
        if d.options.explain {
            d.steps.push(StepRecord { step, op: action, layer: self.layer });
        }
        for (tensors, maps, news) in [(operands, &edges.operands, &after.operands), (results, &edges.results, &after.results)] {
            for (i, map) in maps.iter().enumerate() {
                let slot = tensors.get(i).and_then(|&t| self.origin_slot(t));
                for (axis, edge) in map.iter() {
                    if d.options.explain {
                        let source_value = match edge.source.kind {
                            EdgeNodeKind::Operand => operands.get(edge.source.index as usize),
                            EdgeNodeKind::Result => results.get(edge.source.index as usize),
                        }
                        .and_then(|&t| self.origin_slot(t));
                        let factor = news.get(i).and_then(|t| {
                            t.iter().find(|(_, s)| s.axes.iter().any(|a| a.contains(axis) || axis.contains(a))).map(|(f, _)| f)
                        });
                        d.hops.push(Hop {
                            step,
                            op: action,
                            axis: axis.clone(),
                            factor,
                            source: edge.source,
                            target: edge.target,
                            source_value,
                            target_value: slot,
                        });
                    }
                    if d.options.edges {
                        if is_func {
                            let per_result = d.func_result_edges.iter_mut().find(|(f, _)| *f == action);
                            if let Some(m) = per_result.and_then(|(_, r)| r.get_mut(i)) {
                                m.entry(axis, Vec::new).push(*edge);
                            }
                        } else {
                            d.edges_mut(action).entry(axis, Vec::new).push(*edge);
                        }
                    }
                    if !d.options.origins {
                        continue;
                    }
                    let Some(slot) = slot else { continue };
                    let source = |EdgeNode { kind, index }: EdgeNode| match kind {
                        EdgeNodeKind::Operand => operands.get(index as usize).copied(),
                        EdgeNodeKind::Result => results.get(index as usize).copied(),
                    };
                    let origin = source(edge.source)
                        .and_then(|t| self.origin_slot(t))
                        .and_then(|s| d.origins_of(s))
                        .and_then(|m| m.lookup(axis));
                    match origin {
                        Some(origin) => {
                            d.origins_mut(slot).try_insert(axis, origin);
                        }
                        None => d.missing_origins.push((slot, axis.clone())),
                    }
                }
            }
        }
        self.debug = Some(d);
        Ok(())
    }

    /// Records the axes each tensor of a visit could not take (see [`super::explain`]), when
    /// recording for `shardwise.explain`.
    #[allow(clippy::too_many_arguments)]
    fn record_conflicts(
        &mut self,
        action: u32,
        operands: &[Tensor],
        results: &[Tensor],
        before: &ShardingProjection,
        after: &ShardingProjection,
        info: &VisitInfo<'_>,
        step: Option<i64>,
    ) -> Result<()> {
        if !self.debug.as_ref().is_some_and(|d| d.options.explain) {
            return Ok(());
        }
        let found = diagnose(before, after, info)?;
        let value = |n: EdgeNode| {
            match n.kind {
                EdgeNodeKind::Operand => operands.get(n.index as usize),
                EdgeNodeKind::Result => results.get(n.index as usize),
            }
            .and_then(|&t| self.origin_slot(t))
        };
        let records: Vec<Conflict> = found
            .into_iter()
            .map(|c| Conflict {
                visit: self.stats.visits,
                step,
                op: action,
                layer: self.layer,
                target_value: value(c.target),
                source_value: value(c.source),
                with_value: c.with.as_ref().and_then(|w| value(w.tensor)),
                conflict: c,
            })
            .collect();
        if let Some(d) = self.debug.as_mut() {
            for c in records {
                d.add_conflict(c);
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ sharding groups

    /// Shardy `ShardingGroupMap::syncGroupMemberShardings`: every member of a group gets the
    /// group's common sharding. Groups whose members disagree are returned (and left alone).
    pub fn sync_sharding_groups(&mut self) -> Vec<GroupConflict> {
        let mut conflicts = Vec::new();
        for g in 0..self.prog.groups.len() {
            let (id, members) = self.prog.groups[g].clone();
            let mut common: Option<TensorSharding> = None;
            let mut conflict = false;
            if members.len() == 1 {
                common = self.get_sharding(members[0]);
            } else {
                for &m in &members {
                    let Some(c) = self.get_sharding(m) else { continue };
                    if is_fully_open(&c) {
                        continue;
                    }
                    match &common {
                        None => common = Some(c),
                        Some(s) if *s != c => {
                            conflict = true;
                            break;
                        }
                        Some(_) => {}
                    }
                }
            }
            let Some(sharding) = common else { continue };
            if conflict {
                conflicts.push(GroupConflict { group_id: id, members, sharding });
                continue;
            }
            for m in members {
                self.set_sharding(m, Arc::new(sharding.clone()));
            }
        }
        conflicts
    }

    /// Checks what Shardy's verifier checks of the shardings propagation writes on manual
    /// computations: in each dimension of an in or out sharding, the manual axes come before
    /// the free ones (propagation from outside can break it, and Shardy then fails
    /// verification after the pass).
    pub fn verify_manual_computations(&self) -> Result<()> {
        for op in 0..self.alive.len() as u32 {
            if !self.is_alive(op) || self.prog.kind[op as usize] != OpKind::ManualComputation {
                continue;
            }
            let manual = self.prog.manual_axes.get(&op).map_or(&[][..], Vec::as_slice);
            let lists = [("operand", self.prog.block_args.row(op as usize)), ("result", self.prog.results(op))];
            for (what, values) in lists {
                for (i, &v) in values.iter().enumerate() {
                    let Some(s) = &self.raw[v as usize] else { continue };
                    for (d, dim) in s.dims.iter().enumerate() {
                        let is_manual = |a: &crate::axis::AxisRef| manual.iter().any(|m| a.name == *m);
                        let first_free = dim.axes.iter().position(|a| !is_manual(a)).unwrap_or(dim.axes.len());
                        if let Some(a) = dim.axes[first_free..].iter().find(|a| is_manual(a)) {
                            return Err(Error::invariant(
                                "manual-axis-after-free-axis",
                                format!(
                                    "sdy.manual_computation (op {op}): {what} sharding at index {i} must have all manual axes come before free axes in its dimension sharding at index {d}; saw manual axis {a} after free axis {} in {}",
                                    dim.axes[first_free],
                                    crate::text::print_sharding(s)
                                ),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ user priorities

    fn mesh_of(&self, s: &TensorSharding) -> Result<Mesh> {
        Ok(self.resolve_mesh(s)?.clone())
    }

    /// Shardy `getShardingReferencesPerPriorityAndInitialize`: every stored sharding (skipping
    /// edge owners that have an edge) is reduced to its priority-0 dimensions, the others
    /// becoming closed and replicated; returns, per non-zero priority in increasing order, the
    /// shardings to restore (in program order) with their original form.
    pub fn init_user_priorities(&mut self) -> Result<Vec<(i64, Vec<PriorityReference>)>> {
        let mut per_priority: Vec<(i64, Vec<PriorityReference>)> = Vec::new();
        let n = self.alive.len() as u32;
        for op in 0..n {
            if !self.is_alive(op) {
                continue;
            }
            let prog = self.prog.clone();
            let kind = prog.kind[op as usize];
            let (first, second): (&[u32], &[u32]) = match kind {
                OpKind::Func => (prog.block_args.row(op as usize), &[]),
                OpKind::ManualComputation | OpKind::NamedComputation => (prog.block_args.row(op as usize), prog.results(op)),
                _ => (prog.results(op), &[]),
            };
            for &v in first.iter().chain(second) {
                let Some(s) = self.raw[v as usize].clone() else { continue };
                if kind.is_shardable_data_flow() && self.edge_of_target(v).is_some() {
                    continue;
                }
                if s.replicated.is_empty() && s.dims.iter().all(|d| d.priority.is_none()) {
                    // Nothing to hide or reorder: the initialized sharding is `s` itself (its
                    // mesh must still be known).
                    self.resolve_mesh(&s)?;
                    continue;
                }
                let new = self.initialize_priority(PriorityTarget::Value(v), &s, &mut per_priority)?;
                if new != *s {
                    self.raw[v as usize] = Some(Arc::new(new));
                    self.cache.wrote(v);
                }
            }
            if kind == OpKind::Func {
                let count = self.func_results.get(&op).map_or(0, Vec::len);
                for k in 0..count {
                    let Some(s) = self.func_results[&op][k].clone() else { continue };
                    let new = self.initialize_priority(PriorityTarget::FuncResult(op, k as u32), &s, &mut per_priority)?;
                    if new != *s {
                        if let Some(slot) = self.func_results.get_mut(&op) {
                            slot[k] = Some(Arc::new(new));
                        }
                        if Some(op) == self.prog.main_func {
                            self.cache.wrote_func_result(k as u32);
                        }
                    }
                }
            }
        }
        per_priority.sort_by_key(|(p, _)| *p);
        Ok(per_priority)
    }

    fn initialize_priority(
        &self,
        target: PriorityTarget,
        s: &TensorSharding,
        per_priority: &mut Vec<(i64, Vec<PriorityReference>)>,
    ) -> Result<TensorSharding> {
        for p in nonzero_priorities(s) {
            match per_priority.iter_mut().find(|(q, _)| *q == p) {
                Some((_, refs)) => refs.push((target, s.clone())),
                None => per_priority.push((p, vec![(target, s.clone())])),
            }
        }
        Ok(initialized_for_priorities(s, &self.mesh_of(s)?))
    }

    /// Shardy `updateReferencedShardingsForPriority`: restores the dimensions of priority
    /// `priority` of each referenced sharding.
    pub fn apply_priority(&mut self, refs: &[PriorityReference], priority: i64) {
        for (target, original) in refs {
            match *target {
                PriorityTarget::Value(v) => {
                    let Some(cur) = self.get_sharding(v) else { continue };
                    let new = updated_for_priority(&cur, original, priority);
                    if new != cur {
                        self.set_sharding(v, Arc::new(new));
                    }
                }
                PriorityTarget::FuncResult(f, k) => {
                    let Some(slot) = self.func_results.get_mut(&f).and_then(|r| r.get_mut(k as usize)) else { continue };
                    let Some(cur) = slot.clone() else { continue };
                    let new = updated_for_priority(&cur, original, priority);
                    if new != *cur {
                        *slot = Some(Arc::new(new));
                        if Some(f) == self.prog.main_func {
                            self.cache.wrote_func_result(k);
                        }
                    }
                }
            }
        }
    }

    /// The sharding rule of `op` in the graph (what Shardy finds on the op once it has
    /// propagated through it).
    pub fn rule(&self, op: u32) -> Option<&'g OpShardingRule> {
        let graph: &'g Graph = self.prog.graph;
        graph.rule(op as usize)
    }
}
