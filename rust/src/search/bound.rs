//! Lower bounds of a strategy graph's optimum, so that a user sees how far from optimal an
//! answer can be.
//!
//! The bound is a Lagrangian dual value of two relaxations at once:
//! * **memory**: the usage limit `M` leaves the constraints with a price `λ_t >= 0` per time
//!   point, so strategy `s` of node `v` costs `c_vs + u_vs · Σ_{t live in v} λ_t` and the
//!   constant `− M · Σ_t λ_t` joins the bound (Fisher, "The Lagrangian relaxation method for
//!   solving integer programming problems", Mgmt. Sci. 1981);
//! * **edges**: the edges are split into spanning forests, each forest gets a share of every
//!   node's cost vector plus a correction `δ` (the corrections of a node sum to zero over its
//!   forests), and each forest is solved exactly by min-sum dynamic programming (dual
//!   decomposition; Komodakis, Paragios & Tziritas, "MRF optimization via dual decomposition:
//!   message-passing revisited", ICCV 2007). Nodes on no edge take their cheapest strategy; a
//!   self-edge's diagonal joins its node's costs.
//!
//! For every `λ >= 0` and every `δ`, the sum of the forests' minima plus the edgeless nodes'
//! minima minus `M · Σ λ` is at most the cost of any assignment within the limit (weak
//! duality), so every iterate is a valid bound and the best is kept; its best value over all
//! multipliers is the bound of the linear relaxation with the local-polytope edge constraints
//! and the usage rows. The subgradients are exact (each forest is solved exactly): per node
//! copy, whether its forest chose a strategy less the share of the node's forests that did; per
//! time point, the usage of the forests' choices (averaged per node) over the limit. The ascent is projected (`λ >= 0`), deflected (Camerini, Fratta &
//! Maffioli, "On improving relaxation methods by modified gradient techniques", Math. Prog.
//! Study 1975: half the last direction is added, which damps the zig-zag) and takes Polyak's
//! step towards a target, the cost of a known answer, or without one half as much again as the
//! best bound so far (Polyak, "Minimization of unsmooth functionals", USSR Comput. Math. 1969); the step factor halves after 20 rounds without a
//! better bound and, once the prices move, starts again at 1 when it falls below 10^-6. The
//! first third of the time holds the prices at zero (the forests first agree on the problem
//! without its limit), unless the forests agree or the steps die out before.
//!
//! Measurements on the IOPDDL instances: `docs/search.md`.
//!
//! Arithmetic is in `f64`. The bound returned is lowered by the largest rounding difference per
//! node between its cost vector and the sum of its forests' shares, and by one part in 10^9 of
//! the magnitudes summed, which covers the rounding of the sums over the graph; then, as every
//! cost is an integer, rounded up.

use std::time::Instant;

use super::StrategyGraph;
use crate::error::Result;

/// A lower bound of a strategy graph's optimum ([`lower_bound`]).
#[derive(Debug, Clone)]
pub struct LowerBound {
    /// The best bound found: no assignment within the usage limit costs less.
    pub bound: i128,
    /// The best bound of the rounds with all memory prices at zero (a bound of the problem
    /// without its usage limit); `bound` itself without a usage limit.
    pub unpriced: i128,
    /// Forests the edges were split into.
    pub forests: usize,
    /// Subgradient rounds run.
    pub rounds: u64,
    /// The relaxation's choices at the best bound: per node, its first forest's strategy (a
    /// node on no edge: its cheapest priced one). A full assignment near the relaxation's
    /// optimum, not necessarily within the usage limit.
    pub assignment: Vec<usize>,
}

/// One spanning forest: its trees' nodes in breadth-first order, each with its parent.
struct Forest {
    order: Vec<usize>,
    /// Per position: (position of the parent or `usize::MAX` for a root, edge to the parent,
    /// whether the node is the edge's first node).
    parent: Vec<(usize, usize, bool)>,
    /// Start of each position's cost slots (one per strategy) in the forest's flat vectors.
    off: Vec<usize>,
}

/// Splits the edges (self-edges excepted) into spanning forests: each pass keeps the edges that
/// join two of its trees (union-find in edge order), the rest go to the next pass.
fn forests(g: &StrategyGraph) -> Vec<Forest> {
    let n = g.num_nodes();
    let mut left: Vec<usize> = (0..g.edges.len()).filter(|&e| g.edges[e].0 != g.edges[e].1).collect();
    let mut out = Vec::new();
    let mut uf: Vec<usize> = vec![0; n];
    fn find(uf: &mut [usize], mut x: usize) -> usize {
        while uf[x] != x {
            uf[x] = uf[uf[x]];
            x = uf[x];
        }
        x
    }
    while !left.is_empty() {
        uf.iter_mut().enumerate().for_each(|(i, p)| *p = i);
        let mut adj: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
        let mut rest = Vec::new();
        for &e in &left {
            let (a, b) = g.edges[e];
            let (ra, rb) = (find(&mut uf, a), find(&mut uf, b));
            if ra == rb {
                rest.push(e);
            } else {
                uf[ra] = rb;
                adj[a].push((b, e));
                adj[b].push((a, e));
            }
        }
        let mut f = Forest { order: Vec::new(), parent: Vec::new(), off: vec![0] };
        let mut pos = vec![usize::MAX; n];
        for r in 0..n {
            if pos[r] != usize::MAX || adj[r].is_empty() {
                continue;
            }
            pos[r] = f.order.len();
            f.order.push(r);
            f.parent.push((usize::MAX, usize::MAX, false));
            let mut i = f.order.len() - 1;
            while i < f.order.len() {
                let u = f.order[i];
                for &(w, e) in &adj[u] {
                    if pos[w] == usize::MAX {
                        pos[w] = f.order.len();
                        f.order.push(w);
                        f.parent.push((i, e, g.edges[e].0 == w));
                    }
                }
                i += 1;
            }
        }
        for &v in &f.order {
            let last = *f.off.last().expect("off starts with 0");
            f.off.push(last + g.k(v));
        }
        out.push(f);
        left = rest;
    }
    out
}

/// Minimum of a forest's problem with the flat unary costs `unary` (consumed as work space):
/// returns the value and each position's strategy in an optimal assignment.
fn solve_forest(g: &StrategyGraph, f: &Forest, unary: &mut [f64], choice: &mut [usize]) -> f64 {
    let entry = |e: usize, first: bool, sc: usize, sp: usize| -> f64 {
        (if first { g.edge_entry(e, sc, sp) } else { g.edge_entry(e, sp, sc) }) as f64
    };
    for i in (0..f.order.len()).rev() {
        let (p, e, first) = f.parent[i];
        if p == usize::MAX {
            continue;
        }
        let (ci, pi) = (f.off[i]..f.off[i + 1], f.off[p]..f.off[p + 1]);
        for sp in 0..pi.len() {
            let mut best = f64::INFINITY;
            for (sc, &x) in unary[ci.clone()].iter().enumerate() {
                best = best.min(x + entry(e, first, sc, sp));
            }
            unary[pi.start + sp] += best;
        }
    }
    let mut value = 0.0;
    for i in 0..f.order.len() {
        let (p, e, first) = f.parent[i];
        let slots = &unary[f.off[i]..f.off[i + 1]];
        let (mut best, mut arg) = (f64::INFINITY, 0);
        for (s, &x) in slots.iter().enumerate() {
            let y = if p == usize::MAX { x } else { x + entry(e, first, s, choice[p]) };
            if y < best {
                best = y;
                arg = s;
            }
        }
        if p == usize::MAX {
            value += best;
        }
        choice[i] = arg;
    }
    value
}

/// Share of the last direction kept in the next (`lower_bound`).
const DEFLECT: f64 = 0.5;

/// A lower bound of the optimum of `g` within its usage limit (module documentation), from
/// subgradient rounds until `deadline` (at least one round) or `max_rounds`. `target`: the
/// cost of a known assignment, which the Polyak steps aim at (without one, half as much again
/// as the best bound so far). Deterministic for a given `max_rounds` when `deadline` does not
/// cut it short. An error if `g` fails [`StrategyGraph::validate`].
pub fn lower_bound(
    g: &StrategyGraph,
    deadline: Instant,
    max_rounds: Option<u64>,
    target: Option<i128>,
) -> Result<LowerBound> {
    g.validate()?;
    let n = g.num_nodes();
    let fs = forests(g);
    // Memberships per node: (forest, position).
    let mut memb: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (fi, f) in fs.iter().enumerate() {
        for (i, &v) in f.order.iter().enumerate() {
            memb[v].push((fi, i));
        }
    }
    // Compressed time points (as in `local::State`): the distinct interval starts.
    let mut times: Vec<i64> = g.intervals.iter().filter(|(a, b)| a < b).map(|&(a, _)| a).collect();
    times.sort_unstable();
    times.dedup();
    let range: Vec<(usize, usize)> = g
        .intervals
        .iter()
        .map(|&(a, b)| (times.partition_point(|&t| t < a), times.partition_point(|&t| t < b)))
        .collect();
    let npoints = times.len();
    let limit = g.usage_limit.map(|l| l as f64);
    // Memory prices in units of cost per share of the limit (`λ_t = μ_t / M`), so that their
    // subgradients (overflow shares) and the corrections' (0/1 indicators) have like scales.
    let mut mu = vec![0.0f64; npoints];
    let mut delta: Vec<Vec<f64>> = fs.iter().map(|f| vec![0.0; *f.off.last().expect("off")]).collect();
    let mut work: Vec<Vec<f64>> = delta.clone();
    let mut choice: Vec<Vec<usize>> = fs.iter().map(|f| vec![0; f.order.len()]).collect();
    let mut out =
        LowerBound { bound: i128::MIN, unpriced: i128::MIN, forests: fs.len(), rounds: 0, assignment: vec![0; n] };
    let mut best = f64::NEG_INFINITY;
    let target = target.map(|t| t as f64);
    // Step factor and rounds since the bound last improved.
    let mut alpha = 1.0f64;
    let mut stall = 0u32;
    // Rounds with the prices held at zero first (a third of the time): the forests come to
    // agree on the problem without its limit, which gives `unpriced`.
    let start = Instant::now();
    let priced_from = start + deadline.saturating_duration_since(start) / 3;
    let mut priced = false;
    // A self-edge's diagonal is a cost of its node's strategy alone.
    let mut own = vec![0.0f64; g.cost.len()];
    for (e, &(a, b)) in g.edges.iter().enumerate() {
        if a == b {
            for s in 0..g.k(a) {
                own[g.offsets[a] + s] += g.edge_entry(e, s, s) as f64;
            }
        }
    }
    let mut theta = vec![0.0f64; g.cost.len()];
    let mut split = vec![0.0f64; g.cost.len()];
    let mut mean_use = vec![0.0f64; n];
    // Strategy of each node on no forest edge in the last round.
    let mut alone = vec![0usize; n];
    let mut grad: Vec<Vec<f64>> = delta.clone();
    let mut dir: Vec<Vec<f64>> = delta.clone();
    let mut dmu = vec![0.0f64; npoints];
    loop {
        // Node prices and the priced node costs.
        let mut pre = vec![0.0f64; npoints + 1];
        for (t, &m) in mu.iter().enumerate() {
            pre[t + 1] = pre[t] + m;
        }
        let scale = limit.map_or(0.0, |l| 1.0 / l.max(1.0));
        let mut magnitude = 0.0f64;
        for (v, &(lo, hi)) in range.iter().enumerate() {
            let price = if lo < hi { (pre[hi] - pre[lo]) * scale } else { 0.0 };
            for s in 0..g.k(v) {
                let i = g.offsets[v] + s;
                theta[i] = g.cost[i] as f64 + own[i] + g.usage[i] as f64 * price;
            }
        }
        // The bound at these multipliers.
        let mut value = 0.0f64;
        for v in 0..n {
            if memb[v].is_empty() {
                let sl = &theta[g.offsets[v]..g.offsets[v + 1]];
                let (s, &x) = sl.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)).expect("a strategy");
                value += x;
                magnitude += x.abs();
                mean_use[v] = g.node_usage(v, s) as f64;
                alone[v] = s;
            }
        }
        // The forests' shares of a node's costs sum to them up to rounding: `split[i]` is their
        // sum, and the largest difference per node is taken off the bound.
        split.fill(0.0);
        for (fi, f) in fs.iter().enumerate() {
            let w = &mut work[fi];
            for (i, &v) in f.order.iter().enumerate() {
                let share = 1.0 / memb[v].len() as f64;
                for s in 0..g.k(v) {
                    let x = theta[g.offsets[v] + s] * share + delta[fi][f.off[i] + s];
                    w[f.off[i] + s] = x;
                    split[g.offsets[v] + s] += x;
                }
            }
            let x = solve_forest(g, f, w, &mut choice[fi]);
            value += x;
            magnitude += x.abs();
        }
        for v in (0..n).filter(|&v| !memb[v].is_empty()) {
            let r = g.offsets[v]..g.offsets[v + 1];
            value -= theta[r.clone()].iter().zip(&split[r]).map(|(t, x)| (t - x).abs()).fold(0.0, f64::max);
        }
        let sum_mu: f64 = mu.iter().sum();
        value -= sum_mu;
        magnitude += sum_mu;
        out.rounds += 1;
        let safe = value - magnitude * 1e-9;
        if safe > best {
            best = safe;
            stall = 0;
            for (v, m) in memb.iter().enumerate() {
                out.assignment[v] = m.first().map_or(alone[v], |&(fi, i)| choice[fi][i]);
            }
        } else {
            stall += 1;
            if stall >= 20 {
                alpha /= 2.0;
                stall = 0;
                if priced && alpha < 1e-6 {
                    alpha = 1.0;
                }
            }
        }
        if !priced {
            out.unpriced = out.unpriced.max(safe.ceil() as i128);
        }
        // Subgradients: corrections (per membership and strategy `t`: whether the forest chose
        // `t`, less the share of the node's forests that did) and prices (the usage of the
        // forests' choices, averaged per node, as a share of the limit).
        for (gd, f) in grad.iter_mut().zip(&fs) {
            gd[..*f.off.last().expect("off")].fill(0.0);
        }
        for v in 0..n {
            let m = &memb[v];
            if m.is_empty() {
                continue;
            }
            let k = m.len() as f64;
            let mut u = 0.0;
            for &(fj, j) in m {
                let off = fs[fj].off[j];
                let s = choice[fj][j];
                u += g.node_usage(v, s) as f64;
                grad[fj][off + s] += 1.0;
                for &(fk, kk) in m {
                    grad[fj][off + choice[fk][kk]] -= 1.0 / k;
                }
            }
            mean_use[v] = u / k;
        }
        let mut gmu = vec![0.0f64; npoints];
        if let Some(l) = limit {
            let mut d = vec![0.0f64; npoints + 1];
            for v in 0..n {
                let (lo, hi) = range[v];
                if lo < hi {
                    d[lo] += mean_use[v];
                    d[hi] -= mean_use[v];
                }
            }
            let mut cur = 0.0;
            for t in 0..npoints {
                cur += d[t];
                gmu[t] = (cur - l) / l.max(1.0);
            }
        }
        let dnorm: f64 = grad.iter().flatten().map(|x| x * x).sum();
        let late = Instant::now() >= priced_from || max_rounds.is_some_and(|m| out.rounds * 3 >= m);
        if !priced && limit.is_some() && (late || dnorm <= 0.0 || alpha < 1e-4) {
            // The prices start (the forests agree, the steps have shrunk to nothing, or a third
            // of the time is spent): the step factor starts afresh.
            priced = true;
            alpha = 1.0;
            stall = 0;
        }
        if !priced {
            gmu.fill(0.0);
        }
        // Deflected direction (Camerini, Fratta & Maffioli, "On improving relaxation methods by
        // modified gradient techniques", Math. Prog. Study 1975): this round's subgradient plus
        // half the last direction, which damps the zig-zag of plain subgradient steps; prices
        // at zero do not move below it.
        for (dd, gd) in dir.iter_mut().flatten().zip(grad.iter().flatten()) {
            *dd = gd + DEFLECT * *dd;
        }
        for ((dm, &gm), &m) in dmu.iter_mut().zip(&gmu).zip(&mu) {
            *dm = gm + DEFLECT * *dm;
            if m <= 0.0 && *dm < 0.0 {
                *dm = 0.0;
            }
        }
        let norm: f64 = dir.iter().flatten().chain(&dmu).map(|x| x * x).sum();
        if super::expired(deadline) || max_rounds.is_some_and(|m| out.rounds >= m) || norm <= 0.0 {
            break;
        }
        // Without a target: half as much again as the best bound so far (it rises with it).
        let goal = target.unwrap_or(best + best.abs().max(1.0) * 0.5);
        let step = alpha * (goal - value).max(goal.abs() * 1e-6) / norm;
        for (x, d) in delta.iter_mut().flatten().zip(dir.iter().flatten()) {
            *x += step * d;
        }
        for (m, &d) in mu.iter_mut().zip(&dmu) {
            *m = (*m + step * d).max(0.0);
        }
    }
    out.bound = best.ceil() as i128;
    Ok(out)
}
