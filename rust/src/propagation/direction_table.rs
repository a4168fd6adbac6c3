//! The directions ops propagate in, by the direction policy's signature, kept across the
//! solves of one program.
//!
//! Every visit of an op (and every test of whether a visit can be skipped, see
//! `visit_cache`) needs the op's direction per factor. Under the op-priority schedule
//! (Shardy `getOpBasedDirectionToPropagate`) those are a function of the op, its kind and
//! rule, the live uses of its operands and the step of the schedule, and most ops get one of
//! a few answers. A policy's [`DirectionPolicy::signature`](super::solver::DirectionPolicy::signature)
//! names the answer it gives an op, cheaply: equal signatures for one op mean equal
//! directions. The table keeps each `(op, signature)`'s directions, so that they are computed
//! once per program rather than once per visit; a batch of candidate solves hands one table
//! from solve to solve.
//!
//! Until the first op of a solve is erased, live uses are those every solve of the program
//! starts with, so a policy's answer is a function of the op alone. A policy that says so
//! names itself with an
//! [`initial_id`](super::solver::DirectionPolicy::initial_id) (the op-priority schedule's step,
//! under any direction above it), and the table keeps its answers by id and op, looked up by
//! index without working out a signature.

use std::sync::Arc;

use super::factor_prop::PropagationDirection;
use crate::fast_hash::FastMap;

/// No directions kept (in [`DirectionTable`]'s `initial`).
const NONE: u32 = u32::MAX;

/// Directions by op and signature (see the module documentation). Each distinct list of
/// directions is kept once (most ops of a program get one of a few) and named by its index:
/// an op's entries cost 8 bytes each, and 4 per initial id, instead of an allocation each.
#[derive(Debug, Clone, Default)]
pub struct DirectionTable {
    /// Per op, `(signature, list)` pairs.
    per_op: Vec<Vec<(u32, u32)>>,
    /// By a policy's initial id, then by op: the list before any op is erased, or `NONE`.
    initial: Vec<Vec<u32>>,
    lists: Vec<Arc<[PropagationDirection]>>,
    index: FastMap<Arc<[PropagationDirection]>, u32>,
}

impl DirectionTable {
    /// An empty table.
    pub fn new() -> DirectionTable {
        DirectionTable::default()
    }

    /// The index of `dirs` among the kept lists, keeping it when new.
    fn intern(&mut self, dirs: Arc<[PropagationDirection]>) -> u32 {
        if let Some(&i) = self.index.get(&dirs) {
            return i;
        }
        let i = self.lists.len() as u32;
        self.lists.push(dirs.clone());
        self.index.insert(dirs, i);
        i
    }

    /// The directions of `op`'s `num_factors` factors under signature `signature`, if known.
    pub(crate) fn get(&self, op: u32, signature: u32, num_factors: usize) -> Option<Arc<[PropagationDirection]>> {
        let known = self.per_op.get(op as usize)?;
        known
            .iter()
            .map(|&(s, i)| (s, &self.lists[i as usize]))
            .find(|(s, d)| *s == signature && d.len() == num_factors)
            .map(|(_, d)| d.clone())
    }

    /// The directions of `op`'s `num_factors` factors under the policy of initial id `id`
    /// before any op is erased, if known.
    pub(crate) fn initial(&self, id: u8, op: u32, num_factors: usize) -> Option<Arc<[PropagationDirection]>> {
        let i = *self.initial.get(id as usize)?.get(op as usize)?;
        let dirs = self.lists.get(i as usize)?;
        (dirs.len() == num_factors).then(|| dirs.clone())
    }

    /// Keeps `dirs` as the directions of `op` under the policy of initial id `id` before any
    /// op is erased.
    pub(crate) fn put_initial(&mut self, id: u8, op: u32, dirs: Arc<[PropagationDirection]>) {
        let i = self.intern(dirs);
        let (id, op) = (id as usize, op as usize);
        if self.initial.len() <= id {
            self.initial.resize_with(id + 1, Vec::new);
        }
        let ops = &mut self.initial[id];
        if ops.len() <= op {
            ops.resize(op + 1, NONE);
        }
        ops[op] = i;
    }

    /// Keeps `dirs` as the directions of `op` under signature `signature`.
    pub(crate) fn put(&mut self, op: u32, signature: u32, dirs: Arc<[PropagationDirection]>) {
        let len = dirs.len();
        let i = self.intern(dirs);
        let op = op as usize;
        if self.per_op.len() <= op {
            self.per_op.resize_with(op + 1, Vec::new);
        }
        let lists = &self.lists;
        let known = &mut self.per_op[op];
        match known.iter_mut().find(|(s, d)| *s == signature && lists[*d as usize].len() == len) {
            Some(slot) => slot.1 = i,
            None => known.push((signature, i)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PropagationDirection::{Both, Forward};

    #[test]
    fn keeps_directions_by_op_signature_and_factor_count() {
        let mut t = DirectionTable::new();
        assert!(t.get(3, 0, 2).is_none());
        t.put(3, 0, Arc::from(vec![Both, Both]));
        t.put(3, 5, Arc::from(vec![Forward, Both]));
        assert_eq!(t.get(3, 0, 2).as_deref(), Some(&[Both, Both][..]));
        assert_eq!(t.get(3, 5, 2).as_deref(), Some(&[Forward, Both][..]));
        assert!(t.get(3, 0, 3).is_none(), "another factor count is another question");
        assert!(t.get(2, 0, 2).is_none(), "another op");
        assert!(t.get(40, 0, 2).is_none(), "an op beyond the table");
    }
}
