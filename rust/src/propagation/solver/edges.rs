//! Where shardings live: the shardable value that stores each value's sharding (Shardy
//! `getShardableValue`, `ir/utils.cc`), and the sources and targets of `sdy.data_flow_edge`s
//! (Shardy `DataFlowEdgeOp`, `ir/ops.cc`) and of manual computations' bodies.

use std::sync::Arc;

use super::{Shared, Solver};
use crate::graph::NONE;
use crate::propagation::program::OpKind;
use crate::propagation::transforms::{add_free_axes, erase_manual_axes, fully_open};
use crate::sharding::TensorSharding;

impl<'g> Solver<'g> {
    pub(super) fn is_alive(&self, op: u32) -> bool {
        self.alive[op as usize]
    }

    /// The `sdy.data_flow_edge` whose input is `owner`: its only (live) user (Shardy
    /// `getDataFlowEdgeUser`).
    pub(super) fn edge_of(&self, owner: u32) -> Option<u32> {
        if self.live_uses[owner as usize] != 1 {
            return None;
        }
        let (user, _) = *self.prog.uses[owner as usize].iter().find(|(u, _)| self.is_alive(*u))?;
        (self.prog.kind[user as usize] == OpKind::DataFlowEdge).then_some(user)
    }

    /// The edge owner of a data flow target (Shardy `getEdgeOwnerFromTarget`), when the
    /// owning op is a shardable data flow op.
    pub(super) fn edge_owner_from_target(&self, v: u32) -> Option<u32> {
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
    pub(super) fn edge_of_target(&self, v: u32) -> Option<u32> {
        let owner = self.edge_owner_from_target(v)?;
        self.edge_of(owner)
    }

    /// The value whose stored sharding `v` reads and writes (Shardy `getShardableValue`), or
    /// `None` when `v` has none.
    #[inline]
    pub(super) fn shardable(&self, v: u32) -> Option<u32> {
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
    pub(super) fn shardable_after_erasures(&self, v: u32) -> Option<u32> {
        let slot = &self.shardable_memo[v as usize];
        let (epoch, known) = slot.get();
        if epoch == self.structure {
            return (known != NONE).then_some(known);
        }
        let found = self.find_shardable(v);
        slot.set((self.structure, found.unwrap_or(NONE)));
        found
    }

    pub(super) fn find_shardable(&self, v: u32) -> Option<u32> {
        if let Some(edge) = self.edge_of_target(v) {
            return self.prog.results(edge).first().copied();
        }
        if self.prog.def(v).is_some() {
            return Some(v);
        }
        let owner = self.prog.block_owner(v)?;
        match self.prog.kind[owner as usize] {
            OpKind::Func => Some(v),
            OpKind::While
            | OpKind::Case
            | OpKind::OptimizationBarrier
            | OpKind::ManualComputation
            | OpKind::NamedComputation => self.edge_owner_from_target(v),
            OpKind::AsyncStart => self.prog.operands(owner).get(self.prog.value_pos[v as usize] as usize).copied(),
            _ => None,
        }
    }

    /// The manual axes when `slot` is a body argument of a manual computation.
    pub(super) fn manual_arg_axes(&self, slot: u32) -> Option<&[String]> {
        let owner = self.prog.block_owner(slot)?;
        if self.prog.kind[owner as usize] != OpKind::ManualComputation {
            return None;
        }
        Some(self.prog.manual_axes.get(&owner).map_or(&[][..], Vec::as_slice))
    }

    /// The sharding of `v` (Shardy `getSharding`).
    pub(super) fn get_sharding(&self, v: u32) -> Option<TensorSharding> {
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
    pub(super) fn set_sharding(&mut self, v: u32, s: Shared) {
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
    pub(super) fn edge_manual(&self, edge: u32) -> Option<(u32, &[String])> {
        let owner = *self.prog.operands(edge).first()?;
        let op = self.prog.owning_op(owner);
        if op == NONE || self.prog.kind[op as usize] != OpKind::ManualComputation {
            return None;
        }
        Some((owner, self.prog.manual_axes.get(&op).map_or(&[][..], Vec::as_slice)))
    }

    pub(super) fn edge_result(&self, edge: u32) -> u32 {
        self.prog.results(edge)[0]
    }

    /// The sharding of an edge's targets as seen by propagation (Shardy
    /// `transformTargetSharding(..., kBeforeEdgePropagation)`).
    pub(super) fn edge_target_get(&self, edge: u32) -> Option<TensorSharding> {
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
    pub(super) fn edge_target_set(&mut self, edge: u32, s: Shared) {
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
    pub(super) fn edge_sources(&self, owner: u32) -> Vec<u32> {
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
            OpKind::Case if is_result => self
                .prog
                .terminators
                .row(op as usize)
                .iter()
                .filter_map(|&t| self.prog.operands(t).get(k).copied())
                .collect(),
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
    pub(super) fn non_owner_targets(&self, owner: u32) -> Vec<u32> {
        let op = self.prog.owning_op(owner);
        if op == NONE || self.prog.kind[op as usize] != OpKind::While || self.prog.def(owner).is_none() {
            return Vec::new();
        }
        let n = self.prog.results(op).len();
        let k = self.prog.value_pos[owner as usize] as usize;
        let args = self.prog.block_args.row(op as usize);
        [k, n + k].iter().filter_map(|&i| args.get(i).copied()).collect()
    }

    /// The edge a use feeds (Shardy `DataFlowEdgeOp::lookup(OpOperand&)`).
    pub(super) fn edge_of_source(&self, user: u32, operand: u32) -> Option<u32> {
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
}
