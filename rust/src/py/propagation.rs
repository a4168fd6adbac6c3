//! Bindings for the propagation solver (`crate::propagation::{solver, layers, debug}`):
//! `propagate_shardings`, that runs one of Shardy's four propagation passes over a frozen
//! program, given its `ProgramFacts` and its `PropagationOptions` (each a typed object that
//! checks its values when built), the `PropagationResult` it returns (with, on request, the records of where each
//! propagated axis came from), and the printers of Shardy's two debugging attributes
//! (`sharding_origins_text`, `propagation_edges_text`). Axes and shardings cross as the
//! objects of `repr.rs`, debugging records as those of `records.rs`; the GIL is released while
//! the solver runs.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyList;

use super::errors::IntoPyResult;
use super::graph::PyGraph;
use super::records::{PyConflict, PyEdge, PyGroupConflict, PyHop, PyOrigin, PyStep};
use super::repr::{self, PyAxis, PyMesh, PySharding};
use crate::axis::AxisRef;
use crate::error::Error;
use crate::propagation::batch::{Candidate, CandidateBatch, CandidateOutput};
use crate::propagation::debug::{
    origins_dict_text, propagation_edges_text as edges_text, AxisMap, DebugOptions, PropagationEdge,
};
use crate::propagation::layers::{direction_from_name, propagate, Pass, PassOptions, StrategyKind};
use crate::propagation::program::ProgramFacts;
use crate::propagation::solver::{SolverInput, SolverOutput};
use crate::sharding::TensorSharding;

type FuncResultsW = Vec<(u32, Vec<Option<PySharding>>)>;

/// Per axis, the edges that moved it.
type AxisEdgesW = Vec<(PyAxis, Vec<PyEdge>)>;

fn axis_edges_w(m: &AxisMap<Vec<PropagationEdge>>) -> AxisEdgesW {
    m.iter().map(|(a, es)| (PyAxis(a.clone()), es.iter().cloned().map(PyEdge).collect())).collect()
}

/// What a propagation pass computed (see `propagate_shardings`).
#[pyclass(frozen, module = "shardwise._native", name = "PropagationResult")]
pub struct PyPropagationResult {
    held: Held,
}

/// A single solve's output, or one candidate's (which keeps its value shardings as the
/// differences from a shared base result).
enum Held {
    Full(SolverOutput),
    Candidate(CandidateOutput),
}

impl PyPropagationResult {
    /// The distinct value shardings in order of first use and, per value, the index of its
    /// sharding among them (-1: none).
    fn table(&self) -> (Vec<&TensorSharding>, Vec<i32>) {
        let n = match &self.held {
            Held::Full(out) => out.value_shardings.len(),
            Held::Candidate(c) => c.num_values(),
        };
        let mut distinct: Vec<&TensorSharding> = Vec::new();
        let mut seen: HashMap<&TensorSharding, i32> = HashMap::new();
        let mut index = Vec::with_capacity(n);
        for v in 0..n {
            let s = match &self.held {
                Held::Full(out) => out.value_shardings[v].as_ref(),
                Held::Candidate(c) => c.value_sharding(v as u32),
            };
            index.push(match s {
                None => -1,
                Some(s) => *seen.entry(s).or_insert_with(|| {
                    distinct.push(s);
                    distinct.len() as i32 - 1
                }),
            });
        }
        (distinct, index)
    }

    /// One candidate's result.
    pub(super) fn of_candidate(c: CandidateOutput) -> Self {
        PyPropagationResult { held: Held::Candidate(c) }
    }

    /// The candidate's output, when this is one candidate's result.
    pub(super) fn candidate(&self) -> Option<&CandidateOutput> {
        match &self.held {
            Held::Candidate(c) => Some(c),
            Held::Full(_) => None,
        }
    }

    /// Everything but the value shardings.
    fn out(&self) -> &SolverOutput {
        match &self.held {
            Held::Full(out) => out,
            Held::Candidate(c) => c.output(),
        }
    }
}

#[pymethods]
impl PyPropagationResult {
    /// The stored sharding of each value after propagation, indexed like the input.
    #[getter]
    fn shardings(&self) -> Vec<Option<PySharding>> {
        match &self.held {
            Held::Full(out) => out.value_shardings.iter().map(repr::sharding_object).collect(),
            Held::Candidate(c) => {
                (0..c.num_values() as u32).map(|v| c.value_sharding(v).cloned().map(PySharding)).collect()
            }
        }
    }

    /// The same shardings as `shardings`, each distinct one converted once:
    /// ``(distinct, index)``, the distinct shardings in order of first use and, per value,
    /// the index of its sharding in ``distinct`` (-1: none). Programs repeat few shardings
    /// (a dozen over a 22k-op transformer step), so writing back from the table builds a
    /// dozen sharding objects instead of one per value.
    #[getter]
    fn sharding_table(&self) -> (Vec<PySharding>, Vec<i32>) {
        let (distinct, index) = self.table();
        (distinct.into_iter().cloned().map(PySharding).collect(), index)
    }

    /// Sets ``sharding`` on every op result among ``values`` (the frozen program's values, by
    /// index; ``graph`` its graph) to its sharding after propagation: the object of
    /// ``objects`` (one per entry of ``sharding_table``'s distinct list, in its order) or
    /// ``None``. A value keeps its old object where that equals the new one (``==``, asked
    /// once per pair of objects). Block arguments are left alone: returns their indices, for
    /// the caller. Raises ``ValueError`` when ``values`` or ``objects`` do not match the result.
    fn write_result_shardings<'py>(
        &self,
        py: Python<'py>,
        graph: &PyGraph,
        values: Bound<'py, PyList>,
        objects: Bound<'py, PyList>,
    ) -> PyResult<Vec<u32>> {
        let (distinct, index) = self.table();
        if values.len() != index.len()
            || objects.len() != distinct.len()
            || graph.inner.value_block_owner.len() != index.len()
        {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "write_result_shardings: {} values and {} objects for a result of {} values and {} distinct shardings",
                values.len(),
                objects.len(),
                index.len(),
                distinct.len()
            )));
        }
        let name = pyo3::intern!(py, "sharding");
        let none = py.None().into_bound(py);
        let mut block_args = Vec::new();
        // (old object's address, new entry) -> equal; the old objects are held by `held`.
        let mut same: HashMap<(usize, i32), bool> = HashMap::new();
        let mut held: Vec<Bound<'py, PyAny>> = Vec::new();
        for (v, &i) in index.iter().enumerate() {
            if graph.inner.value_block_owner[v] != crate::graph::NONE {
                block_args.push(v as u32);
                continue;
            }
            let value = values.get_item(v)?;
            let new = if i < 0 { none.clone() } else { objects.get_item(i as usize)? };
            let old = value.getattr(name)?;
            if old.is(&new) {
                continue;
            }
            if old.is_none() || new.is_none() {
                value.setattr(name, new)?;
                continue;
            }
            let key = (old.as_ptr() as usize, i);
            let equal = match same.get(&key) {
                Some(&e) => e,
                None => {
                    let e = old.eq(&new)?;
                    same.insert(key, e);
                    held.push(old);
                    e
                }
            };
            if !equal {
                value.setattr(name, new)?;
            }
        }
        Ok(block_args)
    }

    /// The stored sharding of each of `values` after propagation. Raises ``IndexError`` for
    /// a value out of range.
    fn shardings_of(&self, values: Vec<u32>) -> PyResult<Vec<Option<PySharding>>> {
        let n = match &self.held {
            Held::Full(out) => out.value_shardings.len(),
            Held::Candidate(c) => c.num_values(),
        };
        values
            .into_iter()
            .map(|v| {
                if v as usize >= n {
                    return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                        "value {v} is out of range: the program has {n} values"
                    )));
                }
                Ok(match &self.held {
                    Held::Full(out) => repr::sharding_object(&out.value_shardings[v as usize]),
                    Held::Candidate(c) => c.value_sharding(v).cloned().map(PySharding),
                })
            })
            .collect()
    }

    /// ``(func op, result shardings)`` for each function given.
    #[getter]
    fn func_results(&self) -> FuncResultsW {
        self.out().func_results.iter().map(|(f, r)| (*f, r.iter().map(repr::sharding_object).collect())).collect()
    }

    /// Ops erased because their results were unused and they have no side effects.
    #[getter]
    fn erased_ops(&self) -> Vec<u32> {
        self.out().erased_ops.clone()
    }

    /// Ops that propagated with their sharding rule (where Shardy sets the rule on the op).
    #[getter]
    fn rule_ops(&self) -> Vec<u32> {
        self.out().rule_ops.clone()
    }

    /// The sharding groups whose members' shardings conflict; when not empty, nothing was
    /// propagated.
    #[getter]
    fn group_conflicts(&self) -> Vec<PyGroupConflict> {
        self.out()
            .group_conflicts
            .iter()
            .map(|c| PyGroupConflict::new(c.group_id, c.members.clone(), PySharding(c.sharding.clone())))
            .collect()
    }

    /// Fixed-point rounds run.
    #[getter]
    fn rounds(&self) -> u32 {
        self.out().stats.rounds
    }

    /// Ops popped from the worklist and propagated through.
    #[getter]
    fn visits(&self) -> u64 {
        self.out().stats.visits
    }

    /// Shardings changed by propagation.
    #[getter]
    fn updates(&self) -> u64 {
        self.out().stats.updates
    }

    /// Whether debugging records were kept (``debug_sharding_origins`` or
    /// ``debug_propagation_edges``).
    #[getter]
    fn has_debug(&self) -> bool {
        self.out().debug.is_some()
    }

    /// ``(value, [(axis, origin), ...])``: the origin of each axis of each value's sharding,
    /// axes in the order they were recorded (with ``debug_sharding_origins``).
    #[getter]
    fn debug_origins(&self) -> Vec<(u32, Vec<(PyAxis, PyOrigin)>)> {
        let Some(d) = &self.out().debug else { return Vec::new() };
        d.value_origins
            .iter()
            .map(|(v, m)| (*v, m.iter().map(|(a, o)| (PyAxis(a.clone()), PyOrigin(*o))).collect()))
            .collect()
    }

    /// ``(op, [(axis, [edge, ...]), ...])``: the propagation edges recorded on each op (with
    /// ``debug_propagation_edges``).
    #[getter]
    fn debug_edges(&self) -> Vec<(u32, AxisEdgesW)> {
        let Some(d) = &self.out().debug else { return Vec::new() };
        d.op_edges.iter().map(|(op, m)| (*op, axis_edges_w(m))).collect()
    }

    /// ``(func op, [per result: [(axis, [edge, ...]), ...]])``: the propagation edges of
    /// each function result (with ``debug_propagation_edges``; Shardy records them all under
    /// result 0).
    #[getter]
    fn debug_func_result_edges(&self) -> Vec<(u32, Vec<AxisEdgesW>)> {
        let Some(d) = &self.out().debug else { return Vec::new() };
        d.func_result_edges.iter().map(|(f, rs)| (*f, rs.iter().map(axis_edges_w).collect())).collect()
    }

    /// ``(op, name)``: Shardy's ``sdy.sharding_origin_name`` of each sharding constraint and
    /// manual computation (with ``debug_sharding_origins``).
    #[getter]
    fn debug_origin_names(&self) -> Vec<(u32, String)> {
        self.out().debug.as_ref().map(|d| d.origin_names.clone()).unwrap_or_default()
    }

    /// ``(value, axis)``: axes propagated from a tensor without a recorded origin for them
    /// (Shardy's behaviour is undefined there; nothing is recorded).
    #[getter]
    fn debug_missing_origins(&self) -> Vec<(u32, PyAxis)> {
        let Some(d) = &self.out().debug else { return Vec::new() };
        d.missing_origins.iter().map(|(v, a)| (*v, PyAxis(a.clone()))).collect()
    }

    /// Each propagation step (with ``debug_explain``).
    #[getter]
    fn debug_steps(&self) -> Vec<PyStep> {
        let Some(d) = &self.out().debug else { return Vec::new() };
        d.steps.iter().map(PyStep::of).collect()
    }

    /// Each axis moved at each step (with ``debug_explain``).
    #[getter]
    fn debug_hops(&self) -> Vec<PyHop> {
        let Some(d) = &self.out().debug else { return Vec::new() };
        d.hops.iter().map(PyHop::of).collect()
    }

    /// The axes dropped by conflicts, each at its last visit (with ``debug_explain``).
    #[getter]
    fn debug_conflicts(&self) -> Vec<PyConflict> {
        let Some(d) = &self.out().debug else { return Vec::new() };
        d.conflicts.iter().map(PyConflict::of).collect()
    }

    /// The number the next propagation step would get (``debug_first_step`` plus the steps
    /// taken); ``None`` without debugging records.
    #[getter]
    fn debug_next_step(&self) -> Option<i64> {
        self.out().debug.as_ref().map(|d| d.next_step)
    }
}

/// The ``sdy.sharding_origins`` dictionary text of ``[(axis, origin text), ...]`` as MLIR
/// prints it (sorted by key, keys without the axis names' quotes).
#[pyfunction]
fn sharding_origins_text(entries: Vec<(PyAxis, String)>) -> String {
    let entries: Vec<(AxisRef, String)> = entries.into_iter().map(|(a, o)| (a.0, o)).collect();
    origins_dict_text(&entries)
}

/// The ``#sdy.propagation_edges<...>`` text of ``[(axis, [edge, ...]), ...]`` as Shardy builds
/// and prints it; ``None`` when there is no edge.
#[pyfunction]
fn propagation_edges_text(entries: AxisEdgesW) -> Option<String> {
    let entries: Vec<_> = entries.into_iter().map(|(a, es)| (a.0, es.into_iter().map(|e| e.0).collect())).collect();
    edges_text(&entries)
}

fn shardings_of(ws: Vec<Option<PySharding>>) -> Vec<Option<TensorSharding>> {
    ws.into_iter().map(repr::sharding).collect()
}

/// The facts of a frozen program that the solver takes besides its graph (Shardy reads them
/// from op attributes and the symbol table; `crate::propagation::program::ProgramFacts`), for
/// one frozen program. Every index is an op or value index of the graph.
///
/// Errors: `InvalidShardingError` (rule `propagation-bad-direction`) for a barrier direction
/// other than `"NONE"`, `"FORWARD"`, `"BACKWARD"` or `"BOTH"`.
#[pyclass(frozen, module = "shardwise._native", name = "ProgramFacts")]
pub struct PyProgramFacts {
    inner: ProgramFacts,
}

#[pymethods]
impl PyProgramFacts {
    #[new]
    #[pyo3(signature = (
        *, main_func=None, callees=vec![], symbol_users=vec![], manual_axes=vec![], sharding_groups=vec![],
        barrier_directions=vec![], side_effecting_ops=vec![], offload_ops=vec![], non_tensor_values=vec![],
        forward_use_order_values=vec![]
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        main_func: Option<u32>,
        callees: Vec<(u32, u32)>,
        symbol_users: Vec<u32>,
        manual_axes: Vec<(u32, Vec<String>)>,
        sharding_groups: Vec<(u32, i64)>,
        barrier_directions: Vec<(u32, String)>,
        side_effecting_ops: Vec<u32>,
        offload_ops: Vec<u32>,
        non_tensor_values: Vec<u32>,
        forward_use_order_values: Vec<u32>,
    ) -> PyResult<Self> {
        let barrier_directions = barrier_directions
            .into_iter()
            .map(|(op, d)| Ok((op, direction_from_name(&d)?)))
            .collect::<Result<Vec<_>, Error>>()
            .py(py)?;
        Ok(PyProgramFacts {
            inner: ProgramFacts {
                main_func,
                callees,
                symbol_users,
                manual_axes,
                sharding_groups,
                barrier_directions,
                side_effecting_ops,
                offload_ops,
                non_tensor_values,
                forward_use_order_values,
            },
        })
    }
}

/// How to propagate: one of Shardy's four propagation passes with its options
/// (`crate::propagation::layers::PassOptions`), and what to record while doing so
/// (`crate::propagation::debug::DebugOptions`: Shardy's `debug-sharding-origins` and
/// `debug-propagation-edge-sharding`, and the records of `shardwise.explain`).
///
/// Errors: `ValueError` for a pass other than `"basic"`, `"aggressive"`, `"op-priority"` or
/// `"user-priority"`, or a strategy other than `"basic"`, `"aggressive"` or
/// `"basic-then-aggressive"`.
#[pyclass(frozen, module = "shardwise._native", name = "PropagationOptions")]
pub struct PyPropagationOptions {
    pass: PassOptions,
    debug: Option<DebugOptions>,
}

#[pymethods]
impl PyPropagationOptions {
    #[new]
    #[pyo3(signature = (
        *, pass_name="basic", strategy="aggressive", conservative=false, run_op_priority=true,
        debug_sharding_origins=false, debug_propagation_edges=false, debug_first_step=0, debug_skip_ops=vec![],
        debug_explain=false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        pass_name: &str,
        strategy: &str,
        conservative: bool,
        run_op_priority: bool,
        debug_sharding_origins: bool,
        debug_propagation_edges: bool,
        debug_first_step: i64,
        debug_skip_ops: Vec<u32>,
        debug_explain: bool,
    ) -> PyResult<Self> {
        let pass = Pass::from_name(pass_name).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "unknown propagation pass {pass_name:?}; expected \"basic\", \"aggressive\", \"op-priority\" or \"user-priority\""
            ))
        })?;
        let strategy = StrategyKind::from_name(strategy).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "unknown propagation strategy {strategy:?}; expected \"basic\", \"aggressive\" or \"basic-then-aggressive\""
            ))
        })?;
        let debug = (debug_sharding_origins || debug_propagation_edges || debug_explain).then_some(DebugOptions {
            origins: debug_sharding_origins,
            edges: debug_propagation_edges,
            first_step: debug_first_step,
            skip_ops: debug_skip_ops,
            explain: debug_explain,
        });
        Ok(PyPropagationOptions { pass: PassOptions { pass, strategy, conservative, run_op_priority }, debug })
    }
}

/// The solver input of `propagate_shardings`' and `CandidateBatch`'s arguments.
fn solver_input(
    meshes: HashMap<String, PyMesh>,
    shardings: Vec<Option<PySharding>>,
    func_results: FuncResultsW,
    facts: &PyProgramFacts,
    options: &PyPropagationOptions,
) -> SolverInput {
    let meshes = repr::meshes(meshes);
    let value_shardings = shardings_of(shardings);
    let func_results = func_results.into_iter().map(|(f, rs)| (f, shardings_of(rs))).collect();
    SolverInput { meshes, value_shardings, func_results, facts: facts.inner.clone(), debug: options.debug.clone() }
}

/// Runs the propagation pass of `options` over `graph`, from the stored `shardings` (one per
/// value of the graph, `None` for none) and `func_results` (`(func op, one sharding per
/// result)`), with the program's `facts`; see `shardwise.propagation` for the meaning of each
/// option. The GIL is released while the solver runs.
#[pyfunction]
fn propagate_shardings(
    py: Python<'_>,
    graph: &Bound<'_, PyGraph>,
    meshes: HashMap<String, PyMesh>,
    shardings: Vec<Option<PySharding>>,
    func_results: FuncResultsW,
    facts: &Bound<'_, PyProgramFacts>,
    options: &Bound<'_, PyPropagationOptions>,
) -> PyResult<PyPropagationResult> {
    let options = options.get();
    let input = solver_input(meshes, shardings, func_results, facts.get(), options);
    let pass = options.pass;
    let g = graph.get().inner.clone();
    let out = py.detach(|| propagate(&g, input, &pass)).py(py)?;
    Ok(PyPropagationResult { held: Held::Full(out) })
}

/// One candidate of a `CandidateBatch` (`crate::propagation::batch::Candidate`): the stored
/// shardings it replaces, `values` as `(value, sharding)` and `func_results` as `(func op,
/// result index, sharding)`; `None` removes the stored sharding.
#[pyclass(frozen, from_py_object, module = "shardwise._native", name = "Candidate")]
#[derive(Clone)]
pub struct PyCandidate(Candidate);

#[pymethods]
impl PyCandidate {
    #[new]
    #[pyo3(signature = (values=vec![], func_results=vec![]))]
    fn new(values: Vec<(u32, Option<PySharding>)>, func_results: Vec<(u32, usize, Option<PySharding>)>) -> Self {
        PyCandidate(Candidate {
            values: values.into_iter().map(|(v, s)| (v, repr::sharding(s))).collect(),
            func_results: func_results.into_iter().map(|(f, i, s)| (f, i, repr::sharding(s))).collect(),
        })
    }

    #[getter]
    fn values(&self) -> Vec<(u32, Option<PySharding>)> {
        self.0.values.iter().map(|(v, s)| (*v, repr::sharding_object(s))).collect()
    }

    #[getter]
    fn func_results(&self) -> Vec<(u32, usize, Option<PySharding>)> {
        self.0.func_results.iter().map(|(f, i, s)| (*f, *i, repr::sharding_object(s))).collect()
    }
}

/// One program propagated with many candidate sets, call after call (a sharding search's
/// what-if evaluations; `rust/src/propagation/batch.rs`): the base input (the arguments of
/// `propagate_shardings`) is solved once, at construction, and `propagate(candidates,
/// threads)` gives one result per candidate (a `Candidate`), each identical to
/// `propagate_shardings` with the candidate's overrides of the stored shardings. What each worker thread computed is kept from call
/// to call and replayed where it recurs (results are unchanged by it).
#[pyclass(frozen, module = "shardwise._native", name = "CandidateBatch")]
pub struct PyCandidateBatch {
    inner: CandidateBatch,
}

#[pymethods]
impl PyCandidateBatch {
    /// Errors: `ValueError` when `options` asks for debugging records (a batch keeps none).
    #[new]
    fn new(
        py: Python<'_>,
        graph: &Bound<'_, PyGraph>,
        meshes: HashMap<String, PyMesh>,
        shardings: Vec<Option<PySharding>>,
        func_results: FuncResultsW,
        facts: &Bound<'_, PyProgramFacts>,
        options: &Bound<'_, PyPropagationOptions>,
    ) -> PyResult<Self> {
        let options = options.get();
        if options.debug.is_some() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "CandidateBatch: expected propagation options without debugging records, got options with debug_* set",
            ));
        }
        let input = solver_input(meshes, shardings, func_results, facts.get(), options);
        let pass = options.pass;
        let g = graph.get().inner.clone();
        let inner = py.detach(|| CandidateBatch::new(g, input, pass)).py(py)?;
        Ok(PyCandidateBatch { inner })
    }

    /// One result per candidate, on `threads` worker threads with the GIL released.
    #[pyo3(signature = (candidates, threads=1))]
    fn propagate(
        &self,
        py: Python<'_>,
        candidates: Vec<PyCandidate>,
        threads: usize,
    ) -> PyResult<Vec<PyPropagationResult>> {
        let candidates: Vec<Candidate> = candidates.into_iter().map(|c| c.0).collect();
        let outs = py.detach(|| self.inner.propagate(&candidates, threads));
        outs.into_iter().map(|r| r.py(py).map(|c| PyPropagationResult { held: Held::Candidate(c) })).collect()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPropagationResult>()?;
    m.add_class::<PyCandidateBatch>()?;
    m.add_class::<PyCandidate>()?;
    m.add_class::<PyProgramFacts>()?;
    m.add_class::<PyPropagationOptions>()?;
    m.add_function(wrap_pyfunction!(propagate_shardings, m)?)?;
    m.add_function(wrap_pyfunction!(sharding_origins_text, m)?)?;
    m.add_function(wrap_pyfunction!(propagation_edges_text, m)?)?;
    Ok(())
}
