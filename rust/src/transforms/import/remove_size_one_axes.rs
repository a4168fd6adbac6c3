//! `sdy-remove-size-one-axes` (Shardy `transforms/import/remove_size_one_axes.cc`): when some
//! `sdy.mesh` has an axis of size one, removes such axes from every sharding (dimension,
//! replicated and unreduced axes; a closed dimension left empty loses its priority). Meshes
//! and manual axes are kept.

use super::{mesh_of, mesh_ops};
use crate::axis::AxisRef;
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::ir::Program;
use crate::mesh::Mesh;
use crate::sharding::{DimSharding, MeshRef, Reduction};
use crate::text::print_sharding;

pub fn run(p: &mut Program) -> Result<()> {
    let mut meshes: FastMap<String, Mesh> = FastMap::default();
    for op in mesh_ops(p) {
        let mesh = mesh_of(p, op)?;
        meshes.insert(p.symbol_name(op).unwrap_or_default(), mesh);
    }
    if !meshes.values().any(|m| m.axes().iter().any(|a| a.size == 1)) {
        return Ok(());
    }
    p.transform_shardings(&mut |_, s, _| {
        let mesh = match &s.mesh {
            MeshRef::Inline(m) => m,
            MeshRef::Named(n) => meshes.get(n.as_str()).ok_or_else(|| {
                Error::program(format!(
                    "sharding {} refers to mesh @{}, which the module does not define",
                    print_sharding(s),
                    n.as_str()
                ))
            })?,
        };
        let keep = |a: &AxisRef| -> bool {
            let size = match a.sub {
                Some(sub) => sub.size,
                None => mesh.axis_size(&a.name).unwrap_or(0),
            };
            size != 1
        };
        let dims: Vec<DimSharding> = s
            .dims
            .iter()
            .map(|d| {
                let axes: Vec<AxisRef> = d.axes.iter().filter(|a| keep(a)).cloned().collect();
                let priority = if axes.is_empty() && d.closed { None } else { d.priority };
                DimSharding { axes, closed: d.closed, priority }
            })
            .collect();
        let replicated: Vec<AxisRef> = s.replicated.iter().filter(|a| keep(a)).cloned().collect();
        let unreduced: Vec<AxisRef> = s.unreduced.iter().filter(|a| keep(a)).cloned().collect();
        if dims == s.dims && replicated == s.replicated && unreduced == s.unreduced {
            return Ok(None);
        }
        let reduction = if unreduced.is_empty() { Reduction::Sum } else { s.reduction };
        let mut new = s.clone();
        (new.dims, new.replicated, new.unreduced, new.reduction) = (dims, replicated, unreduced, reduction);
        Ok(Some(new))
    })
}
