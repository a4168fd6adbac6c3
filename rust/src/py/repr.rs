//! The representation's values as objects of the extension module: `Axis`, `Mesh`, `Dim` and
//! `Sharding` are frozen wrappers of `crate::axis::AxisRef`, `crate::mesh::Mesh`,
//! `crate::sharding::DimSharding` and `crate::sharding::TensorSharding`. They are what crosses
//! the FFI wherever an axis, a mesh or a sharding does (arguments and results of every binding),
//! so a value is checked once, when it is built, and read back by named getters. The Python
//! classes of `shardwise/mesh.py` and `shardwise/sharding.py` each hold one (`_core`).
//!
//! Each method is the core's own function of the same name (`AxisRef::contains`,
//! `TensorSharding::validate`, `text::parse_sharding`, ...); errors map through `errors.rs`.

use std::collections::HashMap;

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use crate::axis::{AxisRef, SubAxis};
use crate::error::Error;
use crate::mesh::{Mesh, MeshAxis};
use crate::sharding::{DimSharding, MeshRef, Reduction, TensorSharding};
use crate::text;

/// An axis `"x"` or sub-axis `"x":(pre_size)size` (`crate::axis::AxisRef`).
#[pyclass(frozen, from_py_object, eq, hash, module = "shardwise._native", name = "Axis")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyAxis(pub AxisRef);

/// A logical mesh (`crate::mesh::Mesh`), verified when built.
#[pyclass(frozen, from_py_object, eq, hash, module = "shardwise._native", name = "Mesh")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyMesh(pub Mesh);

/// One dimension's sharding (`crate::sharding::DimSharding`).
#[pyclass(frozen, from_py_object, eq, hash, module = "shardwise._native", name = "Dim")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyDim(pub DimSharding);

/// A tensor sharding (`crate::sharding::TensorSharding`): built with its mesh-free invariants
/// unchecked (`check_local`, `validate` check them).
#[pyclass(frozen, from_py_object, eq, hash, module = "shardwise._native", name = "Sharding")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PySharding(pub TensorSharding);

pub fn axes(v: Vec<PyAxis>) -> Vec<AxisRef> {
    v.into_iter().map(|a| a.0).collect()
}

pub fn axis_objects(v: &[AxisRef]) -> Vec<PyAxis> {
    v.iter().cloned().map(PyAxis).collect()
}

/// Meshes by name, as the parsers and the solver's inputs take them.
pub fn meshes(m: HashMap<String, PyMesh>) -> HashMap<String, Mesh> {
    m.into_iter().map(|(k, v)| (k, v.0)).collect()
}

pub fn sharding(s: Option<PySharding>) -> Option<TensorSharding> {
    s.map(|s| s.0)
}

pub fn sharding_object(s: &Option<TensorSharding>) -> Option<PySharding> {
    s.clone().map(PySharding)
}

#[pymethods]
impl PyAxis {
    /// Raises `InvalidShardingError` when a sub-axis breaks a mesh-free rule (`check_local`).
    #[new]
    #[pyo3(signature = (name, sub=None))]
    fn new(py: Python<'_>, name: &str, sub: Option<(i64, i64)>) -> PyResult<Self> {
        let a = AxisRef { name: name.into(), sub: sub.map(|(pre_size, size)| SubAxis { pre_size, size }) };
        a.check_local().py(py)?;
        Ok(PyAxis(a))
    }

    /// Parses `"x"` or `"x":(1)2` (`ShardingParseError`).
    #[staticmethod]
    fn parse(py: Python<'_>, text: &str) -> PyResult<Self> {
        Ok(PyAxis(text::parse_axis_ref(text).py(py)?))
    }

    #[getter]
    fn name(&self) -> &str {
        self.0.name.as_str()
    }

    /// `(pre_size, size)` of a sub-axis, `None` for a full axis.
    #[getter]
    fn sub(&self) -> Option<(i64, i64)> {
        self.0.sub.map(|s| (s.pre_size, s.size))
    }

    fn contains(&self, other: &PyAxis) -> bool {
        self.0.contains(&other.0)
    }

    fn strictly_contains(&self, other: &PyAxis) -> bool {
        self.0.strictly_contains(&other.0)
    }

    fn prefix_of(&self, other: &PyAxis) -> bool {
        self.0.prefix_of(&other.0)
    }

    fn suffix_of(&self, py: Python<'_>, other: &PyAxis, mesh: &PyMesh) -> PyResult<bool> {
        self.0.suffix_of(&other.0, &mesh.0).py(py)
    }

    fn overlaps(&self, other: &PyAxis) -> bool {
        self.0.overlaps(&other.0)
    }

    fn can_merge(&self, other: &PyAxis) -> bool {
        self.0.can_merge(&other.0)
    }

    fn merge(&self, py: Python<'_>, other: &PyAxis, mesh: &PyMesh) -> PyResult<PyAxis> {
        Ok(PyAxis(self.0.merge(&other.0, &mesh.0).py(py)?))
    }

    fn overlap(&self, other: &PyAxis) -> Option<PyAxis> {
        self.0.overlap(&other.0).map(PyAxis)
    }

    fn check(&self, py: Python<'_>, mesh: &PyMesh) -> PyResult<()> {
        self.0.check(&mesh.0).py(py)
    }

    fn size(&self, py: Python<'_>, mesh: &PyMesh) -> PyResult<i64> {
        self.0.size(&mesh.0).py(py)
    }

    fn next_pre_size(&self, py: Python<'_>, mesh: &PyMesh) -> PyResult<i64> {
        self.0.next_pre_size(&mesh.0).py(py)
    }

    /// `axes` in mesh order (Shardy's mesh comparator).
    #[staticmethod]
    fn sorted(axes: Vec<PyAxis>, mesh: &PyMesh) -> Vec<PyAxis> {
        let mut refs = self::axes(axes);
        refs.sort_by(|a, b| a.mesh_cmp(b, &mesh.0));
        refs.into_iter().map(PyAxis).collect()
    }

    /// Shardy's `sortAndMergeAxes` (`propagation::axes::sort_and_merge_axes`).
    #[staticmethod]
    fn sort_and_merge(py: Python<'_>, axes: Vec<PyAxis>, mesh: &PyMesh) -> PyResult<Vec<PyAxis>> {
        let out = crate::propagation::axes::sort_and_merge_axes(&self::axes(axes), &mesh.0).py(py)?;
        Ok(out.into_iter().map(PyAxis).collect())
    }

    /// Shardy's `getAxisSetDiff`: the parts of `a` not in `b` (`propagation::axes::axis_set_diff`).
    #[staticmethod]
    fn set_diff(py: Python<'_>, a: Vec<PyAxis>, b: Vec<PyAxis>, mesh: &PyMesh) -> PyResult<Vec<PyAxis>> {
        let out = crate::propagation::axes::axis_set_diff(&axes(a), &axes(b), &mesh.0).py(py)?;
        Ok(out.into_iter().map(PyAxis).collect())
    }

    fn __str__(&self) -> String {
        text::print_axis_ref(&self.0)
    }
}

#[pymethods]
impl PyMesh {
    /// Verifies the mesh; iota device ids are dropped (`MeshError`).
    #[new]
    fn new(py: Python<'_>, axes: Vec<(String, i64)>, device_ids: Vec<i64>) -> PyResult<Self> {
        let axes = axes.into_iter().map(|(name, size)| MeshAxis { name, size }).collect();
        Ok(PyMesh(Mesh::new(axes, device_ids).py(py)?))
    }

    /// Parses `#sdy.mesh<[...]>` (also `mesh<...>` or the bare `<...>`).
    #[staticmethod]
    fn parse(py: Python<'_>, text: &str) -> PyResult<Self> {
        Ok(PyMesh(text::parse_mesh(text).py(py)?))
    }

    /// Parses `sdy.mesh @name = <[...]>` into `(name, mesh)`.
    #[staticmethod]
    fn parse_op(py: Python<'_>, text: &str) -> PyResult<(String, PyMesh)> {
        let (name, m) = text::parse_mesh_op(text).py(py)?;
        Ok((name, PyMesh(m)))
    }

    /// `(name, size)` per axis, in mesh order.
    #[getter]
    fn axes(&self) -> Vec<(String, i64)> {
        self.0.axes().iter().map(|a| (a.name.clone(), a.size)).collect()
    }

    /// The explicit device order (empty for iota).
    #[getter]
    fn device_ids(&self) -> Vec<i64> {
        self.0.device_ids().to_vec()
    }

    /// `sdy.mesh @name = <[...]>`.
    fn print_op(&self, name: &str) -> String {
        text::print_mesh_op(name, &self.0)
    }

    fn __str__(&self) -> String {
        text::print_mesh(&self.0)
    }
}

#[pymethods]
impl PyDim {
    #[new]
    #[pyo3(signature = (axes, closed, priority=None))]
    fn new(axes: Vec<PyAxis>, closed: bool, priority: Option<i64>) -> Self {
        PyDim(DimSharding { axes: self::axes(axes), closed, priority })
    }

    #[getter]
    fn axes(&self) -> Vec<PyAxis> {
        axis_objects(&self.0.axes)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.0.closed
    }

    #[getter]
    fn priority(&self) -> Option<i64> {
        self.0.priority
    }
}

/// Validates a parsed sharding against its mesh when the mesh is known.
fn check_parsed(py: Python<'_>, t: &TensorSharding, meshes: &Option<HashMap<String, Mesh>>) -> PyResult<()> {
    let empty = HashMap::new();
    let known = meshes.as_ref().unwrap_or(&empty);
    match (&t.mesh, meshes) {
        (MeshRef::Named(_), None) => Ok(()),
        _ => {
            let mesh = t.resolve_mesh(known).py(py)?;
            t.validate(mesh, None, false).py(py)
        }
    }
}

#[pymethods]
impl PySharding {
    /// A sharding on the mesh named `mesh_name` or on `inline_mesh` (one of them); `reduction`
    /// is `"sum"`, `"max"` or `"min"` (`InvalidShardingError`, rule `unknown-reduction`).
    #[new]
    #[pyo3(signature = (mesh_name, inline_mesh, dims, replicated, unreduced, reduction="sum"))]
    fn new(
        py: Python<'_>,
        mesh_name: Option<&str>,
        inline_mesh: Option<PyMesh>,
        dims: Vec<PyDim>,
        replicated: Vec<PyAxis>,
        unreduced: Vec<PyAxis>,
        reduction: &str,
    ) -> PyResult<Self> {
        let mesh = match (mesh_name, inline_mesh) {
            (Some(n), _) => MeshRef::Named(n.into()),
            (None, Some(m)) => MeshRef::Inline(Box::new(m.0)),
            (None, None) => return Err(Error::mesh("a sharding needs a mesh name or an inlined mesh")).py(py),
        };
        let reduction = Reduction::from_name(reduction)
            .ok_or_else(|| {
                Error::invariant("unknown-reduction", format!("reduction must be sum, max or min, got {reduction:?}"))
            })
            .py(py)?;
        Ok(PySharding(TensorSharding {
            mesh,
            dims: dims.into_iter().map(|d| d.0).collect(),
            replicated: axes(replicated),
            unreduced: axes(unreduced),
            reduction,
        }))
    }

    /// Parses one sharding; validates it when `meshes` resolves its mesh (or it is inlined).
    #[staticmethod]
    #[pyo3(signature = (text, meshes=None))]
    fn parse(py: Python<'_>, text: &str, meshes: Option<HashMap<String, PyMesh>>) -> PyResult<Self> {
        let t = text::parse_sharding(text).py(py)?;
        check_parsed(py, &t, &meshes.map(self::meshes))?;
        Ok(PySharding(t))
    }

    /// Parses `#sdy.sharding_per_value<[...]>`, each validated as by `parse`.
    #[staticmethod]
    #[pyo3(signature = (text, meshes=None))]
    fn parse_per_value(py: Python<'_>, text: &str, meshes: Option<HashMap<String, PyMesh>>) -> PyResult<Vec<Self>> {
        let ts = text::parse_sharding_per_value(text).py(py)?;
        let meshes = meshes.map(self::meshes);
        for t in &ts {
            check_parsed(py, t, &meshes)?;
        }
        Ok(ts.into_iter().map(PySharding).collect())
    }

    /// `#sdy.sharding_per_value<[<...>, ...]>` of several shardings.
    #[staticmethod]
    fn print_per_value(shardings: Vec<PySharding>) -> String {
        let ts: Vec<TensorSharding> = shardings.into_iter().map(|s| s.0).collect();
        text::print_sharding_per_value(&ts)
    }

    /// The mesh's name, `None` for an inlined mesh.
    #[getter]
    fn mesh_name(&self) -> Option<&str> {
        match &self.0.mesh {
            MeshRef::Named(n) => Some(n.as_str()),
            MeshRef::Inline(_) => None,
        }
    }

    #[getter]
    fn inline_mesh(&self) -> Option<PyMesh> {
        match &self.0.mesh {
            MeshRef::Named(_) => None,
            MeshRef::Inline(m) => Some(PyMesh((**m).clone())),
        }
    }

    #[getter]
    fn dims(&self) -> Vec<PyDim> {
        self.0.dims.iter().cloned().map(PyDim).collect()
    }

    #[getter]
    fn replicated(&self) -> Vec<PyAxis> {
        axis_objects(&self.0.replicated)
    }

    #[getter]
    fn unreduced(&self) -> Vec<PyAxis> {
        axis_objects(&self.0.unreduced)
    }

    #[getter]
    fn reduction(&self) -> &'static str {
        self.0.reduction.name()
    }

    /// Mesh-free invariants (priorities, duplicates).
    fn check_local(&self, py: Python<'_>) -> PyResult<()> {
        self.0.check_local().py(py)
    }

    /// Every invariant on `mesh`, the shape's too when given; `user` adds the rules for users'
    /// own annotations.
    #[pyo3(signature = (mesh, shape=None, user=false))]
    fn validate(&self, py: Python<'_>, mesh: &PyMesh, shape: Option<Vec<i64>>, user: bool) -> PyResult<()> {
        self.0.validate(&mesh.0, shape.as_deref(), user).py(py)
    }

    fn local_shape(&self, py: Python<'_>, mesh: &PyMesh, shape: Vec<i64>) -> PyResult<Vec<i64>> {
        self.0.local_shape(&mesh.0, &shape).py(py)
    }

    fn device_ranges(&self, py: Python<'_>, mesh: &PyMesh, shape: Vec<i64>, device: i64) -> PyResult<Vec<(i64, i64)>> {
        self.0.device_ranges(&mesh.0, &shape, device).py(py)
    }

    fn __str__(&self) -> String {
        text::print_sharding(&self.0)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAxis>()?;
    m.add_class::<PyMesh>()?;
    m.add_class::<PyDim>()?;
    m.add_class::<PySharding>()?;
    Ok(())
}
