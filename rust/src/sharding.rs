//! Dimension and tensor shardings (Shardonnay RFC "Sharding Representation"; Shardy's
//! `DimensionShardingAttr` / `TensorShardingAttr` and `verifyTensorShardingAttr` in
//! `shardy/dialect/sdy/ir/verifiers.cc`), their invariants and their per-device view.
//!
//! Invariant rule identifiers (the `rule` of an invariant error):
//! `maximal-mesh-sharding`, `rank-mismatch`, `unknown-axis`, `duplicate-axis`,
//! `mergeable-sub-axes`, `sub-axis-pre-size`, `sub-axis-size`, `sub-axis-divisibility`,
//! `sub-axis-is-full-axis`, `overlapping-sub-axes`, `incompatible-sub-axes`, `full-and-sub-axis`, `unsorted-replicated`,
//! `unsorted-unreduced`, `negative-priority`, `priority-on-empty-closed-dim`, `dim-exhausted`,
//! `zero-size-dim-sharded`, `sub-axis-in-user-sharding`, `invalid-shape`, `dynamic-dim`.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use crate::axis::AxisRef;
use crate::error::{Error, Result};
use crate::mesh::Mesh;
use crate::name::Name;

/// The sharding of one tensor dimension: axes major to minor, open (`?`) or closed, and an
/// optional priority `pN` (0 is the highest).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DimSharding {
    pub axes: Vec<AxisRef>,
    pub closed: bool,
    pub priority: Option<i64>,
}

impl DimSharding {
    pub fn closed(axes: Vec<AxisRef>) -> DimSharding {
        DimSharding { axes, closed: true, priority: None }
    }
    pub fn open(axes: Vec<AxisRef>) -> DimSharding {
        DimSharding { axes, closed: false, priority: None }
    }

    /// Product of the axis sizes: how many shards the dimension is split into.
    pub fn shard_count(&self, mesh: &Mesh) -> Result<i64> {
        let mut n: i64 = 1;
        for a in &self.axes {
            n = n
                .checked_mul(a.size(mesh)?)
                .ok_or_else(|| Error::invariant("duplicate-axis", "product of a dimension's axis sizes overflows"))?;
        }
        Ok(n)
    }
}

/// Which mesh a sharding is bound to: a `sdy.mesh` symbol or an inlined mesh.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MeshRef {
    Named(Name),
    /// Boxed: a sharding carries a `MeshRef`, and programs hold one sharding slot per value
    /// (an inline `Mesh` would add 56 bytes to each).
    Inline(Box<Mesh>),
}

/// How unreduced axes are to be reduced (`unreduced={..}` is sum; Shardy also prints
/// `unreduced=max{..}` and `unreduced=min{..}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Reduction {
    #[default]
    Sum,
    Max,
    Min,
}

impl Reduction {
    pub fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Max => "max",
            Reduction::Min => "min",
        }
    }
    pub fn from_name(name: &str) -> Option<Reduction> {
        match name {
            "sum" => Some(Reduction::Sum),
            "max" => Some(Reduction::Max),
            "min" => Some(Reduction::Min),
            _ => None,
        }
    }
}

/// A tensor sharding: one [`DimSharding`] per dimension, explicitly replicated axes and
/// unreduced axes (both in mesh order), bound to a mesh.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorSharding {
    pub mesh: MeshRef,
    pub dims: Vec<DimSharding>,
    pub replicated: Vec<AxisRef>,
    pub unreduced: Vec<AxisRef>,
    pub reduction: Reduction,
}

/// Index range `[start, stop)` of one dimension held by one device (empty when padding only).
pub type Range = (i64, i64);

fn invalid(rule: &'static str, msg: String) -> Error {
    Error::invariant(rule, msg)
}

impl TensorSharding {
    /// A sharding with no axes: `[{}, {}]` (closed) or `[{?}, {?}]` (open).
    pub fn replicated(mesh: MeshRef, rank: usize, open: bool) -> TensorSharding {
        TensorSharding {
            mesh,
            dims: vec![DimSharding { axes: vec![], closed: !open, priority: None }; rank],
            replicated: vec![],
            unreduced: vec![],
            reduction: Reduction::Sum,
        }
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Every axis reference: dimensions (major to minor), then replicated, then unreduced.
    pub fn axis_refs(&self) -> impl Iterator<Item = &AxisRef> {
        self.dims.iter().flat_map(|d| d.axes.iter()).chain(&self.replicated).chain(&self.unreduced)
    }

    /// No dimension is sharded and nothing is unreduced.
    pub fn is_fully_replicated(&self) -> bool {
        self.dims.iter().all(|d| d.axes.is_empty()) && self.unreduced.is_empty()
    }

    /// The mesh this sharding is bound to, looked up by name in `meshes` when not inlined.
    pub fn resolve_mesh<'a>(&'a self, meshes: &'a HashMap<String, Mesh>) -> Result<&'a Mesh> {
        match &self.mesh {
            MeshRef::Inline(m) => Ok(m),
            MeshRef::Named(name) => meshes.get(name.as_str()).ok_or_else(|| {
                let mut known: Vec<&String> = meshes.keys().collect();
                known.sort();
                Error::mesh(format!("unknown mesh @{name}; known meshes: {known:?}"))
            }),
        }
    }

    /// Invariants that need no mesh: priorities, sub-axis sizes and exact duplicates. Cheap;
    /// run on construction and parsing.
    pub fn check_local(&self) -> Result<()> {
        self.check_local_inner()
            .map_err(|e| e.context(format!("invalid sharding {}", crate::text::print_sharding(self))))
    }

    fn check_local_inner(&self) -> Result<()> {
        for (i, d) in self.dims.iter().enumerate() {
            check_priority(i, d)?;
        }
        let mut seen: HashSet<&AxisRef> = HashSet::new();
        for r in self.axis_refs() {
            r.check_local()?;
            if !seen.insert(r) {
                return Err(invalid("duplicate-axis", format!("axis {r} is used more than once")));
            }
        }
        Ok(())
    }

    /// Checks every invariant of the representation against `mesh` and, when given, the tensor
    /// `shape` (one size per dimension, -1 for a dynamic size): Shardy's
    /// `verifyTensorShardingAttr`, plus the rank against `shape`, plus sub-axes that coexist.
    ///
    /// With `user`, also the rules the RFC sets for users' own annotations, which Shardy's
    /// verifier does not check and its propagation does not keep (its aggressive propagation
    /// lit tests shard a dimension of size 2 on `{"a", "b"}`): no sub-axes (users change their
    /// mesh instead), no sharded dimension of size 0, and no dimension sharded further once
    /// exhausted (without the minor-most axis the product of axis sizes must be smaller than
    /// the dimension size whenever the full product exceeds it).
    pub fn validate(&self, mesh: &Mesh, shape: Option<&[i64]>, user: bool) -> Result<()> {
        self.validate_inner(mesh, shape, user)
            .map_err(|e| e.context(format!("invalid sharding {}", crate::text::print_sharding(self))))
    }

    fn validate_inner(&self, mesh: &Mesh, shape: Option<&[i64]>, user: bool) -> Result<()> {
        if mesh.is_maximal() {
            if !self.dims.is_empty() || !self.replicated.is_empty() || !self.unreduced.is_empty() {
                return Err(invalid(
                    "maximal-mesh-sharding",
                    format!(
                        "a sharding on the maximal mesh {} must have no dimensions and no replicated or unreduced axes",
                        crate::text::print_mesh(mesh)
                    ),
                ));
            }
            return Ok(());
        }
        if let Some(shape) = shape {
            if let Some(i) = shape.iter().position(|&s| s < DYNAMIC) {
                return Err(invalid(
                    "invalid-shape",
                    format!("dim {i} of shape {shape:?} has size {}; expected a size >= 0 or -1 (dynamic)", shape[i]),
                ));
            }
            if shape.len() != self.dims.len() {
                return Err(invalid(
                    "rank-mismatch",
                    format!(
                        "expected {} dimension shardings for a tensor of rank {} (shape {:?}), got {}",
                        shape.len(),
                        shape.len(),
                        shape,
                        self.dims.len()
                    ),
                ));
            }
        }
        let mut seen = Seen::default();
        for (i, d) in self.dims.iter().enumerate() {
            check_priority(i, d)?;
            check_axis_list(&d.axes, mesh, &mut seen).map_err(|e| e.context(format!("dim {i}")))?;
            if let Some(&size) = shape.and_then(|s| s.get(i)).filter(|_| user) {
                check_dim_size(i, d, size, mesh)?;
            }
        }
        for (list, name, rule) in [
            (&self.replicated, "replicated", "unsorted-replicated"),
            (&self.unreduced, "unreduced", "unsorted-unreduced"),
        ] {
            if !list.windows(2).all(|w| w[0].mesh_cmp(&w[1], mesh) != Ordering::Greater) {
                let mut sorted = list.clone();
                sorted.sort_by(|a, b| a.mesh_cmp(b, mesh));
                return Err(invalid(
                    rule,
                    format!(
                        "{name} axes must be in mesh order: expected {}, got {}",
                        crate::text::print_axis_list(&sorted),
                        crate::text::print_axis_list(list)
                    ),
                ));
            }
            check_axis_list(list, mesh, &mut seen).map_err(|e| e.context(name))?;
        }
        let seen = seen.list;
        check_sub_axes(&seen, mesh)?;
        if user {
            if let Some(r) = seen.iter().find(|r| r.is_sub_axis()) {
                return Err(invalid(
                    "sub-axis-in-user-sharding",
                    format!("user shardings may only use full axes, got sub-axis {r}; split the mesh axis instead"),
                ));
            }
        }
        Ok(())
    }

    /// Per-device shape: each dimension of size `d` split into `n` shards holds `ceil(d / n)`
    /// elements (the last shards are padded when `n` does not divide `d`).
    pub fn local_shape(&self, mesh: &Mesh, shape: &[i64]) -> Result<Vec<i64>> {
        self.validate(mesh, Some(shape), false)?;
        if mesh.is_maximal() {
            return Ok(shape.to_vec());
        }
        self.dims
            .iter()
            .zip(shape)
            .map(|(d, &size)| Ok(if size == DYNAMIC { DYNAMIC } else { ceil_div(size, d.shard_count(mesh)?) }))
            .collect()
    }

    /// The index ranges of the global tensor held by `device` (one `[start, stop)` per
    /// dimension; shards that lie wholly in the padding are empty ranges `[size, size)`).
    /// Errors for dynamic dimensions (rule `dynamic-dim`) and devices outside the mesh.
    pub fn device_ranges(&self, mesh: &Mesh, shape: &[i64], device: i64) -> Result<Vec<Range>> {
        self.validate(mesh, Some(shape), false)?;
        if let Some(i) = shape.iter().position(|&s| s == DYNAMIC) {
            return Err(invalid(
                "dynamic-dim",
                format!("dim {i} of shape {shape:?} is dynamic: its ranges are unknown"),
            ));
        }
        let pos = mesh.position_of(device)?;
        if mesh.is_maximal() {
            return Ok(shape.iter().map(|&s| (0, s)).collect());
        }
        let mut out = Vec::with_capacity(shape.len());
        for (d, &size) in self.dims.iter().zip(shape) {
            let (index, count) = shard_index(&d.axes, mesh, pos)?;
            let chunk = ceil_div(size, count);
            // index < count, so index * chunk < count * chunk < size + count: no i64 overflow
            // in i128.
            let start = (i128::from(index) * i128::from(chunk)).min(i128::from(size)) as i64;
            out.push((start, start.saturating_add(chunk).min(size)));
        }
        Ok(out)
    }
}

/// A dynamic dimension size (`?` in MLIR).
pub const DYNAMIC: i64 = -1;

/// Shard index of the device at linear mesh position `pos` along a dimension sharded by
/// `axes` (major to minor), and the number of shards.
pub fn shard_index(axes: &[AxisRef], mesh: &Mesh, pos: i64) -> Result<(i64, i64)> {
    let (mut index, mut count) = (0i64, 1i64);
    for a in axes {
        let ai = mesh.axis_index(&a.name).ok_or_else(|| invalid("unknown-axis", format!("unknown axis {a}")))?;
        let full = mesh.axes()[ai].size;
        let coord = mesh.coordinate(pos, ai);
        let size = a.size(mesh)?;
        let sub_coord = (coord / (full / a.next_pre_size(mesh)?)) % size;
        index = index * size + sub_coord;
        count *= size;
    }
    Ok((index, count))
}

fn ceil_div(a: i64, b: i64) -> i64 {
    if b <= 0 {
        return a;
    }
    a / b + i64::from(a % b != 0)
}

fn check_priority(dim: usize, d: &DimSharding) -> Result<()> {
    match d.priority {
        Some(p) if p < 0 => Err(invalid("negative-priority", format!("dim {dim}: priority must be >= 0, got p{p}"))),
        Some(p) if d.closed && d.axes.is_empty() => Err(invalid(
            "priority-on-empty-closed-dim",
            format!("dim {dim}: an empty closed dimension sharding {{}} cannot have a priority, got p{p}"),
        )),
        _ => Ok(()),
    }
}

/// The axis references of a sharding met so far: in order, and as a set for the duplicate check.
#[derive(Default)]
struct Seen<'a> {
    list: Vec<&'a AxisRef>,
    set: HashSet<&'a AxisRef>,
}

/// Known axes, no duplicates, no two consecutive sub-axes that merge (Shardy `verifyAxisRefList`).
fn check_axis_list<'a>(axes: &'a [AxisRef], mesh: &Mesh, seen: &mut Seen<'a>) -> Result<()> {
    let mut prev: Option<&AxisRef> = None;
    for a in axes {
        mesh.require_axis(&a.name)?;
        if !seen.set.insert(a) {
            return Err(invalid("duplicate-axis", format!("axis {a} is used more than once")));
        }
        seen.list.push(a);
        if let Some(p) = prev {
            if p.can_merge(a) {
                let merged = p.merge(a, mesh)?;
                return Err(invalid(
                    "mergeable-sub-axes",
                    format!("consecutive sub-axes {p}, {a} must be written as one: {merged}"),
                ));
            }
        }
        prev = Some(a);
    }
    Ok(())
}

/// Every sub-axis valid for its axis, no full axis used together with its sub-axes, no two
/// sub-axes overlapping (Shardy `verifySubAxes`).
fn check_sub_axes(refs: &[&AxisRef], mesh: &Mesh) -> Result<()> {
    // First-seen order of axes, so the error names the same sub-axis whatever the hashing.
    let mut order: Vec<&str> = Vec::new();
    let mut subs_of: HashMap<&str, Vec<&AxisRef>> = HashMap::new();
    for r in refs.iter().filter(|r| r.is_sub_axis()) {
        subs_of
            .entry(&r.name)
            .or_insert_with(|| {
                order.push(&r.name);
                Vec::new()
            })
            .push(r);
    }
    let whole: HashSet<&str> = refs.iter().filter(|r| !r.is_sub_axis()).map(|r| r.name.as_str()).collect();
    for name in order {
        let mut subs = subs_of.remove(name).unwrap_or_default();
        if whole.contains(name) {
            return Err(invalid(
                "full-and-sub-axis",
                format!("axis \"{name}\" is used both whole and as sub-axis {}", subs[0]),
            ));
        }
        for s in &subs {
            s.check(mesh)?;
        }
        subs.sort_by(|a, b| a.mesh_cmp(b, mesh));
        for w in subs.windows(2) {
            if w[0].overlaps(w[1]) {
                return Err(invalid("overlapping-sub-axes", format!("sub-axes {} and {} overlap", w[0], w[1])));
            }
            // Both must be pieces of one factorisation of the axis: the gap between them is a
            // whole sub-axis (Shardy `AxisRefAttr::canCoexist`).
            let (prev_next, pre) = (w[0].pre_size() * w[0].sub.map_or(1, |s| s.size), w[1].pre_size());
            if pre % prev_next != 0 {
                return Err(invalid(
                    "incompatible-sub-axes",
                    format!(
                        "sub-axes {} and {} do not split axis \"{name}\" consistently: expected the pre-size {pre} to be a multiple of {prev_next}",
                        w[0], w[1]
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_dim_size(dim: usize, d: &DimSharding, size: i64, mesh: &Mesh) -> Result<()> {
    if d.axes.is_empty() || size < 0 {
        return Ok(()); // unsharded, or dynamic
    }
    if size == 0 {
        return Err(invalid(
            "zero-size-dim-sharded",
            format!("dim {dim} has size 0 and cannot be sharded, got {}", crate::text::print_axis_list(&d.axes)),
        ));
    }
    let total = d.shard_count(mesh)?;
    let without_minor = total / d.axes.last().map_or(Ok(1), |a| a.size(mesh))?;
    if total > size && without_minor >= size {
        return Err(invalid(
            "dim-exhausted",
            format!(
                "dim {dim} of size {size} is already split {without_minor} ways before its minor-most axis {}; \
                 expected the product of sizes without the minor-most axis to be < {size}",
                d.axes.last().map(|a| a.to_string()).unwrap_or_default()
            ),
        ));
    }
    Ok(())
}
