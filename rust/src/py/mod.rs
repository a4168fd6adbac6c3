//! PyO3 bindings: the private module `shardwise._native`. Only argument conversion and error
//! mapping live here; every rule is in the core modules.

mod candidates;
mod errors;
mod graph;
mod mlir;
mod propagation;
mod records;
mod redistribution;
mod registry;

mod repr;
mod rule;
mod search;
mod walk;

/// The extension module allocates through mimalloc (see Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use pyo3::prelude::*;

use crate::convert;
use crate::text;
use errors::IntoPyResult;
use repr::{PyMesh, PySharding};

/// An MLIR string literal, escaped as MLIR prints it.
#[pyfunction]
fn mlir_quote(s: &str) -> String {
    let mut out = String::new();
    text::print_string(s, &mut out);
    out
}

/// The value of an MLIR string literal.
#[pyfunction]
fn mlir_unquote(py: Python<'_>, s: &str) -> PyResult<String> {
    text::parse_string(s).py(py)
}

/// XLA HLO sharding text of a sharding on `mesh` (see `convert::hlo`).
#[pyfunction]
fn to_hlo_sharding(py: Python<'_>, sharding: &PySharding, mesh: &PyMesh) -> PyResult<String> {
    // Meshes of many devices make this long (explicit device lists): release the GIL.
    py.detach(|| convert::hlo::to_hlo(&sharding.0, &mesh.0)).py(py)
}

/// Parses an XLA HLO sharding for a tensor of `rank`; onto `mesh` when given, else onto a mesh
/// derived from the tile assignment. Returns the sharding (named `mesh_name`, or inlined when
/// `mesh_name` is None) and the mesh.
#[pyfunction]
#[pyo3(signature = (text, rank, mesh=None, mesh_name=None))]
fn from_hlo_sharding(
    py: Python<'_>,
    text: &str,
    rank: usize,
    mesh: Option<&PyMesh>,
    mesh_name: Option<String>,
) -> PyResult<(PySharding, PyMesh)> {
    let mesh = mesh.map(|m| &m.0);
    let (t, m) = py.detach(|| convert::hlo::from_hlo(text, rank, mesh, mesh_name)).py(py)?;
    Ok((PySharding(t), PyMesh(m)))
}

/// MindSpore tensor layout `(device_matrix, tensor_map)` of a sharding on `mesh`.
#[pyfunction]
fn to_mindspore_layout(py: Python<'_>, sharding: &PySharding, mesh: &PyMesh) -> PyResult<(Vec<i64>, Vec<Vec<i64>>)> {
    convert::mindspore::to_layout(&sharding.0, &mesh.0).py(py)
}

/// A sharding from a MindSpore layout; onto `mesh` when given (the device matrix must refine
/// its axes), else onto a mesh with one axis per device-matrix dimension named `axis_names`.
#[pyfunction]
#[pyo3(signature = (device_matrix, tensor_map, mesh=None, axis_names=None, mesh_name=None))]
fn from_mindspore_layout(
    py: Python<'_>,
    device_matrix: Vec<i64>,
    tensor_map: Vec<Vec<i64>>,
    mesh: Option<&PyMesh>,
    axis_names: Option<Vec<String>>,
    mesh_name: Option<String>,
) -> PyResult<(PySharding, PyMesh)> {
    let mesh = mesh.map(|m| &m.0);
    let (t, m) = convert::mindspore::from_layout(&device_matrix, &tensor_map, mesh, axis_names, mesh_name).py(py)?;
    Ok((PySharding(t), PyMesh(m)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    rule::register(m)?;
    registry::register(m)?;
    graph::register(m)?;
    mlir::register(m)?;
    candidates::register(m)?;
    walk::register(m)?;
    propagation::register(m)?;
    records::register(m)?;
    redistribution::register(m)?;
    repr::register(m)?;
    search::register(m)?;
    m.add_function(wrap_pyfunction!(mlir_quote, m)?)?;
    m.add_function(wrap_pyfunction!(mlir_unquote, m)?)?;
    m.add_function(wrap_pyfunction!(to_hlo_sharding, m)?)?;
    m.add_function(wrap_pyfunction!(from_hlo_sharding, m)?)?;
    m.add_function(wrap_pyfunction!(to_mindspore_layout, m)?)?;
    m.add_function(wrap_pyfunction!(from_mindspore_layout, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
