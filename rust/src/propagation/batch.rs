//! Many propagations of one program at once: the same frozen graph and pass, each candidate
//! with its own overrides of the stored shardings (what-if evaluation for a sharding search),
//! spread over scoped worker threads.
//!
//! Each candidate runs [`super::layers::propagate`] on its own copy of the input, so its
//! result is exactly what a single propagation of that input gives. To save work, the base
//! input is propagated once first with its propagation steps recorded, and each candidate's
//! solve replays a recorded step wherever its inputs recur instead of computing it, which
//! changes nothing in the result (see [`super::step_memo`]). The program's derived structure
//! ([`Program`]) is built once and shared. Each result keeps only the value shardings that
//! differ from the base input's result ([`CandidateOutput`]): most come out the same for every
//! candidate, and full copies for hundreds of candidates cost more memory traffic (fresh
//! pages) than the solves. No thread outlives the call (`std::thread::scope`), so there is
//! no pool to corrupt across `fork`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::graph::Graph;
use crate::sharding::TensorSharding;

use super::layers::{solve_shared, PassOptions, SolveCaches};
use super::program::Program;
use super::solver::{Shared, SolverInput, SolverOutput};

/// The stored shardings one candidate replaces: `(value, sharding)` and `(func op, result
/// index, sharding)`; `None` removes the stored sharding.
#[derive(Debug, Clone, Default)]
pub struct Candidate {
    pub values: Vec<(u32, Option<TensorSharding>)>,
    pub func_results: Vec<(u32, usize, Option<TensorSharding>)>,
}

impl Candidate {
    fn apply(&self, input: &mut SolverInput) -> Result<()> {
        let num_values = input.value_shardings.len();
        for (v, s) in &self.values {
            let slot = input.value_shardings.get_mut(*v as usize).ok_or_else(|| {
                crate::Error::invariant("candidate-value", format!("candidate names value {v}, the program has {num_values} values"))
            })?;
            *slot = s.clone();
        }
        for (f, i, s) in &self.func_results {
            let results = input.func_results.iter_mut().find(|(op, _)| op == f).ok_or_else(|| {
                crate::Error::invariant("candidate-func", format!("candidate names function op {f}, which is no function of the program"))
            })?;
            let count = results.1.len();
            let slot = results.1.get_mut(*i).ok_or_else(|| {
                crate::Error::invariant("candidate-func", format!("candidate names result {i} of function op {f}, which has {count} results"))
            })?;
            *slot = s.clone();
        }
        Ok(())
    }
}

/// One candidate's result: the [`SolverOutput`] of its solve, with its value shardings kept
/// as the differences from the base input's result when there is one (see the module
/// documentation).
#[derive(Debug, Clone)]
pub struct CandidateOutput {
    /// The output; its `value_shardings` is empty when `base` is set.
    out: SolverOutput,
    /// The base input's value shardings after propagation, shared by every candidate.
    base: Option<Arc<Vec<Option<Shared>>>>,
    /// `(value, sharding)` where this result differs from `base`, by value (every value when
    /// there is no base); the shardings are shared with the solves that stored them.
    changed: Vec<(u32, Option<Shared>)>,
}

impl CandidateOutput {
    fn new(out: SolverOutput, values: Vec<Option<Shared>>, base: Option<&Arc<Vec<Option<Shared>>>>) -> CandidateOutput {
        let base = base.filter(|b| b.len() == values.len());
        let differs = |v: usize, s: &Option<Shared>| base.is_none_or(|b| *s != b[v]);
        let changed = values.into_iter().enumerate().filter(|(v, s)| differs(*v, s)).map(|(v, s)| (v as u32, s)).collect();
        CandidateOutput { out, base: base.cloned(), changed }
    }

    /// Everything but the value shardings (its `value_shardings` is empty: use
    /// [`CandidateOutput::value_sharding`] or [`CandidateOutput::into_output`] for those).
    pub fn output(&self) -> &SolverOutput {
        &self.out
    }

    /// The stored sharding of value `v` after propagation (`None` for none, or for an index
    /// out of range).
    pub fn value_sharding(&self, v: u32) -> Option<&TensorSharding> {
        match &self.base {
            None => self.changed.get(v as usize)?.1.as_deref(),
            Some(base) => match self.changed.binary_search_by_key(&v, |(c, _)| *c) {
                Ok(i) => self.changed[i].1.as_deref(),
                Err(_) => base.get(v as usize)?.as_deref(),
            },
        }
    }

    /// Number of values.
    pub fn num_values(&self) -> usize {
        self.base.as_ref().map_or(self.changed.len(), |b| b.len())
    }

    /// Number of value shardings that differ from the base input's result (all of them when
    /// there was no base solve).
    pub fn num_changed(&self) -> usize {
        self.changed.len()
    }

    /// The output in full, as [`super::layers::propagate`] returns it.
    pub fn into_output(self) -> SolverOutput {
        let mut values: Vec<Option<TensorSharding>> = match &self.base {
            Some(base) => base.iter().map(|s| s.as_deref().cloned()).collect(),
            None => Vec::new(),
        };
        for (v, s) in self.changed {
            let s = s.map(Arc::unwrap_or_clone);
            match values.get_mut(v as usize) {
                Some(slot) => *slot = s,
                None => values.push(s),
            }
        }
        SolverOutput { value_shardings: values, ..self.out }
    }
}

/// Propagates `base` with each candidate's overrides, on `threads` worker threads (at least
/// one, at most one per candidate); results in candidate order, each what
/// [`super::layers::propagate`] returns for that input (see [`CandidateOutput`]).
pub fn propagate_candidates(graph: &Graph, base: &SolverInput, options: &PassOptions, candidates: &[Candidate], threads: usize) -> Vec<Result<CandidateOutput>> {
    let n = candidates.len();
    let prog = match Program::new(graph, &base.facts) {
        Ok(p) => Arc::new(p),
        Err(e) => return vec![Err(e); n],
    };
    let slots: Vec<Mutex<Option<Result<CandidateOutput>>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    // The base solve's steps and result; a base input that fails to propagate only leaves
    // none to replay (each candidate reports its own error).
    let mut base_caches = SolveCaches::default();
    let (memo, base_values) = match (n > 1).then(|| solve_shared(&prog, base.clone(), options, None, true, Some(&mut base_caches))) {
        Some(Ok((_, values, steps))) => (steps.map(Arc::new), Some(Arc::new(values))),
        _ => (None, None),
    };
    let work = || {
        // This worker's memo: the base solve's steps, then also the steps its own candidates
        // computed (candidates that share an override repeat each other's steps near it);
        // likewise its step outcomes by content and its directions by signature.
        let mut known = memo.clone();
        let mut caches = base_caches.clone();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            let mut input = base.clone();
            let out = candidates[i].apply(&mut input).and_then(|()| solve_shared(&prog, input, options, known.clone(), known.is_some(), Some(&mut caches)));
            let out = out.map(|(out, values, steps)| {
                if let (Some(known), Some(steps)) = (known.as_mut(), steps) {
                    Arc::make_mut(known).absorb(steps);
                }
                CandidateOutput::new(out, values, base_values.as_ref())
            });
            *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
        }
    };
    let workers = threads.clamp(1, n.max(1));
    if workers == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(work);
            }
        });
    }
    slots
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()).expect("every candidate slot is filled"))
        .collect()
}
