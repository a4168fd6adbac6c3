//! Cost-based sharding search on a generic *strategy graph*: every node has a list of
//! strategies, each with a cost and a memory usage over the node's liveness interval; every edge
//! carries a cost matrix over the strategies of its two nodes. The objective is the one of the
//! ASPLOS 2025 IOPDDL contest (google/iopddl, `iopddl.cc` `Evaluate`): the sum of the chosen node
//! costs plus the sum of the chosen edge costs, subject to the sum of chosen usages at every time
//! point `t` (intervals are half-open, `[start, end)`) staying within the usage limit.
//!
//! The graph is stored in flat arrays (strategy offsets per node, row-major edge matrices) so
//! that it crosses the FFI without per-element objects. `local` holds the local-search solver,
//! `pbqp` the reduction solver of the problem without its usage limit (used by `lagrange`),
//! `components` the forbidden components and their joint assignments (component moves; the
//! contracted ILP of `shardwise.search.contract`);
//! the ILP lives in Python (`shardwise.search.ilp`, HiGHS).

mod bound;
mod components;
pub mod iopddl;
mod lagrange;
pub mod local;
pub mod pbqp;
mod segtree;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

pub use bound::{lower_bound, LowerBound};
pub use components::{forbidden_components, Component};
pub use lagrange::{lagrange_prices, MemoryPrices};
pub use local::{solve_local, LocalOptions, LocalResult};
pub use pbqp::{Pbqp, PbqpSolution, Pilot};

/// `start + limit`, or about a century after `start` where that sum overflows `Instant` (a
/// limit that long means none); so no time limit, however long, can make a search panic.
pub fn deadline_after(start: Instant, limit: Duration) -> Instant {
    start.checked_add(limit).unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 86_400))
}

/// Set by [`request_stop`]: every search of the process stops at its next deadline check.
static STOP: AtomicBool = AtomicBool::new(false);

/// With `true`, asks every search running in this process (all threads) to stop at its next
/// deadline check, as if its deadline had passed, and return its best answer so far; searches
/// started while it is set return at their first check. With `false`, lets searches run to
/// their deadlines again. Process-wide, as a Ctrl-C is (`shardwise.search.local.request_stop`).
pub fn request_stop(stop: bool) {
    STOP.store(stop, Ordering::Relaxed);
}

/// Whether [`request_stop`] is in force.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Whether a search with `deadline` must stop now: the deadline passed or a stop was requested.
pub(crate) fn expired(deadline: Instant) -> bool {
    stop_requested() || Instant::now() >= deadline
}

/// A strategy graph in flat arrays. Strategy `s` of node `v` is at flat index
/// `offsets[v] + s`; the matrix of edge `e = (a, b)` starts at `edge_offsets[e]` and holds
/// `k(a) * k(b)` entries, row-major (strategy of `a` × strategy of `b`), as in the contest format.
#[derive(Debug, Clone)]
pub struct StrategyGraph {
    pub offsets: Vec<usize>,
    pub cost: Vec<i64>,
    pub usage: Vec<i64>,
    pub intervals: Vec<(i64, i64)>,
    pub edges: Vec<(usize, usize)>,
    pub edge_offsets: Vec<usize>,
    pub edge_cost: Vec<i64>,
    pub usage_limit: Option<i64>,
}

fn bad(message: String) -> Error {
    Error::invariant("strategy-graph", message)
}

impl StrategyGraph {
    /// Checks the array lengths and indices; the message names the offending node or edge.
    pub fn validate(&self) -> Result<()> {
        let n = self.intervals.len();
        if self.offsets.len() != n + 1 || self.offsets[0] != 0 {
            return Err(bad(format!(
                "strategy offsets: expected {} entries starting at 0 (one per node plus one), got {}",
                n + 1,
                self.offsets.len()
            )));
        }
        for v in 0..n {
            if self.offsets[v + 1] <= self.offsets[v] {
                return Err(bad(format!("node {v}: expected at least one strategy, got none")));
            }
            let (a, b) = self.intervals[v];
            if a < 0 || b < a {
                return Err(bad(format!("node {v}: interval [{a}, {b}) is not a valid half-open range of times >= 0")));
            }
        }
        let total = self.offsets[n];
        if self.cost.len() != total || self.usage.len() != total {
            return Err(bad(format!(
                "expected {total} strategy costs and usages, got {} costs and {} usages",
                self.cost.len(),
                self.usage.len()
            )));
        }
        if let Some(i) = self.usage.iter().position(|&u| u < 0) {
            return Err(bad(format!("strategy {i}: usage must be >= 0, got {}", self.usage[i])));
        }
        if self.edge_offsets.len() != self.edges.len() + 1 || self.edge_offsets[0] != 0 {
            return Err(bad(format!(
                "edge offsets: expected {} entries starting at 0, got {}",
                self.edges.len() + 1,
                self.edge_offsets.len()
            )));
        }
        for (e, &(a, b)) in self.edges.iter().enumerate() {
            if a >= n || b >= n {
                return Err(bad(format!("edge {e}: node ({a}, {b}) out of range for {n} nodes")));
            }
            let want = self.k(a) * self.k(b);
            let got = self.edge_offsets[e + 1].checked_sub(self.edge_offsets[e]).unwrap_or(usize::MAX);
            if got != want {
                return Err(bad(format!(
                    "edge {e} ({a}, {b}): expected {want} costs ({} x {}), got {got}",
                    self.k(a),
                    self.k(b)
                )));
            }
        }
        if self.edge_offsets[self.edges.len()] != self.edge_cost.len() {
            return Err(bad(format!(
                "edge costs: expected {} entries, got {}",
                self.edge_offsets[self.edges.len()],
                self.edge_cost.len()
            )));
        }
        Ok(())
    }

    pub fn num_nodes(&self) -> usize {
        self.intervals.len()
    }

    /// Number of strategies of node `v`.
    pub fn k(&self, v: usize) -> usize {
        self.offsets[v + 1] - self.offsets[v]
    }

    pub fn node_cost(&self, v: usize, s: usize) -> i64 {
        self.cost[self.offsets[v] + s]
    }

    pub fn node_usage(&self, v: usize, s: usize) -> i64 {
        self.usage[self.offsets[v] + s]
    }

    /// Per node, its strategy of least usage (ties: least node cost). Together they minimise the
    /// usage at every time point at once.
    pub fn least_usage(&self) -> Vec<usize> {
        (0..self.num_nodes())
            .map(|v| (0..self.k(v)).min_by_key(|&s| (self.node_usage(v, s), self.node_cost(v, s))).unwrap_or(0))
            .collect()
    }

    /// Cost of edge `e` with strategies `sa` on its first node and `sb` on its second.
    pub fn edge_entry(&self, e: usize, sa: usize, sb: usize) -> i64 {
        let kb = self.k(self.edges[e].1);
        self.edge_cost[self.edge_offsets[e] + sa * kb + sb]
    }

    /// The contest score of `assign` (exact, in i128) and the peak usage over all time points.
    pub fn evaluate(&self, assign: &[usize]) -> Result<(i128, i128)> {
        if assign.len() != self.num_nodes() {
            return Err(bad(format!("assignment: expected {} strategies, got {}", self.num_nodes(), assign.len())));
        }
        let mut total: i128 = 0;
        for (v, &s) in assign.iter().enumerate() {
            if s >= self.k(v) {
                return Err(bad(format!("node {v}: strategy {s} out of range (node has {})", self.k(v))));
            }
            total += self.node_cost(v, s) as i128;
        }
        for (e, &(a, b)) in self.edges.iter().enumerate() {
            total += self.edge_entry(e, assign[a], assign[b]) as i128;
        }
        let mut events: Vec<(i64, i128)> = Vec::with_capacity(2 * assign.len());
        for (v, &s) in assign.iter().enumerate() {
            let (a, b) = self.intervals[v];
            if a < b {
                let u = self.node_usage(v, s) as i128;
                events.push((a, u));
                events.push((b, -u));
            }
        }
        // Ends sort before starts at the same time: [a, b) does not cover b.
        events.sort_unstable_by_key(|&(t, d)| (t, d));
        let (mut cur, mut peak) = (0i128, 0i128);
        for (_, d) in events {
            cur += d;
            peak = peak.max(cur);
        }
        Ok((total, peak))
    }
}
