//! PBQP (partitioned boolean quadratic programming) by graph reduction: choose one strategy per
//! node minimising Σ node costs + Σ edge costs, with no memory constraint. This is the strategy
//! graph problem of `search/mod.rs` without its usage limit, and the Lagrangian phase
//! (`lagrange.rs`) solves one such problem per price update.
//!
//! Reductions (Scholz & Eckstein, "Register allocation for irregular architectures", LCTES
//! 2002; Hames & Scholz, "Nearly optimal register allocation with PBQP", JMLC 2006):
//! * R0: a node without edges takes its cheapest strategy (exact);
//! * R1: a node with one neighbour `w` is folded into `w`'s cost vector,
//!   `c_w[t] += min_s (c_v[s] + M(s, t))` (exact);
//! * R2: a node with two neighbours `u`, `w` is folded into an edge matrix between them,
//!   `M'(s_u, s_w) = min_s (c_v[s] + M_vu(s, s_u) + M_vw(s, s_w))`, summed with an existing
//!   `u`–`w` edge (exact);
//! * RN: otherwise the node of highest degree takes the strategy minimising
//!   `c_v[s] + Σ_w min_t (M(s, t) + c_w[t])` and its rows are added to its neighbours' vectors
//!   (heuristic; exact when the node has one strategy, and such nodes are taken first).
//!
//! Back-propagation in the reverse order of the reductions then picks every folded node's
//! strategy from its recorded arg-min table. If no heuristic RN step was needed the result is
//! optimal. Costs are `i64` with saturating additions (the contest's forbidden entries are
//! 10^18; sums of several of them saturate at `i64::MAX` and stay "forbidden").
//!
//! R2 is skipped (the node is left to RN) when it would cost more than [`R2_MAX_WORK`]
//! multiply-adds or create a matrix of more than [`R2_MAX_ENTRIES`] entries.
//!
//! The look-ahead of the RN steps ([`Pilot`]) is bounded by work, counted in cost entries read,
//! so that its answer is a function of the instance alone: bounded by time, how many RN steps
//! got it depended on the machine's load, and with it the Lagrangian prices that start the
//! penalty search (`lagrange.rs`; docs/search.md, twenty-seventh session).

use std::borrow::Cow;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Largest `k(v) · k(u) · k(w)` an R2 reduction may spend.
pub const R2_MAX_WORK: usize = 1 << 24;
/// Largest `k(u) · k(w)` matrix an R2 reduction may create.
pub const R2_MAX_ENTRIES: usize = 1 << 18;

#[derive(Clone)]
struct Edge<'a> {
    a: usize,
    b: usize,
    /// Row-major `k(a) × k(b)`.
    m: Cow<'a, [i64]>,
}

enum Step {
    Fixed(usize, usize),
    R1 { v: usize, w: usize, arg: Vec<u32> },
    R2 { v: usize, u: usize, w: usize, arg: Vec<u32> },
}

/// A PBQP instance; edge matrices may borrow from the caller (copied only when an R2 reduction
/// adds into them).
#[derive(Clone)]
pub struct Pbqp<'a> {
    /// Cost of the nodes fixed so far (saturating).
    constant: i64,
    removed: Vec<bool>,
    cost: Vec<Vec<i64>>,
    edges: Vec<Edge<'a>>,
    /// Per node: (neighbour, edge index) of its live edges.
    adj: Vec<Vec<(usize, usize)>>,
}

/// The look-ahead of the RN steps (the pilot method; Voß, Fink & Duin, "Looking ahead with the
/// pilot method", Ann. Oper. Res. 2005): each RN step tries its `candidates` least estimates,
/// completing the instance by plain reduction after each, while `work` is left; a candidate
/// costs the size ([`Pbqp::size`]) of the instance left to reduce, and once an RN step cannot
/// pay for one the look-ahead ends (the steps that get it are the first ones, where the most is
/// left to decide). `deadline` is a guard only (a look-ahead that reaches it stops, and the
/// answer then depends on timing).
#[derive(Debug, Clone, Copy)]
pub struct Pilot {
    /// Strategies tried per RN step; 0: none (plain RN).
    pub candidates: usize,
    /// Cost entries the look-ahead may read over the whole solve (each completion: the size of
    /// the instance left).
    pub work: usize,
    /// Wall-clock guard.
    pub deadline: Option<Instant>,
}

impl Pilot {
    /// Plain RN: no look-ahead.
    pub const OFF: Pilot = Pilot { candidates: 0, work: 0, deadline: None };

    /// `candidates` per RN step on every RN step.
    pub fn unbounded(candidates: usize) -> Pilot {
        Pilot { candidates, work: usize::MAX, deadline: None }
    }
}

/// The answer of [`Pbqp::solve`].
#[derive(Debug, Clone)]
pub struct PbqpSolution {
    /// Strategy index per node.
    pub assignment: Vec<usize>,
    /// Heuristic RN steps taken on nodes with more than one strategy; 0: `assignment` is optimal.
    pub heuristic_steps: usize,
    /// Cost of `assignment` (saturating at `i64::MAX`).
    pub cost: i64,
}

#[inline]
fn add(a: i64, b: i64) -> i64 {
    a.saturating_add(b)
}

fn argmin(v: &[i64]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x < v[best] {
            best = i;
        }
    }
    best
}

impl<'a> Pbqp<'a> {
    /// An instance with one cost vector per node (each non-empty) and no edges.
    pub fn new(cost: Vec<Vec<i64>>) -> Self {
        let n = cost.len();
        Pbqp { constant: 0, removed: vec![false; n], cost, edges: Vec::new(), adj: vec![Vec::new(); n] }
    }

    pub fn num_nodes(&self) -> usize {
        self.cost.len()
    }

    /// Cost entries of the nodes not reduced and their live edges (vector and matrix entries):
    /// what a plain reduction of this instance reads at least once.
    pub fn size(&self) -> usize {
        let mut n = 0;
        for (v, adj) in self.adj.iter().enumerate() {
            if !self.removed[v] {
                n += self.cost[v].len();
                n += adj.iter().filter(|p| v < p.0).map(|p| self.edges[p.1].m.len()).sum::<usize>();
            }
        }
        n
    }

    /// Adds an edge `a`–`b` with the row-major `k(a) × k(b)` matrix `m`. A self-edge adds its
    /// diagonal to the node's vector; a second edge between the same nodes is summed into the
    /// first. Panics when `m` has the wrong size or a node is out of range (a caller's bug;
    /// `StrategyGraph::validate` checks the public inputs).
    pub fn add_edge(&mut self, a: usize, b: usize, m: Cow<'a, [i64]>) {
        let (ka, kb) = (self.cost[a].len(), self.cost[b].len());
        assert_eq!(m.len(), ka * kb, "edge ({a}, {b}) matrix size");
        if a == b {
            for s in 0..ka {
                self.cost[a][s] = add(self.cost[a][s], m[s * ka + s]);
            }
            return;
        }
        if let Some(&(_, e)) = self.adj[a].iter().find(|x| x.0 == b) {
            let first = self.edges[e].a == a;
            let dst = self.edges[e].m.to_mut();
            for sa in 0..ka {
                for sb in 0..kb {
                    let i = if first { sa * kb + sb } else { sb * ka + sa };
                    dst[i] = add(dst[i], m[sa * kb + sb]);
                }
            }
            return;
        }
        let e = self.edges.len();
        self.edges.push(Edge { a, b, m });
        self.adj[a].push((b, e));
        self.adj[b].push((a, e));
    }

    fn unlink(&mut self, x: usize, e: usize) {
        if let Some(i) = self.adj[x].iter().position(|p| p.1 == e) {
            self.adj[x].swap_remove(i);
        }
    }

    /// `M(s_v, s_w)` of edge `e` seen from `v`.
    #[inline]
    fn entry(&self, e: usize, v: usize, sv: usize, sw: usize) -> i64 {
        let ed = &self.edges[e];
        if ed.a == v {
            ed.m[sv * self.cost[ed.b].len() + sw]
        } else {
            ed.m[sw * self.cost[v].len() + sv]
        }
    }

    fn r1(&mut self, v: usize) -> Step {
        let (w, e) = self.adj[v][0];
        let (kv, kw) = (self.cost[v].len(), self.cost[w].len());
        let mut best = vec![i64::MAX; kw];
        let mut arg = vec![0u32; kw];
        let cv = &self.cost[v];
        let ed = &self.edges[e];
        if ed.a == v {
            for (sv, &c) in cv.iter().enumerate() {
                let row = &ed.m[sv * kw..(sv + 1) * kw];
                for sw in 0..kw {
                    let x = add(c, row[sw]);
                    if x < best[sw] {
                        best[sw] = x;
                        arg[sw] = sv as u32;
                    }
                }
            }
        } else {
            for sw in 0..kw {
                let row = &ed.m[sw * kv..(sw + 1) * kv];
                for (sv, (&c, &m)) in cv.iter().zip(row).enumerate() {
                    let x = add(c, m);
                    if x < best[sw] {
                        best[sw] = x;
                        arg[sw] = sv as u32;
                    }
                }
            }
        }
        for (c, b) in self.cost[w].iter_mut().zip(&best) {
            *c = add(*c, *b);
        }
        self.unlink(w, e);
        self.adj[v].clear();
        Step::R1 { v, w, arg }
    }

    fn r2_fits(&self, v: usize) -> bool {
        let (u, w) = (self.adj[v][0].0, self.adj[v][1].0);
        let (kv, ku, kw) = (self.cost[v].len(), self.cost[u].len(), self.cost[w].len());
        ku * kw <= R2_MAX_ENTRIES && kv * ku * kw <= R2_MAX_WORK
    }

    fn r2(&mut self, v: usize) -> Step {
        let ((u, e1), (w, e2)) = (self.adj[v][0], self.adj[v][1]);
        let (kv, ku, kw) = (self.cost[v].len(), self.cost[u].len(), self.cost[w].len());
        // t2[sw][sv] = M_vw(sv, sw), contiguous in sv.
        let mut t2 = vec![0i64; kw * kv];
        for sv in 0..kv {
            for sw in 0..kw {
                t2[sw * kv + sv] = self.entry(e2, v, sv, sw);
            }
        }
        let mut col = vec![0i64; kv];
        let mut m = vec![0i64; ku * kw];
        let mut arg = vec![0u32; ku * kw];
        for su in 0..ku {
            for (sv, c) in col.iter_mut().enumerate() {
                *c = add(self.cost[v][sv], self.entry(e1, v, sv, su));
            }
            for sw in 0..kw {
                let row = &t2[sw * kv..(sw + 1) * kv];
                let (mut best, mut bi) = (i64::MAX, 0u32);
                for (sv, (&c, &t)) in col.iter().zip(row).enumerate() {
                    let x = add(c, t);
                    if x < best {
                        best = x;
                        bi = sv as u32;
                    }
                }
                m[su * kw + sw] = best;
                arg[su * kw + sw] = bi;
            }
        }
        self.unlink(u, e1);
        self.unlink(w, e2);
        self.adj[v].clear();
        self.add_edge(u, w, Cow::Owned(m));
        Step::R2 { v, u, w, arg }
    }

    /// RN estimate per strategy of `v`: `c_v[s] + Σ_w min_t (M(s, t) + c_w[t])`.
    fn estimate(&self, v: usize) -> Vec<i64> {
        let mut val = self.cost[v].clone();
        for &(w, e) in &self.adj[v] {
            let cw = &self.cost[w];
            for (sv, x) in val.iter_mut().enumerate() {
                let mut best = i64::MAX;
                for (sw, &c) in cw.iter().enumerate() {
                    best = best.min(add(self.entry(e, v, sv, sw), c));
                }
                *x = add(*x, best);
            }
        }
        val
    }

    /// Fixes `v` to `s`: its cost joins the constant, its rows join its neighbours' vectors.
    fn fix(&mut self, v: usize, s: usize) -> Step {
        self.constant = add(self.constant, self.cost[v][s]);
        let adj = std::mem::take(&mut self.adj[v]);
        for &(w, e) in &adj {
            for sw in 0..self.cost[w].len() {
                let x = self.entry(e, v, s, sw);
                self.cost[w][sw] = add(self.cost[w][sw], x);
            }
            self.unlink(w, e);
        }
        self.removed[v] = true;
        Step::Fixed(v, s)
    }

    /// The nodes not yet reduced and their live edges as an instance of their own (the same
    /// constant, so that completions compare with this instance's), and `v`'s index in it.
    fn core(&self, v: usize, alive: usize) -> (Pbqp<'a>, usize) {
        let mut index = vec![usize::MAX; self.num_nodes()];
        let mut cost = Vec::with_capacity(alive);
        for (u, c) in self.cost.iter().enumerate() {
            if !self.removed[u] {
                index[u] = cost.len();
                cost.push(c.clone());
            }
        }
        let mut core = Pbqp::new(cost);
        core.constant = self.constant;
        for (u, adj) in self.adj.iter().enumerate() {
            for &(w, e) in adj {
                if u < w {
                    let ed = &self.edges[e];
                    core.add_edge(index[ed.a], index[ed.b], ed.m.clone());
                }
            }
        }
        (core, index[v])
    }

    /// The strategy an RN step gives `v` (`alive` nodes left, `v` included): the least
    /// estimate, or, while `pilot` has work left, the one of its candidates whose completion by
    /// plain reduction costs least ([`Pilot`]; each completion spends the size of the instance).
    fn rn_choice(&self, v: usize, alive: usize, pilot: &mut Pilot) -> usize {
        let val = self.estimate(v);
        if pilot.candidates == 0 || pilot.work == 0 || pilot.deadline.is_some_and(super::expired) {
            return argmin(&val);
        }
        let size = self.size();
        if pilot.work < size {
            pilot.work = 0; // the look-ahead ends here: no later, smaller step takes it up again
            return argmin(&val);
        }
        let mut order: Vec<usize> = (0..val.len()).collect();
        order.sort_by_key(|&s| (val[s], s));
        let mut best = (i64::MAX, order[0]);
        // Each completion reduces a copy of the nodes left alone: by the first RN step most are
        // reduced (IOPDDL's N: 2,751 of 40,958 left), and copying every node, with the edges the
        // reductions unlinked, was a third of a completion's time.
        let (core, cv) = self.core(v, alive);
        for &s in order.iter().take(pilot.candidates) {
            if (val[s] == i64::MAX && best.0 < i64::MAX) || pilot.work < size {
                break;
            }
            pilot.work -= size;
            let mut c = core.clone();
            c.fix(cv, s);
            c.reduce(None, &mut Pilot::OFF);
            if c.constant < best.0 {
                best = (c.constant, s);
            }
        }
        best.1
    }

    /// Reduces every node left (module documentation); records the steps when `steps` is given.
    /// Returns the number of heuristic RN steps on nodes with more than one strategy.
    fn reduce(&mut self, mut steps: Option<&mut Vec<Step>>, pilot: &mut Pilot) -> usize {
        let n = self.num_nodes();
        let alive: Vec<usize> = (0..n).filter(|&v| !self.removed[v]).collect();
        let mut low: Vec<usize> =
            alive.iter().rev().copied().filter(|&v| self.adj[v].len() <= 2 || self.cost[v].len() == 1).collect();
        let mut heap: BinaryHeap<(usize, usize)> = alive.iter().map(|&v| (self.adj[v].len(), v)).collect();
        let mut heuristic = 0usize;
        let mut left = alive.len();
        let mut touched: Vec<usize> = Vec::new();
        while left > 0 {
            let mut pick = None;
            while let Some(v) = low.pop() {
                if self.removed[v] {
                    continue;
                }
                let d = self.adj[v].len();
                if d <= 1 || self.cost[v].len() == 1 || (d == 2 && self.r2_fits(v)) {
                    pick = Some(v);
                    break;
                }
            }
            let v = match pick {
                Some(v) => v,
                None => loop {
                    let (d, v) = heap.pop().expect("a node is left");
                    if !self.removed[v] && d == self.adj[v].len() {
                        break v;
                    }
                },
            };
            touched.clear();
            touched.extend(self.adj[v].iter().map(|x| x.0));
            let d = self.adj[v].len();
            let step = if self.cost[v].len() == 1 || d == 0 {
                let s = argmin(&self.cost[v]);
                self.fix(v, s)
            } else if d == 1 {
                self.r1(v)
            } else if d == 2 && self.r2_fits(v) {
                self.r2(v)
            } else {
                heuristic += 1;
                let s = self.rn_choice(v, left, pilot);
                self.fix(v, s)
            };
            self.removed[v] = true;
            if let Some(st) = steps.as_deref_mut() {
                st.push(step);
            }
            left -= 1;
            for &w in &touched {
                let dw = self.adj[w].len();
                heap.push((dw, w));
                if dw <= 2 {
                    low.push(w);
                }
            }
        }
        heuristic
    }

    /// Reduces the instance to nothing and back-propagates (module documentation), the RN
    /// steps looking ahead as `pilot` allows.
    pub fn solve(mut self, mut pilot: Pilot) -> PbqpSolution {
        let n = self.num_nodes();
        let mut steps: Vec<Step> = Vec::with_capacity(n);
        let heuristic = self.reduce(Some(&mut steps), &mut pilot);
        let mut assignment = vec![0usize; n];
        for step in steps.iter().rev() {
            match step {
                Step::Fixed(v, s) => assignment[*v] = *s,
                Step::R1 { v, w, arg } => assignment[*v] = arg[assignment[*w]] as usize,
                Step::R2 { v, u, w, arg } => {
                    let kw = self.cost[*w].len();
                    assignment[*v] = arg[assignment[*u] * kw + assignment[*w]] as usize;
                }
            }
        }
        PbqpSolution { assignment, heuristic_steps: heuristic, cost: self.constant }
    }
}

impl<'a> Pbqp<'a> {
    /// The strategy graph `g` without its usage limit, as PBQP; `extra` (empty, or one entry
    /// per flat strategy index) is added to the node costs (the Lagrangian memory price),
    /// clamped to the `i64` range. Edge matrices are borrowed from `g`.
    pub fn from_graph(g: &'a super::StrategyGraph, extra: &[i128]) -> Self {
        let cost = (0..g.num_nodes())
            .map(|v| {
                (g.offsets[v]..g.offsets[v + 1])
                    .map(|i| {
                        let x = g.cost[i] as i128 + extra.get(i).copied().unwrap_or(0);
                        x.clamp(i64::MIN as i128, i64::MAX as i128) as i64
                    })
                    .collect()
            })
            .collect();
        let mut p = Pbqp::new(cost);
        for (e, &(a, b)) in g.edges.iter().enumerate() {
            p.add_edge(a, b, Cow::Borrowed(&g.edge_cost[g.edge_offsets[e]..g.edge_offsets[e + 1]]));
        }
        p
    }
}
