//! Shardy's `sdy-collective` canonicalization patterns (`shardy/dialect/sdy/ir/
//! canonicalization.cc` and `canonicalization.td`), each applied to one op:
//! - a no-op `all_gather`, `all_slice`, `all_reduce` or `reduce_scatter` (no axes) and a
//!   `collective_permute` whose operand already has the result's sharding are replaced by
//!   their operand;
//! - `all_slice(all_gather(x))` over the same axes is `x`, and `all_reduce` of a
//!   `replicated_to_unreduced` over the same axes is its operand;
//! - `all_reduce(sharded_to_unreduced(x))` over the same axes becomes `all_gather(x)`;
//! - `all_slice(all_reduce(x))` whose slicing axes start with every reduction axis becomes
//!   `reduce_scatter(x)`, then an `all_slice` of the remaining slicing axes
//!   (`ReduceScatterFusion`);
//! - an unused `all_to_all` is erased, and `all_to_all(all_to_all(x))` over disjoint
//!   dimensions becomes one `all_to_all` (`AllToAllFusion`).
//!
//! The attribute texts are compared as printed.

use super::Rewriter;
use crate::axis::AxisRef;
use crate::error::{Error, Result};
use crate::export::explicit_reshards::is_equivalent;
use crate::ir::values::{result_sharding, set_result_sharding};
use crate::ir::Program;
use crate::propagation::axes::{add_axis_or_merge, sort_and_merge_axes};
use crate::sharding::{DimSharding, MeshRef, Reduction, TensorSharding};
use crate::text::{parse_axis_ref, parse_sharding, print_axis_ref_lists_attr, quoted_spans};
use crate::transforms::common::mesh_of_sharding;

/// The ops the patterns rewrite.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Pattern {
    AllGather,
    AllSlice,
    AllReduce,
    ReduceScatter,
    CollectivePermute,
    AllToAll,
}

impl Pattern {
    pub(super) fn of(name: &str) -> Option<Pattern> {
        Some(match name {
            "sdy.all_gather" => Pattern::AllGather,
            "sdy.all_slice" => Pattern::AllSlice,
            "sdy.all_reduce" => Pattern::AllReduce,
            "sdy.reduce_scatter" => Pattern::ReduceScatter,
            "sdy.collective_permute" => Pattern::CollectivePermute,
            "sdy.all_to_all" => Pattern::AllToAll,
            _ => return None,
        })
    }
}

const LISTS_PREFIX: &str = "#sdy<list_of_axis_ref_lists[";
const LIST_PREFIX: &str = "#sdy<axis_ref_list{";

fn attr<'p>(p: &'p Program, op: u32, name: &str) -> &'p str {
    p.attr(op, name).unwrap_or("")
}

/// `#sdy<list_of_axis_ref_lists[{}, {}]>` (or `[]`): no axes in any dimension.
fn is_empty_lists(text: &str) -> bool {
    let Some(inner) = text.strip_prefix(LISTS_PREFIX).and_then(|t| t.strip_suffix("]>")) else { return false };
    inner.is_empty() || inner.split(", ").all(|d| d == "{}")
}

/// The text inside `#sdy<axis_ref_list{...}>` without spaces, or `text` itself when it is not
/// such a list.
fn axes_text(text: &str) -> String {
    match text.trim().strip_prefix(LIST_PREFIX).and_then(|t| t.strip_suffix("}>")) {
        Some(inner) => inner.replace(' ', ""),
        None => text.to_string(),
    }
}

/// The texts between `{` and the next `}`, in order.
fn braced(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        out.push(&after[..close]);
        rest = &after[close + 1..];
    }
    out
}

/// Length of the digits at the start of `b`.
fn digits(b: &[u8]) -> usize {
    b.iter().take_while(|c| c.is_ascii_digit()).count()
}

/// The axis references written in `text`: each quoted name with its `:(m)k` if any.
fn axis_refs(text: &str) -> Result<Vec<AxisRef>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    for (start, mut end) in quoted_spans(text) {
        // `:(m)k`
        if b[end..].starts_with(b":(") {
            let m = digits(&b[end + 2..]);
            let close = end + 2 + m;
            if m > 0 && b.get(close) == Some(&b')') {
                let k = digits(&b[close + 1..]);
                if k > 0 {
                    end = close + 1 + k;
                }
            }
        }
        out.push(parse_axis_ref(&text[start..end])?);
    }
    Ok(out)
}

/// The axes of an `#sdy<axis_ref_list{...}>` (none when the text is not one).
fn axis_list(text: &str) -> Result<Vec<AxisRef>> {
    match text.trim().strip_prefix(LIST_PREFIX).and_then(|t| t.strip_suffix("}>")) {
        Some(inner) => axis_refs(inner),
        None => Ok(Vec::new()),
    }
}

/// The axes per dimension of an `#sdy<list_of_axis_ref_lists[...]>` (none when the text is
/// not one).
fn axis_lists(text: &str) -> Result<Vec<Vec<AxisRef>>> {
    let Some(inner) = text.trim().strip_prefix(LISTS_PREFIX).and_then(|t| t.strip_suffix("]>")) else {
        return Ok(Vec::new());
    };
    braced(inner).into_iter().map(axis_refs).collect()
}

/// One `{axes}: src->tgt` of an `all_to_all`'s `params`: the axes text as written, and the
/// dimensions as digit strings without leading zeros.
struct Param<'t> {
    axes: &'t str,
    src: &'t str,
    tgt: &'t str,
}

fn trim_zeros(d: &str) -> &str {
    let t = d.trim_start_matches('0');
    if t.is_empty() {
        &d[d.len() - 1..]
    } else {
        t
    }
}

/// Every `{axes}: src->tgt` in `text`, left to right.
fn params(text: &str) -> Vec<Param<'_>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(open) = text[i..].find('{').map(|k| k + i) {
        let Some(close) = text[open + 1..].find('}').map(|k| k + open + 1) else { break };
        let mut j = close + 1;
        let matched = (|| {
            if !b[j..].starts_with(b": ") {
                return None;
            }
            j += 2;
            let s = digits(&b[j..]);
            if s == 0 || !b[j + s..].starts_with(b"->") {
                return None;
            }
            let t = digits(&b[j + s + 2..]);
            if t == 0 {
                return None;
            }
            let p = Param { axes: &text[open + 1..close], src: &text[j..j + s], tgt: &text[j + s + 2..j + s + 2 + t] };
            j += s + 2 + t;
            Some(p)
        })();
        match matched {
            Some(p) => {
                out.push(Param { axes: p.axes, src: trim_zeros(p.src), tgt: trim_zeros(p.tgt) });
                i = j;
            }
            None => i = open + 1,
        }
    }
    out
}

/// A digit string's numeric order.
fn numeric(d: &str) -> (usize, &str) {
    (d.len(), d)
}

/// Applies the first pattern of `op`'s kind that matches, in the order MLIR's
/// `PatternApplicator` tries them (most matched ops first, then as registered); whether one
/// did.
pub(super) fn apply(rw: &mut Rewriter, p: &mut Program, op: u32, pattern: Pattern) -> Result<bool> {
    let Some(&operand) = p.op_operands(op).first() else { return Ok(false) };
    if p.op_results(op).is_empty() {
        return Ok(false);
    }
    match pattern {
        Pattern::AllGather => {
            if is_empty_lists(attr(p, op, "gathering_axes")) {
                rw.replace_op(p, op, operand)?;
                return Ok(true);
            }
        }
        Pattern::AllSlice => {
            // AllSliceOfAllGatherPattern, AllSliceNoopPattern, ReduceScatterFusion.
            if let Some(d) = rw.defining_op(p, operand).filter(|&d| p.op_name(d) == "sdy.all_gather") {
                let strip = |t: &str| t.replace("list_of_axis_ref_lists", "");
                if strip(attr(p, d, "gathering_axes")) == strip(attr(p, op, "slicing_axes")) {
                    let source = p.op_operands(d)[0];
                    rw.replace_op(p, op, source)?;
                    return Ok(true);
                }
            }
            if is_empty_lists(attr(p, op, "slicing_axes")) {
                rw.replace_op(p, op, operand)?;
                return Ok(true);
            }
            return reduce_scatter_fusion(rw, p, op, operand);
        }
        Pattern::AllReduce => {
            // AllReduceOfReplicatedToUnreducedPattern, AllReduceNoopPattern,
            // AllReduceOfShardedToUnreducedPattern.
            let d = rw.defining_op(p, operand);
            let reduction = attr(p, op, "reduction_axes");
            if let Some(d) = d.filter(|&d| p.op_name(d) == "sdy.replicated_to_unreduced") {
                if axes_text(attr(p, d, "axes")) == axes_text(reduction) {
                    let source = p.op_operands(d)[0];
                    rw.replace_op(p, op, source)?;
                    return Ok(true);
                }
            }
            if reduction.replace(' ', "") == "#sdy<axis_ref_list{}>" {
                rw.replace_op(p, op, operand)?;
                return Ok(true);
            }
            if let Some(d) = d.filter(|&d| p.op_name(d) == "sdy.sharded_to_unreduced") {
                if sharded_to_unreduced_matches(rw, p, d, op)? {
                    let (source, axes) = (p.op_operands(d)[0], p.attr_id(d, "axes"));
                    let Some(axes) = axes else { return Ok(false) };
                    let ty = p.value_types[p.op_results(op).start as usize];
                    let attrs = [(p.intern("gathering_axes"), axes)];
                    let loc = p.ops[op as usize].loc;
                    let gather = p.new_op("sdy.all_gather", &[source], &[ty], &attrs, loc);
                    if let Some(s) = result_sharding(p, op, 0)? {
                        set_result_sharding(p, gather, 0, &s)?;
                    }
                    let value = rw.insert_before(p, op, gather);
                    rw.replace_op(p, op, value)?;
                    return Ok(true);
                }
            }
        }
        Pattern::ReduceScatter => {
            if is_empty_lists(attr(p, op, "reduce_scatter_axes")) {
                rw.replace_op(p, op, operand)?;
                return Ok(true);
            }
        }
        Pattern::CollectivePermute => {
            let uses = std::mem::take(&mut rw.uses);
            let source = rw.values(p).get_sharding(p, &uses, operand);
            rw.uses = uses;
            if let Some(source) = source? {
                if is_equivalent(Some(&source), result_sharding(p, op, 0)?.as_ref()) {
                    rw.replace_op(p, op, operand)?;
                    return Ok(true);
                }
            }
        }
        Pattern::AllToAll => return all_to_all(rw, p, op, operand),
    }
    Ok(false)
}

/// `AllToAllFusion` and the erasure of an unused `all_to_all`.
fn all_to_all(rw: &mut Rewriter, p: &mut Program, op: u32, operand: u32) -> Result<bool> {
    let result = p.op_results(op).start;
    if fuse_all_to_all(rw, p, op, operand)? {
        return Ok(true);
    }
    if !rw.is_used(result) {
        rw.replace_op(p, op, operand)?;
        return Ok(true);
    }
    Ok(false)
}

/// `AllToAllFusionPattern`: `all_to_all(all_to_all(x))`, the inner one used once, over
/// disjoint dimensions.
fn fuse_all_to_all(rw: &mut Rewriter, p: &mut Program, op: u32, operand: u32) -> Result<bool> {
    let Some(inner) = rw.defining_op(p, operand).filter(|&d| p.op_name(d) == "sdy.all_to_all") else {
        return Ok(false);
    };
    if rw.uses.of(p.op_results(inner).start).count() != 1 {
        return Ok(false);
    }
    let fused_params = {
        let mut all = params(attr(p, inner, "params"));
        all.extend(params(attr(p, op, "params")));
        let mut dims: Vec<&str> = all.iter().flat_map(|q| [q.src, q.tgt]).collect();
        let n = dims.len();
        dims.sort_unstable();
        dims.dedup();
        if dims.len() != n {
            return Ok(false);
        }
        all.sort_by(|a, b| numeric(a.src).cmp(&numeric(b.src)));
        let items: Vec<String> = all.iter().map(|q| format!("{{{}}}: {}->{}", q.axes, q.src, q.tgt)).collect();
        format!("#sdy<all_to_all_param_list[{}]>", items.join(", "))
    };
    let source = p.op_operands(inner)[0];
    let ty = p.value_types[p.op_results(op).start as usize];
    let (key, value) = (p.intern("params"), p.intern(&fused_params));
    let mut attrs = p.op_attrs(op).to_vec();
    match attrs.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => attrs.push((key, value)),
    }
    let loc = p.ops[op as usize].loc;
    let fused = p.new_op("sdy.all_to_all", &[source], &[ty], &attrs, loc);
    let value = rw.insert_before(p, op, fused);
    rw.replace_op(p, op, value)?;
    Ok(true)
}

/// Whether `all_reduce` reduces over exactly the axes `s2u` (a `sharded_to_unreduced`) made
/// unreduced, sorted and merged in its mesh.
fn sharded_to_unreduced_matches(rw: &mut Rewriter, p: &Program, s2u: u32, all_reduce: u32) -> Result<bool> {
    let Some(out) = p.attr(s2u, "out_sharding") else { return Ok(false) };
    let sharding = parse_sharding(out).map_err(|e| e.context(p.op_where(s2u)))?;
    let meshes = rw.meshes(p)?;
    let Some(mesh) = mesh_of_sharding(&sharding, meshes) else { return Ok(false) };
    let mut axes = Vec::new();
    for group in braced(attr(p, s2u, "axes")) {
        axes.extend(axis_refs(group.trim())?);
    }
    let merged = sort_and_merge_axes(&axes, mesh)?;
    let text: Vec<String> = merged.iter().map(crate::text::print_axis_ref).collect();
    Ok(text.join(", ").replace(' ', "") == axes_text(attr(p, all_reduce, "reduction_axes")))
}

/// Shardy's `ReduceScatterFusion` on `all_slice` (of `operand`); whether it applied.
fn reduce_scatter_fusion(rw: &mut Rewriter, p: &mut Program, all_slice: u32, operand: u32) -> Result<bool> {
    let Some(all_reduce) = rw.defining_op(p, operand).filter(|&d| p.op_name(d) == "sdy.all_reduce") else {
        return Ok(false);
    };
    let Some(&tensor) = p.op_operands(all_reduce).first() else { return Ok(false) };
    let Some(block) = rw.lists.block_of(all_slice) else { return Ok(false) };
    let slicing = p.attr_id(all_slice, "slicing_axes");
    let reduced = p.op_results(all_reduce).start;
    for user in rw.uses.users(reduced) {
        if p.op_name(user) != "sdy.all_slice" || p.attr_id(user, "slicing_axes") != slicing {
            return Ok(false);
        }
        if rw.lists.block_of(user) == Some(block) && rw.lists.is_before(block, user, all_slice) {
            return Ok(false);
        }
    }
    let Some(out) = result_sharding(p, all_reduce, 0)? else { return Ok(false) };
    let Some(mesh) = mesh_of_sharding(&out, rw.meshes(p)?).cloned() else { return Ok(false) };
    let mut remaining = axis_list(attr(p, all_reduce, "reduction_axes"))?;
    let (mut scatter, mut residual) = (Vec::new(), Vec::new());
    for axes in axis_lists(attr(p, all_slice, "slicing_axes"))? {
        let mut k = 0;
        while let Some(i) = axes.get(k).and_then(|a| remaining.iter().position(|r| r == a)) {
            remaining.remove(i);
            k += 1;
        }
        scatter.push(axes[..k].to_vec());
        residual.push(axes[k..].to_vec());
    }
    if !remaining.is_empty() {
        return Ok(false);
    }
    let Some(slice_out) = result_sharding(p, all_slice, 0)? else { return Ok(false) };
    let uses = std::mem::take(&mut rw.uses);
    let in_sharding = rw.values(p).get_sharding(p, &uses, tensor);
    rw.uses = uses;
    let in_sharding = in_sharding?
        .unwrap_or_else(|| TensorSharding::replicated(MeshRef::Inline(Box::new(mesh.clone())), scatter.len(), false));
    let mut dims = Vec::with_capacity(scatter.len());
    for (d, extra) in in_sharding.dims.iter().zip(&scatter) {
        let mut axes = d.axes.clone();
        for a in extra {
            add_axis_or_merge(&mut axes, a.clone(), &mesh)?;
        }
        dims.push(DimSharding::closed(axes));
    }
    // The reduction of the unreduced axes is the all_slice's; the reduce_scatter reduces as
    // the all_reduce did (its `reduction_op`).
    let reduction = if slice_out.unreduced.is_empty() { Reduction::Sum } else { slice_out.reduction };
    let rs_sharding = TensorSharding {
        mesh: out.mesh.clone(),
        dims,
        replicated: slice_out.replicated.clone(),
        unreduced: slice_out.unreduced.clone(),
        reduction,
    };
    let ty = p.value_types[tensor as usize];
    let mut attrs = vec![(p.intern("reduce_scatter_axes"), p.intern(&print_axis_ref_lists_attr(&scatter)))];
    if let Some(op_kind) = p.attr_id(all_reduce, "reduction_op") {
        attrs.push((p.intern("reduction_op"), op_kind));
    }
    let rs = p.new_op("sdy.reduce_scatter", &[tensor], &[ty], &attrs, p.ops[all_reduce as usize].loc);
    set_result_sharding(p, rs, 0, &rs_sharding)?;
    let mut last = rw.insert_before(p, all_slice, rs);
    if residual.iter().any(|axes| !axes.is_empty()) {
        let attrs = [(p.intern("slicing_axes"), p.intern(&print_axis_ref_lists_attr(&residual)))];
        let rest = p.new_op("sdy.all_slice", &[last], &[ty], &attrs, p.ops[all_slice as usize].loc);
        set_result_sharding(p, rest, 0, &slice_out)?;
        last = rw.insert_before(p, all_slice, rest);
    }
    for user in rw.uses.users(reduced) {
        if p.op_results(user).is_empty() {
            return Err(Error::invariant("reduce-scatter-fusion", format!("{} has no result", p.op_where(user))));
        }
        rw.replace_op(p, user, last)?;
    }
    rw.erase(p, all_reduce)?;
    Ok(true)
}
