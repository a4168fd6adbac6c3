//! Visiting ops and running one round to a fixed point (Shardy
//! `BasicPropagationPassImpl::propagate` and its op patterns, `basic_propagation.cc`).

use std::sync::Arc;

use super::{Dir, DirectionPolicy, Solver, Tensor};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::propagation::factor_prop::FactorPropagation;
use crate::propagation::program::OpKind;

impl<'g> Solver<'g> {
    /// The directions `policy` (the current round's) gives `op`'s `num_factors` factors, from
    /// the direction table when the policy names its answer (see [`crate::propagation::direction_table`]);
    /// debug builds check every answer taken from the table against a fresh one.
    pub(super) fn directions(&self, policy: &dyn DirectionPolicy, op: u32, num_factors: usize) -> Arc<[Dir]> {
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

    /// The directions `policy` gives `op`, kept by signature (see [`crate::propagation::direction_table`]).
    pub(super) fn directions_by_signature(
        &self,
        policy: &dyn DirectionPolicy,
        op: u32,
        num_factors: usize,
    ) -> Arc<[Dir]> {
        let Some(signature) = policy.signature(self, op) else {
            return policy.directions(self, op, num_factors).into();
        };
        if let Some(dirs) = self.dir_table.borrow().get(op, signature, num_factors) {
            debug_assert_eq!(*dirs, *policy.directions(self, op, num_factors), "signature {signature} of op {op}");
            return dirs;
        }
        let dirs: Arc<[Dir]> = policy.directions(self, op, num_factors).into();
        self.dir_table.borrow_mut().put(op, signature, dirs.clone());
        dirs
    }

    /// Shardy's `PropagateRegisteredOp`: through an op with a sharding rule.
    pub(super) fn visit_registered(
        &mut self,
        op: u32,
        strategy: &dyn FactorPropagation,
        policy: &dyn DirectionPolicy,
    ) -> Result<bool> {
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
    pub(super) fn visit_edge(
        &mut self,
        edge: u32,
        strategy: &dyn FactorPropagation,
        policy: &dyn DirectionPolicy,
    ) -> Result<bool> {
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
    pub(super) fn visit_func_edge(
        &mut self,
        edge: u32,
        strategy: &dyn FactorPropagation,
        policy: &dyn DirectionPolicy,
    ) -> Result<bool> {
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
    pub(super) fn visit_barrier(&mut self, op: u32, strategy: &dyn FactorPropagation) -> Result<bool> {
        let (Some(&input), Some(&result)) = (self.prog.operands(op).first(), self.prog.results(op).first()) else {
            return Ok(false);
        };
        if !self.begin_step(&[Tensor::Value(input)], &[Tensor::Value(result)]) {
            return Ok(false);
        }
        let dir = self.prog.barrier_direction.get(&op).copied().unwrap_or(Dir::None);
        let rule = self.prog.identity_rule(result, 1);
        let dirs = vec![dir; rule.num_factors()];
        self.propagate_tensors(
            op,
            &[Tensor::Value(input)],
            &[Tensor::Value(result)],
            &rule,
            &dirs,
            strategy,
            false,
            true,
        )
    }

    /// Visits `op`, or skips the visit when the memo knows it would change nothing (see
    /// [`crate::propagation::visit_cache`]).
    pub(super) fn visit(
        &mut self,
        op: u32,
        strategy: &dyn FactorPropagation,
        policy: &dyn DirectionPolicy,
    ) -> Result<()> {
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
    pub(super) fn same_as_remembered(&self, op: u32, id: Option<u8>, policy: &dyn DirectionPolicy) -> bool {
        let Some((counts, dirs)) = self.cache.lookup(op, id) else { return false };
        if dirs.all_none() {
            return true;
        }
        let now = self.directions(policy, op, counts.iter().copied().max().unwrap_or(0) as usize);
        let mut i = 0;
        for &n in counts {
            for &d in &now[..n as usize] {
                if dirs.get(i).is_some_and(|was| was != d) {
                    return false;
                }
                i += 1;
            }
        }
        true
    }

    pub(super) fn visit_op(
        &mut self,
        op: u32,
        strategy: &dyn FactorPropagation,
        policy: &dyn DirectionPolicy,
    ) -> Result<()> {
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
    pub(super) fn propagate_func_results(&mut self, strategy: &dyn FactorPropagation) -> Result<()> {
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
}
