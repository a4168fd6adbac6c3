//! Logical device meshes (Shardonnay RFC "Basic structure", "Multiple logical meshes"; Shardy
//! `MeshAttr` in `shardy/dialect/sdy/ir/attrs.td`, verified as in `MeshAttr::verify`).
//!
//! A mesh is an ordered list of named axes with sizes and an optional explicit device order.
//! Devices are laid out row-major over the axes: the device at mesh coordinates `c` is
//! `device_ids[linear(c)]`, or `linear(c)` itself when no explicit order is given.

use crate::error::{Error, Result};

/// One named mesh axis, `"x"=4` in sdy text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeshAxis {
    pub name: String,
    pub size: i64,
}

/// A logical mesh. Three kinds (Shardy `MeshAttr`): the empty mesh `<[]>` (a placeholder),
/// a maximal mesh `<[], device_ids=[d]>` (everything on device `d`), and a mesh with axes whose
/// device order is iota unless `device_ids` lists a permutation of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Mesh {
    axes: Vec<MeshAxis>,
    /// Explicit device order; empty means iota (never stored when equal to iota).
    device_ids: Vec<i64>,
    /// Axis indices sorted by axis name: lookups by name in O(log n), so checking a sharding
    /// against a mesh of many axes stays near-linear (issue 25). Derived from `axes`.
    by_name: Vec<u32>,
}

impl Mesh {
    /// Builds and verifies a mesh. Device ids equal to iota are dropped, as Shardy's builder does.
    ///
    /// Errors (`ErrorKind::Mesh`): axis size < 1, duplicate axis name, negative device id,
    /// product of axis sizes overflowing i64, device id count not matching the product, device
    /// ids not a permutation of `0..n`, several device ids without axes.
    pub fn new(axes: Vec<MeshAxis>, device_ids: Vec<i64>) -> Result<Mesh> {
        let mesh = Mesh::verified(axes, device_ids)?;
        Ok(mesh.drop_iota_ids())
    }

    /// Like [`Mesh::new`] but rejects explicit iota device ids, as Shardy's verifier does for
    /// parsed text.
    pub fn new_strict(axes: Vec<MeshAxis>, device_ids: Vec<i64>) -> Result<Mesh> {
        let mesh = Mesh::verified(axes, device_ids)?;
        if !mesh.axes.is_empty() && !mesh.device_ids.is_empty() && mesh.ids_are_iota() {
            return Err(Error::mesh(format!(
                "mesh device_ids {:?} are iota(product(axes)); leave them out",
                mesh.device_ids
            )));
        }
        Ok(mesh)
    }

    /// The empty mesh `<[]>`.
    pub fn empty() -> Mesh {
        Mesh::default()
    }

    /// The maximal mesh `<[], device_ids=[device]>`.
    pub fn maximal(device: i64) -> Result<Mesh> {
        Mesh::new(vec![], vec![device])
    }

    fn verified(axes: Vec<MeshAxis>, device_ids: Vec<i64>) -> Result<Mesh> {
        if let Some(&d) = device_ids.iter().find(|&&d| d < 0) {
            return Err(Error::mesh(format!("mesh device id must be non-negative, got {d}")));
        }
        if axes.is_empty() {
            if device_ids.len() > 1 {
                return Err(Error::mesh(format!(
                    "a mesh without axes takes at most one device id (a maximal mesh), got {} ids",
                    device_ids.len()
                )));
            }
            return Ok(Mesh { axes, device_ids, by_name: Vec::new() });
        }
        if axes.len() > u32::MAX as usize {
            return Err(Error::mesh(format!("a mesh takes at most {} axes, got {}", u32::MAX, axes.len())));
        }
        let mut by_name: Vec<u32> = (0..axes.len() as u32).collect();
        by_name.sort_by(|&a, &b| axes[a as usize].name.cmp(&axes[b as usize].name));
        if let Some(w) = by_name.windows(2).find(|w| axes[w[0] as usize].name == axes[w[1] as usize].name) {
            return Err(Error::mesh(format!("duplicate mesh axis name \"{}\"", axes[w[0] as usize].name)));
        }
        let mut total: i64 = 1;
        for axis in &axes {
            if axis.size < 1 {
                return Err(Error::mesh(format!("mesh axis \"{}\" must have size >= 1, got {}", axis.name, axis.size)));
            }
            total = total.checked_mul(axis.size).ok_or_else(|| {
                Error::mesh(format!("product of mesh axis sizes overflows at axis \"{}\"", axis.name))
            })?;
        }
        if !device_ids.is_empty() {
            if device_ids.len() as i64 != total {
                return Err(Error::mesh(format!(
                    "mesh has {} device ids but its axes hold {} devices",
                    device_ids.len(),
                    total
                )));
            }
            let mut seen = vec![false; device_ids.len()];
            for &d in &device_ids {
                let ok = (d as usize) < seen.len() && !seen[d as usize];
                if !ok {
                    return Err(Error::mesh(format!(
                        "mesh device ids must be a permutation of 0..{total}, got {device_ids:?}"
                    )));
                }
                seen[d as usize] = true;
            }
        }
        Ok(Mesh { axes, device_ids, by_name })
    }

    fn ids_are_iota(&self) -> bool {
        self.device_ids.iter().enumerate().all(|(i, &d)| d == i as i64)
    }

    fn drop_iota_ids(mut self) -> Mesh {
        if !self.axes.is_empty() && self.ids_are_iota() {
            self.device_ids.clear();
        }
        self
    }

    pub fn axes(&self) -> &[MeshAxis] {
        &self.axes
    }

    /// Explicit device order; empty when the order is iota (or for the empty mesh).
    pub fn device_ids(&self) -> &[i64] {
        &self.device_ids
    }

    /// No axes and no device ids.
    pub fn is_empty(&self) -> bool {
        self.axes.is_empty() && self.device_ids.is_empty()
    }

    /// No axes and exactly one device id.
    pub fn is_maximal(&self) -> bool {
        self.axes.is_empty() && self.device_ids.len() == 1
    }

    pub fn maximal_device(&self) -> Option<i64> {
        if self.is_maximal() {
            Some(self.device_ids[0])
        } else {
            None
        }
    }

    /// Number of devices: product of axis sizes (1 for a maximal mesh, 0 for the empty mesh).
    pub fn total_size(&self) -> i64 {
        if self.is_empty() {
            return 0;
        }
        // Cannot overflow: checked in `verified`.
        self.axes.iter().map(|a| a.size).product()
    }

    pub fn axis_index(&self, name: &str) -> Option<usize> {
        self.by_name
            .binary_search_by(|&i| self.axes[i as usize].name.as_str().cmp(name))
            .ok()
            .map(|k| self.by_name[k] as usize)
    }

    pub fn axis_size(&self, name: &str) -> Option<i64> {
        self.axis_index(name).map(|i| self.axes[i].size)
    }

    /// The axis size, or an error naming the axis and the mesh.
    pub fn require_axis(&self, name: &str) -> Result<i64> {
        self.axis_size(name).ok_or_else(|| {
            Error::invariant(
                "unknown-axis",
                format!("unknown axis \"{name}\": the mesh {} has no such axis", crate::text::print_mesh(self)),
            )
        })
    }

    /// Row-major stride of an axis in the linear device index.
    pub fn axis_stride(&self, index: usize) -> i64 {
        self.axes[index + 1..].iter().map(|a| a.size).product()
    }

    /// Device id at a linear (row-major) mesh position.
    pub fn device_at(&self, linear: i64) -> i64 {
        if self.device_ids.is_empty() {
            linear
        } else {
            self.device_ids[linear as usize]
        }
    }

    /// Linear mesh position of a device id, or an error if the mesh has no such device.
    pub fn position_of(&self, device: i64) -> Result<i64> {
        if let Some(d) = self.maximal_device() {
            return if d == device {
                Ok(0)
            } else {
                Err(Error::mesh(format!("device {device} is not in the maximal mesh of device {d}")))
            };
        }
        let n = self.total_size();
        if self.device_ids.is_empty() {
            if (0..n).contains(&device) {
                return Ok(device);
            }
        } else if let Some(p) = self.device_ids.iter().position(|&d| d == device) {
            return Ok(p as i64);
        }
        Err(Error::mesh(format!("device {device} is not in the mesh (devices 0..{n})")))
    }

    /// All device ids in mesh order.
    pub fn devices(&self) -> Vec<i64> {
        if !self.device_ids.is_empty() {
            return self.device_ids.clone();
        }
        (0..self.total_size()).collect()
    }

    /// Coordinate of a linear mesh position along axis `index`.
    pub fn coordinate(&self, linear: i64, index: usize) -> i64 {
        (linear / self.axis_stride(index)) % self.axes[index].size
    }
}
