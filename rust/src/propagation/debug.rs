//! Where propagated shardings came from: the data behind Shardy's debugging options
//! `debug-sharding-origins` and `debug-propagation-edge-sharding`
//! (`shardy/dialect/sdy/transforms/propagation/debugging/source_sharding.{h,cc}`), recorded by
//! the solver while it propagates, and the text of the two attributes Shardy writes from it.
//!
//! Two kinds of record, kept by [`ShardingDebug`]:
//!
//! * **sharding origins**: for each value (its shardable value, see
//!   [`super::solver`]), which *user sharding* each axis of its sharding came from
//!   ([`Origin`]): a function argument (`input: 0`) or result (`output: 1`), a sharding
//!   constraint (`constraint_3`), or an in or out sharding of a manual computation
//!   (`mc_0_input: 1`, `mc_0_output: 0`). Constraints and manual computations are numbered
//!   module-wide, constraints in program order, manual computations inner ones first
//!   (MLIR's post-order walk); [`ShardingDebug::origin_names`] gives each its name (Shardy's
//!   `sdy.sharding_origin_name`). Axes a value had before propagation get the origin of the
//!   user sharding that set them; an axis propagated to a value takes the origin the source
//!   tensor had for it (or, when the source has only a sub-axis or a super-axis of it, for that
//!   axis).
//! * **propagation edges**: for each op propagated through, which axis moved from which of its
//!   operands or results ([`EdgeNode`]) to which, at which *step* ([`PropagationEdge`]). A
//!   step is one propagation through one op that changed some sharding; steps are numbered
//!   from [`DebugOptions::first_step`] (one more than the largest step already recorded in the
//!   module, so that `sdy-apply-sharding-constraints` and propagation number on). Edges of
//!   the main function's results (propagated to and from its return values) are kept per
//!   function in [`ShardingDebug::func_result_edges`].
//!
//! An axis "came" to a tensor when, comparing the op's factor shardings before and after the
//! step, the tensor's axes for a factor grew: the new axes beyond the old ones, and the old
//! last axis when it grew into a larger sub-axis. Its source is the first operand, else the
//! first result, whose old axes for the factor extended the new ones. Sub-axes of one
//! dimension that merge across consecutive factors are recorded as the merged axis.
//!
//! Shardy's quirks are kept, since the attributes must be the ones Shardy writes:
//!
//! * every edge of a function result is recorded under result 0 (Shardy indexes its map by
//!   the position of the tensor within the step, which is always 0 for a function result);
//! * an origin is looked up in the source's map by the axis itself, else by the first recorded
//!   axis that contains it or that it contains, in the order they were recorded (Shardy walks
//!   a hash map, whose order is not reproducible when several qualify);
//! * edges with one axis and several sources in one step print in the order they were
//!   recorded (Shardy's order there depends on hashing too).
//!
//! Where Shardy's behaviour is undefined (an axis propagated from a value that has no recorded
//! origin for it, for example a sharding set by hand on an intermediate op, which is none of
//! the user shardings Shardy tracks: Shardy looks it up anyway and prints garbage or crashes),
//! no origin is recorded and the axis is listed in [`ShardingDebug::missing_origins`].

#![warn(missing_docs)]

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;

use crate::axis::AxisRef;
use crate::error::Result;
use crate::mesh::Mesh;
use crate::propagation::explain::{Conflict, Hop, StepRecord};
use crate::propagation::projection::{
    axis_list_prefix_status, PrefixStatus, ShardingProjection, TensorFactorShardings,
};
use crate::rule::{OpShardingRule, TensorMapping};
use crate::text::{print_axis_ref, print_string};

/// Which kind of user sharding an axis came from (Shardy `OriginShardingType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OriginKind {
    /// A function argument's sharding.
    Input,
    /// A `sdy.sharding_constraint`.
    Constraint,
    /// A function result's sharding.
    Output,
    /// An in sharding of a `sdy.manual_computation`.
    ManualInput,
    /// An out sharding of a `sdy.manual_computation`.
    ManualOutput,
}

impl OriginKind {
    /// `"input"`, `"constraint"`, `"output"`, `"mc_input"` or `"mc_output"`.
    pub fn name(self) -> &'static str {
        match self {
            OriginKind::Input => "input",
            OriginKind::Constraint => "constraint",
            OriginKind::Output => "output",
            OriginKind::ManualInput => "mc_input",
            OriginKind::ManualOutput => "mc_output",
        }
    }

    /// The kind named `name` (see [`OriginKind::name`]).
    pub fn from_name(name: &str) -> Option<OriginKind> {
        [
            OriginKind::Input,
            OriginKind::Constraint,
            OriginKind::Output,
            OriginKind::ManualInput,
            OriginKind::ManualOutput,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// The user sharding an axis came from (Shardy `OriginSharding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Origin {
    /// What kind of user sharding.
    pub kind: OriginKind,
    /// The argument, result or in/out sharding index (0 for a constraint).
    pub index: i64,
    /// The module-wide number of the constraint or manual computation (0 otherwise).
    pub source_id: i64,
}

impl fmt::Display for Origin {
    /// As Shardy writes it: `input: 0`, `output: 1`, `constraint_2`, `mc_0_input: 1`,
    /// `mc_0_output: 0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            OriginKind::Input => write!(f, "input: {}", self.index),
            OriginKind::Output => write!(f, "output: {}", self.index),
            OriginKind::Constraint => write!(f, "constraint_{}", self.source_id),
            OriginKind::ManualInput => write!(f, "mc_{}_input: {}", self.source_id, self.index),
            OriginKind::ManualOutput => write!(f, "mc_{}_output: {}", self.source_id, self.index),
        }
    }
}

/// Operand or result side of an op (Shardy `EdgeNodeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeNodeKind {
    /// An operand (for a data flow edge: a source; for a function result: the return value).
    Operand,
    /// A result (for a data flow edge: its targets; for a function result: the result).
    Result,
}

impl EdgeNodeKind {
    /// `"operand"` or `"result"`.
    pub fn name(self) -> &'static str {
        match self {
            EdgeNodeKind::Operand => "operand",
            EdgeNodeKind::Result => "result",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<EdgeNodeKind> {
        match name {
            "operand" => Some(EdgeNodeKind::Operand),
            "result" => Some(EdgeNodeKind::Result),
            _ => None,
        }
    }
}

/// One operand or result of the op a step propagated through (Shardy `EdgeNode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EdgeNode {
    /// Operand or result.
    pub kind: EdgeNodeKind,
    /// Its position among the op's operands or results (as the step saw them).
    pub index: i64,
}

impl fmt::Display for EdgeNode {
    /// `operand-0`, `result-1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.kind.name(), self.index)
    }
}

/// An axis moving from `source` to `target` at step `step` (Shardy `PropagationEdge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PropagationEdge {
    /// Where the axis was.
    pub source: EdgeNode,
    /// Where it went.
    pub target: EdgeNode,
    /// The step.
    pub step: i64,
}

/// A small map from axes to `T` that keeps the order in which axes were first inserted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxisMap<T> {
    entries: Vec<(AxisRef, T)>,
}

impl<T> Default for AxisMap<T> {
    fn default() -> Self {
        AxisMap { entries: Vec::new() }
    }
}

impl<T> AxisMap<T> {
    /// The value of `axis`, if any.
    pub fn get(&self, axis: &AxisRef) -> Option<&T> {
        self.entries.iter().find(|(a, _)| a == axis).map(|(_, t)| t)
    }

    /// Inserts `value` for `axis` unless the axis has one already (`try_emplace`); returns
    /// whether it was inserted.
    pub fn try_insert(&mut self, axis: &AxisRef, value: T) -> bool {
        if self.get(axis).is_some() {
            return false;
        }
        self.entries.push((axis.clone(), value));
        true
    }

    /// The value of `axis`, inserted with `make` first when missing.
    pub fn entry(&mut self, axis: &AxisRef, make: impl FnOnce() -> T) -> &mut T {
        let i = match self.entries.iter().position(|(a, _)| a == axis) {
            Some(i) => i,
            None => {
                self.entries.push((axis.clone(), make()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }

    /// Removes `axis`.
    pub fn remove(&mut self, axis: &AxisRef) {
        self.entries.retain(|(a, _)| a != axis);
    }

    /// The entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&AxisRef, &T)> {
        self.entries.iter().map(|(a, t)| (a, t))
    }

    /// Number of axes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No axes.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl AxisMap<Origin> {
    /// The origin of `axis` (Shardy `lookUpValueOriginSharding`): its own, else that of the
    /// first axis recorded that contains it or that it contains.
    pub fn lookup(&self, axis: &AxisRef) -> Option<Origin> {
        if let Some(o) = self.get(axis) {
            return Some(*o);
        }
        self.entries.iter().find(|(a, _)| a.contains(axis) || axis.contains(a)).map(|(_, o)| *o)
    }
}

/// What to record, and where step numbers start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DebugOptions {
    /// Record sharding origins (`debug-sharding-origins`).
    pub origins: bool,
    /// Record propagation edges (`debug-propagation-edge-sharding`).
    pub edges: bool,
    /// The number of the first step: one more than the largest step of the
    /// `sdy.propagation_edges` already in the module, 0 when there are none.
    pub first_step: i64,
    /// Sharding constraints to leave out of the origins (those the solver's caller inserted
    /// for conflicting sharding groups, which Shardy inserts after it has numbered them).
    pub skip_ops: Vec<u32>,
    /// Also keep the records of [`super::explain`]: the layer of each step, the factor each
    /// axis travelled along, and the axes dropped by conflicts.
    pub explain: bool,
}

/// The records of one propagation pass (Shardy `ShardingDebugMappings`); see the module
/// documentation. Values and ops are indices of the solver's graph.
#[derive(Debug, Clone, Default)]
pub struct ShardingDebug {
    /// What was recorded.
    pub options: DebugOptions,
    /// Per value (a shardable value), the origin of each axis, in the order values were first
    /// recorded. Only with [`DebugOptions::origins`].
    pub value_origins: Vec<(u32, AxisMap<Origin>)>,
    /// Per op propagated through (not a function), the edges of each axis, in the order ops
    /// were first recorded. Only with [`DebugOptions::edges`].
    pub op_edges: Vec<(u32, AxisMap<Vec<PropagationEdge>>)>,
    /// Per function (every function of the module), the edges of each of its results (all
    /// recorded under result 0, as Shardy does). Only with [`DebugOptions::edges`].
    pub func_result_edges: Vec<(u32, Vec<AxisMap<Vec<PropagationEdge>>>)>,
    /// `(op, name)`: Shardy's `sdy.sharding_origin_name` of each sharding constraint
    /// (`constraint_3`) and manual computation (`mc_0`). Only with [`DebugOptions::origins`].
    pub origin_names: Vec<(u32, String)>,
    /// `(value, axis)` for each axis propagated to a value from a tensor that has no recorded
    /// origin for it (a sharding that is none of the user shardings: set on an op result, or
    /// given to a sharding group member). Nothing is recorded for them; Shardy looks the
    /// origin up anyway, which is undefined behaviour (it prints garbage or crashes). Only
    /// with [`DebugOptions::origins`].
    pub missing_origins: Vec<(u32, AxisRef)>,
    /// The number the next step would get.
    pub next_step: i64,
    /// Per step, the op and the layer that took it. Only with [`DebugOptions::explain`].
    pub steps: Vec<StepRecord>,
    /// Each axis moved at each step, with its factor. Only with [`DebugOptions::explain`].
    pub hops: Vec<Hop>,
    /// Axes dropped by conflicts, each (op, target, factor, axis, reason, source) once, at
    /// its last visit. Only with [`DebugOptions::explain`].
    pub conflicts: Vec<Conflict>,
    conflict_index: HashMap<ConflictKey, usize>,
    value_index: HashMap<u32, usize>,
    op_index: HashMap<u32, usize>,
}

/// What makes two conflicts the same: op, target, factor, first axis dropped, reason, source.
type ConflictKey = (u32, EdgeNode, usize, AxisRef, &'static str, EdgeNode);

impl ShardingDebug {
    /// Records `c`, replacing the record of the same conflict at an earlier visit (whose
    /// layer did not decide the final sharding).
    pub fn add_conflict(&mut self, c: Conflict) {
        let key = (
            c.op,
            c.conflict.target,
            c.conflict.factor,
            c.conflict.axes[0].clone(),
            c.conflict.reason.name(),
            c.conflict.source,
        );
        match self.conflict_index.get(&key) {
            Some(&i) => self.conflicts[i] = c,
            None => {
                self.conflict_index.insert(key, self.conflicts.len());
                self.conflicts.push(c);
            }
        }
    }

    /// Empty records for `options`.
    pub fn new(options: DebugOptions) -> ShardingDebug {
        let next_step = options.first_step;
        ShardingDebug { options, next_step, ..ShardingDebug::default() }
    }

    /// The recorded origins of value `v`.
    pub fn origins_of(&self, v: u32) -> Option<&AxisMap<Origin>> {
        self.value_index.get(&v).map(|&i| &self.value_origins[i].1)
    }

    /// The recorded origins of value `v`, created empty when missing.
    pub fn origins_mut(&mut self, v: u32) -> &mut AxisMap<Origin> {
        let i = *self.value_index.entry(v).or_insert_with(|| {
            self.value_origins.push((v, AxisMap::default()));
            self.value_origins.len() - 1
        });
        &mut self.value_origins[i].1
    }

    /// The recorded edges of op `op`.
    pub fn edges_of(&self, op: u32) -> Option<&AxisMap<Vec<PropagationEdge>>> {
        self.op_index.get(&op).map(|&i| &self.op_edges[i].1)
    }

    /// The recorded edges of op `op`, created empty when missing.
    pub fn edges_mut(&mut self, op: u32) -> &mut AxisMap<Vec<PropagationEdge>> {
        let i = *self.op_index.entry(op).or_insert_with(|| {
            self.op_edges.push((op, AxisMap::default()));
            self.op_edges.len() - 1
        });
        &mut self.op_edges[i].1
    }

    /// Records the origin of every axis of the dimension shardings of `axes` on value `v`,
    /// keeping origins already recorded (Shardy `saveShardingOrigins`).
    /// A value gets a (possibly empty) record only once it has an axis.
    pub fn save_origins<'a>(&mut self, v: u32, axes: impl IntoIterator<Item = &'a AxisRef>, origin: Origin) {
        for a in axes {
            self.origins_mut(v).try_insert(a, origin);
        }
    }

    /// Drops the records of erased ops and values (whose attributes nobody will write).
    pub fn forget(&mut self, dead_ops: &[u32], dead_value: impl Fn(u32) -> bool) {
        self.op_edges.retain(|(op, _)| !dead_ops.contains(op));
        self.func_result_edges.retain(|(op, _)| !dead_ops.contains(op));
        self.origin_names.retain(|(op, _)| !dead_ops.contains(op));
        self.value_origins.retain(|(v, _)| !dead_value(*v));
        self.missing_origins.retain(|(v, _)| !dead_value(*v));
        self.steps.retain(|s| !dead_ops.contains(&s.op));
        self.hops.retain(|h| !dead_ops.contains(&h.op));
        self.conflicts.retain(|c| !dead_ops.contains(&c.op));
        self.conflict_index.clear();
        self.op_index = self.op_edges.iter().enumerate().map(|(i, (op, _))| (*op, i)).collect();
        self.value_index = self.value_origins.iter().enumerate().map(|(i, (v, _))| (*v, i)).collect();
    }
}

/// The axes that came to each operand and result in one step, with the edge that brought
/// each (Shardy's `FactorsToEdgeMap`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepEdges {
    /// Per operand.
    pub operands: Vec<AxisMap<PropagationEdge>>,
    /// Per result.
    pub results: Vec<AxisMap<PropagationEdge>>,
}

/// The first tensor of `tensors` whose axes for `factor` in `old` extend (or equal) `new_axes`
/// (Shardy `findNewAxisRefMatch`).
fn matching_source(new_axes: &[AxisRef], factor: usize, tensors: &[TensorFactorShardings]) -> Option<i64> {
    tensors
        .iter()
        .position(|t| {
            t.get(factor).is_some_and(|s| axis_list_prefix_status(new_axes, &s.axes) != PrefixStatus::NotAPrefix)
        })
        .map(|i| i as i64)
}

/// Compares the factor shardings of one step before (`old`) and after (`new`) and returns the
/// axes that came to each tensor, with the edges that brought them, at step `step` (Shardy
/// `createSourceMap`). See the module documentation. Errors only when merging two sub-axes
/// needs the size of an axis `mesh` lacks.
pub fn step_edges(
    old: &ShardingProjection,
    new: &ShardingProjection,
    rule: &OpShardingRule,
    mesh: &Mesh,
    step: i64,
) -> Result<StepEdges> {
    let mut out = StepEdges {
        operands: vec![AxisMap::default(); old.operands.len()],
        results: vec![AxisMap::default(); old.results.len()],
    };
    let sides = [
        (EdgeNodeKind::Operand, &old.operands, &new.operands, &rule.operand_mappings, &mut out.operands),
        (EdgeNodeKind::Result, &old.results, &new.results, &rule.result_mappings, &mut out.results),
    ];
    for (kind, olds, news, mappings, maps) in sides {
        for (i, (o, n)) in olds.iter().zip(news.iter()).enumerate() {
            let (Some(mapping), Some(map)) = (mappings.get(i), maps.get_mut(i)) else { continue };
            let target = EdgeNode { kind, index: i as i64 };
            tensor_edges(o, n, mapping, target, old, mesh, step, map)?;
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn tensor_edges(
    old_t: &TensorFactorShardings,
    new_t: &TensorFactorShardings,
    mapping: &TensorMapping,
    target: EdgeNode,
    old: &ShardingProjection,
    mesh: &Mesh,
    step: i64,
    map: &mut AxisMap<PropagationEdge>,
) -> Result<()> {
    for dim in mapping {
        let mut previous: Option<AxisRef> = None;
        for &f in dim {
            let Ok(f) = usize::try_from(f) else { continue };
            let (Some(old_f), Some(new_f)) = (old_t.get(f), new_t.get(f)) else { continue };
            if old_f.axes == new_f.axes {
                continue;
            }
            let Some(new_last) = new_f.axes.last() else { continue };
            let mut last = new_last.clone();
            if let Some(p) = previous.as_ref().filter(|p| p.can_merge(&last)) {
                map.remove(p);
                last = p.merge(&last, mesh)?;
            }
            previous = Some(new_last.clone());
            let mut introduced = new_f.axes.clone();
            if let Some(l) = introduced.last_mut() {
                *l = last;
            }
            let source = matching_source(&new_f.axes, f, &old.operands)
                .map(|index| EdgeNode { kind: EdgeNodeKind::Operand, index })
                .or_else(|| {
                    matching_source(&new_f.axes, f, &old.results)
                        .map(|index| EdgeNode { kind: EdgeNodeKind::Result, index })
                });
            let Some(source) = source else { continue };
            let edge = PropagationEdge { source, target, step };
            let n_old = old_f.axes.len();
            if n_old > 0 {
                if let Some(a) = introduced.get(n_old - 1).filter(|a| **a != old_f.axes[n_old - 1]) {
                    map.try_insert(a, edge);
                }
            }
            for a in introduced.iter().skip(n_old) {
                map.try_insert(a, edge);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------- attribute text

/// Shardy's order of axis refs (`AxisRefAttr::operator<`): by name, then a full axis after the
/// sub-axes that start it (pre-size 1) and before the others, sub-axes by (pre-size, size).
pub fn shardy_axis_order(a: &AxisRef, b: &AxisRef) -> Ordering {
    let less = |x: &AxisRef, y: &AxisRef| -> bool {
        if x.name != y.name {
            return x.name.as_bytes() < y.name.as_bytes();
        }
        match (x.sub, y.sub) {
            (None, _) => y.pre_size() > 1,
            (Some(s), None) => s.pre_size == 1,
            (Some(s), Some(t)) => (s.pre_size, s.size) < (t.pre_size, t.size),
        }
    };
    if less(a, b) {
        Ordering::Less
    } else if less(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

fn is_bare_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
}

/// The key Shardy gives `axis` in a sharding origins dictionary: the axis as printed, without
/// its double quotes (`a`, `c:(1)2`).
pub fn origin_key(axis: &AxisRef) -> String {
    print_axis_ref(axis).replace('"', "")
}

/// The `sdy.sharding_origins` dictionary of one value as MLIR prints it: entries
/// `key = "origin"` sorted by key (MLIR sorts dictionaries), keys bare when they are
/// identifiers and quoted otherwise; for example `{a = "input: 0", "c:(1)2" = "self"}`.
/// `origins` pairs each axis with the origin text (an [`Origin`] printed, or `self`).
pub fn origins_dict_text(origins: &[(AxisRef, String)]) -> String {
    let mut entries: Vec<(String, &str)> = origins.iter().map(|(a, o)| (origin_key(a), o.as_str())).collect();
    entries.sort_by(|x, y| x.0.as_bytes().cmp(y.0.as_bytes()));
    entries.dedup_by(|x, y| x.0 == y.0);
    let mut out = String::from("{");
    for (i, (key, origin)) in entries.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if is_bare_identifier(key) {
            out.push_str(key);
        } else {
            print_string(key, &mut out);
        }
        out.push_str(" = ");
        print_string(origin, &mut out);
    }
    out.push('}');
    out
}

/// The `#sdy.propagation_edges<...>` attribute of an op (or function result) as Shardy builds
/// and prints it (`createPropagationEdges`): for each (axis, source, target) the edge of the
/// smallest step; grouped by step (increasing), then per axis (in Shardy's axis order) and
/// source, the targets operands first, by index. For example
/// `#sdy.propagation_edges<[{step-0 = [{"a" = operand-0 -> [operand-1, result-0]}]}]>`.
/// `None` when there are no edges.
pub fn propagation_edges_text(edges: &[(AxisRef, Vec<PropagationEdge>)]) -> Option<String> {
    // Minimum step per (axis, source, target), first recorded on ties.
    let mut best: Vec<(&AxisRef, EdgeNode, EdgeNode, i64)> = Vec::new();
    for (axis, list) in edges {
        for e in list {
            match best.iter_mut().find(|(a, s, t, _)| *a == axis && *s == e.source && *t == e.target) {
                Some(entry) => {
                    if e.step < entry.3 {
                        entry.3 = e.step;
                    }
                }
                None => best.push((axis, e.source, e.target, e.step)),
            }
        }
    }
    if best.is_empty() {
        return None;
    }
    let mut steps: Vec<i64> = best.iter().map(|b| b.3).collect();
    steps.sort_unstable();
    steps.dedup();
    let mut out = String::from("#sdy.propagation_edges<[");
    for (si, &step) in steps.iter().enumerate() {
        // (axis, source) -> targets, in first-recorded order.
        let mut entries: Vec<(&AxisRef, EdgeNode, Vec<EdgeNode>)> = Vec::new();
        for &(axis, source, target, s) in &best {
            if s != step {
                continue;
            }
            match entries.iter_mut().find(|(a, src, _)| *a == axis && *src == source) {
                Some(entry) => {
                    if !entry.2.contains(&target) {
                        entry.2.push(target);
                    }
                }
                None => entries.push((axis, source, vec![target])),
            }
        }
        entries.sort_by(|x, y| shardy_axis_order(x.0, y.0));
        if si > 0 {
            out.push_str(", ");
        }
        out.push_str(&format!("{{step-{step} = ["));
        for (ei, (axis, source, mut targets)) in entries.into_iter().enumerate() {
            targets.sort();
            if ei > 0 {
                out.push_str(", ");
            }
            let targets: Vec<String> = targets.iter().map(ToString::to_string).collect();
            out.push_str(&format!("{{{} = {source} -> [{}]}}", print_axis_ref(axis), targets.join(", ")));
        }
        out.push_str("]}");
    }
    out.push_str("]>");
    Some(out)
}
