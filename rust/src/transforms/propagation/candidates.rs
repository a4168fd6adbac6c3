//! `sdy-propagation-pipeline` for many candidate sets of @main's argument and result shardings
//! on one native program (a sharding search's what-if evaluations), as
//! `shardwise.batch.CandidateBatch` runs it on the Python IR.
//!
//! The steps before propagation run once on a copy of the program, which is frozen once and
//! solved unannotated once ([`crate::propagation::batch::CandidateBatch`]); each candidate is
//! then only a solve, on worker threads. A candidate's module is made when asked
//! ([`ProgramCandidates::materialize`]): the copy with the candidate's shardings set and its
//! solve written back, ready for the steps after propagation. Exact when the steps before
//! propagation do not read the annotated shardings ([`guarded_args`] says when that holds).

use std::sync::Arc;

use super::freeze::{check_types, freeze, main_func, solver_input, top_funcs, Frozen};
use super::write_back::{write_back, Stored};
use crate::error::{Error, Result};
use crate::ir::clone::Uses;
use crate::ir::values::{func_arg_sharding, func_result_sharding, set_func_sharding};
use crate::ir::Program;
use crate::propagation::batch::{Candidate, CandidateBatch, CandidateOutput};
use crate::propagation::{Pass, PassOptions, StrategyKind};
use crate::sharding::TensorSharding;
use crate::transforms::common::meshes;
use crate::transforms::{PassContext, WarningKind};

/// The ops whose use of an annotated argument makes a step before propagation read its
/// sharding (`shardwise.batch._GUARDED_USERS`).
const GUARDED_USERS: [&str; 3] = ["sdy.sharding_constraint", "sdy.sharding_group", "sdy.manual_computation"];

/// @main's argument shardings and result shardings (`None`: none).
pub type MainShardings = (Vec<Option<TensorSharding>>, Vec<Option<TensorSharding>>);

/// One sharding of a candidate: @main's argument or result `index` gets `sharding` (`None`
/// removes the stored one).
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    pub result: bool,
    pub index: usize,
    pub sharding: Option<TensorSharding>,
}

/// The index in `p.funcs` of the function Shardy propagates the results of (the only one, or
/// @main). Errors when there is none, or several and none is @main.
pub fn main_func_index(p: &Program) -> Result<usize> {
    let op = main_func(p, &top_funcs(p))?.ok_or_else(|| Error::program("the module has no function to propagate"))?;
    p.func_index().get(&op).copied().ok_or_else(|| Error::program(format!("{}: no function data", p.op_where(op))))
}

/// @main's argument and result types (interned strings of `p`).
pub fn main_signature(p: &Program) -> Result<(String, Vec<&str>, Vec<&str>)> {
    let f = &p.funcs[main_func_index(p)?];
    let name = p.symbol_name(f.op).unwrap_or_default();
    let types = |ts: &[u32]| ts.iter().map(|&t| p.strings.get(t)).collect::<Vec<_>>();
    Ok((name, types(&f.arg_types), types(&f.result_types)))
}

/// @main's stored argument and result shardings (one per argument and per result).
pub fn main_shardings(p: &Program) -> Result<MainShardings> {
    let fi = main_func_index(p)?;
    let f = &p.funcs[fi];
    let args = (0..f.arg_types.len()).map(|k| func_arg_sharding(p, fi, k)).collect::<Result<_>>()?;
    let results = (0..f.result_types.len()).map(|k| func_result_sharding(p, fi, k)).collect::<Result<_>>()?;
    Ok((args, results))
}

/// Sets @main's shardings as `annotations` say. Errors on an index @main does not have.
pub fn annotate(p: &mut Program, annotations: &[Annotation]) -> Result<()> {
    let fi = main_func_index(p)?;
    annotate_func(p, fi, annotations)
}

fn annotate_func(p: &mut Program, fi: usize, annotations: &[Annotation]) -> Result<()> {
    for a in annotations {
        let f = &p.funcs[fi];
        let (count, kind) = if a.result { (f.result_types.len(), "result") } else { (f.arg_types.len(), "arg") };
        if a.index >= count {
            let name = p.symbol_name(f.op).unwrap_or_default();
            return Err(Error::program(format!("candidate annotation {kind}{}: @{name} has {count} {kind}s", a.index)));
        }
        set_func_sharding(p, fi, a.index, a.result, a.sharding.as_ref());
    }
    Ok(())
}

/// The arguments of @main whose candidate shardings the steps before propagation would read
/// (those feeding a sharding constraint, sharding group or manual computation), or `None`
/// when no candidate can be batched: the module has other functions or calls, or a mesh has
/// a size-one axis (`sdy-remove-size-one-axes` rewrites every sharding on it). As
/// `shardwise.batch._guarded_args`.
pub fn guarded_args(p: &Program) -> Result<Option<Vec<usize>>> {
    let funcs = top_funcs(p);
    if funcs.len() != 1 || p.walk(0).into_iter().any(|op| p.op_name(op) == "func.call") {
        return Ok(None);
    }
    if meshes(p)?.values().any(|m| m.axes().iter().any(|a| a.size == 1)) {
        return Ok(None);
    }
    let entry = p.region_blocks(funcs[0], 0);
    if entry.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let uses = Uses::new(p, 0);
    let guarded = p
        .block_args(entry.start)
        .enumerate()
        .filter(|&(_, a)| uses.users(a).into_iter().any(|u| GUARDED_USERS.contains(&p.op_name(u))))
        .map(|(k, _)| k)
        .collect();
    Ok(Some(guarded))
}

/// A native program prepared for many candidate sets of @main's shardings (see the module
/// documentation).
pub struct ProgramCandidates {
    /// The program after the steps before propagation.
    base: Program,
    frozen: Frozen,
    /// `base`'s stored shardings.
    stored: Stored,
    batch: CandidateBatch,
    /// @main: its index in `base.funcs`, its graph op, its arguments' graph values.
    main_func: usize,
    main_op: u32,
    main_args: Vec<u32>,
}

impl ProgramCandidates {
    /// Runs the native steps `before` (the pipeline's steps before propagation) on a copy of
    /// `p`, freezes it (`conservative`: Shardy's conservative rules) and solves it once as
    /// `sdy-user-priority-propagate` does. Returns the warnings of the steps and of freezing.
    /// Errors: what the steps, freezing and the solver raise; no function to propagate.
    pub fn new(p: &Program, before: &[&str], conservative: bool) -> Result<(Self, Vec<(WarningKind, String)>)> {
        let mut base = p.clone();
        let mut warnings = crate::transforms::run(&mut base, before)?;
        check_types(&base)?;
        let mut cx = PassContext::default();
        let frozen = freeze(&base, conservative, &mut cx)?;
        warnings.append(&mut cx.warnings);
        let input = solver_input(&base, &frozen, &[])?;
        let stored = Stored::of(&input.value_shardings, &input.func_results);
        let main_func = main_func_index(&base)?;
        let op = base.funcs[main_func].op;
        let main_op = frozen.op(op).ok_or_else(|| Error::program(format!("{}: not frozen", base.op_where(op))))?;
        let entry = base.region_blocks(op, 0);
        let main_args = if entry.is_empty() {
            Vec::new()
        } else {
            base.block_args(entry.start)
                .map(|v| frozen.value(v).ok_or_else(|| Error::program("an argument of @main is not frozen")))
                .collect::<Result<_>>()?
        };
        let options = PassOptions {
            pass: Pass::UserPriority,
            strategy: StrategyKind::Aggressive,
            conservative,
            run_op_priority: true,
        };
        let batch = CandidateBatch::new(Arc::clone(&frozen.graph), input, options)?;
        let this = ProgramCandidates { base, frozen, stored, batch, main_func, main_op, main_args };
        Ok((this, warnings))
    }

    /// Number of @main's arguments and results.
    pub fn main_arity(&self) -> (usize, usize) {
        (self.main_args.len(), self.base.funcs[self.main_func].result_types.len())
    }

    /// The solver's candidate of `annotations`; errors on an index @main does not have.
    fn candidate(&self, annotations: &[Annotation]) -> Result<Candidate> {
        let (args, results) = self.main_arity();
        let mut c = Candidate::default();
        for a in annotations {
            let (count, kind) = if a.result { (results, "result") } else { (args, "arg") };
            if a.index >= count {
                return Err(Error::program(format!(
                    "candidate annotation {kind}{}: @main has {count} {kind}s",
                    a.index
                )));
            }
            if a.result {
                c.func_results.push((self.main_op, a.index, a.sharding.clone()));
            } else {
                c.values.push((self.main_args[a.index], a.sharding.clone()));
            }
        }
        Ok(c)
    }

    /// Solves each candidate on `threads` worker threads (see
    /// [`CandidateBatch::propagate`]); results in candidate order.
    pub fn propagate(&self, candidates: &[Vec<Annotation>], threads: usize) -> Vec<Result<CandidateOutput>> {
        let mut solvable = Vec::with_capacity(candidates.len());
        let mut bad: Vec<Option<Error>> = Vec::with_capacity(candidates.len());
        for c in candidates {
            match self.candidate(c) {
                Ok(c) => {
                    solvable.push(c);
                    bad.push(None);
                }
                Err(e) => bad.push(Some(e)),
            }
        }
        let mut solved = self.batch.propagate(&solvable, threads).into_iter();
        bad.into_iter().map(|e| e.map_or_else(|| solved.next().expect("one output per candidate"), Err)).collect()
    }

    /// @main's argument and result shardings after the solve `out` (before the steps after
    /// propagation: open dimensions are still open).
    pub fn main_shardings(&self, out: &CandidateOutput) -> MainShardings {
        let args = self.main_args.iter().map(|&v| out.value_sharding(v).cloned()).collect();
        let results = out.output().func_results.iter().find(|(f, _)| *f == self.main_op).map(|(_, rs)| rs.clone());
        (args, results.unwrap_or_default())
    }

    /// The candidate's program before the steps after propagation: the prepared program with
    /// `annotations` set on @main and the solve `out` (of those annotations) written back.
    /// Errors: an index @main does not have; `out` has sharding-group conflicts (then the
    /// whole pipeline must run on the annotated program, as Shardy inserts constraints).
    pub fn materialize(&self, annotations: &[Annotation], out: &CandidateOutput) -> Result<Program> {
        if out.num_values() != self.frozen.values.len() {
            return Err(Error::program(format!(
                "the solve has {} values, the prepared program {}: it is no solve of these candidates",
                out.num_values(),
                self.frozen.values.len()
            )));
        }
        if !out.output().group_conflicts.is_empty() {
            return Err(Error::program("the candidate's sharding groups conflict: run the whole pipeline on it"));
        }
        let mut p = self.base.clone();
        annotate_func(&mut p, self.main_func, annotations)?;
        let mut stored = self.stored.clone();
        for a in annotations {
            if a.result {
                if let Some((_, rs)) = stored.funcs.iter_mut().find(|(f, _)| *f == self.main_op) {
                    if rs.len() <= a.index {
                        rs.resize(a.index + 1, None);
                    }
                    rs[a.index] = a.sharding.clone();
                }
            } else {
                let v = self.main_args[a.index];
                match &a.sharding {
                    Some(s) => stored.values.insert(v, s.clone()),
                    None => stored.values.remove(&v),
                };
            }
        }
        write_back(&mut p, &self.frozen, &stored, out.output(), &out.shared_values(), true)?;
        Ok(p)
    }
}
