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

/// What a visit that changed nothing read and used (see the module documentation). The
/// three lists share one allocation (`data`): the stored shardings read, then the number of
/// factors of each rule the visit propagated along, then those factors' directions packed
/// four to a word (`None` for a factor whose direction did not matter). One entry per op:
/// 56 bytes and one allocation instead of 96 and three.
#[derive(Debug, Default, Clone)]
struct Entry {
    /// The entry describes a visit (false until one is remembered, and after the op changed
    /// some sharding).
    valid: bool,
    /// The strategy's [`cache_id`](super::factor_prop::FactorPropagation::cache_id).
    strategy: u8,
    /// The structure epoch of the visit.
    epoch: u32,
    /// The clock when the visit ended.
    stamp: u64,
    /// How many of `data` are reads, and how many then are factor counts.
    reads: u32,
    counts: u32,
    /// The number of directions packed after them.
    dirs: u32,
    data: Vec<u32>,
}

/// The directions a remembered visit propagated with (see [`Entry`]), unpacked on access.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Directions<'a> {
    words: &'a [u32],
    len: usize,
}

impl Directions<'_> {
    /// The direction of the `i`-th factor, `None` when it did not matter.
    pub(crate) fn get(&self, i: usize) -> Option<PropagationDirection> {
        decode(((self.words[i / 4] >> (8 * (i % 4))) & 0xff) as u8)
    }

    /// Whether no direction mattered.
    pub(crate) fn all_none(&self) -> bool {
        (0..self.len).all(|i| self.get(i).is_none())
    }
}

fn encode(d: Option<PropagationDirection>) -> u32 {
    match d {
        None => 0,
        Some(PropagationDirection::None) => 1,
        Some(PropagationDirection::Forward) => 2,
        Some(PropagationDirection::Backward) => 3,
        Some(PropagationDirection::Both) => 4,
    }
}

fn decode(b: u8) -> Option<PropagationDirection> {
    match b {
        1 => Some(PropagationDirection::None),
        2 => Some(PropagationDirection::Forward),
        3 => Some(PropagationDirection::Backward),
        4 => Some(PropagationDirection::Both),
        _ => None,
    }
}

/// What a step between a result of the main function and its returned value that changed
/// nothing read (Shardy `propagateFuncResults`, run at the start and end of every round).
#[derive(Debug, Default, Clone, Copy)]
struct FuncResultEntry {
    valid: bool,
    stamp: u64,
    epoch: u32,
    strategy: u8,
    /// Where the returned value's sharding is stored.
    slot: Option<u32>,
}

/// The memo of one solve: a write clock per stored sharding and one entry per op (and per
/// result of the main function). [`VisitCache::reset`] readies it for another solve, keeping
/// its allocations.
#[derive(Debug, Default, Clone)]
pub(crate) struct VisitCache {
    enabled: bool,
    clock: u64,
    epoch: u32,
    versions: Vec<u64>,
    entries: Vec<Entry>,
    /// Write clock of each result sharding of the main function.
    func_versions: Vec<u64>,
    func_entries: Vec<FuncResultEntry>,
    /// Whether the current visit is being recorded, and whether it still can be remembered.
    recording: bool,
    cacheable: bool,
    reads: Vec<u32>,
    dirs: Vec<Option<PropagationDirection>>,
    factor_counts: Vec<u32>,
}

impl VisitCache {
    /// Forgets everything, for a solve of `num_values` values and `num_ops` ops (the lists
    /// keep their capacity); a disabled memo remembers nothing.
    pub(crate) fn reset(&mut self, num_values: usize, num_ops: usize, enabled: bool) {
        self.enabled = enabled;
        self.clock = 0;
        self.epoch = 0;
        self.versions.clear();
        self.entries.truncate(if enabled { num_ops } else { 0 });
        self.entries.iter_mut().for_each(|e| e.valid = false);
        if enabled {
            self.versions.resize(num_values, 0);
            self.entries.resize_with(num_ops, Entry::default);
        }
        self.func_versions.clear();
        self.func_entries.clear();
        self.recording = false;
        self.cacheable = false;
        self.reads.clear();
        self.dirs.clear();
        self.factor_counts.clear();
    }

    /// The stored sharding of value `slot` was written.
    pub(crate) fn wrote(&mut self, slot: u32) {
        if self.enabled {
            self.clock += 1;
            self.versions[slot as usize] = self.clock;
        }
    }

    /// Result sharding `k` of the main function was written.
    pub(crate) fn wrote_func_result(&mut self, k: u32) {
        if self.enabled {
            self.clock += 1;
            let k = k as usize;
            if self.func_versions.len() <= k {
                self.func_versions.resize(k + 1, 0);
            }
            self.func_versions[k] = self.clock;
        }
    }

    /// Whether a step between main's result `k` and its returned value, whose sharding is
    /// stored at `slot`, with strategy `strategy`, is known to change nothing: one did before,
    /// and neither sharding was written since.
    pub(crate) fn func_result_fresh(&self, k: u32, strategy: Option<u8>, slot: Option<u32>) -> bool {
        let Some(e) = self.func_entries.get(k as usize) else { return false };
        let written = |v: u64| v > e.stamp;
        e.valid
            && e.epoch == self.epoch
            && Some(e.strategy) == strategy
            && e.slot == slot
            && !slot.is_some_and(|s| written(self.versions[s as usize]))
            && !written(self.func_versions.get(k as usize).copied().unwrap_or(0))
    }

    /// A step between main's result `k` and its returned value ended; remembered when it
    /// changed nothing.
    pub(crate) fn func_result_done(&mut self, k: u32, strategy: Option<u8>, slot: Option<u32>, changed: bool) {
        if !self.enabled {
            return;
        }
        let k = k as usize;
        if self.func_entries.len() <= k {
            self.func_entries.resize(k + 1, FuncResultEntry::default());
        }
        self.func_entries[k] = match (strategy, changed) {
            (Some(strategy), false) => {
                FuncResultEntry { valid: true, stamp: self.clock, epoch: self.epoch, strategy, slot }
            }
            _ => FuncResultEntry::default(),
        };
    }

    /// An op was erased: live uses changed, so every remembered visit is stale.
    pub(crate) fn structure_changed(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.entries.iter_mut().for_each(|e| e.valid = false);
            self.func_entries.iter_mut().for_each(|e| e.valid = false);
        }
    }

    /// The remembered visit of `op` with strategy `strategy`, when no sharding it read was
    /// written since: `(factor counts, directions)` to compare with the current directions.
    pub(crate) fn lookup(&self, op: u32, strategy: Option<u8>) -> Option<(&[u32], Directions<'_>)> {
        let e = self.entries.get(op as usize)?;
        let (reads, counts) = (e.reads as usize, e.counts as usize);
        let fresh = e.valid
            && e.epoch == self.epoch
            && Some(e.strategy) == strategy
            && e.data[..reads].iter().all(|&r| self.versions[r as usize] <= e.stamp);
        let dirs = Directions { words: &e.data[reads + counts..], len: e.dirs as usize };
        fresh.then_some((&e.data[reads..reads + counts], dirs))
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

    /// The visit propagated along a rule whose factors had the directions `dirs`, `None` where
    /// the direction did not matter (as [`VisitCache::directions`] would keep them).
    pub(crate) fn relevant_directions(&mut self, dirs: &[Option<PropagationDirection>]) {
        if self.recording {
            self.dirs.extend_from_slice(dirs);
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
        e.reads = self.reads.len() as u32;
        e.counts = self.factor_counts.len() as u32;
        e.dirs = self.dirs.len() as u32;
        // The entry's own allocation is reused (the scratch lists stay here: handing them to
        // the entry would leave it the capacity of the largest visit so far).
        e.data.clear();
        e.data.reserve_exact(self.reads.len() + self.factor_counts.len() + self.dirs.len().div_ceil(4));
        e.data.extend_from_slice(&self.reads);
        e.data.extend_from_slice(&self.factor_counts);
        e.data.extend(
            self.dirs.chunks(4).map(|c| c.iter().enumerate().fold(0u32, |w, (k, &d)| w | (encode(d) << (8 * k)))),
        );
    }

    /// Stops recording without remembering (the visit failed).
    pub(crate) fn abort(&mut self) {
        self.recording = false;
    }
}
