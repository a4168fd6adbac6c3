//! Forbidden components: the nodes joined by edges that carry forbidden entries (>= 10^18, the
//! contest's "impossible" strategy pairs), with every joint assignment of such a component that
//! lands on no forbidden entry among its own nodes.
//!
//! On the contest instances these edges are functional (each strategy of one end allows at most
//! one strategy of the other) and form a forest, so a component of hundreds or thousands of nodes
//! has only a few joint assignments (measured on the validation instance C: 22,158 of 32,894
//! nodes in 156 components, at most 30 joint assignments each; D: 27,186 nodes, 157 components,
//! at most 41). A single-node move inside such a component always lands on a forbidden entry, so
//! node, edge and small tree moves cannot change which joint assignment a component takes; a
//! component move (`State::component_move` in `local.rs`) re-chooses it whole, with the exact
//! cost change. This is the contraction that toulbar2 reaches by its own arc consistency on hard
//! constraints (Cooper et al., Artif. Intell. 2010); here it is enumerated once per graph.

use super::StrategyGraph;

pub(super) const FORBIDDEN: i64 = 1_000_000_000_000_000_000;

/// Components with more joint assignments than this are left out (no component move).
pub const MAX_JOINTS: usize = 256;

/// One component: its nodes, its joint assignments (row `j` of `joints`, `nodes.len()` entries,
/// is the strategy of each node in `nodes` order) and every edge with an end in it, as (edge,
/// index in `nodes` of its first end, of its second end), [`OUTSIDE`] for an end outside.
#[derive(Debug, Clone)]
pub struct Component {
    pub nodes: Vec<usize>,
    pub joints: Vec<usize>,
    pub edges: Vec<(usize, usize, usize)>,
}

/// Index of an edge end that is not in the component.
pub const OUTSIDE: usize = usize::MAX;

impl Component {
    /// Number of joint assignments.
    pub fn count(&self) -> usize {
        self.joints.len() / self.nodes.len().max(1)
    }

    /// Joint assignment `j`, one strategy per node of `nodes`.
    pub fn joint(&self, j: usize) -> &[usize] {
        let n = self.nodes.len();
        &self.joints[j * n..(j + 1) * n]
    }
}

fn allowed(g: &StrategyGraph, e: usize, sa: usize, sb: usize) -> bool {
    g.edge_entry(e, sa, sb) < FORBIDDEN
}

/// [`find`] after checking `g` ([`StrategyGraph::validate`]'s errors).
pub fn forbidden_components(g: &StrategyGraph) -> crate::error::Result<Vec<Component>> {
    g.validate()?;
    Ok(find(g))
}

/// The forbidden components of `g` with at most [`MAX_JOINTS`] joint assignments and at least
/// two of them (a component with one has nothing to choose; one with none is left to the other
/// moves).
pub(super) fn find(g: &StrategyGraph) -> Vec<Component> {
    let n = g.num_nodes();
    let mut hard: Vec<Vec<(usize, usize, bool)>> = vec![Vec::new(); n];
    let mut inc: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (e, &(a, b)) in g.edges.iter().enumerate() {
        inc[a].push(e);
        inc[b].push(e);
        if a == b {
            continue;
        }
        let m = &g.edge_cost[g.edge_offsets[e]..g.edge_offsets[e + 1]];
        if m.iter().any(|&c| c >= FORBIDDEN) {
            hard[a].push((e, b, true));
            hard[b].push((e, a, false));
        }
    }
    let mut seen = vec![false; n];
    let mut comps = Vec::new();
    for root in 0..n {
        if seen[root] || hard[root].is_empty() {
            continue;
        }
        // BFS tree over the hard edges; `parent[i]` = (index of the parent, edge, parent is the
        // edge's first node).
        seen[root] = true;
        let mut order = vec![root];
        let mut parent = vec![(usize::MAX, usize::MAX, false)];
        let mut i = 0;
        while i < order.len() {
            let u = order[i];
            for &(e, w, u_first) in &hard[u] {
                if !seen[w] {
                    seen[w] = true;
                    order.push(w);
                    parent.push((i, e, u_first));
                }
            }
            i += 1;
        }
        if let Some(c) = enumerate(g, &order, &parent, &hard, &inc) {
            comps.push(c);
        }
    }
    comps
}

/// Joint assignments of one component by counting completions per subtree (saturating above
/// [`MAX_JOINTS`]) and expanding only strategies with a completion; a hard edge outside the BFS
/// tree (a cycle) is checked once both ends are set.
fn enumerate(
    g: &StrategyGraph,
    order: &[usize],
    parent: &[(usize, usize, bool)],
    hard: &[Vec<(usize, usize, bool)>],
    inc: &[Vec<usize>],
) -> Option<Component> {
    let cap = (MAX_JOINTS + 1) as u64;
    let mut count: Vec<Vec<u64>> =
        order.iter().map(|&u| (0..g.k(u)).map(|s| u64::from(g.node_cost(u, s) < FORBIDDEN)).collect()).collect();
    for i in (1..order.len()).rev() {
        let (pi, e, p_first) = parent[i];
        let (pu, c) = (order[pi], order[i]);
        let ways: Vec<u64> = (0..g.k(pu))
            .map(|sp| {
                (0..g.k(c))
                    .filter(|&sc| if p_first { allowed(g, e, sp, sc) } else { allowed(g, e, sc, sp) })
                    .fold(0u64, |acc, sc| acc.saturating_add(count[i][sc]).min(cap))
            })
            .collect();
        for (x, w) in count[pi].iter_mut().zip(ways) {
            *x = x.saturating_mul(w).min(cap);
        }
    }
    let total = count[0].iter().fold(0u64, |a, &x| a.saturating_add(x).min(cap));
    if total < 2 || total > MAX_JOINTS as u64 {
        return None;
    }
    let pos: std::collections::HashMap<usize, usize> = order.iter().enumerate().map(|(i, &u)| (u, i)).collect();
    // Partial assignments over order[..i], column-wise (`cols[i][p]`: strategy of order[i] in
    // partial p); each one extends to at least one completion, so there are never more than
    // `total` of them. Columns are copied only where the partials branch or die.
    let mut cols: Vec<Vec<usize>> = vec![(0..g.k(order[0])).filter(|&s| count[0][s] > 0).collect()];
    for i in 1..order.len() {
        let (pi, e, p_first) = parent[i];
        let c = order[i];
        let np = cols[0].len();
        let mut next: Vec<(usize, usize)> = Vec::with_capacity(np);
        for p in 0..np {
            let sp = cols[pi][p];
            for sc in 0..g.k(c) {
                if count[i][sc] == 0 || !(if p_first { allowed(g, e, sp, sc) } else { allowed(g, e, sc, sp) }) {
                    continue;
                }
                // Hard edges closing a cycle with an earlier node.
                let ok = hard[c].iter().all(|&(f, w, c_first)| match pos.get(&w) {
                    Some(&j) if f != e && j < i => {
                        if c_first {
                            allowed(g, f, sc, cols[j][p])
                        } else {
                            allowed(g, f, cols[j][p], sc)
                        }
                    }
                    _ => true,
                });
                if ok {
                    next.push((p, sc));
                }
            }
        }
        if next.len() != np || next.iter().enumerate().any(|(q, x)| x.0 != q) {
            for col in cols.iter_mut() {
                *col = next.iter().map(|x| col[x.0]).collect();
            }
        }
        cols.push(next.into_iter().map(|x| x.1).collect());
    }
    let np = cols[0].len();
    if np < 2 {
        return None;
    }
    let joints: Vec<usize> = (0..np).flat_map(|p| cols.iter().map(move |col| col[p])).collect();
    let mut ids: Vec<usize> = order.iter().flat_map(|&u| inc[u].iter().copied()).collect();
    ids.sort_unstable();
    ids.dedup();
    let at = |v: usize| pos.get(&v).copied().unwrap_or(OUTSIDE);
    let edges = ids.into_iter().map(|e| (e, at(g.edges[e].0), at(g.edges[e].1))).collect();
    Some(Component { nodes: order.to_vec(), joints, edges })
}
