//! Outcomes of propagation steps by what they compute from, wherever in the program they
//! happen.
//!
//! A step through an op with its sharding rule (Shardy's `propagateTensorShardings`; see
//! `Solver::propagate_tensors`) projects the shardings it reads onto the rule, propagates
//! along the factors and maps the result back. What it stores is a function of
//!
//! * the rule (ops with equal rules share one entry of [`crate::graph::Graph::rules`]),
//! * the shardings of its operands and results as the step reads them,
//! * the direction of each factor, the factor propagation strategy, `conservative`, and
//!   whether the op is elementwise,
//!
//! and of what is fixed for a whole solve (the meshes). Programs repeat themselves (the layers
//! of a model, a gradient op per forward op), so the same step comes up at many ops: the
//! solver looks it up here before projecting, and a hit gives exactly the shardings the
//! computation would (the stores themselves, their order and what they announce stay the
//! solver's). Not used while debugging data is recorded, which needs the projection.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use crate::fast_hash::FastHasher;

use super::factor_prop::PropagationDirection;
use super::solver::Shared;
use crate::sharding::TensorSharding;

/// What one step depends on besides the shardings it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct StepContext<'a> {
    /// The rule's index in the graph's rule table.
    pub rule: u32,
    /// The strategy's `cache_id`.
    pub strategy: u8,
    pub conservative: bool,
    pub elementwise: bool,
    /// Per factor, its direction.
    pub dirs: &'a [PropagationDirection],
}

/// What a step gives: the shardings it changes (by position among its operands then
/// results), and which factors some tensor had axes for.
#[derive(Debug, Clone)]
pub(crate) struct StepOutcome {
    pub updates: Vec<(u32, Shared)>,
    pub relevant: Vec<bool>,
}

#[derive(Debug, Clone)]
struct Entry {
    context: (u32, u8, bool, bool, Vec<PropagationDirection>),
    reads: Vec<Option<TensorSharding>>,
    outcome: StepOutcome,
}

/// The cache (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct StepCache {
    entries: HashMap<u64, Vec<Entry>>,
    len: usize,
}

/// Entries kept at most; later steps are not kept. Repeated parts of a program repeat the
/// steps met first, and the bound keeps the memory of a program without repeats to a few
/// tens of MB (an entry holds copies of the shardings its step read and wrote).
const MAX_ENTRIES: usize = 1 << 16;

impl StepCache {
    /// An empty cache.
    pub fn new() -> StepCache {
        StepCache::default()
    }

    /// Number of steps kept.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no step is kept.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The outcome of the step with `context` reading `reads` (operands then results), if
    /// kept; `hash` is [`StepCache::hash`] of the two.
    pub(crate) fn get(
        &self,
        hash: u64,
        context: &StepContext,
        reads: &[Option<&TensorSharding>],
    ) -> Option<&StepOutcome> {
        self.entries
            .get(&hash)?
            .iter()
            .find(|e| {
                let (rule, strategy, conservative, elementwise, dirs) = &e.context;
                (*rule, *strategy, *conservative, *elementwise)
                    == (context.rule, context.strategy, context.conservative, context.elementwise)
                    && dirs[..] == *context.dirs
                    && e.reads.len() == reads.len()
                    && e.reads.iter().zip(reads).all(|(a, b)| a.as_ref() == *b)
            })
            .map(|e| &e.outcome)
    }

    /// The hash [`StepCache::get`] and [`StepCache::insert`] take.
    pub(crate) fn hash(context: &StepContext, reads: &[Option<&TensorSharding>]) -> u64 {
        let mut h = FastHasher::default();
        context.hash(&mut h);
        reads.hash(&mut h);
        h.finish()
    }

    /// Keeps the outcome of a step computed from `context` and `reads`.
    pub(crate) fn insert(
        &mut self,
        hash: u64,
        context: StepContext<'_>,
        reads: &[Option<&TensorSharding>],
        outcome: StepOutcome,
    ) {
        if self.len >= MAX_ENTRIES {
            return;
        }
        let reads = reads.iter().map(|r| r.cloned()).collect();
        let context =
            (context.rule, context.strategy, context.conservative, context.elementwise, context.dirs.to_vec());
        self.entries.entry(hash).or_default().push(Entry { context, reads, outcome });
        self.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_sharding;

    fn ctx(rule: u32, dirs: &[PropagationDirection]) -> StepContext<'_> {
        StepContext { rule, strategy: 1, conservative: false, elementwise: true, dirs }
    }

    #[test]
    fn finds_a_step_by_what_it_reads_and_nothing_else() {
        let x = parse_sharding(r#"<@mesh, [{"x"}, {}]>"#).unwrap();
        let y = parse_sharding(r#"<@mesh, [{"y"}, {}]>"#).unwrap();
        let both = [PropagationDirection::Both; 2];
        let fwd = [PropagationDirection::Forward; 2];
        let reads = [Some(&x), None];
        let mut cache = StepCache::new();
        let h = StepCache::hash(&ctx(3, &both), &reads);
        cache.insert(
            h,
            ctx(3, &both),
            &reads,
            StepOutcome { updates: vec![(1, x.clone().into())], relevant: vec![true, false] },
        );
        assert_eq!(cache.len(), 1);
        let hit = cache.get(h, &ctx(3, &both), &reads).expect("the same step is found");
        assert_eq!(hit.updates, vec![(1, x.clone().into())]);
        // Another rule, other directions or other shardings are other steps, even under the
        // same hash.
        assert!(cache.get(h, &ctx(4, &both), &reads).is_none());
        assert!(cache.get(h, &ctx(3, &fwd), &reads).is_none());
        assert!(cache.get(h, &ctx(3, &both), &[Some(&y), None]).is_none());
        assert!(cache.get(h, &ctx(3, &both), &[Some(&x)]).is_none());
        assert_ne!(StepCache::hash(&ctx(3, &both), &[Some(&y), None]), h);
    }
}
