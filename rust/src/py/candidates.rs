//! `NativeCandidates`: `shardwise.CandidateBatch` on a module still held as a Rust program
//! (`crate::transforms::propagation::candidates`), so that a search's what-if evaluations of
//! a loaded module never build the Python IR.

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use super::mlir::{failure, issue_warnings, run_program, NativeProgram};
use super::propagation::PyPropagationResult;
use super::repr::{self, PySharding};
use crate::transforms::propagation::candidates::{Annotation, ProgramCandidates};

/// One sharding set on @main (`crate::transforms::propagation::candidates::Annotation`): on
/// argument (`kind` `"arg"`) or result (`"result"`) `index`, `sharding` (`None` removes it).
/// Raises `ValueError` for another kind.
#[pyclass(frozen, from_py_object, eq, module = "shardwise._native", name = "Annotation")]
#[derive(Clone, PartialEq)]
pub struct PyAnnotation(Annotation);

#[pymethods]
impl PyAnnotation {
    #[new]
    fn new(kind: &str, index: usize, sharding: Option<PySharding>) -> PyResult<Self> {
        let result = match kind {
            "arg" => false,
            "result" => true,
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "unknown annotation kind {kind:?}; expected \"arg\" or \"result\""
                )))
            }
        };
        Ok(PyAnnotation(Annotation { result, index, sharding: repr::sharding(sharding) }))
    }

    #[getter]
    fn kind(&self) -> &'static str {
        if self.0.result {
            "result"
        } else {
            "arg"
        }
    }

    #[getter]
    fn index(&self) -> usize {
        self.0.index
    }

    #[getter]
    fn sharding(&self) -> Option<PySharding> {
        repr::sharding_object(&self.0.sharding)
    }
}

/// @main's argument and result shardings.
pub(super) type MainShardingsW = (Vec<Option<PySharding>>, Vec<Option<PySharding>>);

/// The core's annotations of their objects.
pub(super) fn annotations_of(ws: Vec<PyAnnotation>) -> Vec<Annotation> {
    ws.into_iter().map(|a| a.0).collect()
}

pub(super) fn sharding_objects(ss: Vec<Option<crate::sharding::TensorSharding>>) -> Vec<Option<PySharding>> {
    ss.into_iter().map(|s| s.map(PySharding)).collect()
}

/// A native program prepared for many candidate sets of @main's argument and result
/// shardings: `NativeCandidates(program, before, conservative)` runs the native steps
/// `before` (the pipeline's steps before propagation) on a copy, freezes it and solves it
/// once, with the GIL released, and issues the steps' warnings. Raises what the steps,
/// freezing and the solver raise, and `ProgramError` when there is no function to propagate.
#[pyclass(frozen, module = "shardwise._native")]
pub struct NativeCandidates {
    inner: ProgramCandidates,
}

#[pymethods]
impl NativeCandidates {
    #[new]
    fn new(
        py: Python<'_>,
        program: &Bound<'_, NativeProgram>,
        before: Vec<String>,
        conservative: bool,
    ) -> PyResult<Self> {
        let names: Vec<&str> = before.iter().map(String::as_str).collect();
        let p = &program.get().program;
        let (inner, warnings) = py.detach(|| ProgramCandidates::new(p, &names, conservative)).py(py)?;
        issue_warnings(py, warnings)?;
        Ok(NativeCandidates { inner })
    }

    /// One result per candidate (a list of annotations), solved on `threads` worker threads
    /// with the GIL released. Raises the first candidate's error (in order), `ProgramError`
    /// for an index @main does not have.
    #[pyo3(signature = (candidates, threads=1))]
    fn propagate(
        &self,
        py: Python<'_>,
        candidates: Vec<Vec<PyAnnotation>>,
        threads: usize,
    ) -> PyResult<Vec<PyPropagationResult>> {
        let candidates: Vec<Vec<Annotation>> = candidates.into_iter().map(annotations_of).collect();
        let outs = py.detach(|| self.inner.propagate(&candidates, threads));
        outs.into_iter().map(|r| r.py(py).map(PyPropagationResult::of_candidate)).collect()
    }

    /// @main's argument and result shardings after the solve of `result` (a result of
    /// `propagate`), open dimensions still open. Raises `ValueError` for another result.
    fn main_shardings(&self, result: &PyPropagationResult) -> PyResult<MainShardingsW> {
        let out = candidate_of(result)?;
        let (args, results) = self.inner.main_shardings(out);
        Ok((sharding_objects(args), sharding_objects(results)))
    }

    /// The candidate's propagated program: the prepared one with `annotations` set on @main,
    /// the solve `result` (of those annotations) written back and the native steps `after`
    /// run on it, verified, with the GIL released; the steps' warnings are issued. Raises
    /// `ValueError` for a result not of `propagate`, `ProgramError` when its sharding groups
    /// conflict (run the whole pipeline then), and what the steps and the verifier raise.
    fn materialize(
        &self,
        py: Python<'_>,
        annotations: Vec<PyAnnotation>,
        result: &PyPropagationResult,
        after: Vec<String>,
    ) -> PyResult<NativeProgram> {
        let annotations = annotations_of(annotations);
        let out = candidate_of(result)?;
        let names: Vec<&str> = after.iter().map(String::as_str).collect();
        let p = py.detach(|| self.inner.materialize(&annotations, out)).py(py)?;
        let (program, warnings) = py.detach(|| run_program(p, &names)).map_err(|f| failure(py, f))?;
        issue_warnings(py, warnings)?;
        Ok(NativeProgram { program })
    }
}

fn candidate_of(result: &PyPropagationResult) -> PyResult<&crate::propagation::CandidateOutput> {
    result.candidate().ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(
            "expected a result of NativeCandidates.propagate, got the result of a single propagation",
        )
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAnnotation>()?;
    m.add_class::<NativeCandidates>()
}
