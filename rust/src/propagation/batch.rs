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
use super::step_memo::StepMemo;

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
                crate::Error::invariant(
                    "candidate-value",
                    format!("candidate names value {v}, the program has {num_values} values"),
                )
            })?;
            *slot = s.clone();
        }
        for (f, i, s) in &self.func_results {
            let results = input.func_results.iter_mut().find(|(op, _)| op == f).ok_or_else(|| {
                crate::Error::invariant(
                    "candidate-func",
                    format!("candidate names function op {f}, which is no function of the program"),
                )
            })?;
            let count = results.1.len();
            let slot = results.1.get_mut(*i).ok_or_else(|| {
                crate::Error::invariant(
                    "candidate-func",
                    format!("candidate names result {i} of function op {f}, which has {count} results"),
                )
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
        let changed =
            values.into_iter().enumerate().filter(|(v, s)| differs(*v, s)).map(|(v, s)| (v as u32, s)).collect();
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

    /// Every value's stored sharding after propagation, shared with the solves that stored
    /// them (what [`super::layers::propagate_shared`] returns), for writing back.
    pub(crate) fn shared_values(&self) -> Vec<Option<Shared>> {
        match &self.base {
            None => self.changed.iter().map(|(_, s)| s.clone()).collect(),
            Some(base) => {
                let mut values = base.as_ref().clone();
                for (v, s) in &self.changed {
                    values[*v as usize] = s.clone();
                }
                values
            }
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

/// What one worker thread carries from candidate to candidate: the steps it can replay (the
/// base solve's, then also those its own candidates computed: candidates that share an
/// override repeat each other's steps near it), and its step outcomes by content and
/// directions by signature (see [`SolveCaches`]). None of it changes a result.
#[derive(Debug, Clone)]
struct Worker {
    known: Option<Arc<StepMemo>>,
    caches: SolveCaches,
}

/// What the base input's solve leaves for the candidates' solves.
#[derive(Debug, Clone, Default)]
struct BaseSolve {
    /// Its recorded steps (`None` when it failed, or records none).
    memo: Option<Arc<StepMemo>>,
    /// Its value shardings after propagation (`None` when it failed).
    values: Option<Arc<Vec<Option<Shared>>>>,
    /// Its step outcomes and directions.
    caches: SolveCaches,
}

impl BaseSolve {
    /// Solves `base` once, recording its steps. A base input that fails to propagate only
    /// leaves nothing to replay (each candidate reports its own error).
    fn new(prog: &Arc<Program<'_>>, base: &SolverInput, options: &PassOptions) -> BaseSolve {
        let mut caches = SolveCaches::default();
        match solve_shared(prog, base.clone(), options, None, true, Some(&mut caches)) {
            Ok((_, values, steps)) => BaseSolve { memo: steps.map(Arc::new), values: Some(Arc::new(values)), caches },
            Err(_) => BaseSolve::default(),
        }
    }

    /// A new worker's state: the base solve's steps and caches.
    fn worker(&self) -> Worker {
        Worker { known: self.memo.clone(), caches: self.caches.clone() }
    }
}

/// Propagates each candidate on `workers.len()` threads (at least one), the i-th using and
/// updating `workers[i]`; results in candidate order.
fn run(
    prog: &Arc<Program<'_>>,
    base: &SolverInput,
    options: &PassOptions,
    solved: &BaseSolve,
    candidates: &[Candidate],
    workers: &mut [Worker],
) -> Vec<Result<CandidateOutput>> {
    let n = candidates.len();
    let slots: Vec<Mutex<Option<Result<CandidateOutput>>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = |worker: &mut Worker| loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        let mut input = base.clone();
        let known = worker.known.clone();
        let record = known.is_some();
        let out = candidates[i]
            .apply(&mut input)
            .and_then(|()| solve_shared(prog, input, options, known, record, Some(&mut worker.caches)));
        let out = out.map(|(out, values, steps)| {
            if let (Some(known), Some(steps)) = (worker.known.as_mut(), steps) {
                Arc::make_mut(known).absorb(steps);
            }
            CandidateOutput::new(out, values, solved.values.as_ref())
        });
        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
    };
    match workers {
        [] => {}
        [one] => work(one),
        [own, others @ ..] => std::thread::scope(|s| {
            for worker in others.iter_mut() {
                // A thread that cannot be spawned (the system's limit) leaves its share to the
                // others: the counter hands out candidates to whoever asks, and this thread
                // always works too. No panic crosses into Python.
                let _ = std::thread::Builder::new().spawn_scoped(s, || work(worker));
            }
            work(own);
        }),
    }
    slots
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()).expect("every candidate slot is filled"))
        .collect()
}

/// Propagates `base` with each candidate's overrides, on `threads` worker threads (at least
/// one, at most one per candidate); results in candidate order, each what
/// [`super::layers::propagate`] returns for that input (see [`CandidateOutput`]). One call of
/// [`CandidateBatch`], for a program propagated once.
pub fn propagate_candidates(
    graph: &Graph,
    base: &SolverInput,
    options: &PassOptions,
    candidates: &[Candidate],
    threads: usize,
) -> Vec<Result<CandidateOutput>> {
    let n = candidates.len();
    let prog = match Program::new(graph, &base.facts) {
        Ok(p) => Arc::new(p),
        Err(e) => return vec![Err(e); n],
    };
    let solved = if n > 1 { BaseSolve::new(&prog, base, options) } else { BaseSolve::default() };
    let mut workers = vec![solved.worker(); threads.clamp(1, n.max(1))];
    run(&prog, base, options, &solved, candidates, &mut workers)
}

/// One program prepared for many calls with candidate sets (a sharding search's what-if
/// evaluations): the base input is solved once, here, and each call of
/// [`CandidateBatch::propagate`] replays its steps. Each worker thread's [`Worker`] state
/// (the steps its candidates computed, its step outcomes and directions) is kept from call to
/// call, so a later call replays what earlier calls computed. Results are exactly what
/// [`super::layers::propagate`] gives for each candidate's input, whatever came before. No
/// thread outlives a call, and calls from several threads take turns. Safe with `fork`: in a
/// child process (one forked while another thread's call held the workers' lock would find
/// it locked forever) calls leave the kept states alone and start from the base solve's.
#[derive(Debug)]
pub struct CandidateBatch {
    graph: Arc<Graph>,
    base: SolverInput,
    options: PassOptions,
    solved: BaseSolve,
    /// The workers' states between calls (at most one per thread a call used).
    workers: Mutex<Vec<Worker>>,
    /// The process that made the batch (`std::process::id`).
    pid: u32,
}

impl CandidateBatch {
    /// Prepares `graph` with the base input `base` (its stored shardings, meshes and facts):
    /// checks the facts and solves `base` once. Errors: bad facts (as [`Program::new`]).
    pub fn new(graph: Arc<Graph>, base: SolverInput, options: PassOptions) -> Result<CandidateBatch> {
        let solved = {
            let prog = Arc::new(Program::new(&graph, &base.facts)?);
            BaseSolve::new(&prog, &base, &options)
        };
        Ok(CandidateBatch { graph, base, options, solved, workers: Mutex::new(Vec::new()), pid: std::process::id() })
    }

    /// Propagates the base input with each candidate's overrides on `threads` worker threads
    /// (at least one, at most one per candidate); results in candidate order, as
    /// [`propagate_candidates`] gives them.
    pub fn propagate(&self, candidates: &[Candidate], threads: usize) -> Vec<Result<CandidateOutput>> {
        let n = candidates.len();
        let prog = match Program::new(&self.graph, &self.base.facts) {
            Ok(p) => Arc::new(p),
            Err(e) => return vec![Err(e); n],
        };
        let count = threads.clamp(1, n.max(1));
        if std::process::id() != self.pid {
            let mut fresh = vec![self.solved.worker(); count];
            return run(&prog, &self.base, &self.options, &self.solved, candidates, &mut fresh);
        }
        let mut kept = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        while kept.len() < count {
            kept.push(self.solved.worker());
        }
        run(&prog, &self.base, &self.options, &self.solved, candidates, &mut kept[..count])
    }
}
