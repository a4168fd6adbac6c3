//! Records behind `shardwise.explain`: which layer took each propagation step, which factor
//! each propagated axis travelled along ([`Hop`]), and each axis a tensor could not take along
//! a factor, with the reason and what it conflicted with ([`Conflict`]). Kept by the solver
//! only with [`super::debug::DebugOptions::explain`]; nothing here runs otherwise.
//!
//! The reasons follow the checks of Shardy's factor propagation
//! (`shardy/dialect/sdy/transforms/propagation/basic_factor_propagation.cc`,
//! `aggressive_factor_propagation.cc`), in the order Shardy makes them:
//!
//! 1. the factor does not propagate: blocked by the op's rule ([`ConflictReason::BlockedFactor`]),
//!    or not in this direction under the layer's direction policy (op priority heuristics, a
//!    propagation barrier: [`ConflictReason::Direction`]);
//! 2. `getCompatibleMajorAxes`: another tensor shards the same factor along axes that are not
//!    a prefix of the source's, nor the source's of it ([`ConflictReason::IncompatibleSharding`]);
//! 3. `compatiblePrefixNoConflictsAcrossFactors`: the axis overlaps an axis (or overflow axis)
//!    of another factor of a tensor ([`ConflictReason::OverlapsOtherFactor`]);
//! 4. `compatiblePrefixNoConflictsWithinFactor`: the axis is replicated or unreduced in a
//!    tensor, or the tensor's factor is closed (a closed dimension, or one of a lower user
//!    priority, closed until its round), has overflow axes, or is not minor-most and not
//!    divisible by the axis ([`ConflictReason::Replicated`], [`ConflictReason::Unreduced`],
//!    [`ConflictReason::Closed`], [`ConflictReason::OverflowAxes`],
//!    [`ConflictReason::NotDivisible`]);
//! 5. `truncateAxesByRemovingConflicts` in conservative mode: a sub-axis
//!    ([`ConflictReason::ConservativeSubAxis`]);
//! 6. the aggressive strategy on an elementwise op gives operands only what a result has
//!    ([`ConflictReason::ElementwiseOperand`]).
//!
//! The basic strategy checks 3 and 4 against every tensor of the op; the aggressive strategy
//! only against the target tensor (as updated by the factors served before). When none of the
//! checks explains the drop (the aggressive strategy's per-tensor truncation met a partial
//! sub-axis, for example), the reason is [`ConflictReason::NotPropagated`].

#![warn(missing_docs)]

use crate::axis::AxisRef;
use crate::error::Result;
use crate::mesh::Mesh;
use crate::propagation::axes::{axis_size, gcd, total_axes_size};
use crate::propagation::debug::{EdgeNode, EdgeNodeKind};
use crate::propagation::factor_prop::PropagationDirection;
use crate::propagation::projection::{
    axis_list_prefix_status, PrefixStatus, ShardingProjection, TensorFactorShardings,
};

/// The factor propagation strategy of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StrategyTag {
    /// Shardy `BasicFactorPropagation`.
    #[default]
    Basic,
    /// Shardy `AggressiveFactorPropagation`.
    Aggressive,
}

impl StrategyTag {
    /// `"basic"` or `"aggressive"`.
    pub fn name(self) -> &'static str {
        match self {
            StrategyTag::Basic => "basic",
            StrategyTag::Aggressive => "aggressive",
        }
    }
}

/// Which layer runs the current round: the user priority round (`Some(p)` for `p0, p1, ...`;
/// round `p0` also propagates dimensions without a priority), the op priority step (0 to 4,
/// Shardy's op heuristics), both `None` when the pass has no such layer, and the strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LayerTag {
    /// The user priority of the round, under `sdy-user-priority-propagate`.
    pub user_priority: Option<i64>,
    /// The op priority step, under `sdy-op-priority-propagate` (and user priority).
    pub op_priority: Option<u8>,
    /// The factor propagation strategy.
    pub strategy: StrategyTag,
}

/// A propagation step: the op propagated through and the layer that ran it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRecord {
    /// The step's number (as in the propagation edges).
    pub step: i64,
    /// The op (for a function's results, the function).
    pub op: u32,
    /// The layer.
    pub layer: LayerTag,
}

/// One axis moving from one tensor of an op to another at one step, along one factor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// The step.
    pub step: i64,
    /// The op propagated through (for a function's results, the function).
    pub op: u32,
    /// The axis (as in the propagation edges: sub-axes of one dimension merged).
    pub axis: AxisRef,
    /// The factor of the op's rule the axis travelled along (`None` when the axis is a merge
    /// of sub-axes that no single factor holds).
    pub factor: Option<usize>,
    /// The tensor the axis came from.
    pub source: EdgeNode,
    /// The tensor it came to.
    pub target: EdgeNode,
    /// The value holding the source's sharding (its shardable value), if any.
    pub source_value: Option<u32>,
    /// The value holding the target's sharding, if any.
    pub target_value: Option<u32>,
}

/// Why an axis did not reach a tensor along a factor; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConflictReason {
    /// The op's sharding rule blocks propagation along the factor.
    BlockedFactor,
    /// The layer's direction policy does not let the factor propagate from the source.
    Direction,
    /// Another tensor shards the same factor differently.
    IncompatibleSharding,
    /// The axis is used by another factor of a tensor.
    OverlapsOtherFactor,
    /// The axis is explicitly replicated in a tensor.
    Replicated,
    /// The axis is unreduced in a tensor.
    Unreduced,
    /// A tensor's dimension is closed (or of a lower user priority, not yet open).
    Closed,
    /// A tensor's factor has overflow axes.
    OverflowAxes,
    /// A non-minor-most factor whose size the axis does not divide.
    NotDivisible,
    /// A sub-axis under conservative propagation.
    ConservativeSubAxis,
    /// An elementwise op's operand, under the aggressive strategy, takes only a result's axes.
    ElementwiseOperand,
    /// None of the above.
    NotPropagated,
}

impl ConflictReason {
    /// The reason's name: `"blocked-factor"`, `"direction"`, `"incompatible-sharding"`,
    /// `"overlaps-other-factor"`, `"replicated"`, `"unreduced"`, `"closed"`,
    /// `"overflow-axes"`, `"not-divisible"`, `"conservative-sub-axis"`,
    /// `"elementwise-operand"` or `"not-propagated"`.
    pub fn name(self) -> &'static str {
        match self {
            ConflictReason::BlockedFactor => "blocked-factor",
            ConflictReason::Direction => "direction",
            ConflictReason::IncompatibleSharding => "incompatible-sharding",
            ConflictReason::OverlapsOtherFactor => "overlaps-other-factor",
            ConflictReason::Replicated => "replicated",
            ConflictReason::Unreduced => "unreduced",
            ConflictReason::Closed => "closed",
            ConflictReason::OverflowAxes => "overflow-axes",
            ConflictReason::NotDivisible => "not-divisible",
            ConflictReason::ConservativeSubAxis => "conservative-sub-axis",
            ConflictReason::ElementwiseOperand => "elementwise-operand",
            ConflictReason::NotPropagated => "not-propagated",
        }
    }
}

/// What an axis conflicted with: a tensor of the op, the factor and axis of it involved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConflictWith {
    /// The tensor.
    pub tensor: EdgeNode,
    /// Its factor involved (the same factor, or the other factor holding the axis).
    pub factor: Option<usize>,
    /// Its axis involved (the differing axis, the overlapping axis, the replicated axis).
    pub axis: Option<AxisRef>,
}

/// Axes of one factor that one tensor of an op could not take from another, in one visit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StepConflict {
    /// The tensor that did not take them.
    pub target: EdgeNode,
    /// The factor.
    pub factor: usize,
    /// The first axis not taken and the source's axes after it (dropped with it).
    pub axes: Vec<AxisRef>,
    /// The tensor that had them.
    pub source: EdgeNode,
    /// Why the first axis was not taken.
    pub reason: ConflictReason,
    /// What it conflicted with, when one tensor is to blame.
    pub with: Option<ConflictWith>,
}

/// A [`StepConflict`] as the solver records it: where and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The solver's visit counter at the time (orders conflicts; later visits decide).
    pub visit: u64,
    /// The step, when the visit changed some sharding.
    pub step: Option<i64>,
    /// The op.
    pub op: u32,
    /// The layer.
    pub layer: LayerTag,
    /// The value holding the target's sharding, if any.
    pub target_value: Option<u32>,
    /// The value holding the source's sharding, if any.
    pub source_value: Option<u32>,
    /// The value holding the sharding of the tensor conflicted with, if any.
    pub with_value: Option<u32>,
    /// What was dropped.
    pub conflict: StepConflict,
}

/// How the op of one visit propagates: what [`diagnose`] needs besides the projections.
pub struct VisitInfo<'a> {
    /// Size of each factor of the rule.
    pub factor_sizes: &'a [i64],
    /// Direction per factor (already `None` for blocked factors).
    pub direction: &'a dyn Fn(usize) -> PropagationDirection,
    /// Whether the rule blocks the factor.
    pub blocked: &'a dyn Fn(usize) -> bool,
    /// The mesh.
    pub mesh: &'a Mesh,
    /// Conservative propagation.
    pub conservative: bool,
    /// The strategy.
    pub strategy: StrategyTag,
    /// The op is elementwise.
    pub elementwise: bool,
}

fn nodes(p: &ShardingProjection) -> impl Iterator<Item = (EdgeNode, &TensorFactorShardings)> {
    let ops =
        p.operands.iter().enumerate().map(|(i, t)| (EdgeNode { kind: EdgeNodeKind::Operand, index: i as i64 }, t));
    let res = p.results.iter().enumerate().map(|(i, t)| (EdgeNode { kind: EdgeNodeKind::Result, index: i as i64 }, t));
    ops.chain(res)
}

fn tensor_of(p: &ShardingProjection, n: EdgeNode) -> Option<&TensorFactorShardings> {
    match n.kind {
        EdgeNodeKind::Operand => p.operands.get(n.index as usize),
        EdgeNodeKind::Result => p.results.get(n.index as usize),
    }
}

fn compatible(a: &[AxisRef], b: &[AxisRef]) -> bool {
    axis_list_prefix_status(a, b) != PrefixStatus::NotAPrefix
        || axis_list_prefix_status(b, a) != PrefixStatus::NotAPrefix
}

/// Compares the projections of one visit before (`before`) and after (`after`) propagation and
/// returns, for each tensor and factor, the first axis another tensor had along the factor
/// that the tensor did not get, with the reason (see the module documentation). Only the
/// first source per (tensor, factor, axis) is reported. Errors only when an axis is unknown
/// to the mesh.
pub fn diagnose(
    before: &ShardingProjection,
    after: &ShardingProjection,
    info: &VisitInfo<'_>,
) -> Result<Vec<StepConflict>> {
    let mut out: Vec<StepConflict> = Vec::new();
    for f in 0..info.factor_sizes.len() {
        for (t_node, t_before) in nodes(before) {
            if t_before.get(f).is_none() {
                continue;
            }
            let new_axes = tensor_of(after, t_node).and_then(|t| t.get(f)).map_or(&[][..], |s| s.axes.as_slice());
            for (s_node, s_tensor) in nodes(before) {
                if s_node == t_node {
                    continue;
                }
                let Some(s) = s_tensor.get(f) else { continue };
                let Some(i) = s.axes.iter().position(|a| !new_axes.iter().any(|b| b.contains(a))) else { continue };
                let axis = &s.axes[i];
                if out.iter().any(|c| c.target == t_node && c.factor == f && c.axes[0] == *axis) {
                    continue;
                }
                let (reason, with) = reason(before, after, info, f, &s.axes, i, s_node, t_node)?;
                out.push(StepConflict {
                    target: t_node,
                    factor: f,
                    axes: s.axes[i..].to_vec(),
                    source: s_node,
                    reason,
                    with,
                });
            }
        }
    }
    Ok(out)
}

/// Why axis `s_axes[i]` of the source did not reach the target along `f`.
#[allow(clippy::too_many_arguments)]
fn reason(
    before: &ShardingProjection,
    after: &ShardingProjection,
    info: &VisitInfo<'_>,
    f: usize,
    s_axes: &[AxisRef],
    i: usize,
    s_node: EdgeNode,
    t_node: EdgeNode,
) -> Result<(ConflictReason, Option<ConflictWith>)> {
    if (info.blocked)(f) {
        return Ok((ConflictReason::BlockedFactor, None));
    }
    let dir = (info.direction)(f);
    let source_allowed = match dir {
        PropagationDirection::None => false,
        PropagationDirection::Both => true,
        PropagationDirection::Forward => s_node.kind == EdgeNodeKind::Operand,
        PropagationDirection::Backward => s_node.kind == EdgeNodeKind::Result,
    };
    if !source_allowed {
        return Ok((ConflictReason::Direction, None));
    }
    // 2. Another tensor shards the factor along axes incompatible with the source's.
    let wanted = &s_axes[..=i];
    for (u_node, u) in nodes(before) {
        let Some(us) = u.get(f) else { continue };
        if u_node == s_node || compatible(wanted, &us.axes) {
            continue;
        }
        let j = wanted.iter().zip(&us.axes).position(|(a, b)| a != b).unwrap_or(0);
        return Ok((
            ConflictReason::IncompatibleSharding,
            Some(ConflictWith { tensor: u_node, factor: Some(f), axis: us.axes.get(j).cloned() }),
        ));
    }
    // 3 and 4, against the target (aggressive) or every tensor (basic).
    let axis = &s_axes[i];
    let prev_sharded_size = total_axes_size(&s_axes[..i], Some(info.mesh))?;
    let mut checked: Vec<(EdgeNode, &TensorFactorShardings)> = Vec::new();
    if let Some(t) = tensor_of(after, t_node) {
        checked.push((t_node, t));
    }
    if info.strategy == StrategyTag::Basic {
        checked.extend(nodes(before).filter(|(n, _)| *n != t_node));
    }
    for (u_node, u) in checked {
        if let Some(r) = tensor_conflict(u_node, u, f, axis, prev_sharded_size, info)? {
            return Ok(r);
        }
    }
    if info.conservative && axis.sub.is_some() {
        return Ok((ConflictReason::ConservativeSubAxis, None));
    }
    if info.strategy == StrategyTag::Aggressive && info.elementwise && t_node.kind == EdgeNodeKind::Operand {
        return Ok((ConflictReason::ElementwiseOperand, None));
    }
    Ok((ConflictReason::NotPropagated, None))
}

/// The first of checks 3 and 4 that `axis` fails in tensor `u`.
fn tensor_conflict(
    u_node: EdgeNode,
    u: &TensorFactorShardings,
    f: usize,
    axis: &AxisRef,
    prev_sharded_size: i64,
    info: &VisitInfo<'_>,
) -> Result<Option<(ConflictReason, Option<ConflictWith>)>> {
    let with =
        |factor: Option<usize>, a: Option<&AxisRef>| Some(ConflictWith { tensor: u_node, factor, axis: a.cloned() });
    for (g, s) in u.iter() {
        if g == f {
            continue;
        }
        if let Some(b) = s.axes.iter().chain(&s.overflow_axes).find(|b| b.overlaps(axis)) {
            return Ok(Some((ConflictReason::OverlapsOtherFactor, with(Some(g), Some(b)))));
        }
    }
    let Some(s) = u.get(f) else { return Ok(None) };
    if let Some(b) = u.replicated.iter().find(|b| b.overlaps(axis)) {
        return Ok(Some((ConflictReason::Replicated, with(Some(f), Some(b)))));
    }
    if let Some(b) = u.unreduced.iter().find(|b| b.overlaps(axis)) {
        return Ok(Some((ConflictReason::Unreduced, with(Some(f), Some(b)))));
    }
    if s.axes.iter().any(|a| a.contains(axis)) {
        return Ok(None);
    }
    if s.closed {
        return Ok(Some((ConflictReason::Closed, with(Some(f), None))));
    }
    if let Some(b) = s.overflow_axes.first() {
        return Ok(Some((ConflictReason::OverflowAxes, with(Some(f), Some(b)))));
    }
    if !s.minor_most {
        let size = axis_size(axis, Some(info.mesh))?;
        let factor_size = info.factor_sizes[f];
        let divisible = prev_sharded_size != 0
            && factor_size.checked_rem(prev_sharded_size) == Some(0)
            && gcd(factor_size / prev_sharded_size, size) == size;
        if !divisible {
            return Ok(Some((ConflictReason::NotDivisible, with(Some(f), None))));
        }
    }
    Ok(None)
}
