//! PyO3 bindings: the private module `shardwise._native`. Only argument conversion and error
//! mapping live here; every rule is in the core modules.

mod axes;
mod candidates;
mod errors;
mod graph;
mod mlir;
mod propagation;
mod redistribution;
mod registry;

mod rule;
mod search;
mod walk;
mod wire;

use std::collections::HashMap;

/// The extension module allocates through mimalloc (see Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use pyo3::prelude::*;

use crate::axis::AxisRef;
use crate::convert;
use crate::mesh::Mesh;
use crate::sharding::TensorSharding;
use crate::text;
use errors::IntoPyResult;
use wire::{AxisW, MeshW, ShardingW};

fn mesh_of(py: Python<'_>, m: &MeshW) -> PyResult<Mesh> {
    m.to_mesh().py(py)
}

fn sharding_of(py: Python<'_>, t: ShardingW) -> PyResult<TensorSharding> {
    t.into_sharding().py(py)
}

fn meshes_of(py: Python<'_>, meshes: Option<HashMap<String, MeshW>>) -> PyResult<Option<HashMap<String, Mesh>>> {
    meshes.map(|ms| ms.into_iter().map(|(k, v)| Ok((k, mesh_of(py, &v)?))).collect::<PyResult<_>>()).transpose()
}

/// Validates a parsed sharding against its mesh when the mesh is known.
fn check_parsed(py: Python<'_>, t: &TensorSharding, meshes: &Option<HashMap<String, Mesh>>) -> PyResult<()> {
    let empty = HashMap::new();
    let known = meshes.as_ref().unwrap_or(&empty);
    match (&t.mesh, meshes) {
        (crate::MeshRef::Named(_), None) => Ok(()),
        _ => {
            let mesh = t.resolve_mesh(known).py(py)?;
            t.validate(mesh, None, false).py(py)
        }
    }
}

/// Verifies a mesh and returns its normal form (iota device ids dropped).
#[pyfunction]
fn mesh_new(py: Python<'_>, mesh: MeshW) -> PyResult<MeshW> {
    Ok(MeshW::from(&mesh_of(py, &mesh)?))
}

#[pyfunction]
fn mesh_parse(py: Python<'_>, text: &str) -> PyResult<MeshW> {
    Ok(MeshW::from(&text::parse_mesh(text).py(py)?))
}

#[pyfunction]
fn mesh_op_parse(py: Python<'_>, text: &str) -> PyResult<(String, MeshW)> {
    let (name, m) = text::parse_mesh_op(text).py(py)?;
    Ok((name, MeshW::from(&m)))
}

#[pyfunction]
fn mesh_print(py: Python<'_>, mesh: MeshW) -> PyResult<String> {
    Ok(text::print_mesh(&mesh_of(py, &mesh)?))
}

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

#[pyfunction]
fn mesh_op_print(py: Python<'_>, name: &str, mesh: MeshW) -> PyResult<String> {
    Ok(text::print_mesh_op(name, &mesh_of(py, &mesh)?))
}

/// Parses one sharding; validates it when `meshes` resolves its mesh (or it is inlined).
#[pyfunction]
#[pyo3(signature = (text, meshes=None))]
fn sharding_parse(py: Python<'_>, text: &str, meshes: Option<HashMap<String, MeshW>>) -> PyResult<ShardingW> {
    let t = text::parse_sharding(text).py(py)?;
    check_parsed(py, &t, &meshes_of(py, meshes)?)?;
    Ok(ShardingW::from(&t))
}

#[pyfunction]
#[pyo3(signature = (text, meshes=None))]
fn sharding_per_value_parse(
    py: Python<'_>,
    text: &str,
    meshes: Option<HashMap<String, MeshW>>,
) -> PyResult<Vec<ShardingW>> {
    let ts = text::parse_sharding_per_value(text).py(py)?;
    let meshes = meshes_of(py, meshes)?;
    for t in &ts {
        check_parsed(py, t, &meshes)?;
    }
    Ok(ts.iter().map(ShardingW::from).collect())
}

#[pyfunction]
fn sharding_print(py: Python<'_>, sharding: ShardingW) -> PyResult<String> {
    Ok(text::print_sharding(&sharding_of(py, sharding)?))
}

#[pyfunction]
fn sharding_per_value_print(py: Python<'_>, shardings: Vec<ShardingW>) -> PyResult<String> {
    let ts = shardings.into_iter().map(|t| sharding_of(py, t)).collect::<PyResult<Vec<_>>>()?;
    Ok(text::print_sharding_per_value(&ts))
}

/// Mesh-free invariants (priorities, duplicates).
#[pyfunction]
fn sharding_check_local(py: Python<'_>, sharding: ShardingW) -> PyResult<()> {
    sharding_of(py, sharding)?.check_local().py(py)
}

#[pyfunction]
#[pyo3(signature = (sharding, mesh, shape=None, user=false))]
fn sharding_validate(
    py: Python<'_>,
    sharding: ShardingW,
    mesh: MeshW,
    shape: Option<Vec<i64>>,
    user: bool,
) -> PyResult<()> {
    let t = sharding_of(py, sharding)?;
    t.validate(&mesh_of(py, &mesh)?, shape.as_deref(), user).py(py)
}

#[pyfunction]
fn sharding_local_shape(py: Python<'_>, sharding: ShardingW, mesh: MeshW, shape: Vec<i64>) -> PyResult<Vec<i64>> {
    sharding_of(py, sharding)?.local_shape(&mesh_of(py, &mesh)?, &shape).py(py)
}

#[pyfunction]
fn sharding_device_ranges(
    py: Python<'_>,
    sharding: ShardingW,
    mesh: MeshW,
    shape: Vec<i64>,
    device: i64,
) -> PyResult<Vec<(i64, i64)>> {
    sharding_of(py, sharding)?.device_ranges(&mesh_of(py, &mesh)?, &shape, device).py(py)
}

/// Sorts axis refs into mesh order (Shardy's mesh comparator).
#[pyfunction]
fn axes_sorted(py: Python<'_>, axes: Vec<AxisW>, mesh: MeshW) -> PyResult<Vec<AxisW>> {
    let mesh = mesh_of(py, &mesh)?;
    let mut refs: Vec<AxisRef> = axes.into_iter().map(AxisRef::from).collect();
    refs.sort_by(|a, b| a.mesh_cmp(b, &mesh));
    Ok(refs.iter().map(AxisW::from).collect())
}

/// Relations between two axis refs: `op` is one of `contains`, `strictly_contains`,
/// `prefix_of`, `suffix_of`, `overlaps`, `can_merge` (bool), `merge`, `overlap` (axis ref or
/// None), `check_local`, `check` (validity of `a`, in `mesh` for `check`; `b` ignored), `size`, `next_pre_size` (int).
#[pyfunction]
#[pyo3(signature = (op, a, b=None, mesh=None))]
fn axis_op<'py>(
    py: Python<'py>,
    op: &str,
    a: AxisW,
    b: Option<AxisW>,
    mesh: Option<MeshW>,
) -> PyResult<Bound<'py, PyAny>> {
    let a = AxisRef::from(a);
    let b = b.map(AxisRef::from);
    let mesh = mesh.map(|m| mesh_of(py, &m)).transpose()?;
    let need_b = || {
        b.clone().ok_or_else(|| pyo3::exceptions::PyTypeError::new_err(format!("axis_op {op:?} needs a second axis")))
    };
    let need_mesh =
        || mesh.clone().ok_or_else(|| pyo3::exceptions::PyTypeError::new_err(format!("axis_op {op:?} needs a mesh")));
    let out = match op {
        "contains" => a.contains(&need_b()?).into_pyobject(py)?.to_owned().into_any(),
        "strictly_contains" => a.strictly_contains(&need_b()?).into_pyobject(py)?.to_owned().into_any(),
        "prefix_of" => a.prefix_of(&need_b()?).into_pyobject(py)?.to_owned().into_any(),
        "suffix_of" => a.suffix_of(&need_b()?, &need_mesh()?).py(py)?.into_pyobject(py)?.to_owned().into_any(),
        "overlaps" => a.overlaps(&need_b()?).into_pyobject(py)?.to_owned().into_any(),
        "can_merge" => a.can_merge(&need_b()?).into_pyobject(py)?.to_owned().into_any(),
        "merge" => AxisW::from(&a.merge(&need_b()?, &need_mesh()?).py(py)?).into_pyobject(py)?.into_any(),
        "overlap" => a.overlap(&need_b()?).map(|r| AxisW::from(&r)).into_pyobject(py)?.into_any(),
        "check_local" => {
            a.check_local().py(py)?;
            py.None().into_bound(py)
        }
        "check" => {
            a.check(&need_mesh()?).py(py)?;
            py.None().into_bound(py)
        }
        "size" => a.size(&need_mesh()?).py(py)?.into_pyobject(py)?.into_any(),
        "next_pre_size" => a.next_pre_size(&need_mesh()?).py(py)?.into_pyobject(py)?.into_any(),
        _ => return Err(pyo3::exceptions::PyValueError::new_err(format!("unknown axis_op {op:?}"))),
    };
    Ok(out)
}

#[pyfunction]
fn axis_parse(py: Python<'_>, text: &str) -> PyResult<AxisW> {
    Ok(AxisW::from(&text::parse_axis_ref(text).py(py)?))
}

#[pyfunction]
fn axis_print(a: AxisW) -> String {
    text::print_axis_ref(&AxisRef::from(a))
}

/// XLA HLO sharding text of a sharding on `mesh` (see `convert::hlo`).
#[pyfunction]
fn to_hlo_sharding(py: Python<'_>, sharding: ShardingW, mesh: MeshW) -> PyResult<String> {
    let (t, m) = (sharding_of(py, sharding)?, mesh_of(py, &mesh)?);
    // Meshes of many devices make this long (explicit device lists): release the GIL.
    py.detach(|| convert::hlo::to_hlo(&t, &m)).py(py)
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
    mesh: Option<MeshW>,
    mesh_name: Option<String>,
) -> PyResult<(ShardingW, MeshW)> {
    let mesh = mesh.map(|m| mesh_of(py, &m)).transpose()?;
    let (t, m) = py.detach(|| convert::hlo::from_hlo(text, rank, mesh.as_ref(), mesh_name)).py(py)?;
    Ok((ShardingW::from(&t), MeshW::from(&m)))
}

/// MindSpore tensor layout `(device_matrix, tensor_map)` of a sharding on `mesh`.
#[pyfunction]
fn to_mindspore_layout(py: Python<'_>, sharding: ShardingW, mesh: MeshW) -> PyResult<(Vec<i64>, Vec<Vec<i64>>)> {
    convert::mindspore::to_layout(&sharding_of(py, sharding)?, &mesh_of(py, &mesh)?).py(py)
}

/// A sharding from a MindSpore layout; onto `mesh` when given (the device matrix must refine
/// its axes), else onto a mesh with one axis per device-matrix dimension named `axis_names`.
#[pyfunction]
#[pyo3(signature = (device_matrix, tensor_map, mesh=None, axis_names=None, mesh_name=None))]
fn from_mindspore_layout(
    py: Python<'_>,
    device_matrix: Vec<i64>,
    tensor_map: Vec<Vec<i64>>,
    mesh: Option<MeshW>,
    axis_names: Option<Vec<String>>,
    mesh_name: Option<String>,
) -> PyResult<(ShardingW, MeshW)> {
    let mesh = mesh.map(|m| mesh_of(py, &m)).transpose()?;
    let (t, m) =
        convert::mindspore::from_layout(&device_matrix, &tensor_map, mesh.as_ref(), axis_names, mesh_name).py(py)?;
    Ok((ShardingW::from(&t), MeshW::from(&m)))
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
    redistribution::register(m)?;
    axes::register(m)?;
    search::register(m)?;
    m.add_function(wrap_pyfunction!(mesh_new, m)?)?;
    m.add_function(wrap_pyfunction!(mesh_parse, m)?)?;
    m.add_function(wrap_pyfunction!(mesh_op_parse, m)?)?;
    m.add_function(wrap_pyfunction!(mesh_print, m)?)?;
    m.add_function(wrap_pyfunction!(mesh_op_print, m)?)?;
    m.add_function(wrap_pyfunction!(mlir_quote, m)?)?;
    m.add_function(wrap_pyfunction!(mlir_unquote, m)?)?;
    m.add_function(wrap_pyfunction!(sharding_parse, m)?)?;
    m.add_function(wrap_pyfunction!(sharding_per_value_parse, m)?)?;
    m.add_function(wrap_pyfunction!(sharding_print, m)?)?;
    m.add_function(wrap_pyfunction!(sharding_per_value_print, m)?)?;
    m.add_function(wrap_pyfunction!(sharding_check_local, m)?)?;
    m.add_function(wrap_pyfunction!(sharding_validate, m)?)?;
    m.add_function(wrap_pyfunction!(sharding_local_shape, m)?)?;
    m.add_function(wrap_pyfunction!(sharding_device_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(axes_sorted, m)?)?;
    m.add_function(wrap_pyfunction!(axis_op, m)?)?;
    m.add_function(wrap_pyfunction!(axis_print, m)?)?;
    m.add_function(wrap_pyfunction!(axis_parse, m)?)?;
    m.add_function(wrap_pyfunction!(to_hlo_sharding, m)?)?;
    m.add_function(wrap_pyfunction!(from_hlo_sharding, m)?)?;
    m.add_function(wrap_pyfunction!(to_mindspore_layout, m)?)?;
    m.add_function(wrap_pyfunction!(from_mindspore_layout, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
