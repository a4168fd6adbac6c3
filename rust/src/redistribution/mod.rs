//! Tensor redistribution (`connect`): the cheapest sequence of collectives that turns a tensor
//! sharded one way into the same tensor sharded another way on the same mesh (issue 6
//! "Redistribution"; hidet RFC "Parameter Sharding and Communication Op Injection", `connect`;
//! MindSpore "Tensor Redistribution"; Shardonnay RFC "SPMD Partitioner").
//!
//! The collectives and their semantics are Shardy's (`shardy/dialect/sdy/ir/ops.td`, produced by
//! `sdy-reshard-to-collectives`, `transforms/export/reshard_to_collectives.cc`):
//!
//! * `all_gather`: per dimension, the minor-most axes listed are gathered (the group's shards
//!   concatenated in axis order, major to minor);
//! * `all_slice`: per dimension, the axes listed are appended minor-most; each device keeps its
//!   slice of what it holds (local, free);
//! * `all_to_all`: the minor-most axes of `src_dim` move to the minor end of `tgt_dim`;
//! * `collective_permute`: same shard counts per dimension, shards reassigned to devices (e.g.
//!   axes swapped between or reordered within dimensions);
//! * `all_reduce`: pending (unreduced) axes reduced; the result is replicated along them;
//! * `reduce_scatter`: per dimension, unreduced axes reduced and scattered along that dimension.
//!
//! Non-divisible dimensions are padded: a dimension of size `d` in `n` shards holds
//! `ceil(d / n)` elements per device (the layout of `TensorSharding::device_ranges`), costs
//! count the padded shard, and a change of shard count is only planned when both counts pad the
//! dimension to the same length or one side is unsharded (otherwise the dimension is gathered
//! whole and sliced again).

mod atoms;
pub mod cost;
mod moves;
mod planner;

use crate::axis::AxisRef;
use crate::error::{Error, Result};
use crate::mesh::Mesh;
use crate::sharding::{DimSharding, MeshRef, Reduction, TensorSharding, DYNAMIC};
use atoms::{Atoms, Layout};
use moves::{Ctx, Move};
use planner::AtomPlan;

pub use cost::{CollectiveKind, CostModel, Link, ResolvedCost, StepCost, DEFAULT_BANDWIDTH, DEFAULT_LATENCY};

/// One collective of a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Collective {
    /// Per tensor dimension, the minor-most axes gathered.
    AllGather { axes: Vec<Vec<AxisRef>> },
    /// Per tensor dimension, the axes sliced (appended minor-most). Local; costs nothing.
    AllSlice { axes: Vec<Vec<AxisRef>> },
    /// The minor-most `axes` of dimension `src_dim` move to the minor end of `tgt_dim`.
    AllToAll { src_dim: usize, tgt_dim: usize, axes: Vec<AxisRef> },
    /// Shards move between devices with the same shard count per dimension; `axes` are the
    /// (sub-)axes whose place in the sharding changes.
    CollectivePermute { axes: Vec<AxisRef> },
    /// The unreduced `axes` are reduced with `reduction`; the result is replicated along them.
    AllReduce { axes: Vec<AxisRef>, reduction: Reduction },
    /// Per tensor dimension, unreduced axes reduced with `reduction` and scattered along it.
    ReduceScatter { axes: Vec<Vec<AxisRef>>, reduction: Reduction },
}

impl Collective {
    pub fn kind(&self) -> CollectiveKind {
        match self {
            Collective::AllGather { .. } => CollectiveKind::AllGather,
            Collective::AllSlice { .. } => CollectiveKind::AllSlice,
            Collective::AllToAll { .. } => CollectiveKind::AllToAll,
            Collective::CollectivePermute { .. } => CollectiveKind::CollectivePermute,
            Collective::AllReduce { .. } => CollectiveKind::AllReduce,
            Collective::ReduceScatter { .. } => CollectiveKind::ReduceScatter,
        }
    }
}

/// One step: a collective, the sharding after it, and its cost per device.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub op: Collective,
    /// The tensor's sharding after this step (closed dimensions, bound to the target's mesh).
    pub out: TensorSharding,
    /// Bytes each device sends (the most any device sends), see [`cost`].
    pub bytes: f64,
    /// Seconds under the cost model.
    pub seconds: f64,
}

fn dims_text(per_dim: &[Vec<AxisRef>]) -> String {
    let parts: Vec<String> = per_dim.iter().map(|a| crate::text::print_axis_list(a)).collect();
    format!("[{}]", parts.join(", "))
}

fn reduction_prefix(r: Reduction) -> &'static str {
    match r {
        Reduction::Sum => "",
        Reduction::Max => "max ",
        Reduction::Min => "min ",
    }
}

impl Step {
    /// The step in Shardy's collective op syntax without operand and type, e.g.
    /// `sdy.all_to_all [{"x"}: 0->2] out_sharding=<@mesh, [{}, {"y"}, {"x"}]>`.
    pub fn text(&self) -> String {
        let head = match &self.op {
            Collective::AllGather { axes } => format!("sdy.all_gather {}", dims_text(axes)),
            Collective::AllSlice { axes } => format!("sdy.all_slice {}", dims_text(axes)),
            Collective::AllToAll { src_dim, tgt_dim, axes } => {
                format!("sdy.all_to_all [{}: {src_dim}->{tgt_dim}]", crate::text::print_axis_list(axes))
            }
            Collective::CollectivePermute { .. } => "sdy.collective_permute".to_string(),
            Collective::AllReduce { axes, reduction } => {
                format!("sdy.all_reduce {}{}", reduction_prefix(*reduction), crate::text::print_axis_list(axes))
            }
            Collective::ReduceScatter { axes, reduction } => {
                format!("sdy.reduce_scatter {}{}", reduction_prefix(*reduction), dims_text(axes))
            }
        };
        let mut body = String::new();
        crate::text::print_sharding_body(&self.out, &mut body);
        format!("{head} out_sharding={body}")
    }
}

/// A redistribution plan: ordered steps, their totals and the naive plan's totals.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// Sum of the steps' bytes per device.
    pub bytes: f64,
    /// Sum of the steps' seconds.
    pub seconds: f64,
    /// Bytes per device of the naive plan: all-reduce pending partial axes, all-gather
    /// everything, all-slice the target.
    pub naive_bytes: f64,
    pub naive_seconds: f64,
}

impl Plan {
    /// One step per line in Shardy's syntax ([`Step::text`]).
    pub fn text(&self) -> String {
        self.steps.iter().map(Step::text).collect::<Vec<_>>().join("\n")
    }
}

fn check_mesh(which: &str, t: &TensorSharding, mesh: &Mesh) -> Result<()> {
    match &t.mesh {
        MeshRef::Inline(m) if **m != *mesh => Err(Error::mesh(format!(
            "the {which} sharding {} is on mesh {}, expected the planning mesh {}",
            crate::text::print_sharding(t),
            crate::text::print_mesh(m),
            crate::text::print_mesh(mesh)
        ))),
        _ => Ok(()),
    }
}

fn layout(atoms: &Atoms, mesh: &Mesh, t: &TensorSharding) -> Layout {
    let mut unreduced = atoms.of_list(mesh, &t.unreduced);
    unreduced.sort_unstable();
    Layout { dims: t.dims.iter().map(|d| atoms.of_list(mesh, &d.axes)).collect(), unreduced }
}

/// Plans the redistribution of a tensor of `shape` (static sizes) with elements of
/// `dtype_bytes` bytes from sharding `src` to `tgt` on `mesh`, priced by `model`.
///
/// Both shardings must be valid on `mesh` for `shape` (an inlined mesh must equal `mesh`; a
/// named one is taken to be `mesh`). Open/closed dimensions, priorities and explicitly
/// replicated axes do not matter. The target's unreduced axes must be unreduced in the source
/// (no collective creates a partial value) with the same reduction.
///
/// Errors: `ErrorKind::Mesh` for a mismatched mesh or cost-model axis; `ErrorKind::Invariant`
/// with rules `rank-mismatch` and the other sharding invariants, `dynamic-dim`, `dtype-bytes`,
/// `unreduced-target` and `reduction-mismatch`.
pub fn plan(
    mesh: &Mesh,
    shape: &[i64],
    dtype_bytes: i64,
    src: &TensorSharding,
    tgt: &TensorSharding,
    model: &CostModel,
) -> Result<Plan> {
    if dtype_bytes < 1 {
        return Err(Error::invariant(
            "dtype-bytes",
            format!("element size must be at least 1 byte, got {dtype_bytes}"),
        ));
    }
    if let Some(i) = shape.iter().position(|&s| s == DYNAMIC) {
        return Err(Error::invariant(
            "dynamic-dim",
            format!("dim {i} of shape {shape:?} is dynamic; redistribution needs static sizes"),
        ));
    }
    check_mesh("source", src, mesh)?;
    check_mesh("target", tgt, mesh)?;
    src.validate(mesh, Some(shape), false).map_err(|e| e.context("source"))?;
    tgt.validate(mesh, Some(shape), false).map_err(|e| e.context("target"))?;
    let cost = model.resolve(mesh)?;
    if let Some(r) = tgt.unreduced.iter().find(|r| !src.unreduced.contains(r)) {
        return Err(Error::invariant(
            "unreduced-target",
            format!(
                "the target is unreduced along {r} but the source {} is not; no collective makes a value partial",
                crate::text::print_sharding(src)
            ),
        ));
    }
    if !tgt.unreduced.is_empty() && tgt.reduction != src.reduction {
        return Err(Error::invariant(
            "reduction-mismatch",
            format!(
                "the source reduces its unreduced axes with {}, the target with {}",
                src.reduction.name(),
                tgt.reduction.name()
            ),
        ));
    }
    if mesh.axes().is_empty() {
        return Ok(Plan { steps: vec![], bytes: 0.0, seconds: 0.0, naive_bytes: 0.0, naive_seconds: 0.0 });
    }
    let src_refs = || src.dims.iter().flat_map(|d| d.axes.iter()).chain(&src.unreduced);
    let tgt_refs = || tgt.dims.iter().flat_map(|d| d.axes.iter());
    let (atoms, src_l, tgt_l, joint) = match Atoms::new(mesh, src_refs().chain(tgt_refs())) {
        Some(atoms) => {
            let (s, t) = (layout(&atoms, mesh, src), layout(&atoms, mesh, tgt));
            (atoms, s, t, true)
        }
        None => {
            let (atoms, s, t) = split_atoms(mesh, src, tgt);
            (atoms, s, t, false)
        }
    };
    let ctx = Ctx { atoms: &atoms, shape, dtype_bytes, cost: &cost };
    let naive =
        planner::naive(&ctx, &src_l, &tgt_l).ok_or_else(|| internal("the naive plan does not reach the target"))?;
    let naive = planner::merge_adjacent(&ctx, &src_l, naive);
    let limit = naive.total().bytes * (1.0 + 1e-12) + 1e-9;
    // Preference on equal cost: permute, greedy (the shapes of Shardy's plans), then naive.
    let mut candidates: Vec<AtomPlan> = Vec::new();
    if joint {
        let opening = planner::opening(&ctx, &src_l, &tgt_l);
        let built = [planner::permute(&ctx, &src_l, &tgt_l, &opening), planner::greedy(&ctx, &src_l, &tgt_l, &opening)];
        candidates.extend(built.into_iter().flatten().map(|c| planner::merge_adjacent(&ctx, &src_l, c)));
    }
    candidates.push(naive.clone());
    let mut best: Option<AtomPlan> = None;
    for c in candidates {
        if c.end(&src_l) != &tgt_l || c.total().bytes > limit {
            continue;
        }
        if best.as_ref().is_none_or(|b| planner::better(&c, b)) {
            best = Some(c);
        }
    }
    let best = best.unwrap_or_else(|| naive.clone());
    let (t, n) = (best.total(), naive.total());
    Ok(Plan {
        steps: convert(mesh, &atoms, src, tgt, &src_l, &best),
        bytes: t.bytes,
        seconds: t.seconds,
        naive_bytes: n.bytes,
        naive_seconds: n.seconds,
    })
}

fn internal(msg: &str) -> Error {
    Error::invariant("redistribution-internal", format!("internal planner error: {msg}"))
}

/// Atoms when source and target split an axis incompatibly: the source's atoms, then the
/// target's dimension atoms as separate ids (only the naive plan, which gathers every source
/// axis before slicing any target axis, is valid over them). Target unreduced axes are source
/// unreduced axes (checked by the caller) and use the source's ids.
fn split_atoms(mesh: &Mesh, src: &TensorSharding, tgt: &TensorSharding) -> (Atoms, Layout, Layout) {
    let src_refs = src.dims.iter().flat_map(|d| d.axes.iter()).chain(&src.unreduced);
    let tgt_refs = tgt.dims.iter().flat_map(|d| d.axes.iter());
    // A valid sharding's own sub-axes always coexist, so each side alone has atoms.
    let a = Atoms::new(mesh, src_refs).unwrap_or(Atoms { atoms: vec![] });
    let b = Atoms::new(mesh, tgt_refs).unwrap_or(Atoms { atoms: vec![] });
    let src_l = layout(&a, mesh, src);
    let offset = a.atoms.len();
    let mut tgt_l = layout(&b, mesh, tgt);
    for d in &mut tgt_l.dims {
        for id in d.iter_mut() {
            *id += offset;
        }
    }
    tgt_l.unreduced = layout(&a, mesh, tgt).unreduced;
    let mut atoms = a;
    atoms.atoms.extend(b.atoms);
    (atoms, src_l, tgt_l)
}

/// Turns atom moves back into collectives over axis references, with the sharding after each.
fn convert(
    mesh: &Mesh,
    atoms: &Atoms,
    src: &TensorSharding,
    tgt: &TensorSharding,
    start: &Layout,
    plan: &AtomPlan,
) -> Vec<Step> {
    let refs = |ids: &[usize]| atoms.refs(mesh, ids);
    let per_dim = |p: &[Vec<usize>]| p.iter().map(|ids| refs(ids)).collect::<Vec<_>>();
    let sorted = |ids: &[usize]| {
        let mut v = ids.to_vec();
        v.sort_unstable();
        refs(&v)
    };
    let mut prev = start;
    let mut out = Vec::with_capacity(plan.steps.len());
    for (m, after, c) in &plan.steps {
        let op = match m {
            Move::Gather(p) => Collective::AllGather { axes: per_dim(p) },
            Move::Slice(p) => Collective::AllSlice { axes: per_dim(p) },
            Move::AllToAll { src, tgt, atoms } => {
                Collective::AllToAll { src_dim: *src, tgt_dim: *tgt, axes: refs(atoms) }
            }
            Move::Permute(to) => Collective::CollectivePermute { axes: sorted(&moves::moved_atoms(prev, to)) },
            Move::AllReduce(ids) => Collective::AllReduce { axes: sorted(ids), reduction: src.reduction },
            Move::ReduceScatter(p) => Collective::ReduceScatter { axes: per_dim(p), reduction: src.reduction },
        };
        let unreduced = sorted(&after.unreduced);
        let sharding = TensorSharding {
            mesh: tgt.mesh.clone(),
            dims: after.dims.iter().map(|ids| DimSharding::closed(refs(ids))).collect(),
            replicated: vec![],
            reduction: if unreduced.is_empty() { Reduction::Sum } else { src.reduction },
            unreduced,
        };
        out.push(Step { op, out: sharding, bytes: c.bytes, seconds: c.seconds });
        prev = after;
    }
    out
}
