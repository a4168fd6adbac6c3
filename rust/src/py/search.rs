//! Bindings of `search`: the local-search solver, the Lagrangian memory prices, the lower
//! bound and the forbidden components of a strategy graph (`StrategyGraph`, converted once and
//! passed by reference), each result a frozen class with named fields.

use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

use super::errors::IntoPyResult;
use crate::search::iopddl::parse_instance;
use crate::search::{
    deadline_after, forbidden_components, lagrange_prices, lower_bound, request_stop, solve_local, LocalOptions,
    StrategyGraph,
};

/// A strategy graph (`crate::search::StrategyGraph`), converted once from the arrays of
/// `shardwise.search.StrategyGraph` (`shardwise.search.local.native_graph`, which keeps it
/// with the graph) and then handed to every search by reference: `offsets`, `intervals`,
/// `edges`, `edge_offsets` and `usage_limit` as in `StrategyGraph`, the int64 arrays `cost`,
/// `usage` and `edge_cost` as little-endian bytes (numpy's `astype("<i8").tobytes()`).
/// Building it checks only that those buffers hold whole int64s (`ValueError`); the searches
/// check the graph itself (`InvalidShardingError`, rule `strategy-graph`).
#[pyclass(frozen, module = "shardwise._native", name = "StrategyGraph")]
pub struct PyStrategyGraph(StrategyGraph);

#[pymethods]
impl PyStrategyGraph {
    #[new]
    #[pyo3(signature = (offsets, cost, usage, intervals, edges, edge_offsets, edge_cost, usage_limit=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        offsets: Vec<usize>,
        cost: PyBackedBytes,
        usage: PyBackedBytes,
        intervals: Vec<(i64, i64)>,
        edges: Vec<(usize, usize)>,
        edge_offsets: Vec<usize>,
        edge_cost: PyBackedBytes,
        usage_limit: Option<i64>,
    ) -> PyResult<Self> {
        Ok(PyStrategyGraph(StrategyGraph {
            offsets,
            cost: int64s("cost", &cost)?,
            usage: int64s("usage", &usage)?,
            intervals,
            edges,
            edge_offsets,
            edge_cost: int64s("edge_cost", &edge_cost)?,
            usage_limit,
        }))
    }

    #[getter]
    fn num_nodes(&self) -> usize {
        self.0.intervals.len()
    }

    #[getter]
    fn num_edges(&self) -> usize {
        self.0.edges.len()
    }

    #[getter]
    fn usage_limit(&self) -> Option<i64> {
        self.0.usage_limit
    }
}

/// An IOPDDL instance read by [`read_iopddl`]: its `name`, its `graph` (the searches'
/// `StrategyGraph`, so that `shardwise.search.local.native_graph` need not convert it again)
/// and that graph's arrays as `shardwise.search.StrategyGraph` holds them, each as
/// little-endian int64 bytes (`numpy.frombuffer(b, "<i8")`): `offsets` (n + 1), `cost` and
/// `usage` (one per strategy), `intervals` (n × 2), `edges` (m × 2), `edge_offsets` (m + 1),
/// `edge_cost`.
#[pyclass(frozen, module = "shardwise._native", name = "IopddlInstance")]
pub struct PyIopddlInstance {
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    graph: Py<PyStrategyGraph>,
}

fn le_bytes<'py>(py: Python<'py>, values: impl Iterator<Item = i64>) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &values.flat_map(i64::to_le_bytes).collect::<Vec<u8>>())
}

#[pymethods]
impl PyIopddlInstance {
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        le_bytes(py, self.graph.get().0.offsets.iter().map(|&x| x as i64))
    }

    #[getter]
    fn cost<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        le_bytes(py, self.graph.get().0.cost.iter().copied())
    }

    #[getter]
    fn usage<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        le_bytes(py, self.graph.get().0.usage.iter().copied())
    }

    #[getter]
    fn intervals<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        le_bytes(py, self.graph.get().0.intervals.iter().flat_map(|&(a, b)| [a, b]))
    }

    #[getter]
    fn edges<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        le_bytes(py, self.graph.get().0.edges.iter().flat_map(|&(a, b)| [a as i64, b as i64]))
    }

    #[getter]
    fn edge_offsets<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        le_bytes(py, self.graph.get().0.edge_offsets.iter().map(|&x| x as i64))
    }

    #[getter]
    fn edge_cost<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        le_bytes(py, self.graph.get().0.edge_cost.iter().copied())
    }
}

/// The IOPDDL instance in `json` (UTF-8 JSON text, already decompressed), read with the GIL
/// released (`crate::search::iopddl`), or `None` when it is not a well-formed instance: the
/// caller (`shardwise.search.read_instance`) then reads it in Python to name the fault.
#[pyfunction]
fn read_iopddl(py: Python<'_>, json: PyBackedBytes) -> PyResult<Option<PyIopddlInstance>> {
    let text: &[u8] = &json;
    let Some(found) = py.detach(|| parse_instance(text)) else {
        return Ok(None);
    };
    Ok(Some(PyIopddlInstance { name: found.name, graph: Py::new(py, PyStrategyGraph(found.graph))? }))
}

/// `time_limit` seconds as a `Duration`; a limit beyond what a `Duration` holds becomes the
/// longest one (the searches then run until their own end, as without a limit).
fn seconds(time_limit: f64) -> PyResult<Duration> {
    if time_limit.is_finite() && time_limit >= 0.0 {
        return Ok(Duration::try_from_secs_f64(time_limit).unwrap_or(Duration::MAX));
    }
    Err(PyValueError::new_err(format!("time_limit: expected a finite number of seconds >= 0, got {time_limit}")))
}

/// What a local search found (`crate::search::LocalResult`): one strategy per node
/// (`assignment`), its `cost` and `peak_usage`, whether it fits the usage limit (`feasible`),
/// the `rounds` run and the `improvements` made.
#[pyclass(frozen, get_all, module = "shardwise._native", name = "LocalResult")]
pub struct PyLocalResult {
    assignment: Vec<usize>,
    cost: i128,
    peak_usage: i128,
    feasible: bool,
    rounds: u64,
    improvements: u64,
}

/// Lagrangian memory prices (`crate::search::lagrange_prices`): per node, a price per usage
/// unit (`prices`), and the overflow of the priced assignment as a share of the usage limit
/// (`overflow`; <= 0: it fitted), and the cycles run (`cycles`).
#[pyclass(frozen, get_all, module = "shardwise._native", name = "MemoryPrices")]
pub struct PyMemoryPrices {
    prices: Vec<f64>,
    overflow: f64,
    cycles: u64,
}

/// Little-endian int64 values from a bytes buffer (numpy's `astype("<i8").tobytes()`).
fn int64s(name: &str, b: &[u8]) -> PyResult<Vec<i64>> {
    if b.len() % 8 != 0 {
        return Err(PyValueError::new_err(format!(
            "{name}: expected little-endian int64 bytes (a multiple of 8), got {} bytes",
            b.len()
        )));
    }
    Ok(b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("chunk of 8"))).collect())
}

/// Local search (`rust/src/search/local.rs`) with the GIL released; `time_limit` in seconds.
#[pyfunction]
#[pyo3(signature = (graph, time_limit, seed=0, initial=None, max_rounds=None, lagrange_share=0.8))]
fn search_local(
    py: Python<'_>,
    graph: &PyStrategyGraph,
    time_limit: f64,
    seed: u64,
    initial: Option<Vec<usize>>,
    max_rounds: Option<u64>,
    lagrange_share: f64,
) -> PyResult<PyLocalResult> {
    let time_limit = seconds(time_limit)?;
    if !(0.0..=1.0).contains(&lagrange_share) {
        return Err(PyValueError::new_err(format!(
            "lagrange_share: expected a share of the time limit in [0, 1], got {lagrange_share}"
        )));
    }
    let g = &graph.0;
    let options = LocalOptions { time_limit, seed, initial, max_rounds, lagrange_share };
    let r = py.detach(|| solve_local(g, &options)).py(py)?;
    Ok(PyLocalResult {
        assignment: r.assignment,
        cost: r.cost,
        peak_usage: r.peak_usage,
        feasible: r.feasible,
        rounds: r.rounds,
        improvements: r.improvements,
    })
}

/// Lagrangian memory prices (`rust/src/search/lagrange.rs`, `lagrange_prices`) with the GIL
/// released: `(price per usage unit per node, overflow share)`, or `None` without a usage limit.
#[pyfunction]
#[pyo3(signature = (graph, time_limit, seed=0, max_cycles=None))]
fn search_prices(
    py: Python<'_>,
    graph: &PyStrategyGraph,
    time_limit: f64,
    seed: u64,
    max_cycles: Option<u64>,
) -> PyResult<Option<PyMemoryPrices>> {
    let limit = seconds(time_limit)?;
    let g = &graph.0;
    let deadline = deadline_after(Instant::now(), limit);
    let r = py.detach(|| lagrange_prices(g, deadline, max_cycles, seed)).py(py)?;
    Ok(r.map(|m| PyMemoryPrices { prices: m.prices, overflow: m.overflow, cycles: m.cycles }))
}

/// A lower bound of a strategy graph's optimum (`crate::search::LowerBound`), as Python sees it.
#[pyclass(frozen, get_all, module = "shardwise._native", name = "LowerBound")]
pub struct PyLowerBound {
    /// No assignment within the usage limit costs less.
    bound: i128,
    /// The bound of the rounds with the memory prices at zero.
    unpriced: i128,
    /// Spanning forests the edges were split into.
    forests: usize,
    /// Subgradient rounds run.
    rounds: u64,
    /// The relaxation's choices at the best bound, one strategy per node.
    assignment: Vec<usize>,
}

/// A lower bound of the graph's optimum (`rust/src/search/bound.rs`, `lower_bound`) with the
/// GIL released; `time_limit` in seconds, `target` the cost of a known answer.
#[pyfunction]
#[pyo3(signature = (graph, time_limit, target=None, max_rounds=None))]
fn search_bound(
    py: Python<'_>,
    graph: &PyStrategyGraph,
    time_limit: f64,
    target: Option<i128>,
    max_rounds: Option<u64>,
) -> PyResult<PyLowerBound> {
    let limit = seconds(time_limit)?;
    let g = &graph.0;
    let deadline = deadline_after(Instant::now(), limit);
    let b = py.detach(|| lower_bound(g, deadline, max_rounds, target)).py(py)?;
    Ok(PyLowerBound {
        bound: b.bound,
        unpriced: b.unpriced,
        forests: b.forests,
        rounds: b.rounds,
        assignment: b.assignment,
    })
}

/// A forbidden component of a strategy graph (`crate::search::Component`): nodes joined by
/// edges with forbidden entries, and the joint assignments that avoid them.
#[pyclass(frozen, get_all, module = "shardwise._native", name = "ForbiddenComponent")]
pub struct PyForbiddenComponent {
    /// The component's nodes.
    nodes: Vec<usize>,
    /// Its joint assignments, row-major: `count` rows of one strategy per node of `nodes`.
    joints: Vec<usize>,
    /// Number of joint assignments.
    count: usize,
}

/// The forbidden components of the graph with 2 to 256 joint assignments
/// (`rust/src/search/components.rs`), the GIL released.
#[pyfunction]
fn search_components(py: Python<'_>, graph: &PyStrategyGraph) -> PyResult<Vec<PyForbiddenComponent>> {
    let g = &graph.0;
    let comps = py.detach(|| forbidden_components(g)).py(py)?;
    Ok(comps.into_iter().map(|c| PyForbiddenComponent { count: c.count(), nodes: c.nodes, joints: c.joints }).collect())
}

/// With `true`, makes every running local search and price search of the process stop at its
/// next deadline check and return its best answer (`crate::search::request_stop`); with
/// `false`, lets searches run to their time limits again.
#[pyfunction]
fn search_stop(stop: bool) {
    request_stop(stop);
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStrategyGraph>()?;
    m.add_class::<PyIopddlInstance>()?;
    m.add_function(wrap_pyfunction!(read_iopddl, m)?)?;
    m.add_class::<PyLocalResult>()?;
    m.add_class::<PyMemoryPrices>()?;
    m.add_function(wrap_pyfunction!(search_local, m)?)?;
    m.add_function(wrap_pyfunction!(search_prices, m)?)?;
    m.add_function(wrap_pyfunction!(search_stop, m)?)?;
    m.add_function(wrap_pyfunction!(search_bound, m)?)?;
    m.add_class::<PyLowerBound>()?;
    m.add_function(wrap_pyfunction!(search_components, m)?)?;
    m.add_class::<PyForbiddenComponent>()?;
    Ok(())
}
