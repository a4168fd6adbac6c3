//! The plain-tuple form in which representation values cross the FFI (the Python classes in
//! `shardwise/mesh.py` and `shardwise/sharding.py` build and read these tuples):
//!
//! * axis ref: `(name, None)` or `(name, (pre_size, size))`
//! * mesh: `([(name, size), ...], [device_id, ...])`
//! * dim sharding: `([axis ref, ...], closed, priority or None)`
//! * tensor sharding: `(mesh name or None, inlined mesh or None, [dim, ...], [replicated],
//!   [unreduced], reduction)` with reduction one of `"sum"`, `"max"`, `"min"`.

use pyo3::prelude::*;

use crate::axis::{AxisRef, SubAxis};
use crate::error::{Error, Result};
use crate::mesh::{Mesh, MeshAxis};
use crate::sharding::{DimSharding, MeshRef, Reduction, TensorSharding};

#[derive(FromPyObject, IntoPyObject, Clone)]
pub struct AxisW(pub String, pub Option<(i64, i64)>);

#[derive(FromPyObject, IntoPyObject, Clone)]
pub struct MeshW(pub Vec<(String, i64)>, pub Vec<i64>);

#[derive(FromPyObject, IntoPyObject, Clone)]
pub struct DimW(pub Vec<AxisW>, pub bool, pub Option<i64>);

#[derive(FromPyObject, IntoPyObject, Clone)]
pub struct ShardingW(pub Option<String>, pub Option<MeshW>, pub Vec<DimW>, pub Vec<AxisW>, pub Vec<AxisW>, pub String);

impl From<&AxisRef> for AxisW {
    fn from(a: &AxisRef) -> Self {
        AxisW(a.name.into(), a.sub.map(|s| (s.pre_size, s.size)))
    }
}

impl From<AxisW> for AxisRef {
    fn from(a: AxisW) -> Self {
        AxisRef { name: a.0.into(), sub: a.1.map(|(pre_size, size)| SubAxis { pre_size, size }) }
    }
}

impl From<&Mesh> for MeshW {
    fn from(m: &Mesh) -> Self {
        MeshW(m.axes().iter().map(|a| (a.name.clone(), a.size)).collect(), m.device_ids().to_vec())
    }
}

impl MeshW {
    /// Builds (and verifies) the mesh; iota device ids are dropped.
    pub fn to_mesh(&self) -> Result<Mesh> {
        Mesh::new(self.0.iter().map(|(n, s)| MeshAxis { name: n.clone(), size: *s }).collect(), self.1.clone())
    }
}

fn axes_w(v: &[AxisRef]) -> Vec<AxisW> {
    v.iter().map(AxisW::from).collect()
}

fn axes_r(v: Vec<AxisW>) -> Vec<AxisRef> {
    v.into_iter().map(AxisRef::from).collect()
}

impl From<&TensorSharding> for ShardingW {
    fn from(t: &TensorSharding) -> Self {
        let (name, mesh) = match &t.mesh {
            MeshRef::Named(n) => (Some(String::from(*n)), None),
            MeshRef::Inline(m) => (None, Some(MeshW::from(&**m))),
        };
        ShardingW(
            name,
            mesh,
            t.dims.iter().map(|d| DimW(axes_w(&d.axes), d.closed, d.priority)).collect(),
            axes_w(&t.replicated),
            axes_w(&t.unreduced),
            t.reduction.name().to_string(),
        )
    }
}

impl ShardingW {
    pub fn into_sharding(self) -> Result<TensorSharding> {
        let mesh = match (self.0, self.1) {
            (Some(n), _) => MeshRef::Named(n.into()),
            (None, Some(m)) => MeshRef::Inline(Box::new(m.to_mesh()?)),
            (None, None) => return Err(Error::mesh("a sharding needs a mesh name or an inlined mesh")),
        };
        let reduction = Reduction::from_name(&self.5).ok_or_else(|| {
            Error::invariant("unknown-reduction", format!("reduction must be sum, max or min, got {:?}", self.5))
        })?;
        Ok(TensorSharding {
            mesh,
            dims: self.2.into_iter().map(|d| DimSharding { axes: axes_r(d.0), closed: d.1, priority: d.2 }).collect(),
            replicated: axes_r(self.3),
            unreduced: axes_r(self.4),
            reduction,
        })
    }
}
