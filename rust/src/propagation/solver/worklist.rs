//! MLIR's greedy-driver worklist and what feeds it: the users notified when a sharding changes,
//! and the trivially dead ops erased when popped (Shardy runs its propagation under
//! `applyPatternsGreedily`, whose order decides which conflicting sharding wins).

use super::Solver;
use crate::graph::NONE;
use crate::propagation::program::{Effects, OpKind};

/// MLIR's greedy-driver worklist: a stack without duplicates.
#[derive(Debug, Default)]
pub(super) struct Worklist {
    list: Vec<u32>,
    pos: Vec<u32>,
}

impl Worklist {
    pub(super) fn new(n: usize) -> Worklist {
        Worklist { list: Vec::new(), pos: vec![NONE; n] }
    }

    pub(super) fn push(&mut self, op: u32) {
        if self.pos[op as usize] != NONE {
            return;
        }
        self.pos[op as usize] = self.list.len() as u32;
        self.list.push(op);
    }

    pub(super) fn pop(&mut self) -> Option<u32> {
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

    pub(super) fn remove(&mut self, op: u32) {
        let p = self.pos[op as usize];
        if p != NONE {
            self.list[p as usize] = NONE;
            self.pos[op as usize] = NONE;
        }
    }
}

impl<'g> Solver<'g> {
    /// Puts `op` and its ancestors back on the worklist (MLIR's `addToWorklist`), unless it
    /// is the op being propagated through.
    pub(super) fn notify_op(&mut self, op: u32) {
        if !self.notify || self.current == Some(op) {
            return;
        }
        self.add_to_worklist(op);
    }

    pub(super) fn add_to_worklist(&mut self, op: u32) {
        let mut cur = Some(op);
        while let Some(o) = cur {
            self.worklist.push(o);
            cur = self.prog.parent(o);
        }
    }

    /// Shardy `notifyUsersModified`: puts the users of `root` back on the worklist, looking
    /// through data flow edges, terminators (to the parent op, or from a function's return
    /// to the results of its calls) and calls (to the callee's arguments), depth first in
    /// use-list order. A value reached twice is not walked again: walking it again would only
    /// push ops already pushed (Shardy recurses, without end where calls form a cycle).
    pub(super) fn notify_users(&mut self, root: u32) {
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
                let arg = self
                    .prog
                    .callee
                    .get(&user)
                    .and_then(|&f| self.prog.block_args.row(f as usize).get(k as usize).copied());
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
    pub(super) fn notify_sharding_modified(&mut self, v: u32) {
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

    /// Whether `op` would be erased when popped (MLIR `isOpTriviallyDead`).
    pub(super) fn is_trivially_dead(&self, op: u32) -> bool {
        if self.prog.kind[op as usize].is_terminator()
            || self.prog.results(op).iter().any(|&r| self.live_uses[r as usize] > 0)
        {
            return false;
        }
        let mut stack = vec![op];
        while let Some(o) = stack.pop() {
            match self.prog.effects[o as usize] {
                Effects::None => {}
                Effects::Recursive => {
                    stack.extend(self.prog.children.row(o as usize).iter().filter(|&&c| self.is_alive(c)))
                }
                Effects::Some => return false,
            }
        }
        true
    }

    /// Erases `op` and the ops nested in it, last first (MLIR `RewriterBase::eraseOp`), putting
    /// the producers of their operands back on the worklist where one user at most remains.
    pub(super) fn erase_tree(&mut self, op: u32) {
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

    /// Ops in MLIR's post-order walk (an op after the ops nested in it).
    pub(super) fn post_order(&self) -> Vec<u32> {
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
}
