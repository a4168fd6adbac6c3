//! The common factor shardings that Shardy's explicit-reshard insertion picks for an op whose
//! operands and results disagree: `findCommonAxes` and its heuristic in
//! `shardy/dialect/sdy/transforms/export/explicit_reshards_util.cc`, over the `AxisListRef`
//! operations of `shardy/dialect/sdy/ir/axis_list_ref.cc`.

use crate::axis::AxisRef;
use crate::error::Result;
use crate::mesh::Mesh;
use crate::propagation::axes::{add_axis_or_merge, prefix_without_overlap, total_axes_size};
use crate::propagation::{is_strict_prefix, ShardingProjection, TensorFactorShardings};
use crate::rule::OpShardingRule;

/// The axes of each factor of an op's rule, indexed by factor.
pub type AxesPerFactor = Vec<Vec<AxisRef>>;

fn size(axes: &[AxisRef], mesh: &Mesh) -> Result<i64> {
    total_axes_size(axes, Some(mesh))
}

fn has(factors: &[i64], f: usize) -> bool {
    factors.contains(&(f as i64))
}

/// Cuts `axes` at the first reference that overlaps one of `other`, keeping the part of it
/// before the overlap (Shardy `AxisListRef::truncateWithoutOverlap`, and
/// `truncateAxesByRemovingOverlaps`); whether `axes` changed.
pub fn truncate_without_overlap(axes: &mut Vec<AxisRef>, other: &[AxisRef]) -> bool {
    for i in 0..axes.len() {
        let prefix = prefix_without_overlap(&axes[i], other);
        if prefix.as_ref() != Some(&axes[i]) {
            axes.truncate(i);
            axes.extend(prefix);
            return true;
        }
    }
    false
}

/// Shardy's `FactorAxesCandidate`: the axes `axes` for `factor`, with the total size of the
/// tensors that agree with them, the factor's precedence by kind and the sharding size.
#[derive(Debug, Clone)]
struct Candidate {
    factor: usize,
    axes: Vec<AxisRef>,
    total: i64,
    precedence: u8,
    size: i64,
}

/// Shardy's `AxisRefAttr::operator<` on a list: by length, then reference by reference.
fn list_key(axes: &[AxisRef]) -> (usize, Vec<(&'static str, i64, i64)>) {
    let key = |a: &AxisRef| match a.sub {
        Some(s) => (a.name.as_str(), s.pre_size, s.size),
        None => (a.name.as_str(), 1, i64::MAX),
    };
    (axes.len(), axes.iter().map(key).collect())
}

impl Candidate {
    fn better_than(&self, other: &Candidate) -> bool {
        let a = (self.total, self.precedence, self.size, self.factor);
        let b = (other.total, other.precedence, other.size, other.factor);
        a > b || (a == b && list_key(&self.axes) > list_key(&other.axes))
    }
}

/// Precedence of a factor's kind when candidates tie on size: pass-through over reduction
/// over permutation over need-replication.
fn precedence(rule: &OpShardingRule, f: usize) -> u8 {
    if has(&rule.reduction_factors, f) {
        2
    } else if has(&rule.need_replication_factors, f) {
        0
    } else if has(&rule.permutation_factors, f) {
        1
    } else {
        3
    }
}

fn mappings(rule: &OpShardingRule) -> impl Iterator<Item = &Vec<Vec<i64>>> {
    rule.operand_mappings.iter().chain(&rule.result_mappings)
}

/// Shardy's greedy heuristic (`findCommonAxesUsingMajorityVoteHeuristic` and its candidate
/// bag): every prefix of every factor sharding is a candidate, worth the total element count
/// of the tensors whose sharding of that factor it is or extends; the best valid candidate
/// (no factor major to it in a dimension still unsharded) is taken, and the others are cut
/// where they overlap it, until none is left.
fn heuristic(proj: &ShardingProjection, rule: &OpShardingRule, sizes: &[i64], mesh: &Mesh) -> Result<AxesPerFactor> {
    let n = rule.factor_sizes.len();
    let mut assigned: AxesPerFactor = vec![Vec::new(); n];
    // deps[f]: the factors right before `f` in some dimension, still not fully sharded.
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); n];
    for mapping in mappings(rule) {
        for factors in mapping {
            for k in 1..factors.len() {
                let (f, major) = (factors[k] as usize, factors[k - 1] as usize);
                if !deps[f].contains(&major) {
                    deps[f].push(major);
                }
            }
        }
    }
    let mut candidates: Vec<Candidate> = Vec::new();
    for t in proj.tensors() {
        for (f, fs) in t.iter() {
            for len in (1..=fs.axes.len()).rev() {
                let axes = &fs.axes[..len];
                if !candidates.iter().any(|c| c.factor == f && c.axes == axes) {
                    let (precedence, size) = (precedence(rule, f), size(axes, mesh)?);
                    candidates.push(Candidate { factor: f, axes: axes.to_vec(), total: 0, precedence, size });
                }
            }
        }
    }
    for (t, &tensor_size) in proj.tensors().zip(sizes) {
        for (f, fs) in t.iter() {
            for c in candidates.iter_mut().filter(|c| c.factor == f) {
                if c.axes == fs.axes || is_strict_prefix(&c.axes, &fs.axes) {
                    c.total = c.total.saturating_add(tensor_size);
                }
            }
        }
    }
    while !candidates.is_empty() {
        let mut best: Option<usize> = None;
        for (i, c) in candidates.iter().enumerate() {
            if deps[c.factor].is_empty() && best.is_none_or(|b| c.better_than(&candidates[b])) {
                best = Some(i);
            }
        }
        let Some(best) = best else { break };
        let (factor, best_axes) = (candidates[best].factor, candidates[best].axes.clone());
        let best_size = size(&best_axes, mesh)?;
        assigned[factor].clone_from(&best_axes);
        if best_size == rule.factor_sizes[factor] {
            for d in &mut deps {
                d.retain(|&x| x != factor);
            }
        }
        let mut i = 0;
        while i < candidates.len() {
            let c = &mut candidates[i];
            if c.factor == factor {
                if !is_strict_prefix(&best_axes, &c.axes) {
                    candidates.swap_remove(i);
                } else {
                    c.size = size(&c.axes, mesh)? / best_size.max(1);
                    i += 1;
                }
                continue;
            }
            if truncate_without_overlap(&mut c.axes, &best_axes) {
                if c.axes == assigned[c.factor] {
                    candidates.swap_remove(i);
                } else {
                    c.size = size(&c.axes, mesh)? / size(&assigned[c.factor], mesh)?.max(1);
                    i += 1;
                }
                continue;
            }
            c.size = size(&c.axes, mesh)?;
            i += 1;
        }
    }
    Ok(assigned)
}

/// The axes of factor `f` when every tensor that has it agrees (`[]` when none has it),
/// `None` when two disagree.
pub fn compatible_factor_axes(proj: &ShardingProjection, f: usize) -> Option<Vec<AxisRef>> {
    let mut found: Option<&Vec<AxisRef>> = None;
    for t in proj.tensors() {
        let Some(fs) = t.get(f) else { continue };
        match found {
            Some(axes) if *axes != fs.axes => return None,
            Some(_) => {}
            None => found = Some(&fs.axes),
        }
    }
    Some(found.cloned().unwrap_or_default())
}

/// The factor shardings when all tensors agree on each factor, no factor that needs
/// replication is sharded and no two factors share an axis.
fn compatible_all(proj: &ShardingProjection, rule: &OpShardingRule) -> Option<AxesPerFactor> {
    let mut out: AxesPerFactor = vec![Vec::new(); rule.factor_sizes.len()];
    let mut seen: Vec<AxisRef> = Vec::new();
    for (f, slot) in out.iter_mut().enumerate() {
        let axes = compatible_factor_axes(proj, f)?;
        if has(&rule.need_replication_factors, f) {
            if !axes.is_empty() {
                return None;
            }
            continue;
        }
        if axes.iter().any(|a| seen.iter().any(|b| a.overlaps(b))) {
            return None;
        }
        seen.extend(axes.iter().cloned());
        *slot = axes;
    }
    Some(out)
}

/// Indices (operands, then results) of the tensors of rank > 0.
fn non_scalar(rule: &OpShardingRule) -> Vec<usize> {
    mappings(rule).enumerate().filter(|(_, m)| !m.is_empty()).map(|(i, _)| i).collect()
}

fn has_sharded_permutation(t: &TensorFactorShardings, rule: &OpShardingRule) -> bool {
    t.iter().any(|(f, fs)| has(&rule.permutation_factors, f) && !fs.axes.is_empty())
}

/// Two non-scalar tensors (Shardy's unary/binary special case): the preferred one (no sharded
/// permutation factor, then more elements, then the larger sharding) keeps its factor
/// shardings; the other one's factors it lacks are cut where they overlap them.
fn two_tensors(proj: &ShardingProjection, rule: &OpShardingRule, sizes: &[i64], mesh: &Mesh) -> Result<AxesPerFactor> {
    let ns = non_scalar(rule);
    let (lhs, rhs) = (ns[0], ns[1]);
    let tensor = |i: usize| proj.tensor(i).expect("a tensor of the projection");
    let pref = |i: usize| -> Result<(bool, i64, i64)> {
        Ok((!has_sharded_permutation(tensor(i), rule), sizes[i], tensor(i).sharding_size(mesh)?))
    };
    let (preferred, other) = if pref(lhs)? >= pref(rhs)? { (lhs, rhs) } else { (rhs, lhs) };
    let mut out: AxesPerFactor = vec![Vec::new(); rule.factor_sizes.len()];
    let mut in_preferred: Vec<AxisRef> = Vec::new();
    for (f, fs) in tensor(preferred).iter() {
        out[f].clone_from(&fs.axes);
        in_preferred.extend(fs.axes.iter().cloned());
    }
    for (f, fs) in tensor(other).iter() {
        if !tensor(preferred).has_factor(f) {
            out[f].clone_from(&fs.axes);
            truncate_without_overlap(&mut out[f], &in_preferred);
        }
    }
    Ok(out)
}

fn in_all_non_scalar(rule: &OpShardingRule, f: usize) -> bool {
    mappings(rule).filter(|m| !m.is_empty()).all(|m| m.iter().any(|d| has(d, f)))
}

/// Moves the axes of a factor that needs replication to the batching factors (in every
/// non-scalar tensor, of no special kind) that have room for them, in order.
fn distribute_to_batching(
    axes: &[AxisRef],
    rule: &OpShardingRule,
    mesh: &Mesh,
    common: &mut AxesPerFactor,
) -> Result<()> {
    let mut todo = axes.iter();
    let mut next = todo.next();
    for (f, (&factor_size, common_f)) in rule.factor_sizes.iter().zip(common.iter_mut()).enumerate() {
        let special = has(&rule.reduction_factors, f)
            || has(&rule.need_replication_factors, f)
            || has(&rule.permutation_factors, f);
        if special || !in_all_non_scalar(rule, f) {
            continue;
        }
        let sharded = size(common_f, mesh)?;
        if factor_size == 0 || sharded == 0 || factor_size % sharded != 0 {
            continue;
        }
        let mut capacity = factor_size / sharded;
        while let Some(a) = next {
            let a_size = a.size(mesh)?;
            if a_size == 0 || capacity % a_size != 0 {
                break;
            }
            add_axis_or_merge(common_f, a.clone(), mesh)?;
            capacity /= a_size;
            next = todo.next();
        }
        if next.is_none() {
            break;
        }
    }
    Ok(())
}

/// Shardy's `findCommonAxes`: the factor shardings all tensors of the op are resharded to.
/// When every tensor agrees, their shardings; for an op with two non-scalar tensors, no factor
/// that needs replication and no dimension of several factors, the preferred tensor's
/// shardings; otherwise the greedy heuristic, then the axes of factors that need replication
/// moved to batching factors. `sizes` is the element count of each operand and result (0 for a
/// dynamic shape). Errors when an axis is unknown to `mesh`.
pub fn find_common_axes(
    proj: &ShardingProjection,
    rule: &OpShardingRule,
    sizes: &[i64],
    mesh: &Mesh,
) -> Result<AxesPerFactor> {
    if let Some(common) = compatible_all(proj, rule) {
        return Ok(common);
    }
    let compound = mappings(rule).any(|m| m.iter().any(|d| d.len() > 1));
    if non_scalar(rule).len() == 2 && rule.need_replication_factors.is_empty() && !compound {
        return two_tensors(proj, rule, sizes, mesh);
    }
    let mut common = heuristic(proj, rule, sizes, mesh)?;
    for &f in &rule.need_replication_factors {
        let f = f as usize;
        let Some(slot) = common.get_mut(f) else { continue };
        let axes = std::mem::take(slot);
        if in_all_non_scalar(rule, f) && !axes.is_empty() {
            distribute_to_batching(&axes, rule, mesh, &mut common)?;
        }
    }
    Ok(common)
}
