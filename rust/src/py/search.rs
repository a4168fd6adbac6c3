//! Bindings of `search`: the local-search solver on a strategy graph in flat arrays.

use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::errors::IntoPyResult;
use crate::search::{solve_local, LocalOptions, StrategyGraph};

/// `(assignment, cost, peak_usage, feasible, rounds, improvements)`.
type LocalW = (Vec<usize>, i128, i128, bool, u64, u64);

/// Little-endian int64 values from a bytes buffer (numpy's `astype("<i8").tobytes()`).
fn int64s(name: &str, b: &[u8]) -> PyResult<Vec<i64>> {
    if b.len() % 8 != 0 {
        return Err(PyValueError::new_err(format!("{name}: expected little-endian int64 bytes (a multiple of 8), got {} bytes", b.len())));
    }
    Ok(b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("chunk of 8"))).collect())
}

/// Local search (`rust/src/search/local.rs`) with the GIL released. Arrays as in
/// `StrategyGraph`, the int64 ones as little-endian bytes; `time_limit` in seconds.
#[pyfunction]
#[pyo3(signature = (offsets, cost, usage, intervals, edges, edge_offsets, edge_cost, usage_limit, time_limit, seed=0, initial=None, max_rounds=None, lagrange_share=0.8))]
#[allow(clippy::too_many_arguments)]
fn search_local(
    py: Python<'_>,
    offsets: Vec<usize>,
    cost: &[u8],
    usage: &[u8],
    intervals: Vec<(i64, i64)>,
    edges: Vec<(usize, usize)>,
    edge_offsets: Vec<usize>,
    edge_cost: &[u8],
    usage_limit: Option<i64>,
    time_limit: f64,
    seed: u64,
    initial: Option<Vec<usize>>,
    max_rounds: Option<u64>,
    lagrange_share: f64,
) -> PyResult<LocalW> {
    if !(time_limit.is_finite() && time_limit >= 0.0) {
        return Err(PyValueError::new_err(format!("time_limit: expected a finite number of seconds >= 0, got {time_limit}")));
    }
    if !(0.0..=1.0).contains(&lagrange_share) {
        return Err(PyValueError::new_err(format!("lagrange_share: expected a share of the time limit in [0, 1], got {lagrange_share}")));
    }
    let cost = int64s("cost", cost)?;
    let usage = int64s("usage", usage)?;
    let edge_cost = int64s("edge_cost", edge_cost)?;
    let g = StrategyGraph { offsets, cost, usage, intervals, edges, edge_offsets, edge_cost, usage_limit };
    let options = LocalOptions { time_limit: Duration::from_secs_f64(time_limit), seed, initial, max_rounds, lagrange_share };
    let r = py.detach(|| solve_local(&g, &options)).py(py)?;
    Ok((r.assignment, r.cost, r.peak_usage, r.feasible, r.rounds, r.improvements))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(search_local, m)?)?;
    Ok(())
}
