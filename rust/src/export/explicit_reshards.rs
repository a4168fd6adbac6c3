//! What `sdy-insert-explicit-reshards` inserts around one op, decided on the op's shardings
//! alone (Shardy's `shardy/dialect/sdy/transforms/export/explicit_reshards_util.cc` and
//! `insert_explicit_reshards.cc`): the common factor shardings of an op with a sharding rule
//! and the reshards of the operands and results that differ from them (the full version), the
//! reshard of a dot result that makes the dot compatible (the propagation pipeline's version),
//! the all-reduce over sharded reduction factors, and the collectives that turn replicated or
//! sharded axes into unreduced ones. The pass itself (`shardwise.passes.explicit_reshards`)
//! walks the program and inserts the ops these plans name.

use crate::axis::AxisRef;
use crate::error::{Error, Result};
use crate::mesh::Mesh;
use crate::propagation::axes::{axis_set_diff, sort_and_merge_axes, suffix_without_overlap};
use crate::propagation::{
    axis_list_prefix_status, distribute_axes_across_factors, FactorSharding, PrefixStatus, ShardingProjection,
    TensorFactorShardings, UpdateTensorShardings,
};
use crate::rule::OpShardingRule;
use crate::sharding::{DimSharding, MeshRef, Reduction, TensorSharding};

use super::common_axes::{compatible_factor_axes, find_common_axes, AxesPerFactor};

/// Which of Shardy's paths an op with a sharding rule takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// The full version (`enable-full-version`, a concatenate whose operands are sharded
    /// unlike its result, `mhlo.ragged_dot`, a call): common factor shardings for every op.
    Full,
    /// The propagation pipeline's version on a `dot` or `dot_general`: only the reshard of the
    /// result that makes the dot compatible with its operands.
    Dot,
    /// The propagation pipeline's version on any other op: only the all-reduce of a result
    /// with unreduced axes.
    Basic,
}

/// An op with a sharding rule as the plan sees it.
#[derive(Debug, Clone)]
pub struct OpShardings<'a> {
    pub rule: &'a OpShardingRule,
    /// The sharding of each operand (through propagation barriers), `None` where it has none.
    pub operands: &'a [Option<TensorSharding>],
    /// The sharding of each result.
    pub results: &'a [Option<TensorSharding>],
    /// The operands' own shardings (not looked through barriers) where they differ from
    /// `operands`; a reshape with overflow axes compares them (Shardy reads the operand).
    pub direct_operands: Option<&'a [Option<TensorSharding>]>,
    /// The mesh the op's tensors share (Shardy `getMesh`), by name.
    pub mesh_name: &'a str,
    pub mesh: &'a Mesh,
    /// Element count of each operand, then each result (0 for a dynamic shape in the full
    /// version).
    pub sizes: &'a [i64],
    /// For each operand, then each result: its sharding's mesh orders the devices unlike
    /// `mesh` (a sharded such tensor is resharded onto `mesh`).
    pub other_device_order: &'a [bool],
    /// As `other_device_order`, for `direct_operands`.
    pub direct_other_device_order: Option<&'a [bool]>,
    pub version: Version,
    /// The op is a `stablehlo.reshape` (overflow axes take Shardy's reshape path).
    pub is_reshape: bool,
}

/// What to insert around one op.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpReshards {
    /// For each operand, the sharding it is resharded to before the op (`None`: kept).
    pub operands: Vec<Option<TensorSharding>>,
    /// For each result, the sharding the op now produces (`None`: kept); a reshard after the
    /// op restores the result's previous sharding for its users.
    pub results: Vec<Option<TensorSharding>>,
    /// The axes of an all-reduce of every result after the op (sorted and merged), empty for
    /// none.
    pub all_reduce_axes: Vec<AxisRef>,
}

fn is_sharded(s: &Option<TensorSharding>) -> bool {
    s.as_ref().is_some_and(|s| s.dims.iter().any(|d| !d.axes.is_empty()))
}

/// Shardy's `TensorShardingAttr::isEquivalent` as jaxlib 0.10.2 has it: the same mesh and
/// the same axes in every dimension; a missing sharding and shardings without dimension axes
/// are all equivalent.
pub fn is_equivalent(a: Option<&TensorSharding>, b: Option<&TensorSharding>) -> bool {
    let replicated = |s: Option<&TensorSharding>| s.is_none_or(|s| s.dims.iter().all(|d| d.axes.is_empty()));
    if replicated(a) {
        return replicated(b);
    }
    let (Some(a), Some(b)) = (a, b) else { return false };
    a.mesh == b.mesh && a.dims.len() == b.dims.len() && a.dims.iter().zip(&b.dims).all(|(x, y)| x.axes == y.axes)
}

/// Plans the reshards and all-reduces around one op with a sharding rule (Shardy's
/// `processOp` after its checks, then `insertAllReducesForReductionFactors`).
///
/// Errors (`ErrorKind::Program`) when the result has unreduced axes but the operands disagree
/// on a reduction factor (Shardy's check); when a sharding does not fit the rule or the mesh;
/// and when a planned sharding is invalid (an axis used twice: Shardy's verifier refuses the
/// reshard it would insert).
pub fn plan_op(op: &OpShardings<'_>) -> Result<OpReshards> {
    let rule = op.rule;
    let count = op.operands.len() + op.results.len();
    if op.sizes.len() != count || op.other_device_order.len() != count {
        return Err(Error::invariant(
            "explicit-reshards-tensor-count",
            format!(
                "expected one size and one device-order flag per operand and result ({count}), got {} and {}",
                op.sizes.len(),
                op.other_device_order.len()
            ),
        ));
    }
    let direct_count = |n: Option<usize>| n.is_some_and(|n| n != op.operands.len());
    if direct_count(op.direct_operands.map(<[_]>::len)) || direct_count(op.direct_other_device_order.map(<[_]>::len)) {
        return Err(Error::invariant(
            "explicit-reshards-tensor-count",
            "direct_operands and direct_other_device_order need one entry per operand".to_string(),
        ));
    }
    let operand_refs: Vec<Option<&TensorSharding>> = op.operands.iter().map(Option::as_ref).collect();
    let result_refs: Vec<Option<&TensorSharding>> = op.results.iter().map(Option::as_ref).collect();
    let mut proj = ShardingProjection::build_on_mesh(&operand_refs, &result_refs, rule, op.mesh, true)?;
    let mesh_ref = MeshRef::Named(op.mesh_name.into());
    let mut plan = OpReshards {
        operands: vec![None; op.operands.len()],
        results: vec![None; op.results.len()],
        all_reduce_axes: Vec::new(),
    };
    let common = match op.version {
        Version::Full => Some(full(op, &mut proj, &mesh_ref, &mut plan)?),
        Version::Dot => {
            dot(op, &mut proj, &mesh_ref, &mut plan)?;
            None
        }
        Version::Basic => None,
    };
    plan.all_reduce_axes = reduction_axes(op, &proj, common.as_deref())?;
    for s in plan.operands.iter().chain(&plan.results).flatten() {
        s.validate(op.mesh, None, false)?;
    }
    Ok(plan)
}

/// Shardy's `processOp` on the full version: the common axes per factor, and the operands and
/// results whose factor shardings differ from them (or whose mesh orders devices differently).
fn full(
    op: &OpShardings<'_>,
    proj: &mut ShardingProjection,
    mesh_ref: &MeshRef,
    plan: &mut OpReshards,
) -> Result<AxesPerFactor> {
    let mut updated = proj.tensors_containing_overflow_axes();
    if updated.any() && op.is_reshape && !proj.operands.is_empty() && !proj.results.is_empty() {
        return reshape_with_overflow(op, proj, mesh_ref, plan);
    }
    let common = find_common_axes(proj, op.rule, op.sizes, op.mesh)?;
    for (f, axes) in common.iter().enumerate() {
        updated |= &proj.update_sharding(f, axes, &[]);
    }
    reshard_tensors(op, proj, mesh_ref, &updated, op.operands, op.other_device_order, plan)?;
    Ok(common)
}

/// Shardy's `insertExplicitReshards`: the operands and results to reshard to `proj`.
fn reshard_tensors(
    op: &OpShardings<'_>,
    proj: &ShardingProjection,
    mesh_ref: &MeshRef,
    updated: &UpdateTensorShardings,
    operands: &[Option<TensorSharding>],
    operand_device_order: &[bool],
    plan: &mut OpReshards,
) -> Result<()> {
    let rule = op.rule;
    let n = op.operands.len();
    for (i, s) in operands.iter().enumerate() {
        if updated.operands.get(i) || (is_sharded(s) && operand_device_order[i]) {
            plan.operands[i] = Some(proj.operands[i].to_tensor_sharding(
                &rule.operand_mappings[i],
                &rule.factor_sizes,
                mesh_ref,
                op.mesh,
            )?);
        }
    }
    for (i, s) in op.results.iter().enumerate() {
        if updated.results.get(i) || (is_sharded(s) && op.other_device_order[n + i]) {
            plan.results[i] = Some(proj.results[i].to_tensor_sharding(
                &rule.result_mappings[i],
                &rule.factor_sizes,
                mesh_ref,
                op.mesh,
            )?);
        }
    }
    Ok(())
}

/// Shardy's `processReshapeWithOverflowAxes`: the axes of the operand or the result, whichever
/// is sharded more, redistributed over the factors of both, and both resharded to the greatest
/// common prefix of what that gives.
fn reshape_with_overflow(
    op: &OpShardings<'_>,
    proj: &mut ShardingProjection,
    mesh_ref: &MeshRef,
    plan: &mut OpReshards,
) -> Result<AxesPerFactor> {
    let (rule, mesh) = (op.rule, op.mesh);
    let num_factors = rule.factor_sizes.len();
    let prefer_input = proj.operands[0].sharding_size(mesh)? >= proj.results[0].sharding_size(mesh)?;
    let best = if prefer_input { &proj.operands[0] } else { &proj.results[0] };
    let mut all_axes: Vec<AxisRef> = Vec::new();
    for (_, fs) in best.iter() {
        all_axes.extend(fs.axes.iter().cloned());
        all_axes.extend(fs.overflow_axes.iter().cloned());
    }
    redistribute(&mut proj.operands[0], &rule.operand_mappings[0], rule, &all_axes, mesh)?;
    redistribute(&mut proj.results[0], &rule.result_mappings[0], rule, &all_axes, mesh)?;
    let input = proj.operands[0].to_tensor_sharding(&rule.operand_mappings[0], &rule.factor_sizes, mesh_ref, mesh)?;
    let output = proj.results[0].to_tensor_sharding(&rule.result_mappings[0], &rule.factor_sizes, mesh_ref, mesh)?;
    let legal = ShardingProjection::build_on_mesh(&[Some(&input)], &[Some(&output)], rule, mesh, false)?;
    let common = legal.greatest_common_prefix_axes(num_factors);
    for (f, axes) in common.iter().enumerate() {
        proj.update_sharding(f, axes, &[]);
    }
    let operands = op.direct_operands.unwrap_or(op.operands);
    let device_order = op.direct_other_device_order.unwrap_or(op.other_device_order);
    let mut updated = UpdateTensorShardings::new(op.operands.len(), op.results.len());
    let new_input =
        proj.operands[0].to_tensor_sharding(&rule.operand_mappings[0], &rule.factor_sizes, mesh_ref, mesh)?;
    updated.operands.set(0, !is_equivalent(operands[0].as_ref(), Some(&new_input)));
    let new_output =
        proj.results[0].to_tensor_sharding(&rule.result_mappings[0], &rule.factor_sizes, mesh_ref, mesh)?;
    updated.results.set(0, !is_equivalent(Some(&new_output), op.results[0].as_ref()));
    reshard_tensors(op, proj, mesh_ref, &updated, operands, device_order, plan)?;
    Ok(common)
}

/// Shardy's `distributeAxesAcrossFactors` over every factor of one tensor, major to minor.
fn redistribute(
    t: &mut TensorFactorShardings,
    mapping: &[Vec<i64>],
    rule: &OpShardingRule,
    all_axes: &[AxisRef],
    mesh: &Mesh,
) -> Result<()> {
    let mut order: Vec<usize> = Vec::new();
    let mut flat: Vec<FactorSharding> = Vec::new();
    let mut sizes: Vec<i64> = Vec::new();
    for &f in mapping.iter().flatten() {
        let f = f as usize;
        if let Some(fs) = t.get(f) {
            flat.push(FactorSharding { closed: fs.closed, minor_most: fs.minor_most, ..FactorSharding::default() });
            sizes.push(rule.factor_sizes[f]);
            order.push(f);
        }
    }
    distribute_axes_across_factors(&mut flat, &sizes, all_axes, mesh)?;
    for (f, fs) in order.into_iter().zip(flat) {
        if let Some(target) = t.get_mut(f) {
            target.axes = fs.axes;
            target.overflow_axes = fs.overflow_axes;
        }
    }
    Ok(())
}

/// The propagation pipeline's dot rule (Shardy's `processDot` path of `processOp`): when the
/// operands agree with each other and the result differs from them in exactly one factor,
/// sharded in the result along the axes of the sharded contracting dimension, the result takes
/// the operands' axes for that factor and a reshard restores its sharding; sets
/// `plan.results[0]`.
fn dot(op: &OpShardings<'_>, proj: &mut ShardingProjection, mesh_ref: &MeshRef, plan: &mut OpReshards) -> Result<()> {
    let rule = op.rule;
    if op.results.is_empty() || proj.operands.len() < 2 {
        return Ok(());
    }
    let (lhs_size, rhs_size) = (op.sizes[0], op.sizes[1]);
    let result_size = op.sizes[op.operands.len()];
    let mut conflicting: Option<(usize, Vec<AxisRef>)> = None;
    let mut reduction: Vec<AxisRef> = Vec::new();
    let mut seen: Vec<AxisRef> = Vec::new();
    for f in 0..rule.factor_sizes.len() {
        let lhs = proj.operands[0].get(f).map(|s| &s.axes);
        let rhs = proj.operands[1].get(f).map(|s| &s.axes);
        let (operand_axes, max_size) = match (lhs, rhs) {
            (Some(l), Some(r)) => {
                if l != r {
                    return Ok(());
                }
                if rule.reduction_factors.contains(&(f as i64)) {
                    reduction.extend(l.iter().cloned());
                    continue;
                }
                (l.clone(), lhs_size.max(rhs_size))
            }
            (l, r) => {
                let axes = l.or(r).cloned().unwrap_or_default();
                for a in &axes {
                    if seen.iter().any(|s| s.overlaps(a)) {
                        return Ok(());
                    }
                    seen.push(a.clone());
                }
                (axes, if l.is_some() { lhs_size } else { rhs_size })
            }
        };
        if proj.results[0].get(f).map(|s| &s.axes) != Some(&operand_axes) {
            if operand_axes.is_empty() || conflicting.is_some() || result_size > max_size {
                return Ok(());
            }
            conflicting = Some((f, operand_axes));
        }
    }
    let Some((f, axes)) = conflicting else { return Ok(()) };
    let Some(result_factor) = proj.results[0].get_mut(f) else { return Ok(()) };
    if result_factor.axes.is_empty() || result_factor.axes != reduction {
        return Ok(());
    }
    result_factor.axes = axes;
    plan.results[0] =
        Some(proj.results[0].to_tensor_sharding(&rule.result_mappings[0], &rule.factor_sizes, mesh_ref, op.mesh)?);
    Ok(())
}

/// Shardy's `insertAllReducesForReductionFactors`: the axes of the reduction factors (the
/// common ones on the full version; else, when the result is unreduced, the ones all tensors
/// agree on) that the result's unreduced axes do not cover, sorted and merged.
fn reduction_axes(
    op: &OpShardings<'_>,
    proj: &ShardingProjection,
    common: Option<&[Vec<AxisRef>]>,
) -> Result<Vec<AxisRef>> {
    let Some(first) = op.results.first() else { return Ok(Vec::new()) };
    let unreduced: &[AxisRef] = first.as_ref().map_or(&[], |s| &s.unreduced);
    let mut reduction: Vec<AxisRef> = Vec::new();
    for &f in &op.rule.reduction_factors {
        let f = f as usize;
        match common {
            Some(common) => reduction.extend(common.get(f).into_iter().flatten().cloned()),
            None if unreduced.is_empty() => return Ok(Vec::new()),
            None => reduction.extend(compatible_factor_axes(proj, f).ok_or_else(|| {
                Error::program(
                    "the result has unreduced axes while the operand has incompatible sharding along reduction factors",
                )
            })?),
        }
    }
    if reduction.is_empty() {
        return Ok(Vec::new());
    }
    let axes = axis_set_diff(&reduction, unreduced, op.mesh)?;
    if axes.is_empty() {
        return Ok(axes);
    }
    sort_and_merge_axes(&axes, op.mesh)
}

/// `sharding` with some parts replaced, as Shardy's `replaceDimShardings` & co. build it:
/// replicated and unreduced axes in mesh order, the reduction kept only with unreduced axes.
fn with_parts(
    sharding: &TensorSharding,
    dims: Option<Vec<DimSharding>>,
    replicated: Option<&[AxisRef]>,
    unreduced: Option<Vec<AxisRef>>,
    mesh: &Mesh,
) -> TensorSharding {
    let mut replicated = replicated.map_or_else(|| sharding.replicated.clone(), <[AxisRef]>::to_vec);
    let mut unreduced = unreduced.unwrap_or_else(|| sharding.unreduced.clone());
    replicated.sort_by(|a, b| a.mesh_cmp(b, mesh));
    unreduced.sort_by(|a, b| a.mesh_cmp(b, mesh));
    let reduction = if unreduced.is_empty() { Reduction::Sum } else { sharding.reduction };
    TensorSharding {
        mesh: sharding.mesh.clone(),
        dims: dims.unwrap_or_else(|| sharding.dims.clone()),
        replicated,
        unreduced,
        reduction,
    }
}

/// Shardy's `insertAllReduceIfUnreducedToReplicated`: the unreduced axes of `source` that
/// `target_unreduced` lacks, to all-reduce, and `source` without them; `None` when there are
/// none. Errors when an axis is unknown to `mesh`.
pub fn all_reduce_to_replicated(
    source: &TensorSharding,
    target_unreduced: &[AxisRef],
    mesh: &Mesh,
) -> Result<Option<(Vec<AxisRef>, TensorSharding)>> {
    let axes = axis_set_diff(&source.unreduced, target_unreduced, mesh)?;
    if axes.is_empty() {
        return Ok(None);
    }
    let kept = axis_set_diff(&source.unreduced, &axes, mesh)?;
    let new = with_parts(source, None, None, Some(kept), mesh);
    new.validate(mesh, None, false)?;
    Ok(Some((axes, new)))
}

/// The collectives that give a value the unreduced axes its user expects (Shardy's
/// `insertUnreducedCollectives`), in order; each set field is one op.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnreducedCollectives {
    /// First a reshard to this sharding (the input's dimension axes that the output lacks
    /// other than as a suffix kept where they can become unreduced).
    pub reshard: Option<TensorSharding>,
    /// Then `sdy.replicated_to_unreduced` of these axes, to this sharding.
    pub replicated_to_unreduced: Option<(Vec<AxisRef>, TensorSharding)>,
    /// Then `sdy.sharded_to_unreduced` of these axes per dimension, to the output sharding.
    pub sharded_to_unreduced: Option<(Vec<Vec<AxisRef>>, TensorSharding)>,
}

impl UnreducedCollectives {
    /// The sharding the last op gives (`None` when there is no op).
    pub fn last(&self) -> Option<&TensorSharding> {
        self.sharded_to_unreduced
            .as_ref()
            .map(|(_, s)| s)
            .or(self.replicated_to_unreduced.as_ref().map(|(_, s)| s))
            .or(self.reshard.as_ref())
    }
}

/// Plans Shardy's `insertUnreducedCollectives` from `input` to `output` (whose unreduced axes
/// are not empty): `None` when `output` has no unreduced axis that `input` lacks.
///
/// Errors (`ErrorKind::Program`) when each has unreduced axes the other lacks, and when an
/// axis is unknown to `mesh`.
pub fn unreduced_collectives(
    input: &TensorSharding,
    output: &TensorSharding,
    mesh: &Mesh,
) -> Result<Option<UnreducedCollectives>> {
    let to_unreduced = axis_set_diff(&output.unreduced, &input.unreduced, mesh)?;
    if to_unreduced.is_empty() {
        return Ok(None);
    }
    if !axis_set_diff(&input.unreduced, &output.unreduced, mesh)?.is_empty() {
        return Err(Error::program("input and output both have unreduced axes the other lacks"));
    }
    let mut sharded: Vec<AxisRef> = Vec::new();
    let mut per_dim: Vec<Vec<AxisRef>> = vec![Vec::new(); input.dims.len()];
    let mut need_reshard = false;
    let mut dims = output.dims.clone();
    for (d, (in_d, out_d)) in input.dims.iter().zip(&output.dims).enumerate() {
        match axis_list_prefix_status(&out_d.axes, &in_d.axes) {
            PrefixStatus::StrictPrefix => {
                let n = out_d.axes.len();
                let mut diff: Vec<AxisRef> = Vec::new();
                if let Some(last) = out_d.axes.last() {
                    if *last != in_d.axes[n - 1] {
                        diff.extend(suffix_without_overlap(&in_d.axes[n - 1], last, mesh)?);
                    }
                }
                diff.extend(in_d.axes[n..].iter().cloned());
                if axis_set_diff(&diff, &to_unreduced, mesh)?.is_empty() {
                    sharded.extend(diff.iter().cloned());
                    per_dim[d] = diff;
                    dims[d] = in_d.clone();
                } else {
                    need_reshard = true;
                }
            }
            PrefixStatus::NotAPrefix => need_reshard = true,
            PrefixStatus::Equal => {}
        }
    }
    let mut plan = UnreducedCollectives::default();
    if need_reshard {
        plan.reshard = Some(with_parts(input, Some(dims.clone()), None, None, mesh));
    }
    let replicated = axis_set_diff(&to_unreduced, &sharded, mesh)?;
    if !replicated.is_empty() {
        let mut all: Vec<AxisRef> = input.unreduced.clone();
        all.extend(replicated.iter().cloned());
        let unreduced = sort_and_merge_axes(&all, mesh)?;
        let s = with_parts(input, Some(dims), Some(&output.replicated), Some(unreduced), mesh);
        plan.replicated_to_unreduced = Some((replicated, s));
    }
    if !sharded.is_empty() {
        plan.sharded_to_unreduced = Some((per_dim, output.clone()));
    }
    for s in plan.reshard.iter().chain(plan.replicated_to_unreduced.as_ref().map(|(_, s)| s)) {
        s.validate(mesh, None, false)?;
    }
    Ok(Some(plan))
}
