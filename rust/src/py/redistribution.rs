//! Bindings of `redistribution`: plans as tuples of steps (built into `ReshardPlan` by
//! `shardwise/spmd/redistribute.py`; axes and shardings as the objects of `repr.rs`) and the
//! collective cost function.

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use super::repr::{axis_objects, PyAxis, PyMesh, PySharding};
use crate::redistribution::{self, Collective, CollectiveKind, CostModel, Link};

/// `(default (bandwidth, latency), [(axis name, bandwidth, latency), ...])`.
type ModelW = ((f64, f64), Vec<(String, f64, f64)>);

/// One step: `(kind, per-dim axes, axes, src_dim, tgt_dim, reduction, out sharding, bytes,
/// seconds, text)`; `per-dim axes` for all_gather / all_slice / reduce_scatter, `axes` for
/// all_to_all / collective_permute / all_reduce.
type StepW =
    (String, Vec<Vec<PyAxis>>, Vec<PyAxis>, Option<usize>, Option<usize>, Option<String>, PySharding, f64, f64, String);

/// `(steps, bytes, seconds, naive_bytes, naive_seconds)`.
type PlanW = (Vec<StepW>, f64, f64, f64, f64);

fn model_of(py: Python<'_>, m: ModelW) -> PyResult<CostModel> {
    let ((bw, lat), axes) = m;
    let mut model = CostModel::uniform(Link::new(bw, lat).py(py)?);
    for (name, bw, lat) in axes {
        let link = Link::new(bw, lat).map_err(|e| e.context(format!("axis \"{name}\""))).py(py)?;
        model = model.with_axis(name, link);
    }
    Ok(model)
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

fn list(axes: &[crate::axis::AxisRef]) -> Vec<PyAxis> {
    axis_objects(axes)
}

fn lists(axes: &[Vec<crate::axis::AxisRef>]) -> Vec<Vec<PyAxis>> {
    axes.iter().map(|a| list(a)).collect()
}

/// Plans the redistribution of a tensor from `src` to `tgt` (see `redistribution::plan`).
#[pyfunction]
fn redistribution_plan(
    py: Python<'_>,
    mesh: &PyMesh,
    shape: Vec<i64>,
    dtype_bytes: i64,
    src: &PySharding,
    tgt: &PySharding,
    model: ModelW,
) -> PyResult<PlanW> {
    let (mesh, src, tgt) = (&mesh.0, &src.0, &tgt.0);
    let model = model_of(py, model)?;
    let p = py.detach(|| redistribution::plan(mesh, &shape, dtype_bytes, src, tgt, &model)).py(py)?;
    let steps = p
        .steps
        .iter()
        .map(|s| {
            let (per_dim, axes, sd, td, red) = match &s.op {
                Collective::AllGather { axes } | Collective::AllSlice { axes } => {
                    (lists(axes), vec![], None, None, None)
                }
                Collective::ReduceScatter { axes, reduction } => {
                    (lists(axes), vec![], None, None, Some(reduction.name().to_string()))
                }
                Collective::AllToAll { src_dim, tgt_dim, axes } => {
                    (vec![], list(axes), Some(*src_dim), Some(*tgt_dim), None)
                }
                Collective::CollectivePermute { axes } => (vec![], list(axes), None, None, None),
                Collective::AllReduce { axes, reduction } => {
                    (vec![], list(axes), None, None, Some(reduction.name().to_string()))
                }
            };
            (
                s.op.kind().name().to_string(),
                per_dim,
                axes,
                sd,
                td,
                red,
                PySharding(s.out.clone()),
                s.bytes,
                s.seconds,
                s.text(),
            )
        })
        .collect();
    Ok((steps, p.bytes, p.seconds, p.naive_bytes, p.naive_seconds))
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
    model: ModelW,
) -> PyResult<(f64, f64)> {
    let kind = kind_of(kind)?;
    if !(local_bytes.is_finite() && local_bytes >= 0.0) {
        return Err(super::errors::ShardwiseError::new_err(format!(
            "local_bytes must be a finite number >= 0, got {local_bytes}"
        )));
    }
    let mesh = &mesh.0;
    let resolved = model_of(py, model)?.resolve(mesh).py(py)?;
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
    m.add_function(wrap_pyfunction!(redistribution_plan, m)?)?;
    m.add_function(wrap_pyfunction!(collective_cost, m)?)?;
    Ok(())
}
