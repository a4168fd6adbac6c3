//! `sdy-remove-size-one-axes` (Shardy `transforms/import/remove_size_one_axes.cc`): when some
//! `sdy.mesh` has an axis of size one, removes such axes from every sharding (dimension,
//! replicated and unreduced axes; a closed dimension left empty loses its priority). Meshes
//! and manual axes are kept.

use crate::axis::AxisRef;
use crate::error::Result;
use crate::ir::Program;
use crate::sharding::{DimSharding, Reduction};
use crate::transforms::common::{meshes, resolve_mesh};
use crate::transforms::PassContext;

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let meshes = meshes(p)?;
    if !meshes.values().any(|m| m.axes().iter().any(|a| a.size == 1)) {
        return Ok(());
    }
    p.transform_shardings(&mut |_, s, _| {
        let mesh = resolve_mesh(s, &meshes)?;
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
