//! Many propagations of one program at once: the same frozen graph and pass, each candidate
//! with its own overrides of the stored shardings (what-if evaluation for a sharding search),
//! spread over scoped worker threads.
//!
//! Each candidate runs [`super::layers::propagate`] on its own copy of the input, so its
//! result is exactly what a single propagation of that input gives. To save work, the base
//! input is propagated once first with its propagation steps recorded, and each candidate's
//! solve replays a recorded step wherever its inputs recur instead of computing it, which
//! changes nothing in the result (see [`super::step_memo`]). No thread outlives the call
//! (`std::thread::scope`), so there is no pool to corrupt across `fork`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::graph::Graph;
use crate::sharding::TensorSharding;

use super::layers::{propagate_with_steps, PassOptions};
use super::solver::{SolverInput, SolverOutput};

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

/// Propagates `base` with each candidate's overrides, on `threads` worker threads (at least
/// one, at most one per candidate); results in candidate order, each as
/// [`super::layers::propagate`] returns it for that input.
pub fn propagate_candidates(graph: &Graph, base: &SolverInput, options: &PassOptions, candidates: &[Candidate], threads: usize) -> Vec<Result<SolverOutput>> {
    let n = candidates.len();
    let slots: Vec<Mutex<Option<Result<SolverOutput>>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    // The base solve's steps; a base input that fails to propagate only leaves none to replay
    // (each candidate reports its own error).
    let memo = if n > 1 {
        propagate_with_steps(graph, base.clone(), options, None, true).ok().and_then(|(_, steps)| steps).map(Arc::new)
    } else {
        None
    };
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        let mut input = base.clone();
        let out = candidates[i]
            .apply(&mut input)
            .and_then(|()| propagate_with_steps(graph, input, options, memo.clone(), false))
            .map(|(out, _)| out);
        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
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
