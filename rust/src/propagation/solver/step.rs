//! One propagation step over an op's tensors (Shardy `propagateTensorShardings`,
//! `transforms/propagation/basic_propagation.cc`): project to factors, propagate, project back and
//! store what changed; with the step cache and the memo of steps of another run.

use std::borrow::Cow;
use std::sync::Arc;

use super::{changed, Dir, Shared, Solver, Tensor};
use crate::error::Result;
use crate::graph::NONE;
use crate::mesh::Mesh;
use crate::propagation::explain::VisitInfo;
use crate::propagation::factor_prop::{FactorPropagation, OpInfo};
use crate::propagation::program::OpKind;
use crate::propagation::projection::ShardingProjection;
use crate::propagation::step_cache::{StepCache, StepContext, StepOutcome};
use crate::propagation::step_memo::{Step, StepMemo};
use crate::rule::OpShardingRule;
use crate::sharding::{MeshRef, TensorSharding};

impl<'g> Solver<'g> {
    /// Starts a step through `operands` and `results` (before [`Solver::propagate_tensors`]):
    /// tells the visit memo what the step reads, and returns whether any of them has a
    /// sharding. A step where none has one stores nothing (Shardy's `getCommonMeshName` finds
    /// no mesh), and its caller returns before finding its directions.
    pub(super) fn begin_step(&mut self, operands: &[Tensor], results: &[Tensor]) -> bool {
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
    /// [`crate::propagation::step_memo`]).
    pub(super) fn find_step<'m>(
        &self,
        memo: &'m StepMemo,
        action: u32,
        id: u8,
        operands: &[Tensor],
        results: &[Tensor],
        dirs: &[Dir],
    ) -> Option<&'m Step> {
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
    pub(super) fn modified_value(&self, t: Tensor) -> Option<u32> {
        match t {
            Tensor::Value(v) => self.shardable(v),
            Tensor::EdgeTarget(e) => Some(self.edge_result(e)),
            Tensor::FuncResult(..) => None,
        }
    }

    /// The mesh the shardings share (Shardy `getCommonMeshName`): the first sharding's,
    /// unless it is the empty mesh, which any other replaces; `None` when two non-empty meshes
    /// differ or no sharding is given. Errors when a sharding names an unknown mesh.
    pub(super) fn common_mesh<'a>(
        &'a self,
        shardings: &[Option<&'a TensorSharding>],
    ) -> Result<Option<(&'a MeshRef, &'a Mesh)>> {
        // Shardings naming the same mesh resolve to the same entry, so most comparisons are
        // pointer comparisons.
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
        Ok(chosen)
    }

    /// The mesh `s` is bound to (as [`TensorSharding::resolve_mesh`] finds it among the
    /// program's meshes).
    pub(super) fn resolve_mesh<'s>(&'s self, s: &'s TensorSharding) -> Result<&'s Mesh> {
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
    pub(super) fn propagate_tensors(
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
            k != NONE
                && std::ptr::eq(&self.prog.graph.rules[k as usize], rule)
                && self.prog.kind[action as usize] != OpKind::PropagationBarrier
        });
        let context = match (rule_index, strategy.cache_id(), self.debug.is_none()) {
            (Some(rule), Some(strategy), true) => Some(StepContext { rule, strategy, conservative, elementwise, dirs }),
            _ => None,
        };
        let (debug_state, updates, relevant) = 'step: {
            let held: Vec<Option<Cow<'_, TensorSharding>>> =
                operands.iter().chain(results).map(|&t| self.tensor_cow(t)).collect();
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
                    let updates: Vec<(Tensor, Shared)> =
                        hit.updates.iter().map(|(p, s)| (tensor_at(*p as usize), s.clone())).collect();
                    let relevant = if recording { hit.relevant.clone() } else { Vec::new() };
                    break 'step (None, updates, relevant);
                }
            }
            let mut projection = ShardingProjection::build_on_mesh(op_refs, res_refs, rule, mesh, false)?;
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
                Some(mesh),
                conservative,
                OpInfo { elementwise },
            )?;
            // The changed shardings, by position among the operands then the results.
            let mut changes: Vec<(u32, Shared)> = Vec::new();
            for i in updated.operands.ones() {
                let new = projection.operands[i].to_tensor_sharding(
                    &rule.operand_mappings[i],
                    &rule.factor_sizes,
                    mesh_ref,
                    mesh,
                )?;
                if changed(op_refs[i], &new) {
                    changes.push((i as u32, Arc::new(new)));
                }
            }
            for i in updated.results.ones() {
                let new = projection.results[i].to_tensor_sharding(
                    &rule.result_mappings[i],
                    &rule.factor_sizes,
                    mesh_ref,
                    mesh,
                )?;
                if changed(res_refs[i], &new) {
                    changes.push(((operands.len() + i) as u32, Arc::new(new)));
                }
            }
            let updates: Vec<(Tensor, Shared)> = match (context, hash) {
                (Some(c), Some(h)) => {
                    let updates = changes.iter().map(|(p, s)| (tensor_at(*p as usize), s.clone())).collect();
                    self.step_cache.borrow_mut().insert(
                        h,
                        c,
                        &all,
                        StepOutcome { updates: changes, relevant: relevant.clone() },
                    );
                    updates
                }
                _ => changes.into_iter().map(|(p, s)| (tensor_at(p as usize), s)).collect(),
            };
            (before.map(|b| (mesh.clone(), projection, b)), updates, relevant)
        };
        if self.cache.recording() {
            self.cache.directions(dirs, &relevant);
        }
        if let (Some(id), Some(reads), Some(memo)) = (memo_id, memo_reads, self.memo_out.as_mut()) {
            let step = Step {
                strategy: id,
                num_operands: operands.len() as u32,
                tensors: operands.iter().chain(results).copied().collect(),
                dirs: dirs
                    .iter()
                    .enumerate()
                    .map(|(f, &d)| relevant.get(f).copied().unwrap_or(false).then_some(d))
                    .collect(),
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
    pub(super) fn store_update(&mut self, t: Tensor, new: Shared) {
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
}
