//! Local search for the strategy-graph problem (see `search/mod.rs`).
//!
//! 0. Lagrangian phase (`lagrange.rs`, `LocalOptions::lagrange_share` of the time, 80% by
//!    default, when there is a usage limit and the instance is feasible): memory priced per time
//!    point instead of constrained, a greedy start, spanning-forest dynamic programming over the
//!    edges holding forbidden (>= 10^18) entries first, PBQP by graph reduction (`pbqp.rs`, on
//!    small or forbidden-free graphs), and a repair to a feasible assignment
//!    each cycle; the best feasible one (or a better warm start) starts the steps below.
//! 1. Start otherwise: the strategy of least memory usage on every node (ties: least node cost).
//!    This assignment minimises the usage at every time point at once, so it is feasible if and
//!    only if the instance is; or a caller's warm start (one over the limit is first repaired,
//!    as after each Lagrangian cycle).
//! 2. Coordinate descent: a worklist of nodes; each node takes the strategy that lowers
//!    `node cost + Σ incident edge costs` the most among those that keep the peak usage over its
//!    liveness range within the limit (a range-add / range-max segment tree over the distinct
//!    start times, where every peak occurs). A change puts the node's neighbours back on the list.
//! 3. Edge moves: both ends of an edge re-chosen jointly (exact over `k(a) × k(b)` pairs, with a
//!    conservative memory check), which escapes the optima of single-node moves where two
//!    neighbours must change together.
//! 4. Tree moves (every other round): a BFS tree of up to 64 nodes re-chosen exactly by min-sum
//!    dynamic programming with the rest fixed, kept if it fits and is no worse.
//! 5. Iterated local search (Lourenço, Martin & Stützle, "Iterated Local Search", 2003): a
//!    random connected ball of nodes gets random feasible strategies, descent repairs it, and the
//!    result is kept when it is no worse (plateau moves allowed) and, one round in 64, even when
//!    worse (a random-walk step); otherwise it is undone from a change log. The best assignment
//!    seen is returned at the time limit.
//!
//! Costs are exact (`i64` inputs, `i128` sums); the run is deterministic for a given seed and
//! iteration count (the time limit only decides when to stop).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::components::{self, Component, OUTSIDE};
use super::lagrange::{lagrange_phase, repair};
use super::segtree::MaxAddTree;
use super::StrategyGraph;
use crate::error::Result;

/// Options of [`solve_local`].
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Wall-clock budget; the best assignment found so far is returned when it runs out.
    pub time_limit: Duration,
    /// Seed of the perturbation's pseudo-random generator (splitmix64) and of the Lagrangian
    /// phase's forest-move edge orders.
    pub seed: u64,
    /// A starting assignment (strategy index per node); one over the usage limit is first
    /// repaired (`lagrange::repair`: usage-lowering moves, cheapest per byte freed) and used
    /// when that makes it fit.
    pub initial: Option<Vec<usize>>,
    /// Stop perturbing after this many rounds (`None`: only the time limit stops it); also caps
    /// the Lagrangian cycles.
    pub max_rounds: Option<u64>,
    /// Share of the time limit (0 to 1) spent in the Lagrangian phase (`lagrange.rs`) before
    /// the feasible local search; used only when there is a usage limit.
    pub lagrange_share: f64,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            time_limit: Duration::from_secs(10),
            seed: 0,
            initial: None,
            max_rounds: None,
            lagrange_share: 0.8,
        }
    }
}

/// The result of [`solve_local`].
#[derive(Debug, Clone)]
pub struct LocalResult {
    pub assignment: Vec<usize>,
    /// Exact score (Σ node costs + Σ edge costs) of `assignment`.
    pub cost: i128,
    /// Peak usage of `assignment` over all time points.
    pub peak_usage: i128,
    /// Whether the peak usage is within the limit.
    pub feasible: bool,
    /// Perturbation rounds run.
    pub rounds: u64,
    /// Rounds whose result was kept with a strictly lower cost.
    pub improvements: u64,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

pub(super) struct State<'g> {
    pub(super) g: &'g StrategyGraph,
    /// Per node: (edge, the other node, whether this node is the edge's first node).
    pub(super) adj: Vec<Vec<(usize, usize, bool)>>,
    pub(super) assign: Vec<usize>,
    pub(super) range: Vec<(usize, usize)>,
    pub(super) tree: MaxAddTree,
    pub(super) limit: i128,
    pub(super) total: i128,
    pub(super) log: Vec<(usize, usize)>,
    buf: Vec<i128>,
    buf2: Vec<i128>,
    /// Extra cost per flat strategy index added to the node costs (the Lagrangian memory
    /// price of `lagrange.rs`); empty: none. `total` then includes it.
    pub(super) extra: Vec<i128>,
    queued: Vec<bool>,
    pub(super) least_usage: Vec<usize>,
    /// Nodes with a non-empty liveness range, by range start.
    pub(super) by_start: Vec<usize>,
}

impl<'g> State<'g> {
    pub(super) fn new(g: &'g StrategyGraph, assign: Vec<usize>, least_usage: Vec<usize>) -> Self {
        let n = g.num_nodes();
        let mut adj = vec![Vec::new(); n];
        for (e, &(a, b)) in g.edges.iter().enumerate() {
            adj[a].push((e, b, true));
            adj[b].push((e, a, false));
        }
        let mut times: Vec<i64> = g.intervals.iter().filter(|(a, b)| a < b).map(|&(a, _)| a).collect();
        times.sort_unstable();
        times.dedup();
        let range: Vec<(usize, usize)> = g
            .intervals
            .iter()
            .map(|&(a, b)| (times.partition_point(|&t| t < a), times.partition_point(|&t| t < b)))
            .collect();
        let mut by_start: Vec<usize> = (0..n).filter(|&v| range[v].0 < range[v].1).collect();
        by_start.sort_by_key(|&v| range[v].0);
        let mut tree = MaxAddTree::new(times.len());
        for v in 0..n {
            tree.add(range[v].0, range[v].1, g.node_usage(v, assign[v]) as i128);
        }
        let mut total: i128 = (0..n).map(|v| g.node_cost(v, assign[v]) as i128).sum();
        for (e, &(a, b)) in g.edges.iter().enumerate() {
            total += g.edge_entry(e, assign[a], assign[b]) as i128;
        }
        State {
            g,
            adj,
            assign,
            range,
            tree,
            limit: g.usage_limit.map_or(i128::MAX, |l| l as i128),
            total,
            log: Vec::new(),
            buf: Vec::new(),
            buf2: Vec::new(),
            extra: Vec::new(),
            queued: vec![false; n],
            least_usage,
            by_start,
        }
    }

    /// Node cost of strategy `s` of `v` plus its extra (memory price), if any.
    pub(super) fn ncost(&self, v: usize, s: usize) -> i128 {
        let i = self.g.offsets[v] + s;
        self.g.cost[i] as i128 + self.extra.get(i).copied().unwrap_or(0)
    }

    /// Recomputes `total` from scratch (after `extra` changed).
    pub(super) fn recompute_total(&mut self) {
        let g = self.g;
        let mut total: i128 = (0..g.num_nodes()).map(|v| self.ncost(v, self.assign[v])).sum();
        for (e, &(a, b)) in g.edges.iter().enumerate() {
            total += g.edge_entry(e, self.assign[a], self.assign[b]) as i128;
        }
        self.total = total;
    }

    pub(super) fn peak(&self) -> i128 {
        self.tree.max(0, usize::MAX >> 1).max(0)
    }

    /// `out[s]` = node cost of `s` + Σ incident edge costs with `s`, the neighbours fixed;
    /// edge `skip` left out.
    pub(super) fn local_costs(&self, v: usize, skip: Option<usize>, out: &mut Vec<i128>) {
        let g = self.g;
        let k = g.k(v);
        out.clear();
        out.extend((0..k).map(|s| self.ncost(v, s)));
        for &(e, w, first) in &self.adj[v] {
            if Some(e) == skip {
                continue;
            }
            let base = g.edge_offsets[e];
            let sw = self.assign[w];
            if first {
                let kw = g.k(w);
                for (s, o) in out.iter_mut().enumerate() {
                    *o += g.edge_cost[base + s * kw + sw] as i128;
                }
            } else {
                let row = &g.edge_cost[base + sw * k..base + (sw + 1) * k];
                for (o, &c) in out.iter_mut().zip(row) {
                    *o += c as i128;
                }
            }
        }
    }

    /// Extra usage that changing `v` by `du` may add, against the limit: true when it fits.
    pub(super) fn fits(&self, v: usize, du: i128) -> bool {
        let (lo, hi) = self.range[v];
        du <= 0 || lo >= hi || self.tree.max(lo, hi) + du <= self.limit
    }

    pub(super) fn set(&mut self, v: usize, s: usize, delta: i128) {
        let old = self.assign[v];
        if old != s {
            self.apply(v, s, delta);
            self.log.push((v, old));
        }
    }

    /// Changes `v` to `s` (cost change `delta`) without logging.
    pub(super) fn apply(&mut self, v: usize, s: usize, delta: i128) {
        let old = self.assign[v];
        let du = self.g.node_usage(v, s) as i128 - self.g.node_usage(v, old) as i128;
        let (lo, hi) = self.range[v];
        self.tree.add(lo, hi, du);
        self.total += delta;
        self.assign[v] = s;
    }

    /// Moves `v` to its best feasible strategy when that lowers the cost; true if it moved.
    fn improve_node(&mut self, v: usize) -> bool {
        let mut buf = std::mem::take(&mut self.buf);
        self.local_costs(v, None, &mut buf);
        let cur = self.assign[v];
        let cu = self.g.node_usage(v, cur) as i128;
        let mut best = (buf[cur], cur);
        for (s, &c) in buf.iter().enumerate() {
            if c < best.0 && self.fits(v, self.g.node_usage(v, s) as i128 - cu) {
                best = (c, s);
            }
        }
        let moved = best.1 != cur;
        if moved {
            self.set(v, best.1, best.0 - buf[cur]);
        }
        self.buf = buf;
        moved
    }

    /// Re-chooses both ends of edge `e` jointly; true if the cost went down.
    fn improve_edge(&mut self, e: usize) -> bool {
        let g = self.g;
        let (a, b) = g.edges[e];
        if a == b {
            return false;
        }
        let (ka, kb) = (g.k(a), g.k(b));
        if ka * kb > (1 << 16) || ka * kb <= 1 {
            return false;
        }
        let mut ca = std::mem::take(&mut self.buf);
        let mut cb = std::mem::take(&mut self.buf2);
        self.local_costs(a, Some(e), &mut ca);
        self.local_costs(b, Some(e), &mut cb);
        let (sa0, sb0) = (self.assign[a], self.assign[b]);
        let base = g.edge_offsets[e];
        let cur = ca[sa0] + cb[sb0] + g.edge_cost[base + sa0 * kb + sb0] as i128;
        let (ra, rb) = (self.range[a], self.range[b]);
        let overlap = ra.0.max(rb.0) < ra.1.min(rb.1);
        let (ua0, ub0) = (g.node_usage(a, sa0) as i128, g.node_usage(b, sb0) as i128);
        let mut best = (cur, sa0, sb0);
        for (sa, &ca_sa) in ca.iter().enumerate().take(ka) {
            let dua = g.node_usage(a, sa) as i128 - ua0;
            if !self.fits(a, dua) && !overlap {
                continue;
            }
            let row = &g.edge_cost[base + sa * kb..base + (sa + 1) * kb];
            for sb in 0..kb {
                let c = ca_sa + cb[sb] + row[sb] as i128;
                if c >= best.0 {
                    continue;
                }
                let dub = g.node_usage(b, sb) as i128 - ub0;
                // Conservative: where the ranges overlap, both increases count on both ranges.
                let (xa, xb) = if overlap { (dua.max(0) + dub.max(0), dua.max(0) + dub.max(0)) } else { (dua, dub) };
                if self.fits(a, xa) && self.fits(b, xb) {
                    best = (c, sa, sb);
                }
            }
        }
        let moved = (best.1, best.2) != (sa0, sb0);
        if moved {
            // Deltas split so that the running total stays exact.
            let mut tmp = std::mem::take(&mut ca);
            self.local_costs(a, None, &mut tmp);
            let da = tmp[best.1] - tmp[sa0];
            self.set(a, best.1, da);
            self.local_costs(b, None, &mut tmp);
            let db = tmp[best.2] - tmp[sb0];
            self.set(b, best.2, db);
            ca = tmp;
        }
        self.buf = ca;
        self.buf2 = cb;
        moved
    }

    fn push(&mut self, q: &mut VecDeque<usize>, v: usize) {
        if !self.queued[v] {
            self.queued[v] = true;
            q.push_back(v);
        }
    }

    /// Node moves until no node improves, then edge moves on the edges touching `seeds` (all
    /// edges when `seeds` is `None`), repeated while anything improves or time remains.
    pub(super) fn descend(&mut self, seeds: Option<&[usize]>, deadline: Instant) {
        let mut q = VecDeque::new();
        match seeds {
            Some(s) => {
                for &v in s {
                    self.push(&mut q, v);
                }
            }
            None => {
                for v in 0..self.g.num_nodes() {
                    self.push(&mut q, v);
                }
            }
        }
        let mut edges: Vec<usize> = match seeds {
            Some(s) => s.iter().flat_map(|&v| self.adj[v].iter().map(|x| x.0)).collect(),
            None => (0..self.g.edges.len()).collect(),
        };
        edges.sort_unstable();
        edges.dedup();
        let mut steps = 0u32;
        loop {
            while let Some(v) = q.pop_front() {
                self.queued[v] = false;
                if self.improve_node(v) {
                    for i in 0..self.adj[v].len() {
                        let w = self.adj[v][i].1;
                        self.push(&mut q, w);
                    }
                }
                steps += 1;
                if steps % 1024 == 0 && super::expired(deadline) {
                    self.clear_queue(&mut q);
                    return;
                }
            }
            let mut any = false;
            for &e in &edges {
                if self.improve_edge(e) {
                    any = true;
                    let (a, b) = self.g.edges[e];
                    for &x in &[a, b] {
                        self.push(&mut q, x);
                        for i in 0..self.adj[x].len() {
                            let w = self.adj[x][i].1;
                            self.push(&mut q, w);
                        }
                    }
                }
                steps += 1;
                if steps % 256 == 0 && super::expired(deadline) {
                    self.clear_queue(&mut q);
                    return;
                }
            }
            if !any {
                return;
            }
        }
    }

    fn clear_queue(&mut self, q: &mut VecDeque<usize>) {
        for v in q.drain(..) {
            self.queued[v] = false;
        }
    }

    pub(super) fn undo_to(&mut self, mark: usize) {
        while self.log.len() > mark {
            let (v, old) = self.log.pop().expect("log longer than mark");
            let mut buf = std::mem::take(&mut self.buf);
            self.local_costs(v, None, &mut buf);
            let delta = buf[old] - buf[self.assign[v]];
            self.buf = buf;
            self.apply(v, old, delta);
        }
    }

    /// Tree move: a BFS tree of up to `size` nodes from `root` is re-chosen exactly by dynamic
    /// programming over the tree (Felzenszwalb & Huttenlocher-style min-sum message passing),
    /// the nodes outside it fixed; an edge between two tree nodes that is not a tree edge is
    /// priced with its far end's current strategy. The result is kept when it fits in memory
    /// and is no worse (its exact delta is recomputed), else undone. Returns the changed nodes.
    pub(super) fn tree_move(&mut self, root: usize, size: usize) -> Vec<usize> {
        self.tree_move_rot(root, size, 0)
    }

    /// [`State::tree_move`] with each node's neighbours visited from position `rot` (mod its
    /// degree) on, so that different `rot` give different BFS trees.
    pub(super) fn tree_move_rot(&mut self, root: usize, size: usize, rot: usize) -> Vec<usize> {
        let g = self.g;
        let mut order = vec![root];
        let mut parent: Vec<(usize, usize)> = vec![(usize::MAX, usize::MAX)];
        let mut pos = std::collections::HashMap::new();
        pos.insert(root, 0usize);
        let mut i = 0;
        while i < order.len() && order.len() < size {
            let u = order[i];
            let deg = self.adj[u].len();
            for j in 0..deg {
                let (e, w, _) = self.adj[u][(j + rot) % deg];
                if order.len() >= size {
                    break;
                }
                if pos.contains_key(&w) || w == u || g.k(u) * g.k(w) > (1 << 15) {
                    continue;
                }
                pos.insert(w, order.len());
                order.push(w);
                parent.push((i, e));
            }
            i += 1;
        }
        if order.len() < 2 {
            return Vec::new();
        }
        self.dp_move(&order, &parent, &pos)
    }

    /// Exact min-sum dynamic programming over a forest of tree nodes: `order` lists them with
    /// every parent before its children, `parent[i]` is (index in `order`, edge) or
    /// `(usize::MAX, usize::MAX)` for a root, `pos` maps a node to its index. Nodes outside stay
    /// fixed; a non-tree edge between two tree nodes is priced with the far end's current
    /// strategy upwards and its new one downwards. The result is kept when it fits in memory and
    /// is no worse (exact delta), else undone. Returns the changed nodes.
    pub(super) fn dp_move(
        &mut self,
        order: &[usize],
        parent: &[(usize, usize)],
        pos: &std::collections::HashMap<usize, usize>,
    ) -> Vec<usize> {
        let g = self.g;
        // unary[i][s]: node cost + edges to fixed nodes + non-tree edges to earlier tree nodes.
        let mut f: Vec<Vec<i128>> = Vec::with_capacity(order.len());
        for (i, &u) in order.iter().enumerate() {
            let k = g.k(u);
            let mut un: Vec<i128> = (0..k).map(|s| self.ncost(u, s)).collect();
            for &(e, w, first) in &self.adj[u] {
                let inside = pos.get(&w).copied();
                let tree_edge = parent[i].1 == e || inside.is_some_and(|j| parent[j].1 == e);
                if tree_edge || inside.is_some_and(|j| j > i) {
                    continue;
                }
                let sw = self.assign[w];
                for (s, x) in un.iter_mut().enumerate() {
                    *x += if first { g.edge_entry(e, s, sw) } else { g.edge_entry(e, sw, s) } as i128;
                }
            }
            f.push(un);
        }
        // Upward pass: children (later in BFS order) send min-sum messages to their parent.
        let mut best_child: Vec<Vec<usize>> = vec![Vec::new(); order.len()];
        for i in (0..order.len()).rev() {
            let (pi, e) = parent[i];
            if pi == usize::MAX {
                continue;
            }
            let (u, c) = (order[pi], order[i]);
            let (ku, kc) = (g.k(u), g.k(c));
            let u_first = g.edges[e].0 == u;
            let mut arg = vec![0usize; ku];
            for (su, slot) in arg.iter_mut().enumerate() {
                let mut best = (i128::MAX, 0usize);
                for (sc, &fc) in f[i].iter().enumerate().take(kc) {
                    let ec = if u_first { g.edge_entry(e, su, sc) } else { g.edge_entry(e, sc, su) } as i128;
                    let v = fc + ec;
                    if v < best.0 {
                        best = (v, sc);
                    }
                }
                f[pi][su] += best.0;
                *slot = best.1;
            }
            best_child[i] = arg;
        }
        let mut choice = vec![0usize; order.len()];
        // Downward pass: each node takes its best strategy given its parent's choice and, for
        // the non-tree edges to earlier tree nodes (priced at their old strategy upwards), the
        // new choices of those nodes, so that such edges see the strategies actually chosen.
        let mut vals: Vec<i128> = Vec::new();
        for i in 0..order.len() {
            let u = order[i];
            let (pi, pe) = parent[i];
            if pi == usize::MAX {
                choice[i] = (0..g.k(u)).min_by_key(|&s| f[i][s]).unwrap_or(0);
                continue;
            }
            let sp = choice[pi];
            let mut extra_edges = false;
            vals.clear();
            vals.extend_from_slice(&f[i]);
            for &(e, w, first) in &self.adj[u] {
                let Some(j) = pos.get(&w).copied() else { continue };
                if j >= i || e == pe || parent[j].1 == e {
                    continue;
                }
                let (sw_old, sw_new) = (self.assign[w], choice[j]);
                if sw_old == sw_new {
                    continue;
                }
                extra_edges = true;
                for (s, x) in vals.iter_mut().enumerate() {
                    *x += if first {
                        g.edge_entry(e, s, sw_new) as i128 - g.edge_entry(e, s, sw_old) as i128
                    } else {
                        g.edge_entry(e, sw_new, s) as i128 - g.edge_entry(e, sw_old, s) as i128
                    };
                }
            }
            choice[i] = if extra_edges {
                let p_first = g.edges[pe].0 == order[pi];
                (0..vals.len())
                    .min_by_key(|&s| {
                        vals[s] + if p_first { g.edge_entry(pe, sp, s) } else { g.edge_entry(pe, s, sp) } as i128
                    })
                    .unwrap_or(0)
            } else {
                best_child[i][sp]
            };
        }
        let before = self.total;
        let mark = self.log.len();
        let mut buf = std::mem::take(&mut self.buf);
        let mut changed = Vec::new();
        for (i, &u) in order.iter().enumerate() {
            if choice[i] != self.assign[u] {
                self.local_costs(u, None, &mut buf);
                let delta = buf[choice[i]] - buf[self.assign[u]];
                self.set(u, choice[i], delta);
                changed.push(u);
            }
        }
        self.buf = buf;
        let fits = changed.iter().all(|&u| {
            let (lo, hi) = self.range[u];
            lo >= hi || self.tree.max(lo, hi) <= self.limit
        });
        if !fits || self.total > before {
            self.undo_to(mark);
            return Vec::new();
        }
        changed
    }

    /// Cost of the nodes of `c` and of every edge with an end in `c` when `c` takes `joint`
    /// (strategies in `c.nodes` order), the other nodes as they are.
    fn component_cost(&self, c: &Component, joint: &[usize]) -> i128 {
        let g = self.g;
        let mut total: i128 = c.nodes.iter().zip(joint).map(|(&v, &s)| self.ncost(v, s)).sum();
        for &(e, ia, ib) in &c.edges {
            let (a, b) = g.edges[e];
            let sa = if ia == OUTSIDE { self.assign[a] } else { joint[ia] };
            let sb = if ib == OUTSIDE { self.assign[b] } else { joint[ib] };
            total += g.edge_entry(e, sa, sb) as i128;
        }
        total
    }

    /// Sets component `c` to `joint` (logged); returns the nodes that changed.
    fn set_component(&mut self, c: &Component, joint: &[usize]) -> Vec<usize> {
        let mut buf = std::mem::take(&mut self.buf);
        let mut changed = Vec::new();
        for (&v, &s) in c.nodes.iter().zip(joint) {
            if self.assign[v] != s {
                self.local_costs(v, None, &mut buf);
                let delta = buf[s] - buf[self.assign[v]];
                self.set(v, s, delta);
                changed.push(v);
            }
        }
        self.buf = buf;
        changed
    }

    /// Whether every node in `nodes` is within the usage limit over its range.
    fn all_fit(&self, nodes: &[usize]) -> bool {
        nodes.iter().all(|&u| {
            let (lo, hi) = self.range[u];
            lo >= hi || self.tree.max(lo, hi) <= self.limit
        })
    }

    /// Component move (`components.rs`): component `c` re-chosen whole among its joint
    /// assignments, each priced exactly (its nodes and every edge with an end in it, the rest
    /// fixed); the cheapest that lowers the cost and fits in memory is kept (at most four tried,
    /// cheapest first). Returns the changed nodes.
    pub(super) fn component_move(&mut self, c: &Component) -> Vec<usize> {
        let cur_joint: Vec<usize> = c.nodes.iter().map(|&v| self.assign[v]).collect();
        let cur = self.component_cost(c, &cur_joint);
        let mut cands: Vec<(i128, usize)> =
            (0..c.count()).map(|j| (self.component_cost(c, c.joint(j)), j)).filter(|x| x.0 < cur).collect();
        cands.sort_unstable();
        for &(_, j) in cands.iter().take(4) {
            let mark = self.log.len();
            let before = self.total;
            let changed = self.set_component(c, c.joint(j));
            if self.all_fit(&changed) && self.total < before {
                return changed;
            }
            self.undo_to(mark);
        }
        Vec::new()
    }

    /// A component move on every component (in the given order), then descent from the changed
    /// nodes; true if anything changed.
    pub(super) fn component_pass(&mut self, comps: &[Component], deadline: Instant) -> bool {
        let mut changed = Vec::new();
        for c in comps {
            if super::expired(deadline) {
                break;
            }
            changed.extend(self.component_move(c));
        }
        if !changed.is_empty() {
            self.descend(Some(&changed), deadline);
        }
        !changed.is_empty()
    }

    /// One perturbation: a random ball of up to `size` nodes, either connected by edges or (every
    /// other round) live at one common time point, so that nodes coupled only through the
    /// memory limit can trade usage; the ball first takes its least-usage strategies, then
    /// random strategies that fit. Returns the ball.
    fn perturb(&mut self, rng: &mut Rng, size: usize, by_time: bool) -> Vec<usize> {
        let n = self.g.num_nodes();
        let start = rng.below(n);
        let mut ball = vec![start];
        if by_time && !self.by_start.is_empty() {
            // Nodes live at a random point of `start`'s range: scan back from the last node that
            // starts at or before it (at most 256 candidates).
            let (lo, hi) = self.range[start];
            let p = if lo < hi { lo + rng.below(hi - lo) } else { lo };
            let end = self.by_start.partition_point(|&v| self.range[v].0 <= p);
            let mut live: Vec<usize> = self.by_start[end.saturating_sub(256)..end]
                .iter()
                .copied()
                .filter(|&v| self.range[v].1 > p && v != start)
                .collect();
            while ball.len() < size && !live.is_empty() {
                let i = rng.below(live.len());
                ball.push(live.swap_remove(i));
            }
            return self.randomize(rng, ball);
        }
        let mut i = 0;
        while ball.len() < size && i < ball.len() {
            let v = ball[i];
            i += 1;
            let deg = self.adj[v].len();
            if deg == 0 {
                continue;
            }
            let off = rng.below(deg);
            for j in 0..deg {
                let w = self.adj[v][(off + j) % deg].1;
                if ball.len() < size && !ball.contains(&w) {
                    ball.push(w);
                }
            }
        }
        self.randomize(rng, ball)
    }

    fn randomize(&mut self, rng: &mut Rng, ball: Vec<usize>) -> Vec<usize> {
        let mut buf = std::mem::take(&mut self.buf);
        // First the least-usage strategy on every ball node (always fits), so that the random
        // choices below can use the memory the ball frees, in any order.
        for &v in &ball {
            let s = self.least_usage[v];
            self.local_costs(v, None, &mut buf);
            let delta = buf[s] - buf[self.assign[v]];
            self.set(v, s, delta);
        }
        for &v in &ball {
            let k = self.g.k(v);
            if k <= 1 {
                continue;
            }
            let s = rng.below(k);
            let du = self.g.node_usage(v, s) as i128 - self.g.node_usage(v, self.assign[v]) as i128;
            if self.fits(v, du) {
                self.local_costs(v, None, &mut buf);
                let delta = buf[s] - buf[self.assign[v]];
                self.set(v, s, delta);
            }
        }
        self.buf = buf;
        ball
    }
}

/// Solves `g` by local search within `options.time_limit`; see the module documentation.
/// Errors: `g` fails [`StrategyGraph::validate`], or the warm start has the wrong length or an
/// out-of-range strategy.
pub fn solve_local(g: &StrategyGraph, options: &LocalOptions) -> Result<LocalResult> {
    g.validate()?;
    let start_time = Instant::now();
    let deadline = super::deadline_after(start_time, options.time_limit);
    let n = g.num_nodes();
    let least_usage = g.least_usage();
    let limit = g.usage_limit.map_or(i128::MAX, |l| l as i128);
    let mut initial = least_usage.clone();
    let mut initial_cost: Option<i128> = None;
    if let Some(w) = &options.initial {
        let (cost, peak) = g.evaluate(w)?;
        if peak <= limit {
            initial = w.clone();
            initial_cost = Some(cost);
        } else {
            let mut st = State::new(g, w.clone(), least_usage.clone());
            if repair(&mut st, &mut Vec::new()) {
                st.descend(None, deadline);
                initial_cost = Some(st.total);
                initial = st.assign;
            }
        }
    }
    let least_peak = g.evaluate(&least_usage)?.1;
    if g.usage_limit.is_some() && least_peak <= limit && options.lagrange_share > 0.0 {
        let share = options.time_limit.as_secs_f64() * options.lagrange_share.min(1.0);
        let phase_end = super::deadline_after(start_time, Duration::try_from_secs_f64(share).unwrap_or(Duration::MAX));
        let cycles = options.max_rounds.map(|m| m.min(16));
        if let Some((c, a)) = lagrange_phase(g, &least_usage, phase_end, cycles, options.seed) {
            if initial_cost.is_none_or(|ic| c < ic) {
                initial = a;
            }
        }
    }
    let mut st = State::new(g, initial, least_usage);
    if st.peak() > st.limit {
        let (cost, peak) = g.evaluate(&st.assign)?;
        return Ok(LocalResult {
            assignment: st.assign,
            cost,
            peak_usage: peak,
            feasible: false,
            rounds: 0,
            improvements: 0,
        });
    }
    st.descend(None, deadline);
    let comps = components::find(g);
    st.component_pass(&comps, deadline);
    st.log.clear();
    let mut best = (st.total, st.assign.clone());
    let mut rng = Rng(options.seed ^ 0x5EED_0F5E_A7C4);
    let (mut rounds, mut improvements) = (0u64, 0u64);
    while !super::expired(deadline) && n > 0 && options.max_rounds.is_none_or(|m| rounds < m) {
        rounds += 1;
        let before = st.total;
        if rounds % 2 == 0 {
            // A tree move never makes things worse; descent spreads its effect.
            let root = rng.below(n);
            let changed = st.tree_move(root, 4 + rng.below(60));
            if !changed.is_empty() {
                st.descend(Some(&changed), deadline);
            }
            st.log.clear();
            if st.total < best.0 {
                improvements += 1;
                best = (st.total, st.assign.clone());
            }
            continue;
        }
        let size = 1 + rng.below(if rounds % 4 == 1 { 4 } else { 12 });
        let ball = st.perturb(&mut rng, size, rounds % 8 == 3);
        st.descend(Some(&ball), deadline);
        // Keep the result when no worse; a worse one is kept now and then (a random walk step,
        // one round in 64) so that the search can leave a basin; the best is remembered.
        if st.total > before && rng.below(64) != 0 {
            st.undo_to(0);
        }
        st.log.clear();
        if st.total < best.0 {
            improvements += 1;
            best = (st.total, st.assign.clone());
        }
    }
    st.assign = best.1;
    let (cost, peak) = g.evaluate(&st.assign)?;
    debug_assert_eq!(cost, best.0);
    Ok(LocalResult { assignment: st.assign, cost, peak_usage: peak, feasible: peak <= limit, rounds, improvements })
}
