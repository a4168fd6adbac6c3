//! Bindings of Shardy's axis-list helpers (`propagation::axes`), which
//! `shardwise.sharding` uses. Axes and meshes cross in the plain-tuple forms of `wire.rs`.

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use super::wire::{AxisW, MeshW};
use crate::axis::AxisRef;

fn axes(ws: Vec<AxisW>) -> Vec<AxisRef> {
    ws.into_iter().map(AxisRef::from).collect()
}

fn axis_wires(axes: &[AxisRef]) -> Vec<AxisW> {
    axes.iter().map(AxisW::from).collect()
}

/// Shardy's `getAxisSetDiff`: the parts of `a` not in `b` (`propagation::axes::axis_set_diff`).
#[pyfunction]
fn axes_set_diff(py: Python<'_>, a: Vec<AxisW>, b: Vec<AxisW>, mesh: MeshW) -> PyResult<Vec<AxisW>> {
    let mesh = mesh.to_mesh().py(py)?;
    Ok(axis_wires(&crate::propagation::axes::axis_set_diff(&axes(a), &axes(b), &mesh).py(py)?))
}

/// Shardy's `sortAndMergeAxes`: mesh order, adjacent sub-axes merged.
#[pyfunction]
fn axes_sort_and_merge(py: Python<'_>, a: Vec<AxisW>, mesh: MeshW) -> PyResult<Vec<AxisW>> {
    let mesh = mesh.to_mesh().py(py)?;
    Ok(axis_wires(&crate::propagation::axes::sort_and_merge_axes(&axes(a), &mesh).py(py)?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(axes_set_diff, m)?)?;
    m.add_function(wrap_pyfunction!(axes_sort_and_merge, m)?)?;
    Ok(())
}
