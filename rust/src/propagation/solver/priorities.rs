//! User priorities (Shardy `user_priority_propagation.cc`): the references each priority
//! restores, and their shardings at one priority.

use std::sync::Arc;

use super::{PriorityReference, PriorityTarget, Solver};
use crate::error::Result;
use crate::mesh::Mesh;
use crate::propagation::program::OpKind;
use crate::propagation::transforms::{initialized_for_priorities, nonzero_priorities, updated_for_priority};
use crate::sharding::TensorSharding;

impl<'g> Solver<'g> {
    pub(super) fn mesh_of(&self, s: &TensorSharding) -> Result<Mesh> {
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
                OpKind::ManualComputation | OpKind::NamedComputation => {
                    (prog.block_args.row(op as usize), prog.results(op))
                }
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
                    let new =
                        self.initialize_priority(PriorityTarget::FuncResult(op, k as u32), &s, &mut per_priority)?;
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

    pub(super) fn initialize_priority(
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
                    let Some(slot) = self.func_results.get_mut(&f).and_then(|r| r.get_mut(k as usize)) else {
                        continue;
                    };
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
}
