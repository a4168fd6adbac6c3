//! Propagation steps of one run, kept to replay in other runs of the same program (what
//! [`super::batch::propagate_candidates`] does for candidate sets that differ from a base
//! input in a few stored shardings).
//!
//! One step is Shardy's `propagateTensorShardings` through one op (see
//! `Solver::propagate_tensors` in [`super::solver`]): it projects the shardings of the op's
//! operands and results onto a rule, propagates along the factors, and stores the shardings
//! that changed. Its outcome, which shardings it stores, is a function of
//!
//! * the op and the tensors it reads and writes (which include where each tensor's sharding is
//!   stored: that depends on which ops are alive, so it is compared, not assumed),
//! * the stored shardings it reads,
//! * the direction of each factor that some tensor has axes for (a factor without axes
//!   propagates nothing in any direction),
//! * the factor propagation strategy,
//!
//! and of what is fixed for every run over one program with one set of options: the graph, its
//! rules, the meshes, `conservative`. A step of another run with equal inputs therefore stores
//! the same shardings, and the solver applies the remembered updates instead of computing them,
//! with the same stores and announcements in the same order, so the run is identical to one
//! without the memo.

use std::collections::HashMap;

use super::factor_prop::PropagationDirection;
use super::solver::{Shared, Tensor};

/// Where a stored sharding a step reads lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// The stored sharding of a value.
    Value(u32),
    /// Result `k` of function op `f`: `FuncResult(f, k)`.
    FuncResult(u32, u32),
}

/// One remembered step (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct Step {
    /// The strategy's `cache_id`.
    pub strategy: u8,
    /// Number of operands among `tensors`.
    pub num_operands: u32,
    /// The operands, then the results.
    pub tensors: Vec<Tensor>,
    /// Per factor, its direction where it mattered.
    pub dirs: Vec<Option<PropagationDirection>>,
    /// The stored shardings read: where, and what.
    pub reads: Vec<(Stored, Option<Shared>)>,
    /// The shardings stored, in order.
    pub updates: Vec<(Tensor, Shared)>,
}

/// The steps of one run by op, and by function result for the steps between the main
/// function's return values and its result shardings (one op, many results) (see the module
/// documentation). Read-only once recorded, so one memo serves every worker thread.
#[derive(Debug, Clone, Default)]
pub struct StepMemo {
    per_op: Vec<Vec<Step>>,
    per_func_result: HashMap<(u32, u32), Vec<Step>>,
}

/// Distinct steps kept per op (or function result) at most; later ones are dropped (a run
/// visits most ops a few times).
const MAX_STEPS_PER_OP: usize = 8;

/// The function result a step writes, when it is a step of Shardy's `propagateFuncResults`.
fn func_result(results: &[Tensor]) -> Option<(u32, u32)> {
    match results {
        [Tensor::FuncResult(f, k)] => Some((*f, *k)),
        _ => None,
    }
}

impl StepMemo {
    /// An empty memo for a program of `num_ops` ops.
    pub fn new(num_ops: usize) -> StepMemo {
        StepMemo { per_op: vec![Vec::new(); num_ops], per_func_result: HashMap::new() }
    }

    /// Number of steps kept.
    pub fn len(&self) -> usize {
        self.per_op.iter().map(Vec::len).sum::<usize>() + self.per_func_result.values().map(Vec::len).sum::<usize>()
    }

    /// Whether no step is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps a step of op `op`, unless an equal one is kept already.
    pub(crate) fn insert(&mut self, op: u32, step: Step) {
        let key = func_result(&step.tensors[step.num_operands as usize..]);
        let steps = match key {
            Some(key) => self.per_func_result.entry(key).or_default(),
            None => match self.per_op.get_mut(op as usize) {
                Some(steps) => steps,
                None => return,
            },
        };
        let same = |s: &Step| {
            s.strategy == step.strategy && s.tensors == step.tensors && s.dirs == step.dirs && s.reads == step.reads
        };
        if steps.len() < MAX_STEPS_PER_OP && !steps.iter().any(same) {
            steps.push(step);
        }
    }

    /// Keeps the steps of `other` (recorded by a run of the same program with the same
    /// options) as [`StepMemo::insert`] keeps each.
    pub fn absorb(&mut self, other: StepMemo) {
        for (op, steps) in other.per_op.into_iter().enumerate() {
            for step in steps {
                self.insert(op as u32, step);
            }
        }
        for ((func, _), steps) in other.per_func_result {
            for step in steps {
                self.insert(func, step);
            }
        }
    }

    /// The steps kept for op `op` writing `results`.
    pub(crate) fn steps(&self, op: u32, results: &[Tensor]) -> &[Step] {
        match func_result(results) {
            Some(key) => self.per_func_result.get(&key).map_or(&[], Vec::as_slice),
            None => self.per_op.get(op as usize).map_or(&[], Vec::as_slice),
        }
    }
}
