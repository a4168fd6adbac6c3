//! Candidate plans over atom layouts and the choice of the cheapest.
//!
//! Three constructions, all ending exactly in the target layout:
//!
//! * **naive**: all-reduce pending partial axes, all-gather every sharded dimension, all-slice
//!   the target (the baseline every plan is compared with; hidet's `connect` fallback).
//! * **greedy** (the order of Shardy's `reshard_to_collectives.cc`): slice free axes a
//!   dimension needs next, reduce-scatter / all-reduce partial axes, all-to-all an axis suffix
//!   into the dimension that needs it next (slicing free axes onto the source dimension first,
//!   so that less is sent), and all-gather only what blocks progress.
//! * **slice-permute-gather**: slice the missing axes, one collective-permute to a layout that
//!   holds the target plus the axes to drop, then one all-gather (Shardy's
//!   `collective_permute` cases: swapped, replaced and reordered axes).
//!
//! The cheapest by seconds (then bytes, then fewer steps) wins among those that never move more
//! bytes than the naive plan.

use super::atoms::Layout;
use super::cost::StepCost;
use super::moves::{Ctx, Move};

/// A plan over atoms: moves with the layout after each and its cost.
#[derive(Debug, Clone, Default)]
pub struct AtomPlan {
    pub steps: Vec<(Move, Layout, StepCost)>,
}

impl AtomPlan {
    pub fn total(&self) -> StepCost {
        self.steps.iter().fold(StepCost::default(), |a, (_, _, c)| StepCost {
            bytes: a.bytes + c.bytes,
            seconds: a.seconds + c.seconds,
        })
    }

    /// The layout after the last step (or `start`).
    pub fn end<'a>(&'a self, start: &'a Layout) -> &'a Layout {
        self.steps.last().map_or(start, |(_, l, _)| l)
    }
}

/// Appends `m` to `plan` if it applies exactly; returns whether it did.
fn push(ctx: &Ctx<'_>, start: &Layout, plan: &mut AtomPlan, m: Move) -> bool {
    let cur = plan.end(start).clone();
    match ctx.apply(&cur, &m) {
        Some(next) if next != cur => {
            let c = ctx.cost(&cur, &m);
            plan.steps.push((m, next, c));
            true
        }
        _ => false,
    }
}

/// The naive plan: all-reduce, gather everything, slice the target.
pub fn naive(ctx: &Ctx<'_>, src: &Layout, tgt: &Layout) -> Option<AtomPlan> {
    let mut plan = AtomPlan::default();
    let reduce: Vec<usize> = src.unreduced.iter().copied().filter(|a| !tgt.unreduced.contains(a)).collect();
    if !reduce.is_empty() {
        push(ctx, src, &mut plan, Move::AllReduce(reduce));
    }
    let all = plan.end(src).dims.clone();
    if all.iter().any(|d| !d.is_empty()) {
        push(ctx, src, &mut plan, Move::Gather(all));
    }
    if tgt.dims.iter().any(|d| !d.is_empty()) {
        push(ctx, src, &mut plan, Move::Slice(tgt.dims.clone()));
    }
    (plan.end(src) == tgt).then_some(plan)
}

/// `cur.dims[d]` is a prefix of `tgt.dims[d]`: the atoms still needed there.
fn need<'a>(cur: &Layout, tgt: &'a Layout, d: usize) -> Option<&'a [usize]> {
    tgt.dims[d].strip_prefix(cur.dims[d].as_slice())
}

fn leading(ids: &[usize], pred: impl Fn(usize) -> bool) -> Vec<usize> {
    ids.iter().copied().take_while(|&a| pred(a)).collect()
}

/// One all-slice of the free atoms each ready dimension needs next.
fn slice_ready(ctx: &Ctx<'_>, start: &Layout, tgt: &Layout, plan: &mut AtomPlan) -> bool {
    let cur = plan.end(start).clone();
    let mut per_dim = vec![Vec::new(); cur.dims.len()];
    for (d, slot) in per_dim.iter_mut().enumerate() {
        if let Some(n) = need(&cur, tgt, d) {
            let run = leading(n, |a| !cur.uses(a));
            let mut trial = cur.clone();
            trial.dims[d].extend_from_slice(&run);
            let single: Vec<Vec<usize>> =
                (0..cur.dims.len()).map(|i| if i == d { run.clone() } else { vec![] }).collect();
            if !run.is_empty() && ctx.apply(&cur, &Move::Slice(single)).is_some() {
                *slot = run;
            }
        }
    }
    per_dim.iter().any(|v| !v.is_empty()) && push(ctx, start, plan, Move::Slice(per_dim))
}

/// Reduce-scatter partial atoms that ready dimensions need next, all-reduce the rest.
fn reduce(ctx: &Ctx<'_>, start: &Layout, tgt: &Layout, plan: &mut AtomPlan) {
    let cur = plan.end(start).clone();
    let pending: Vec<usize> = cur.unreduced.iter().copied().filter(|a| !tgt.unreduced.contains(a)).collect();
    if pending.is_empty() {
        return;
    }
    let mut per_dim = vec![Vec::new(); cur.dims.len()];
    for (d, slot) in per_dim.iter_mut().enumerate() {
        if let Some(n) = need(&cur, tgt, d) {
            let run = leading(n, |a| pending.contains(&a));
            let single: Vec<Vec<usize>> =
                (0..cur.dims.len()).map(|i| if i == d { run.clone() } else { vec![] }).collect();
            if !run.is_empty() && ctx.apply(&cur, &Move::ReduceScatter(single)).is_some() {
                *slot = run;
            }
        }
    }
    if per_dim.iter().any(|v| !v.is_empty()) {
        push(ctx, start, plan, Move::ReduceScatter(per_dim));
    }
    let rest: Vec<usize> = plan.end(start).unreduced.iter().copied().filter(|a| !tgt.unreduced.contains(a)).collect();
    if !rest.is_empty() {
        push(ctx, start, plan, Move::AllReduce(rest));
    }
}

/// One all-to-all of a suffix of some dimension into a ready dimension that needs it next.
fn all_to_all(ctx: &Ctx<'_>, start: &Layout, tgt: &Layout, plan: &mut AtomPlan) -> bool {
    let cur = plan.end(start).clone();
    for t in 0..cur.dims.len() {
        let Some(n) = need(&cur, tgt, t) else { continue };
        let Some(&first) = n.first() else { continue };
        let Some((s, q)) = cur.find(first) else { continue };
        if s == t {
            continue;
        }
        let suffix = cur.dims[s][q..].to_vec();
        if !n.starts_with(&suffix) {
            continue;
        }
        // Slice the free atoms that follow onto the source first: the all-to-all then sends
        // smaller pieces (Shardy's "slice on src dim then all-to-all").
        let ext = leading(&n[suffix.len()..], |a| !cur.uses(a));
        if !ext.is_empty() {
            let mut slice = vec![Vec::new(); cur.dims.len()];
            slice[s] = ext.clone();
            let mut trial = plan.clone();
            let mut atoms = suffix.clone();
            atoms.extend_from_slice(&ext);
            if push(ctx, start, &mut trial, Move::Slice(slice))
                && push(ctx, start, &mut trial, Move::AllToAll { src: s, tgt: t, atoms })
            {
                *plan = trial;
                return true;
            }
        }
        if push(ctx, start, plan, Move::AllToAll { src: s, tgt: t, atoms: suffix }) {
            return true;
        }
    }
    false
}

/// All-gathers what blocks progress: the minor-most atom of each dimension that is not a
/// prefix of its target (preferring atoms no other dimension needs), or a whole dimension whose
/// padding does not allow a partial change.
fn gather(ctx: &Ctx<'_>, start: &Layout, tgt: &Layout, plan: &mut AtomPlan) -> bool {
    let cur = plan.end(start).clone();
    let rank = cur.dims.len();
    let needed_elsewhere = |a: usize, d: usize| tgt.dims.iter().enumerate().any(|(t, v)| t != d && v.contains(&a));
    let blocked: Vec<usize> = (0..rank).filter(|&d| need(&cur, tgt, d).is_none()).collect();
    let mut chosen: Vec<usize> =
        blocked.iter().copied().filter(|&d| cur.dims[d].last().is_some_and(|&a| !needed_elsewhere(a, d))).collect();
    if chosen.is_empty() {
        chosen.extend(blocked.first());
    }
    if chosen.is_empty() {
        // Every dimension is a prefix of its target but none can grow exactly: restart the
        // first unfinished one from the whole dimension.
        let stuck = (0..rank).find(|&d| need(&cur, tgt, d).is_some_and(|n| !n.is_empty()) && !cur.dims[d].is_empty());
        let Some(d) = stuck else { return false };
        let mut per_dim = vec![Vec::new(); rank];
        per_dim[d] = cur.dims[d].clone();
        return push(ctx, start, plan, Move::Gather(per_dim));
    }
    let mut per_dim = vec![Vec::new(); rank];
    for &d in &chosen {
        let last = cur.dims[d][cur.dims[d].len() - 1];
        let mut single = vec![Vec::new(); rank];
        single[d] = vec![last];
        per_dim[d] = if ctx.apply(&cur, &Move::Gather(single)).is_some() { vec![last] } else { cur.dims[d].clone() };
    }
    push(ctx, start, plan, Move::Gather(per_dim))
}

/// The shared opening of the greedy and permute plans: slice free atoms, then reduce.
pub fn opening(ctx: &Ctx<'_>, src: &Layout, tgt: &Layout) -> AtomPlan {
    let mut plan = AtomPlan::default();
    slice_ready(ctx, src, tgt, &mut plan);
    reduce(ctx, src, tgt, &mut plan);
    plan
}

/// The greedy plan, continuing `opening`; `None` if it does not reach the target.
pub fn greedy(ctx: &Ctx<'_>, src: &Layout, tgt: &Layout, opening: &AtomPlan) -> Option<AtomPlan> {
    let mut plan = opening.clone();
    let limit = 8 + 4 * ctx.atoms.atoms.len() * (src.dims.len() + 1);
    for _ in 0..limit {
        if plan.end(src) == tgt {
            return Some(plan);
        }
        if slice_ready(ctx, src, tgt, &mut plan)
            || all_to_all(ctx, src, tgt, &mut plan)
            || gather(ctx, src, tgt, &mut plan)
        {
            continue;
        }
        return None;
    }
    (plan.end(src) == tgt).then_some(plan)
}

/// Most assignments of atoms to dimensions the permute search tries.
const PERMUTE_SEARCH_LIMIT: usize = 4096;

/// The cheapest slice → collective-permute → all-gather plan continuing `opening`, if any.
pub fn permute(ctx: &Ctx<'_>, src: &Layout, tgt: &Layout, opening: &AtomPlan) -> Option<AtomPlan> {
    let cur = opening.end(src).clone();
    let rank = cur.dims.len();
    if rank == 0 {
        return None;
    }
    let in_tgt = |a: usize| tgt.dims.iter().any(|d| d.contains(&a));
    let free: Vec<usize> = tgt.dims.iter().flatten().copied().filter(|&a| !cur.uses(a)).collect();
    let drop: Vec<usize> = cur.dims.iter().flatten().copied().filter(|&a| !in_tgt(a)).collect();
    let k = free.len() + drop.len();
    // Each atom to add is sliced onto a dimension or reaches the target by the permute alone
    // (choice `rank`); each atom to drop is gathered from a dimension of the permuted layout or
    // left behind by the permute (choice `rank`).
    let choices = rank + 1;
    let combos = (0..k).try_fold(1usize, |acc, _| acc.checked_mul(choices).filter(|&c| c <= PERMUTE_SEARCH_LIMIT))?;
    let mut best: Option<AtomPlan> = None;
    let mut choice = vec![0usize; k];
    for mut c in 0..combos {
        for slot in choice.iter_mut() {
            *slot = c % choices;
            c /= choices;
        }
        let mut sliced = vec![Vec::new(); rank];
        let mut inter = tgt.clone();
        for (i, &a) in free.iter().enumerate() {
            if choice[i] < rank {
                sliced[choice[i]].push(a);
            }
        }
        let mut gathered = vec![Vec::new(); rank];
        for (i, &a) in drop.iter().enumerate() {
            let d = choice[free.len() + i];
            if d < rank {
                gathered[d].push(a);
            }
        }
        for (d, g) in gathered.iter_mut().enumerate() {
            g.sort_unstable(); // mesh order, as Shardy orders the axes it gathers
            inter.dims[d].extend_from_slice(g);
        }
        let counts_match = (0..rank)
            .all(|d| ctx.atoms.count(&cur.dims[d]) * ctx.atoms.count(&sliced[d]) == ctx.atoms.count(&inter.dims[d]));
        if !counts_match {
            continue;
        }
        let mut plan = opening.clone();
        if sliced.iter().any(|v| !v.is_empty()) && !push(ctx, src, &mut plan, Move::Slice(sliced)) {
            continue;
        }
        if plan.end(src) != &inter && !push(ctx, src, &mut plan, Move::Permute(inter.clone())) {
            continue;
        }
        if gathered.iter().any(|v| !v.is_empty()) && !push(ctx, src, &mut plan, Move::Gather(gathered)) {
            continue;
        }
        if plan.end(src) != tgt {
            continue;
        }
        if best.as_ref().is_none_or(|b| better(&plan, b)) {
            best = Some(plan);
        }
    }
    best
}

/// Cheaper by seconds, then bytes, then fewer steps.
pub fn better(a: &AtomPlan, b: &AtomPlan) -> bool {
    let (ta, tb) = (a.total(), b.total());
    const EPS: f64 = 1e-12;
    if (ta.seconds - tb.seconds).abs() > EPS * ta.seconds.max(tb.seconds).max(1e-30) {
        return ta.seconds < tb.seconds;
    }
    if (ta.bytes - tb.bytes).abs() > 1e-9 {
        return ta.bytes < tb.bytes;
    }
    a.steps.len() < b.steps.len()
}

/// Merges adjacent all-gathers and adjacent all-slices into one collective each (the gathered
/// or sliced atoms of every dimension concatenate; costs are recomputed).
pub fn merge_adjacent(ctx: &Ctx<'_>, src: &Layout, plan: AtomPlan) -> AtomPlan {
    let mut moves: Vec<Move> = Vec::new();
    for (m, _, _) in plan.steps.iter().cloned() {
        match (moves.last_mut(), m) {
            (Some(Move::Gather(prev)), Move::Gather(next)) => {
                for (p, n) in prev.iter_mut().zip(next) {
                    let mut merged = n;
                    merged.extend_from_slice(p);
                    *p = merged;
                }
            }
            (Some(Move::Slice(prev)), Move::Slice(next)) => {
                for (p, n) in prev.iter_mut().zip(next) {
                    p.extend(n);
                }
            }
            (_, m) => moves.push(m),
        }
    }
    let mut out = AtomPlan::default();
    for m in moves {
        if !push(ctx, src, &mut out, m) {
            return plan;
        }
    }
    if out.end(src) == plan.end(src) {
        out
    } else {
        plan
    }
}
