//! Bindings of `redistribution`: the cost model (`Link`, `CostModel`), the plans the planner
//! returns (`ReshardPlan` of `ReshardStep`s, read by `shardwise/spmd/redistribute.py`; axes and
//! shardings as the objects of `repr.rs`) and the collective cost function. Each class is a
//! frozen wrapper of the core's type of the same meaning.

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use super::repr::{axis_objects, PyAxis, PyMesh, PySharding};
use crate::redistribution::{self, Collective, CollectiveKind, CostModel, Link, Plan, Step};

/// A mesh axis' links (`crate::redistribution::Link`): `bandwidth` in bytes per second and
/// `latency` α in seconds per message. Raises `InvalidShardingError` (rule `cost-model`)
/// unless the bandwidth is finite and > 0 and the latency finite and >= 0.
#[pyclass(frozen, from_py_object, eq, module = "shardwise._native", name = "Link")]
#[derive(Clone, PartialEq)]
pub struct PyLink(Link);

#[pymethods]
impl PyLink {
    #[new]
    fn new(py: Python<'_>, bandwidth: f64, latency: f64) -> PyResult<Self> {
        Ok(PyLink(Link::new(bandwidth, latency).py(py)?))
    }

    #[getter]
    fn bandwidth(&self) -> f64 {
        self.0.bandwidth
    }

    #[getter]
    fn latency(&self) -> f64 {
        self.0.latency
    }
}

/// Per-axis alpha-beta costs (`crate::redistribution::CostModel`): `default` for every axis,
/// `axes` overriding it by mesh axis name (a later entry for the same axis wins).
#[pyclass(frozen, eq, module = "shardwise._native", name = "CostModel")]
#[derive(PartialEq)]
pub struct PyCostModel(CostModel);

#[pymethods]
impl PyCostModel {
    #[new]
    #[pyo3(signature = (default, axes=vec![]))]
    fn new(default: PyLink, axes: Vec<(String, PyLink)>) -> Self {
        let mut model = CostModel::uniform(default.0);
        for (name, link) in axes {
            model = model.with_axis(name, link.0);
        }
        PyCostModel(model)
    }

    #[getter]
    fn default(&self) -> PyLink {
        PyLink(self.0.default)
    }

    /// The overrides, by mesh axis name, in the order they were given.
    #[getter]
    fn axes(&self) -> Vec<(String, PyLink)> {
        self.0.per_axis.iter().map(|(n, l)| (n.clone(), PyLink(*l))).collect()
    }
}

/// One collective of a plan (`crate::redistribution::Step`): `kind` (one of `all_gather`,
/// `all_slice`, `all_to_all`, `collective_permute`, `all_reduce`, `reduce_scatter`);
/// `dim_axes`, per tensor dimension, the axes gathered, sliced or reduce-scattered (empty for
/// the other kinds); `axes`, those moved by an all-to-all (from `src_dim` to `tgt_dim`),
/// reduced by an all-reduce or whose place changes in a collective-permute (empty for the
/// other kinds); `reduction` (`"sum"`, `"max"`, `"min"`) of an all-reduce or reduce-scatter;
/// `out`, the sharding after the step; `bytes` each device sends and `seconds` under the cost
/// model; `text`, Shardy's op syntax without operand and type.
#[pyclass(frozen, module = "shardwise._native", name = "ReshardStep")]
pub struct PyReshardStep(Step);

#[pymethods]
impl PyReshardStep {
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.op.kind().name()
    }

    #[getter]
    fn dim_axes(&self) -> Vec<Vec<PyAxis>> {
        match &self.0.op {
            Collective::AllGather { axes } | Collective::AllSlice { axes } | Collective::ReduceScatter { axes, .. } => {
                axes.iter().map(|a| axis_objects(a)).collect()
            }
            _ => Vec::new(),
        }
    }

    #[getter]
    fn axes(&self) -> Vec<PyAxis> {
        match &self.0.op {
            Collective::AllToAll { axes, .. }
            | Collective::CollectivePermute { axes }
            | Collective::AllReduce { axes, .. } => axis_objects(axes),
            _ => Vec::new(),
        }
    }

    #[getter]
    fn src_dim(&self) -> Option<usize> {
        match &self.0.op {
            Collective::AllToAll { src_dim, .. } => Some(*src_dim),
            _ => None,
        }
    }

    #[getter]
    fn tgt_dim(&self) -> Option<usize> {
        match &self.0.op {
            Collective::AllToAll { tgt_dim, .. } => Some(*tgt_dim),
            _ => None,
        }
    }

    #[getter]
    fn reduction(&self) -> Option<&'static str> {
        match &self.0.op {
            Collective::AllReduce { reduction, .. } | Collective::ReduceScatter { reduction, .. } => {
                Some(reduction.name())
            }
            _ => None,
        }
    }

    #[getter]
    fn out(&self) -> PySharding {
        PySharding(self.0.out.clone())
    }

    #[getter]
    fn bytes(&self) -> f64 {
        self.0.bytes
    }

    #[getter]
    fn seconds(&self) -> f64 {
        self.0.seconds
    }

    #[getter]
    fn text(&self) -> String {
        self.0.text()
    }
}

/// A redistribution plan (`crate::redistribution::Plan`): its `steps` in order, their totals
/// per device (`bytes`, `seconds`) and those of the naive plan (`naive_bytes`,
/// `naive_seconds`: reduce pending partial axes, gather everything, slice the target).
#[pyclass(frozen, module = "shardwise._native", name = "ReshardPlan")]
pub struct PyReshardPlan(Plan);

#[pymethods]
impl PyReshardPlan {
    #[getter]
    fn steps(&self) -> Vec<PyReshardStep> {
        self.0.steps.iter().cloned().map(PyReshardStep).collect()
    }

    #[getter]
    fn bytes(&self) -> f64 {
        self.0.bytes
    }

    #[getter]
    fn seconds(&self) -> f64 {
        self.0.seconds
    }

    #[getter]
    fn naive_bytes(&self) -> f64 {
        self.0.naive_bytes
    }

    #[getter]
    fn naive_seconds(&self) -> f64 {
        self.0.naive_seconds
    }
}

fn kind_of(name: &str) -> PyResult<CollectiveKind> {
    Ok(match name {
        "all_gather" => CollectiveKind::AllGather,
        "all_slice" => CollectiveKind::AllSlice,
        "all_to_all" => CollectiveKind::AllToAll,
        "collective_permute" => CollectiveKind::CollectivePermute,
        "all_reduce" => CollectiveKind::AllReduce,
        "reduce_scatter" => CollectiveKind::ReduceScatter,
        _ => {
            return Err(super::errors::ShardwiseError::new_err(format!(
                "unknown collective {name:?}; expected one of all_gather, all_slice, all_to_all, collective_permute, all_reduce, reduce_scatter"
            )))
        }
    })
}

/// Plans the redistribution of a tensor of `shape` (elements of `dtype_bytes` bytes) from
/// `src` to `tgt` on `mesh` under `model` (see `redistribution::plan`), the GIL released.
#[pyfunction]
fn redistribution_plan(
    py: Python<'_>,
    mesh: &PyMesh,
    shape: Vec<i64>,
    dtype_bytes: i64,
    src: &PySharding,
    tgt: &PySharding,
    model: &PyCostModel,
) -> PyResult<PyReshardPlan> {
    let (mesh, src, tgt, model) = (&mesh.0, &src.0, &tgt.0, &model.0);
    let p = py.detach(|| redistribution::plan(mesh, &shape, dtype_bytes, src, tgt, model)).py(py)?;
    Ok(PyReshardPlan(p))
}

/// `(bytes, seconds)` of collective `kind` over `axes` of `mesh` on a local buffer of
/// `local_bytes` per device (see `redistribution::cost`).
#[pyfunction]
fn collective_cost(
    py: Python<'_>,
    kind: &str,
    mesh: &PyMesh,
    axes: Vec<PyAxis>,
    local_bytes: f64,
    model: &PyCostModel,
) -> PyResult<(f64, f64)> {
    let kind = kind_of(kind)?;
    if !(local_bytes.is_finite() && local_bytes >= 0.0) {
        return Err(super::errors::ShardwiseError::new_err(format!(
            "local_bytes must be a finite number >= 0, got {local_bytes}"
        )));
    }
    let mesh = &mesh.0;
    let resolved = model.0.resolve(mesh).py(py)?;
    let mut group = Vec::with_capacity(axes.len());
    for a in axes {
        let r = a.0;
        r.check(mesh).py(py)?;
        let index = mesh.axis_index(&r.name).unwrap_or(0);
        group.push((index, r.size(mesh).py(py)?));
    }
    let c = resolved.cost(kind, &group, local_bytes);
    Ok((c.bytes, c.seconds))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLink>()?;
    m.add_class::<PyCostModel>()?;
    m.add_class::<PyReshardStep>()?;
    m.add_class::<PyReshardPlan>()?;
    m.add_function(wrap_pyfunction!(redistribution_plan, m)?)?;
    m.add_function(wrap_pyfunction!(collective_cost, m)?)?;
    Ok(())
}
