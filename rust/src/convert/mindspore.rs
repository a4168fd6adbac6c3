//! MindSpore tensor layouts (`../shared/references/mindspore-sharding-propagation.md`, "Tensor
//! Layout"): a logical device matrix and a tensor map sending each tensor dimension to the
//! device-matrix dimensions that split it, counted from the right (the last device-matrix
//! dimension is 0), an empty entry (MindSpore's -1) for an unsplit dimension.
//!
//! The device matrix of a sharding is its mesh with every axis split into the pieces the
//! sharding uses (`pieces.rs`), in mesh order; axes of size 1 stay as entries of size 1.

use crate::axis::AxisRef;
use crate::convert::pieces::{merge_adjacent, mesh_of_sizes, Pieces};
use crate::error::{Error, Result};
use crate::mesh::Mesh;
use crate::sharding::{DimSharding, MeshRef, TensorSharding};

/// `(device_matrix, tensor_map)` of `t` on `mesh`.
///
/// Errors: unreduced axes (a layout has no partial sums) and explicit device orders (a layout
/// numbers devices in rank order) cannot be expressed.
pub fn to_layout(t: &TensorSharding, mesh: &Mesh) -> Result<(Vec<i64>, Vec<Vec<i64>>)> {
    t.validate(mesh, None, false)?;
    if !t.unreduced.is_empty() {
        return Err(Error::conversion("a MindSpore tensor layout cannot express unreduced axes"));
    }
    if !mesh.device_ids().is_empty() {
        return Err(Error::conversion(format!(
            "a MindSpore tensor layout numbers devices in rank order; mesh {} has an explicit device order",
            crate::text::print_mesh(mesh)
        )));
    }
    if mesh.is_maximal() || mesh.is_empty() {
        return Ok((vec![1], t.dims.iter().map(|_| vec![]).collect()));
    }
    let refs: Vec<&AxisRef> = t.dims.iter().flat_map(|d| &d.axes).collect();
    let pieces = Pieces::split(mesh, &refs)?;
    let last = pieces.pieces.len() as i64 - 1;
    let mut map = Vec::with_capacity(t.rank());
    for d in &t.dims {
        let mut entry = Vec::new();
        for a in &d.axes {
            entry.extend(pieces.of(a, mesh)?.into_iter().map(|i| last - i as i64));
        }
        map.push(entry);
    }
    Ok((pieces.sizes(), map))
}

/// A sharding from a layout. With `mesh`, the device matrix must split its axes in order
/// (each axis the product of consecutive device-matrix dims); without, each device-matrix
/// dimension becomes a mesh axis named by `axis_names` or `d<k>` (`k` counted from the right,
/// as in the tensor map). The sharding is bound to `mesh_name`, or inlined when None.
pub fn from_layout(
    device_matrix: &[i64],
    tensor_map: &[Vec<i64>],
    mesh: Option<&Mesh>,
    axis_names: Option<Vec<String>>,
    mesh_name: Option<String>,
) -> Result<(TensorSharding, Mesh)> {
    let k = device_matrix.len();
    if let Some(&bad) = device_matrix.iter().find(|&&s| s < 1) {
        return Err(Error::conversion(format!("device matrix {device_matrix:?}: sizes must be >= 1, got {bad}")));
    }
    let m = match mesh {
        Some(m) => m.clone(),
        None => {
            let names = axis_names.unwrap_or_else(|| (0..k).map(|i| format!("d{}", k - 1 - i)).collect());
            mesh_of_sizes(device_matrix, Some(names), vec![]).map_err(|e| Error::conversion(e.message))?
        }
    };
    // Name each device-matrix dimension as a (sub-)axis of `m`.
    let mut named: Vec<Option<AxisRef>> = Vec::with_capacity(k);
    let mut next = 0;
    for axis in m.axes() {
        let mut pre = 1;
        let start = next;
        while next < k && (pre < axis.size || (axis.size == 1 && next == start && device_matrix[next] == 1)) {
            let s = device_matrix[next];
            named.push(match (s, pre == 1 && s == axis.size) {
                (1, true) => Some(AxisRef::full(axis.name.clone())),
                (1, false) => None,
                (_, true) => Some(AxisRef::full(axis.name.clone())),
                _ => Some(AxisRef::sub(axis.name.clone(), pre, s)),
            });
            pre = pre.saturating_mul(s);
            next += 1;
        }
        if pre != axis.size {
            return Err(Error::conversion(format!(
                "device matrix {device_matrix:?} does not split mesh {} axis by axis (axis \"{}\"={} got {pre})",
                crate::text::print_mesh(&m),
                axis.name,
                axis.size
            )));
        }
    }
    if next != k {
        return Err(Error::conversion(format!(
            "device matrix {device_matrix:?} has more devices than mesh {}",
            crate::text::print_mesh(&m)
        )));
    }
    let mut used = vec![false; k];
    let mut dims = Vec::with_capacity(tensor_map.len());
    for (j, entry) in tensor_map.iter().enumerate() {
        let mut axes = Vec::new();
        for &idx in entry {
            if !(0..k as i64).contains(&idx) || std::mem::replace(&mut used[(k as i64 - 1 - idx) as usize], true) {
                return Err(Error::conversion(format!(
                    "tensor map {tensor_map:?}: entry {idx} of dim {j} is out of range 0..{k} or used twice"
                )));
            }
            axes.extend(named[(k as i64 - 1 - idx) as usize].clone());
        }
        dims.push(DimSharding::closed(merge_adjacent(axes, &m)?));
    }
    let mesh_ref = match mesh_name {
        Some(n) => MeshRef::Named(n.into()),
        None => MeshRef::Inline(Box::new(m.clone())),
    };
    let t = TensorSharding { dims, ..TensorSharding::replicated(mesh_ref, 0, false) };
    t.validate(&m, None, false).map_err(|e| Error::conversion(e.message))?;
    Ok((t, m))
}
