//! The alpha-beta cost of one collective over mesh axes (issue 6 "Redistribution"; the
//! bandwidth terms are the standard ring-algorithm volumes, Thakur, Rabenseifner and Gropp,
//! "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005; the hidet RFC
//! "Parameter Sharding and Communication Op Injection" prices `connect` the same way).
//!
//! Every formula takes `s`, the bytes of the **local buffer each device holds before the
//! collective** (padded shard: the product of `ceil(dim / shards)` over the dimensions, times
//! the element size), and the group size `n` (product of the sizes of the axes involved):
//!
//! | collective          | bytes sent per device            | latency term              |
//! |---------------------|----------------------------------|---------------------------|
//! | all-gather          | `(n-1)·s` = `(n-1)/n·S_out`, `S_out = n·s` gathered size | `Σ_a α_a·(n_a-1)` |
//! | all-slice           | 0 (local dynamic slice)          | 0                         |
//! | all-to-all          | `(n-1)/n·s` = `(n-1)/n²·S_grp`, `S_grp = n·s` | `Σ_a α_a·(n_a-1)` |
//! | collective-permute  | `s` (whole buffer to one peer)   | `max_a α_a` (one message) |
//! | all-reduce          | `2(n-1)/n·s` (reduce-scatter + all-gather) | `2·Σ_a α_a·(n_a-1)` |
//! | reduce-scatter      | `(n-1)/n·s` (`s` = unscattered input) | `Σ_a α_a·(n_a-1)`  |
//!
//! Seconds = latency term + bytes / (bandwidth of the slowest axis involved), where `n_a` is the
//! size of axis (or sub-axis) `a` in the group and `α_a`, bandwidth are that mesh axis' link.

use crate::error::{Error, Result};
use crate::mesh::Mesh;

/// Default link bandwidth: 100 GB/s (10^11 bytes per second), about one NVLink-class link.
pub const DEFAULT_BANDWIDTH: f64 = 100e9;
/// Default per-message latency α: 5 µs.
pub const DEFAULT_LATENCY: f64 = 5e-6;

/// The kind of a collective, for [`ResolvedCost::cost`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CollectiveKind {
    AllGather,
    AllSlice,
    AllToAll,
    CollectivePermute,
    AllReduce,
    ReduceScatter,
}

impl CollectiveKind {
    /// Shardy's op name (`sdy.<name>`).
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllGather => "all_gather",
            CollectiveKind::AllSlice => "all_slice",
            CollectiveKind::AllToAll => "all_to_all",
            CollectiveKind::CollectivePermute => "collective_permute",
            CollectiveKind::AllReduce => "all_reduce",
            CollectiveKind::ReduceScatter => "reduce_scatter",
        }
    }
}

/// Bandwidth (bytes per second) and latency α (seconds per message) of a mesh axis' links.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    pub bandwidth: f64,
    pub latency: f64,
}

impl Link {
    /// Errors unless bandwidth is finite and > 0 and latency finite and >= 0.
    pub fn new(bandwidth: f64, latency: f64) -> Result<Link> {
        if !(bandwidth.is_finite() && bandwidth > 0.0) {
            return Err(Error::invariant(
                "cost-model",
                format!("bandwidth must be a finite number of bytes/s > 0, got {bandwidth}"),
            ));
        }
        if !(latency.is_finite() && latency >= 0.0) {
            return Err(Error::invariant(
                "cost-model",
                format!("latency must be a finite number of seconds >= 0, got {latency}"),
            ));
        }
        Ok(Link { bandwidth, latency })
    }
}

impl Default for Link {
    fn default() -> Link {
        Link { bandwidth: DEFAULT_BANDWIDTH, latency: DEFAULT_LATENCY }
    }
}

/// Per-axis links: a default for every axis and overrides by mesh axis name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CostModel {
    pub default: Link,
    pub per_axis: Vec<(String, Link)>,
}

impl CostModel {
    /// The model with `default` for every axis.
    pub fn uniform(default: Link) -> CostModel {
        CostModel { default, per_axis: Vec::new() }
    }

    /// Overrides the link of axis `name` (a later override of the same axis wins).
    pub fn with_axis(mut self, name: impl Into<String>, link: Link) -> CostModel {
        let name = name.into();
        self.per_axis.retain(|(n, _)| *n != name);
        self.per_axis.push((name, link));
        self
    }

    /// The link of axis `name`.
    pub fn link(&self, name: &str) -> Link {
        self.per_axis.iter().find(|(n, _)| n == name).map_or(self.default, |(_, l)| *l)
    }

    /// Binds the model to `mesh`: one link per mesh axis, indexed like `mesh.axes()`. Errors
    /// (`ErrorKind::Mesh`) if an override names an axis the mesh lacks.
    pub fn resolve(&self, mesh: &Mesh) -> Result<ResolvedCost> {
        if let Some((n, _)) = self.per_axis.iter().find(|(n, _)| mesh.axis_index(n).is_none()) {
            return Err(Error::mesh(format!(
                "the cost model sets a link for axis \"{n}\", which the mesh {} does not have",
                crate::text::print_mesh(mesh)
            )));
        }
        Ok(ResolvedCost { links: mesh.axes().iter().map(|a| self.link(&a.name)).collect() })
    }
}

/// A [`CostModel`] bound to one mesh; [`ResolvedCost::cost`] allocates nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedCost {
    /// One link per mesh axis, in mesh order.
    pub links: Vec<Link>,
}

/// Bytes sent per device and seconds of one collective.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepCost {
    pub bytes: f64,
    pub seconds: f64,
}

impl ResolvedCost {
    /// Cost of `kind` over the group made of `group` (pairs `(mesh axis index, size of the axis
    /// or sub-axis)`), on a local buffer of `local_bytes` per device before the collective (see
    /// the module table). An empty group, or a group of size 1, costs nothing. Axis indices
    /// must come from the mesh this model was resolved on (out-of-range indices use the
    /// default link of the first axis; they never panic).
    pub fn cost(&self, kind: CollectiveKind, group: &[(usize, i64)], local_bytes: f64) -> StepCost {
        let n: f64 = group.iter().map(|&(_, s)| s as f64).product();
        if kind == CollectiveKind::AllSlice || n <= 1.0 {
            return StepCost::default();
        }
        let link = |i: usize| self.links.get(i).or(self.links.first()).copied().unwrap_or_default();
        let mut ring_latency = 0.0;
        let mut max_latency: f64 = 0.0;
        let mut bandwidth = f64::INFINITY;
        for &(i, s) in group {
            let l = link(i);
            ring_latency += l.latency * (s as f64 - 1.0);
            max_latency = max_latency.max(l.latency);
            bandwidth = bandwidth.min(l.bandwidth);
        }
        let (bytes, latency) = match kind {
            CollectiveKind::AllGather => ((n - 1.0) * local_bytes, ring_latency),
            CollectiveKind::AllToAll | CollectiveKind::ReduceScatter => ((n - 1.0) / n * local_bytes, ring_latency),
            CollectiveKind::AllReduce => (2.0 * (n - 1.0) / n * local_bytes, 2.0 * ring_latency),
            CollectiveKind::CollectivePermute => (local_bytes, max_latency),
            CollectiveKind::AllSlice => (0.0, 0.0),
        };
        StepCost { bytes, seconds: latency + bytes / bandwidth }
    }
}
