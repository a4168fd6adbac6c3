//! Lagrangian phase of the local search (see `local.rs`): the memory constraint is moved into
//! the objective with a price `λ_t >= 0` per time point (Lagrangian relaxation; Fisher, "The
//! Lagrangian relaxation method for solving integer programming problems", Mgmt. Sci. 1981).
//! Strategy `s` of node `v` then costs `c_vs + u_vs · Σ_{t live in v} λ_t`, an unconstrained
//! labelling problem that plain descent handles without getting stuck at the memory limit.
//!
//! Without the memory rows the priced problem is exactly PBQP, so on small graphs and on graphs
//! without forbidden edge entries each cycle also solves it by reduction (`pbqp.rs`: R0/R1/R2
//! exact, RN with pilot look-ahead) and keeps that answer, after descent, when it prices lower.
//!
//! Each cycle: descent on the priced costs; the result is *repaired* into a feasible assignment
//! (while some time point is over the limit, the node live there whose lower-usage strategy
//! costs least per byte freed, up to the overflow, moves to it) and improved by feasible descent
//! on the true costs; the best feasible one is kept. The prices then follow a subgradient step
//! (where the usage is over by the share `g_t`: `λ_t ← 1.1 λ_t + η · min(g_t, 1)`; elsewhere
//! they decay), with the step `η` growing while the priced optimum is more than 5% over and
//! shrinking once it fits.
//!
//! The same cycles without the repair (`lagrange_prices`) give the first penalties of the
//! penalty search (`python/shardwise/search/penalty.py`).

use std::time::Instant;

use super::local::State;
use super::pbqp::{Pbqp, Pilot};
use super::StrategyGraph;
use crate::error::Result;

/// PBQP move: the priced problem of `st` (its costs plus `extra`, no memory limit) solved by
/// reduction (`pbqp.rs`), then descent from that answer; kept when no worse than the current
/// assignment, else undone. True if kept with a change.
pub(super) fn pbqp_move(st: &mut State<'_>, deadline: Instant) -> bool {
    let pilot = Pilot { candidates: PILOT, work: PILOT_WORK, deadline: Some(deadline) };
    let sol = Pbqp::from_graph(st.g, &st.extra).solve(pilot);
    let before = st.total;
    let mark = st.log.len();
    let mut buf = Vec::new();
    let mut changed = Vec::new();
    for (v, &s) in sol.assignment.iter().enumerate() {
        if s != st.assign[v] {
            st.local_costs(v, None, &mut buf);
            let delta = buf[s] - buf[st.assign[v]];
            st.set(v, s, delta);
            changed.push(v);
        }
    }
    if changed.is_empty() {
        return false;
    }
    st.descend(Some(&changed), deadline);
    if st.total > before {
        st.undo_to(mark);
        return false;
    }
    true
}

/// Cost per usage unit at which a typical node is indifferent between its cheapest and its
/// least-usage strategy (median over nodes; forbidden costs >= 10^18 left out); at least 1e-9.
fn exchange_rate(g: &StrategyGraph, least_usage: &[usize]) -> f64 {
    let mut rates: Vec<f64> = Vec::new();
    for (v, &l) in least_usage.iter().enumerate() {
        let (a, b) = g.intervals[v];
        if a >= b || g.k(v) < 2 {
            continue;
        }
        let cheapest = (0..g.k(v)).min_by_key(|&s| (g.node_cost(v, s), g.node_usage(v, s))).unwrap_or(0);
        let du = g.node_usage(v, cheapest) - g.node_usage(v, l);
        let dc = g.node_cost(v, l) as f64 - g.node_cost(v, cheapest) as f64;
        if du > 0 && dc > 0.0 && g.node_cost(v, l) < FORBIDDEN {
            rates.push(dc / du as f64);
        }
    }
    if rates.is_empty() {
        return 1.0;
    }
    let mid = rates.len() / 2;
    let (_, m, _) = rates.select_nth_unstable_by(mid, |a, b| a.total_cmp(b));
    m.max(1e-9)
}

/// Candidates per RN step of the PBQP moves' pilot look-ahead (`pbqp.rs`).
const PILOT: usize = 32;

/// The look-ahead's work per PBQP move, in cost entries read (`pbqp::Pilot`). It replaced a
/// twentieth of the time left, with which the answer depended on the machine's load. On this
/// 2-core machine a completion reads 6 to 25 ns per entry (the shared instances B, G, U and V),
/// so 2^26 entries take about the 0.54 s that rule gave the first move of the penalty search's
/// 10.8 s price search on a 180 s instance; the whole look-ahead of B and G fits in it
/// (docs/search.md, twenty-seventh session).
const PILOT_WORK: usize = 1 << 26;

/// Largest graph (nodes) on which PBQP moves always run (see `lagrange_phase`).
const PBQP_MAX_NODES: usize = 4096;

/// Costs at or above this mark impossible combinations in the contest instances.
const FORBIDDEN: i64 = 1_000_000_000_000_000_000;

/// Usage at every compressed time point of `st`'s current assignment (`npoints` entries).
fn profile(st: &State<'_>, npoints: usize) -> Vec<i128> {
    let mut d = vec![0i128; npoints + 1];
    for v in 0..st.g.num_nodes() {
        let (lo, hi) = st.range[v];
        if lo < hi {
            let u = st.g.node_usage(v, st.assign[v]) as i128;
            d[lo] += u;
            d[hi] -= u;
        }
    }
    let mut cur = 0i128;
    d.truncate(npoints);
    for x in d.iter_mut() {
        cur += *x;
        *x = cur;
    }
    d
}

/// Makes `st` feasible by usage-lowering moves at the first peak point, cheapest per byte
/// freed first (exact cost deltas with the neighbours fixed). False if some peak cannot be
/// lowered any more (the instance is infeasible from here).
pub(super) fn repair(st: &mut State<'_>, buf: &mut Vec<i128>) -> bool {
    let g = st.g;
    loop {
        let (peak, p) = st.tree.argmax();
        if peak <= st.limit {
            return true;
        }
        let over = peak - st.limit;
        let end = st.by_start.partition_point(|&v| st.range[v].0 <= p);
        // Key: (lands on a forbidden entry, cost per byte freed); forbidden moves only when
        // nothing else frees memory here.
        let mut best: Option<((bool, f64), usize, usize, i128)> = None;
        for i in 0..end {
            let v = st.by_start[i];
            if st.range[v].1 <= p {
                continue;
            }
            let cur = st.assign[v];
            let cu = g.node_usage(v, cur);
            if g.node_usage(v, st.least_usage[v]) >= cu {
                continue;
            }
            st.local_costs(v, None, buf);
            for (s, &c) in buf.iter().enumerate() {
                let du = cu - g.node_usage(v, s);
                if du <= 0 {
                    continue;
                }
                let dc = c - buf[cur];
                let key = (c >= FORBIDDEN as i128, dc as f64 / (du as i128).min(over) as f64);
                if best.is_none_or(|b| (!key.0 && b.0 .0) || (key.0 == b.0 .0 && key.1 < b.0 .1)) {
                    best = Some((key, v, s, dc));
                }
            }
        }
        match best {
            Some((_, v, s, dc)) => st.set(v, s, dc),
            None => return false,
        }
    }
}

/// Sets the priced node costs `extra` of `st` from the prices `lambda` (one per compressed
/// time point); returns the nodes whose price changed.
fn set_prices(st: &mut State<'_>, lambda: &[f64], old: &mut [f64]) -> Vec<usize> {
    let g = st.g;
    let mut pre = vec![0.0f64; lambda.len() + 1];
    for (i, &l) in lambda.iter().enumerate() {
        pre[i + 1] = pre[i] + l;
    }
    if st.extra.len() != g.cost.len() {
        st.extra = vec![0; g.cost.len()];
    }
    let mut changed = Vec::new();
    for (v, old_v) in old.iter_mut().enumerate() {
        let (lo, hi) = st.range[v];
        let price = if lo < hi { pre[hi] - pre[lo] } else { 0.0 };
        if price == *old_v {
            continue;
        }
        *old_v = price;
        changed.push(v);
        let off = g.offsets[v];
        for s in 0..g.k(v) {
            st.extra[off + s] = (g.node_usage(v, s) as f64 * price).round() as i128;
        }
    }
    st.recompute_total();
    changed
}

/// Greedy start ignoring memory: nodes in index order (forwards or backwards), each taking the
/// strategy of least node cost plus edge costs to the nodes already chosen (ties: least usage).
pub(super) fn greedy_start(g: &StrategyGraph, backwards: bool) -> Vec<usize> {
    let n = g.num_nodes();
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (e, &(a, b)) in g.edges.iter().enumerate() {
        adj[a].push(e);
        if a != b {
            adj[b].push(e);
        }
    }
    let mut assign = vec![usize::MAX; n];
    let mut c: Vec<i128> = Vec::new();
    for i in 0..n {
        let v = if backwards { n - 1 - i } else { i };
        c.clear();
        c.extend((0..g.k(v)).map(|s| g.node_cost(v, s) as i128));
        for &e in &adj[v] {
            let (a, b) = g.edges[e];
            if a == b {
                for (s, x) in c.iter_mut().enumerate() {
                    *x += g.edge_entry(e, s, s) as i128;
                }
            } else if a == v && assign[b] != usize::MAX {
                for (s, x) in c.iter_mut().enumerate() {
                    *x += g.edge_entry(e, s, assign[b]) as i128;
                }
            } else if b == v && assign[a] != usize::MAX {
                for (s, x) in c.iter_mut().enumerate() {
                    *x += g.edge_entry(e, assign[a], s) as i128;
                }
            }
        }
        assign[v] = (0..g.k(v)).min_by_key(|&s| (c[s], g.node_usage(v, s))).unwrap_or(0);
    }
    assign
}

/// Per edge: whether its matrix holds a forbidden entry (>= 10^18), and the spread (largest
/// finite entry minus the least) of its other entries.
pub(super) fn edge_weights(g: &StrategyGraph) -> Vec<(bool, f64)> {
    (0..g.edges.len())
        .map(|e| {
            let m = &g.edge_cost[g.edge_offsets[e]..g.edge_offsets[e + 1]];
            let hi = m.iter().copied().filter(|&c| c < FORBIDDEN).max().unwrap_or(0);
            let lo = m.iter().copied().min().unwrap_or(0).min(hi);
            (m.iter().any(|&c| c >= FORBIDDEN), (hi - lo) as f64)
        })
        .collect()
}

/// Forest move: a spanning forest whose edges are chosen forbidden-bearing first (Kruskal
/// order: those edges in random order, then the others in random order), so that the
/// contest's "impossible" combinations, which form a forest in the shared instances, are all
/// priced exactly; then [`State::dp_move`] over it. Returns the changed nodes.
pub(super) fn forest_move(st: &mut State<'_>, weights: &[(bool, f64)], next: &mut impl FnMut() -> usize) -> Vec<usize> {
    let g = st.g;
    let n = g.num_nodes();
    let mut edges: Vec<(bool, f64, usize)> = (0..g.edges.len())
        .map(|e| (!weights[e].0, -weights[e].1 * (0.25 + (next() % 1024) as f64 / 512.0), e))
        .collect();
    edges.sort_unstable_by(|x, y| x.0.cmp(&y.0).then(x.1.total_cmp(&y.1)));
    let mut uf: Vec<usize> = (0..n).collect();
    fn find(uf: &mut [usize], mut x: usize) -> usize {
        while uf[x] != x {
            uf[x] = uf[uf[x]];
            x = uf[x];
        }
        x
    }
    let mut tadj: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for &(_, _, e) in &edges {
        let (a, b) = g.edges[e];
        if a == b || g.k(a) * g.k(b) > (1 << 16) {
            continue;
        }
        let (ra, rb) = (find(&mut uf, a), find(&mut uf, b));
        if ra != rb {
            uf[ra] = rb;
            tadj[a].push((b, e));
            tadj[b].push((a, e));
        }
    }
    let mut order = Vec::with_capacity(n);
    let mut parent = Vec::with_capacity(n);
    let mut pos = std::collections::HashMap::with_capacity(n);
    let first = next() % n.max(1);
    for r in (0..n).map(|i| (i + first) % n) {
        if pos.contains_key(&r) || tadj[r].is_empty() {
            continue;
        }
        pos.insert(r, order.len());
        order.push(r);
        parent.push((usize::MAX, usize::MAX));
        let mut i = order.len() - 1;
        while i < order.len() {
            let u = order[i];
            for &(w, e) in &tadj[u] {
                if let std::collections::hash_map::Entry::Vacant(slot) = pos.entry(w) {
                    slot.insert(order.len());
                    order.push(w);
                    parent.push((i, e));
                }
            }
            i += 1;
        }
    }
    if order.len() < 2 {
        return Vec::new();
    }
    st.dp_move(&order, &parent, &pos)
}

/// The priced problem of the Lagrangian phase: memory prices `λ_t` per compressed time point,
/// the assignment that descent, forest moves and (on small or forbidden-free graphs) PBQP moves
/// reach under them, and the subgradient step (module docs).
struct Priced<'g> {
    st: State<'g>,
    limit: i128,
    npoints: usize,
    lambda: Vec<f64>,
    /// Node prices `Σ λ_t` over each node's range, as last set on `st`.
    prices: Vec<f64>,
    eta: f64,
    decay: f64,
    use_pbqp: bool,
    pbqp_fails: u32,
    cycles: u64,
    weights: Vec<(bool, f64)>,
    rng: u64,
}

impl<'g> Priced<'g> {
    /// Greedy start, descent, a PBQP move where it runs and four forest moves, all at zero
    /// prices; `None` without a usage limit. `seed` varies the forest moves' random edge orders
    /// (seed 0 gives the fixed order of earlier releases).
    fn new(g: &'g StrategyGraph, least_usage: &[usize], seed: u64, deadline: Instant) -> Option<Self> {
        let limit = g.usage_limit? as i128;
        let mut st = State::new(g, greedy_start(g, false), least_usage.to_vec());
        let npoints = st.range.iter().map(|r| r.1).max().unwrap_or(0);
        st.limit = i128::MAX;
        // xorshift64 state; never 0 (the generator's fixed point), seed 0 keeps the old stream.
        let rng = match 0x243F_6A88_85A3_08D3u64 ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) {
            0 => 0x243F_6A88_85A3_08D3u64,
            r => r,
        };
        st.descend(None, deadline);
        let weights = edge_weights(g);
        // Measured on the shared instances at a quarter of the contest limits: PBQP moves took V
        // from +503% to +43% and U from +42% to +29%, but K from +39% to +67% (a solve there costs
        // 1-2 s, halving the cycles); so they run on small graphs and on graphs without forbidden
        // edge entries only, and the other graphs keep the earlier price decay.
        let use_pbqp = g.num_nodes() <= PBQP_MAX_NODES || !weights.iter().any(|w| w.0);
        // A price per point: spread over the points of a typical liveness range.
        let live: Vec<usize> = st.range.iter().filter(|r| r.0 < r.1).map(|r| r.1 - r.0).collect();
        let mean_len = live.iter().sum::<usize>() as f64 / live.len().max(1) as f64;
        let eta = exchange_rate(g, least_usage) / mean_len.max(1.0);
        let n = g.num_nodes();
        let mut p = Priced {
            st,
            limit,
            npoints,
            lambda: vec![0.0; npoints],
            prices: vec![0.0; n],
            eta,
            decay: if use_pbqp { 0.7 } else { 0.85 },
            use_pbqp,
            pbqp_fails: 0,
            cycles: 0,
            weights,
            rng,
        };
        if use_pbqp {
            pbqp_move(&mut p.st, deadline);
        }
        // Each forest move is an exact pass over the whole graph (0.2-0.5 s on a 41k-node
        // instance), so none starts past the deadline.
        for _ in 0..4 {
            if super::expired(deadline) {
                break;
            }
            p.forest_step(deadline);
        }
        p.st.log.clear();
        Some(p)
    }

    /// A forest move over a random spanning forest, then descent from the changed nodes.
    fn forest_step(&mut self, deadline: Instant) {
        let rng = &mut self.rng;
        let mut next = || {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            *rng as usize
        };
        let changed = forest_move(&mut self.st, &self.weights, &mut next);
        self.st.descend(Some(&changed), deadline);
    }

    /// Largest overflow of the current assignment over the usage limit, as a share of the
    /// limit (<= 0: it fits).
    fn overflow(&self) -> f64 {
        let top = profile(&self.st, self.npoints).into_iter().max().unwrap_or(0);
        (top - self.limit) as f64 / self.limit.max(1) as f64
    }

    /// One cycle's subgradient step on the prices (`λ_t ← 1.1 λ_t + η · min(g_t, 1)` where the
    /// usage is over by the share `g_t`, else decay), the step size adapted, and the priced
    /// problem re-solved from the current assignment.
    fn step(&mut self, deadline: Instant) {
        self.cycles += 1;
        let use_t = profile(&self.st, self.npoints);
        let mut over = 0.0f64;
        for (l, &u) in self.lambda.iter_mut().zip(&use_t) {
            let gt = (u - self.limit) as f64 / self.limit as f64;
            if gt > 0.0 {
                over = over.max(gt);
                *l = *l * 1.1 + self.eta * gt.min(1.0);
            } else {
                *l *= self.decay;
            }
        }
        // Far over: raise prices faster; nearly fitting: hold the step; fitting: lower it.
        self.eta *= if over > 0.05 {
            1.5
        } else if over > 0.0 {
            1.0
        } else {
            0.7
        };
        let changed = set_prices(&mut self.st, &self.lambda, &mut self.prices);
        if !changed.is_empty() {
            self.st.descend(Some(&changed), deadline);
        }
        // PBQP moves back off (every 2nd, 4th, 8th cycle) while they fail to improve.
        if self.use_pbqp && self.cycles % (1 << self.pbqp_fails.min(3)) == 0 {
            self.pbqp_fails = if pbqp_move(&mut self.st, deadline) { 0 } else { self.pbqp_fails + 1 };
        }
        self.forest_step(deadline);
        self.st.log.clear();
    }
}

/// Runs Lagrangian cycles until `deadline` or `max_cycles`; returns the best feasible assignment
/// found and its exact cost, or `None` (no usage limit, or no cycle could be repaired). `seed`
/// varies the random edge orders of the forest moves, so runs with different seeds explore
/// differently.
pub(super) fn lagrange_phase(
    g: &StrategyGraph,
    least_usage: &[usize],
    deadline: Instant,
    max_cycles: Option<u64>,
    seed: u64,
) -> Option<(i128, Vec<usize>)> {
    let mut pr = Priced::new(g, least_usage, seed, deadline)?;
    let limit = pr.limit;
    let mut best: Option<(i128, Vec<usize>)> = None;
    let mut buf = Vec::new();
    while !super::expired(deadline) && max_cycles.is_none_or(|m| pr.cycles < m) {
        // Feasible image of the priced optimum; skipped (a long, poor repair) while the priced
        // optimum is far over the limit and some feasible assignment is already known.
        let mut fs = State::new(g, pr.st.assign.clone(), least_usage.to_vec());
        fs.limit = limit;
        let far = fs.peak() > limit + limit * 3 / 10;
        if !(far && best.is_some()) && repair(&mut fs, &mut buf) {
            fs.descend(None, deadline);
            if best.as_ref().is_none_or(|b| fs.total < b.0) {
                best = Some((fs.total, fs.assign.clone()));
            }
        }
        pr.step(deadline);
    }
    best
}

/// The answer of [`lagrange_prices`].
#[derive(Debug, Clone)]
pub struct MemoryPrices {
    /// Per node, the price per usage unit (cost units).
    pub prices: Vec<f64>,
    /// The priced assignment's overflow as a share of the limit (<= 0: it fitted).
    pub overflow: f64,
    /// Cycles run (the time limit or `max_cycles` ended them).
    pub cycles: u64,
}

/// Memory prices from the Lagrangian cycles alone (no repair), until `deadline` or
/// `max_cycles`: per node, the price per usage unit `Σ λ_t` over its liveness range, where `λ`
/// is the average of the cycles' prices from the first cycle whose priced assignment fitted the
/// limit on (an ergodic average of the subgradient iterates, which steadies the prices that
/// otherwise swing about the limit; Nedić & Ozdaglar, SIAM J. Optim. 2009), else the last
/// prices; and the overflow of the priced assignment under them, as a share of the limit (<= 0:
/// it fitted; its last descent may run up to a second past `deadline`). `None` without a usage
/// limit; an error if `g` fails [`StrategyGraph::validate`]. These prices start the penalty search (`shardwise.search.penalty`) near the limit
/// instead of at zero. Single prices swing: on the shared instance S the last fitting cycle's
/// (sum 3.4e4) gave relaxed optima about 2% over the limit at 1.59-1.72e9, those of another
/// run (sum 2.6e4) 1.51-1.52e9, and those of the fitting cycle of least cost (sum 7.5e3) 20%
/// over.
pub fn lagrange_prices(
    g: &StrategyGraph,
    deadline: Instant,
    max_cycles: Option<u64>,
    seed: u64,
) -> Result<Option<MemoryPrices>> {
    g.validate()?;
    let least_usage = g.least_usage();
    let Some(mut pr) = Priced::new(g, &least_usage, seed, deadline) else {
        return Ok(None);
    };
    let mut sum = vec![0.0f64; pr.npoints];
    let mut count = 0u32;
    while !super::expired(deadline) && max_cycles.is_none_or(|m| pr.cycles < m) {
        pr.step(deadline);
        if count > 0 || pr.overflow() <= 0.0 {
            count += 1;
            sum.iter_mut().zip(&pr.lambda).for_each(|(s, l)| *s += l);
        }
    }
    if count > 0 {
        let mean: Vec<f64> = sum.iter().map(|s| s / count as f64).collect();
        let changed = set_prices(&mut pr.st, &mean, &mut pr.prices);
        if !changed.is_empty() {
            pr.st.descend(Some(&changed), super::deadline_after(deadline, std::time::Duration::from_secs(1)));
        }
    }
    Ok(Some(MemoryPrices { overflow: pr.overflow(), prices: pr.prices, cycles: pr.cycles }))
}
