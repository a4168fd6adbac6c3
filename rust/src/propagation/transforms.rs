//! Sharding rewrites the solver applies outside of factor propagation: moving manual axes in
//! and out of the shardings of `sdy.manual_computation` (Shardy `eraseManualAxes`,
//! `eraseFreeAxes` in `ir/utils.cc`, `addFreeAxesToManualComputationSharding` in
//! `ir/dialect.cc`), fully open placeholders (`TensorShardingAttr::getFullyOpen`), and the
//! per-priority views of user priorities (`getInitializedSharding`,
//! `getUpdatedShardingForPriority` in `transforms/propagation/user_priority_propagation.cc`).

#![warn(missing_docs)]

use crate::axis::AxisRef;
use crate::mesh::Mesh;
use crate::sharding::{DimSharding, MeshRef, TensorSharding};

/// Priority of a dimension sharding without one (Shardy `kDefaultPriority`).
pub const DEFAULT_PRIORITY: i64 = 0;

/// `[{?}, {?}, ...]` of rank `rank` on `mesh` (Shardy `TensorShardingAttr::getFullyOpen`).
pub fn fully_open(mesh: &MeshRef, rank: usize) -> TensorSharding {
    TensorSharding::replicated(mesh.clone(), rank, true)
}

/// No dimension, replicated or unreduced axis (Shardy `TensorShardingAttr::emptyAxes`).
pub fn empty_axes(s: &TensorSharding) -> bool {
    s.replicated.is_empty() && s.unreduced.is_empty() && s.dims.iter().all(|d| d.axes.is_empty())
}

/// Every dimension open and without axes; replicated and unreduced axes are not looked at
/// (Shardy `TensorShardingAttr::isFullyReplicatedAndOpen`).
pub fn is_fully_open(s: &TensorSharding) -> bool {
    s.dims.iter().all(|d| d.axes.is_empty() && !d.closed)
}

fn is_manual(axis: &AxisRef, manual: &[String]) -> bool {
    manual.iter().any(|m| axis.name == *m)
}

/// Number of leading axes of `axes` that are manual (the manual axes of a manual computation's
/// sharding come first in each dimension).
fn manual_prefix(axes: &[AxisRef], manual: &[String]) -> usize {
    axes.iter().take_while(|a| is_manual(a, manual)).count()
}

/// Keeps, per dimension, the axes that `keep(dim axes, manual prefix length)` selects; the
/// replicated and unreduced axes keep their free (non-manual) axes only.
fn map_manual(outer: &TensorSharding, manual: &[String], take_manual: bool) -> TensorSharding {
    let dims = outer
        .dims
        .iter()
        .map(|d| {
            let n = manual_prefix(&d.axes, manual);
            let axes = if take_manual { d.axes[..n].to_vec() } else { d.axes[n..].to_vec() };
            DimSharding { axes, closed: d.closed, priority: d.priority }
        })
        .collect();
    let free = |list: &[AxisRef]| list.iter().filter(|a| !is_manual(a, manual)).cloned().collect::<Vec<_>>();
    TensorSharding {
        mesh: outer.mesh.clone(),
        dims,
        replicated: free(&outer.replicated),
        unreduced: free(&outer.unreduced),
        reduction: outer.reduction,
    }
}

/// The sharding seen inside a manual computation: each dimension without its leading manual
/// axes, replicated and unreduced axes without manual ones (Shardy `eraseManualAxes`).
pub fn erase_manual_axes(outer: &TensorSharding, manual: &[String]) -> TensorSharding {
    if manual.is_empty() {
        return outer.clone();
    }
    map_manual(outer, manual, false)
}

/// The manual axes of `outer` followed by the axes of `inner`, per dimension, with the
/// open/closed state and priority of `inner` and the replicated and unreduced axes of `outer`
/// (Shardy `addFreeAxesToManualComputationSharding`).
pub fn add_free_axes(outer: &TensorSharding, inner: &TensorSharding, manual: &[String]) -> TensorSharding {
    let base = map_manual(outer, manual, true);
    let dims = base
        .dims
        .iter()
        .zip(&inner.dims)
        .map(|(b, n)| {
            let mut axes = b.axes.clone();
            axes.extend(n.axes.iter().cloned());
            DimSharding { axes, closed: n.closed, priority: n.priority }
        })
        .collect();
    TensorSharding {
        mesh: inner.mesh.clone(),
        dims,
        replicated: outer.replicated.clone(),
        unreduced: outer.unreduced.clone(),
        reduction: outer.reduction,
    }
}

/// The non-zero priorities of `s`'s dimensions.
pub fn nonzero_priorities(s: &TensorSharding) -> Vec<i64> {
    let mut out: Vec<i64> = Vec::new();
    for d in &s.dims {
        let p = d.priority.unwrap_or(DEFAULT_PRIORITY);
        if p > 0 && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The sharding for the first user-priority round (Shardy `getInitializedSharding`): a
/// dimension of priority 0 (or none) loses its priority; any other becomes empty and closed,
/// its axes moving to the replicated axes (kept in mesh order).
pub fn initialized_for_priorities(original: &TensorSharding, mesh: &Mesh) -> TensorSharding {
    let mut replicated = original.replicated.clone();
    let dims = original
        .dims
        .iter()
        .map(|d| {
            if d.priority.unwrap_or(DEFAULT_PRIORITY) == 0 {
                DimSharding { axes: d.axes.clone(), closed: d.closed, priority: None }
            } else {
                replicated.extend(d.axes.iter().cloned());
                DimSharding { axes: Vec::new(), closed: true, priority: None }
            }
        })
        .collect();
    replicated.sort_by(|a, b| a.mesh_cmp(b, mesh));
    TensorSharding {
        mesh: original.mesh.clone(),
        dims,
        replicated,
        unreduced: original.unreduced.clone(),
        reduction: original.reduction,
    }
}

/// The current sharding `current` with each dimension whose original priority is `priority`
/// restored to its original sharding (without priority), and those axes removed from the
/// replicated axes (Shardy `getUpdatedShardingForPriority`).
pub fn updated_for_priority(current: &TensorSharding, original: &TensorSharding, priority: i64) -> TensorSharding {
    let mut dims = current.dims.clone();
    let mut seen: Vec<&AxisRef> = Vec::new();
    for (d, o) in dims.iter_mut().zip(&original.dims) {
        if o.priority.unwrap_or(DEFAULT_PRIORITY) == priority {
            *d = DimSharding { axes: o.axes.clone(), closed: o.closed, priority: None };
            seen.extend(o.axes.iter());
        }
    }
    let replicated = current.replicated.iter().filter(|a| !seen.contains(a)).cloned().collect();
    TensorSharding {
        mesh: current.mesh.clone(),
        dims,
        replicated,
        unreduced: current.unreduced.clone(),
        reduction: current.reduction,
    }
}
