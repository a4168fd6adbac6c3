//! Memo of op visits that changed nothing, so that the solver can skip a visit whose outcome
//! is already known.
//!
//! A visit of an op (Shardy's `PropagateRegisteredOp`, `PropagateDataFlowEdgeOp`, ...; see
//! [`super::solver`]) is a pure function of the stored shardings it reads, the propagation
//! directions of its factors, the factor propagation strategy and the program's structure
//! (which ops are alive, how many live uses each value has): the solver's other state (the
//! meshes, the rules, `conservative`) is fixed for a solve. So when a visit stored nothing, a
//! later visit of the same op with the same directions and strategy, after no write to any
//! sharding it read and no erased op, would store nothing either, and can be skipped. This is
//! what the op-priority and user-priority layers need: each of their rounds seeds the worklist
//! with every op, and most ops have reached their fixed point in an earlier round.
//!
//! Skipping such a visit leaves the solver's state exactly as visiting would: a visit that
//! stores nothing announces nothing (no worklist change) and only counts itself, which the
//! solver still does. It is used only without debugging records (those record every visit's
//! dropped axes).
//!
//! Writes are tracked with a logical clock: each stored sharding keeps the clock value of its
//! last write; a remembered visit keeps the clock value when it ended and the stored shardings
//! it read. It is still valid when none of them was written since.

use super::factor_prop::PropagationDirection;

/// What a visit that changed nothing read and used (see the module documentation).
#[derive(Debug, Default)]
struct Entry {
    /// The entry describes a visit (false until one is remembered, and after the op changed
    /// some sharding).
    valid: bool,
    /// The clock when the visit ended.
    stamp: u64,
    /// The structure epoch of the visit.
    epoch: u32,
    /// The strategy's [`cache_id`](super::factor_prop::FactorPropagation::cache_id).
    strategy: u8,
    /// The stored shardings (values) the visit read.
    reads: Vec<u32>,
    /// The directions of the factors, for each rule the visit propagated along, concatenated;
    /// `None` for a factor whose direction did not matter.
    dirs: Vec<Option<PropagationDirection>>,
    /// The number of factors of each such rule.
    factor_counts: Vec<u32>,
}

/// The memo of one solve: a write clock per stored sharding and one entry per op.
#[derive(Debug, Default)]
pub(crate) struct VisitCache {
    enabled: bool,
    clock: u64,
    epoch: u32,
    versions: Vec<u64>,
    entries: Vec<Entry>,
    /// Whether the current visit is being recorded, and whether it still can be remembered.
    recording: bool,
    cacheable: bool,
    reads: Vec<u32>,
    dirs: Vec<Option<PropagationDirection>>,
    factor_counts: Vec<u32>,
}

impl VisitCache {
    /// A memo for `num_values` values and `num_ops` ops; a disabled one remembers nothing.
    pub(crate) fn new(num_values: usize, num_ops: usize, enabled: bool) -> VisitCache {
        VisitCache {
            enabled,
            versions: if enabled { vec![0; num_values] } else { Vec::new() },
            entries: if enabled { (0..num_ops).map(|_| Entry::default()).collect() } else { Vec::new() },
            ..VisitCache::default()
        }
    }

    /// The stored sharding of value `slot` was written.
    pub(crate) fn wrote(&mut self, slot: u32) {
        if self.enabled {
            self.clock += 1;
            self.versions[slot as usize] = self.clock;
        }
    }

    /// An op was erased: live uses changed, so every remembered visit is stale.
    pub(crate) fn structure_changed(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.entries.iter_mut().for_each(|e| e.valid = false);
        }
    }

    /// The remembered visit of `op` with strategy `strategy`, when no sharding it read was
    /// written since: `(factor counts, directions)` to compare with the current directions.
    pub(crate) fn lookup(&self, op: u32, strategy: Option<u8>) -> Option<(&[u32], &[Option<PropagationDirection>])> {
        let e = self.entries.get(op as usize)?;
        let fresh = e.valid
            && e.epoch == self.epoch
            && Some(e.strategy) == strategy
            && e.reads.iter().all(|&r| self.versions[r as usize] <= e.stamp);
        fresh.then_some((&e.factor_counts[..], &e.dirs[..]))
    }

    /// Starts recording a visit of `op`; the op's entry is dropped until the visit ends.
    pub(crate) fn begin(&mut self, op: u32) {
        if !self.enabled {
            return;
        }
        self.entries[op as usize].valid = false;
        self.recording = true;
        self.cacheable = true;
        self.reads.clear();
        self.dirs.clear();
        self.factor_counts.clear();
    }

    /// Whether a visit is being recorded.
    pub(crate) fn recording(&self) -> bool {
        self.recording
    }

    /// The visit read the stored sharding of value `slot`.
    pub(crate) fn read(&mut self, slot: u32) {
        if self.recording {
            self.reads.push(slot);
        }
    }

    /// The visit read something the memo does not track (a function result sharding).
    pub(crate) fn read_untracked(&mut self) {
        self.cacheable = false;
    }

    /// The visit propagated along a rule whose factors had the directions `dirs`, which
    /// mattered only for the factors `f` with `relevant[f]` (a factor no tensor has axes for
    /// propagates nothing in any direction).
    pub(crate) fn directions(&mut self, dirs: &[PropagationDirection], relevant: &[bool]) {
        if self.recording {
            let at = |f: usize| relevant.get(f).copied().unwrap_or(false);
            self.dirs.extend(dirs.iter().enumerate().map(|(f, &d)| at(f).then_some(d)));
            self.factor_counts.push(dirs.len() as u32);
        }
    }

    /// Ends the visit of `op` with strategy `strategy`; remembers it when it changed nothing.
    pub(crate) fn end(&mut self, op: u32, strategy: Option<u8>, changed: bool) {
        if !self.recording {
            return;
        }
        self.recording = false;
        let (Some(strategy), false, true) = (strategy, changed, self.cacheable) else { return };
        let e = &mut self.entries[op as usize];
        e.valid = true;
        e.stamp = self.clock;
        e.epoch = self.epoch;
        e.strategy = strategy;
        std::mem::swap(&mut e.reads, &mut self.reads);
        std::mem::swap(&mut e.dirs, &mut self.dirs);
        std::mem::swap(&mut e.factor_counts, &mut self.factor_counts);
    }

    /// Stops recording without remembering (the visit failed).
    pub(crate) fn abort(&mut self) {
        self.recording = false;
    }
}
