//! Shardy's `SourceShardingHandler` on the native program
//! (`shardy/dialect/sdy/transforms/propagation/debugging/source_sharding.cc`): the records of
//! the debugging options `debug-sharding-origins` and `debug-propagation-edge-sharding`
//! ([`crate::propagation::debug::ShardingDebug`], here indexed by native values and ops)
//! prepared before a pass, added to by `sdy-apply-sharding-constraints`
//! ([`Handler::record_constraint`]) or by the solver (mapped with [`native_records`]), and
//! written onto the program as Shardy's `saveOnModule` writes them ([`save`]):
//!
//! * `sdy.sharding_origins`: a dictionary from axis to origin on the op or function argument
//!   or result holding each recorded value's sharding (an array of one dictionary per result on
//!   an op with several results); on a user sharding's own axes the origin reads `self`;
//! * `sdy.sharding_origin_name` on each sharding constraint (`constraint_3`) and manual
//!   computation (`mc_0`);
//! * `sdy.propagation_edges` on each op propagated through and on function results.

use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::ir::clone::Uses;
use crate::ir::values::{func_arg_sharding, func_result_sharding, result_sharding, ValueIndex};
use crate::ir::Program;
use crate::mlir::attr::split_top;
use crate::propagation::debug::{
    origins_dict_text, propagation_edges_text, AxisMap, EdgeNode, EdgeNodeKind, Origin, OriginKind, PropagationEdge,
    ShardingDebug,
};
use crate::sharding::TensorSharding;
use crate::text::{parse_sharding_per_value, parse_string, quote};
use crate::transforms::common::post_order_of;

use super::freeze::{top_funcs, Frozen};

/// The dictionary of the origin of each axis of a value's sharding.
pub const SHARDING_ORIGINS: &str = "sdy.sharding_origins";
/// The name of a sharding constraint or manual computation as an origin.
pub const SHARDING_ORIGIN_NAME: &str = "sdy.sharding_origin_name";
/// The propagation edges of an op or function result.
pub const PROPAGATION_EDGES: &str = "sdy.propagation_edges";

const SHARDING_CONSTRAINT: &str = "sdy.sharding_constraint";
const MANUAL_COMPUTATION: &str = "sdy.manual_computation";
const DATA_FLOW_EDGE: &str = "sdy.data_flow_edge";
const FUNC: &str = "func.func";

/// The largest step of the `sdy.propagation_edges` of the ops of `p` (-1 when none): a pass
/// numbers its steps on from the next one.
pub fn max_step(p: &Program) -> i64 {
    let mut best = -1;
    for op in p.walk(0) {
        let Some(text) = p.attr(op, PROPAGATION_EDGES) else { continue };
        for (i, _) in text.match_indices("step-") {
            let digits: &str = &text[i + 5..];
            let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
            if let Ok(n) = digits[..end].parse::<i64>() {
                best = best.max(n);
            }
        }
    }
    best
}

/// The ops of `p` but the module, an op after the ops nested in it (MLIR's post-order walk).
fn post_order(p: &Program) -> Vec<u32> {
    let top: Vec<u32> = p.walk(0).into_iter().skip(1).collect();
    post_order_of(p, &top)
}

/// The records of `sdy-apply-sharding-constraints` while it runs, with the program's values
/// and uses (the pass's own, kept up to date as it edits).
pub struct Handler<'a> {
    pub values: &'a mut ValueIndex,
    pub uses: &'a Uses,
    pub debug: &'a mut ShardingDebug,
}

impl Handler<'_> {
    /// Records `origin` for every axis of `s` on the shardable value of `v` (Shardy
    /// `saveShardingOrigins`), keeping origins already recorded.
    fn save_origins(&mut self, p: &Program, s: Option<&TensorSharding>, origin: Origin, v: u32) {
        let Some(s) = s else { return };
        let Some(v) = self.values.shardable_value(p, self.uses, v) else { return };
        for d in &s.dims {
            self.debug.save_origins(v, d.axes.iter(), origin);
        }
    }

    /// `prepareHandler`: the first step, and with origins the origin of every axis of each
    /// sharding constraint, manual computation and function argument and result sharding, and
    /// the origin name of each constraint and manual computation (numbered module-wide in
    /// post-order).
    pub fn prepare(&mut self, p: &Program) -> Result<()> {
        self.debug.next_step = max_step(p) + 1;
        if !self.debug.options.origins {
            return Ok(());
        }
        let ops = post_order(p);
        let mut source = 0;
        for &op in ops.iter().filter(|&&o| p.op_name(o) == SHARDING_CONSTRAINT) {
            let origin = Origin { kind: OriginKind::Constraint, index: 0, source_id: source };
            let result = p.op_results(op).start;
            self.save_origins(p, result_sharding(p, op, 0)?.as_ref(), origin, result);
            self.debug.origin_names.push((op, origin.to_string()));
            if let Some(&operand) = p.op_operands(op).first() {
                let s = self.values.get_sharding(p, self.uses, operand)?;
                self.save_origins(p, s.as_ref(), origin, operand);
            }
            source += 1;
        }
        source = 0;
        for &op in ops.iter().filter(|&&o| p.op_name(o) == MANUAL_COMPUTATION) {
            let args: Vec<u32> = match p.region_blocks(op, 0).next() {
                Some(entry) => p.block_args(entry).collect(),
                None => Vec::new(),
            };
            let ins = match p.attr(op, "in_shardings") {
                Some(t) => parse_sharding_per_value(t).map_err(|e| e.context(p.op_where(op)))?,
                None => Vec::new(),
            };
            for (i, s) in ins.iter().enumerate() {
                let Some(&arg) = args.get(i) else { continue };
                let Some(edge) = self.values.lookup_data_flow_edge(p, self.uses, arg) else { continue };
                let origin = Origin { kind: OriginKind::ManualInput, index: i as i64, source_id: source };
                self.save_origins(p, Some(s), origin, p.op_results(edge).start);
                if let Some(&operand) = p.op_operands(op).get(i) {
                    let current = self.values.get_sharding(p, self.uses, operand)?;
                    self.save_origins(p, current.as_ref(), origin, operand);
                }
            }
            for (i, r) in p.op_results(op).enumerate() {
                let Some(edge) = self.values.lookup_data_flow_edge(p, self.uses, r) else { continue };
                let Some(s) = result_sharding(p, op, i)? else { continue };
                let origin = Origin { kind: OriginKind::ManualOutput, index: i as i64, source_id: source };
                self.save_origins(p, Some(&s), origin, p.op_results(edge).start);
            }
            self.debug.origin_names.push((op, format!("mc_{source}")));
            source += 1;
        }
        let funcs = p.func_index();
        for op in top_funcs(p) {
            let (Some(&fi), Some(entry)) = (funcs.get(&op), p.region_blocks(op, 0).next()) else { continue };
            for (k, a) in p.block_args(entry).enumerate() {
                let s = func_arg_sharding(p, fi, k)?;
                self.save_origins(p, s.as_ref(), Origin { kind: OriginKind::Input, index: k as i64, source_id: 0 }, a);
            }
            let Some(&ret) = p.block_ops(entry).last() else { continue };
            for (k, &v) in p.op_operands(ret).iter().enumerate() {
                let s = func_result_sharding(p, fi, k)?;
                self.save_origins(p, s.as_ref(), Origin { kind: OriginKind::Output, index: k as i64, source_id: 0 }, v);
            }
        }
        Ok(())
    }

    /// The action of copying a sharding constraint's sharding (`op`'s result 0) onto its
    /// input (operand 0): one step, in which each of its axes came from result 0.
    pub fn record_constraint(&mut self, p: &Program, op: u32) -> Result<()> {
        let step = self.debug.next_step;
        self.debug.next_step += 1;
        let Some(s) = result_sharding(p, op, 0)? else { return Ok(()) };
        let mut axes: Vec<&crate::axis::AxisRef> = Vec::new();
        for a in s.dims.iter().flat_map(|d| d.axes.iter()) {
            if !axes.contains(&a) {
                axes.push(a);
            }
        }
        let edge = PropagationEdge {
            source: EdgeNode { kind: EdgeNodeKind::Result, index: 0 },
            target: EdgeNode { kind: EdgeNodeKind::Operand, index: 0 },
            step,
        };
        let (Some(&operand), result) = (p.op_operands(op).first(), p.op_results(op).start) else { return Ok(()) };
        for a in axes {
            if self.debug.options.edges {
                self.debug.edges_mut(op).entry(a, Vec::new).push(edge);
            }
            if self.debug.options.origins {
                let v = self.values.shardable_value(p, self.uses, operand);
                let src = self.values.shardable_value(p, self.uses, result);
                let (Some(v), Some(src)) = (v, src) else { continue };
                if let Some(origin) = self.debug.origins_of(src).and_then(|m| m.lookup(a)) {
                    self.debug.origins_mut(v).try_insert(a, origin);
                }
            }
        }
        Ok(())
    }
}

/// The solver's records (`debug`, indexed by the graph of `frozen`) indexed by the native
/// values and ops of the program.
pub fn native_records(debug: &ShardingDebug, frozen: &Frozen) -> ShardingDebug {
    let mut out = ShardingDebug::new(debug.options.clone());
    out.next_step = debug.next_step;
    for (v, axes) in &debug.value_origins {
        let native = frozen.values[*v as usize];
        for (a, o) in axes.iter() {
            out.origins_mut(native).try_insert(a, *o);
        }
    }
    for (op, axes) in &debug.op_edges {
        let native = out.edges_mut(frozen.ops[*op as usize]);
        for (a, edges) in axes.iter() {
            native.entry(a, Vec::new).extend(edges.iter().copied());
        }
    }
    out.func_result_edges =
        debug.func_result_edges.iter().map(|(op, per)| (frozen.ops[*op as usize], per.clone())).collect();
    out.origin_names = debug.origin_names.iter().map(|(op, n)| (frozen.ops[*op as usize], n.clone())).collect();
    out.missing_origins = debug.missing_origins.iter().map(|(v, a)| (frozen.values[*v as usize], a.clone())).collect();
    out
}

/// `saveOnModule`: with origins, the origin name of each constraint and manual computation,
/// the origins of each recorded value on what holds its sharding (and on the function result
/// it is returned as), then `self` for each user sharding's own axes; with edges, the edges
/// of each recorded op (replacing any it had) and of each function result. Then checks the
/// edges as Shardy's verifier does ([`check_edges`]).
pub fn save(p: &mut Program, values: &mut ValueIndex, uses: &Uses, debug: &ShardingDebug) -> Result<()> {
    if debug.options.origins {
        for (op, name) in &debug.origin_names {
            p.set_attr(*op, SHARDING_ORIGIN_NAME, &quote(name));
        }
        let funcs = p.func_index();
        let parents: FastMap<u32, u32> = p.parents(0).into_iter().map(|(o, w)| (o, w.op)).collect();
        for (v, axes) in &debug.value_origins {
            save_value_origins(p, values, uses, &funcs, &parents, *v, axes);
        }
        override_to_self(p, values, uses)?;
    }
    if debug.options.edges {
        for (op, axes) in &debug.op_edges {
            if p.op_name(*op) == FUNC {
                continue;
            }
            if let Some(text) = edges_text(axes) {
                p.set_attr(*op, PROPAGATION_EDGES, &text);
            }
        }
        let funcs = p.func_index();
        let name = p.intern(PROPAGATION_EDGES);
        for (op, per_result) in &debug.func_result_edges {
            let Some(&fi) = funcs.get(op) else { continue };
            for (i, axes) in per_result.iter().enumerate() {
                if i >= p.funcs[fi].result_types.len() {
                    continue;
                }
                if let Some(text) = edges_text(axes) {
                    let text = p.intern(&text);
                    p.set_func_attr_id(fi, true, i, name, Some(text));
                }
            }
        }
        check_edges(p, debug)?;
    }
    Ok(())
}

fn edges_text(axes: &AxisMap<Vec<PropagationEdge>>) -> Option<String> {
    let entries: Vec<_> = axes.iter().map(|(a, e)| (a.clone(), e.clone())).collect();
    propagation_edges_text(&entries)
}

/// Writes the origins `axes` of value `v` onto what holds its sharding: the argument of a
/// function, the attribute of a constraint or data flow edge, else the entry of its result
/// in the op's array; and onto the function result `v` is returned as.
fn save_value_origins(
    p: &mut Program,
    values: &mut ValueIndex,
    uses: &Uses,
    funcs: &FastMap<u32, usize>,
    parents: &FastMap<u32, u32>,
    v: u32,
    axes: &AxisMap<Origin>,
) {
    let Some(op) = values.owning_op(p, v) else { return };
    let entries: Vec<(crate::axis::AxisRef, String)> = axes.iter().map(|(a, o)| (a.clone(), o.to_string())).collect();
    let text = p.intern(&origins_dict_text(&entries));
    let name = p.intern(SHARDING_ORIGINS);
    // The enclosing function (the op itself for a function argument).
    let mut func = op;
    while p.op_name(func) != FUNC {
        match parents.get(&func) {
            Some(&w) => func = w,
            None => break,
        }
    }
    if let Some(&fi) = funcs.get(&func) {
        if let Some(ret) = p.region_blocks(func, 0).next().and_then(|b| p.block_ops(b).last().copied()) {
            if let Some((_, index)) = uses.of(v).find(|&(user, _)| user == ret) {
                p.set_func_attr_id(fi, true, index as usize, name, Some(text));
            }
        }
    }
    if let Some(&fi) = funcs.get(&op) {
        if let Some(index) = p.region_blocks(op, 0).next().and_then(|b| p.block_args(b).position(|a| a == v)) {
            p.set_func_attr_id(fi, false, index, name, Some(text));
        }
    } else if matches!(p.op_name(op), SHARDING_CONSTRAINT | DATA_FLOW_EDGE) {
        p.set_attr_id(op, name, text);
    } else {
        let results = p.op_results(op);
        let Some(index) = results.clone().position(|r| r == v) else { return };
        let mut dicts =
            p.attr(op, SHARDING_ORIGINS).and_then(split_array).unwrap_or_else(|| vec!["{}".to_string(); results.len()]);
        if index >= dicts.len() {
            return;
        }
        dicts[index] = p.strings.get(text).to_string();
        p.set_attr(op, SHARDING_ORIGINS, &format!("[{}]", dicts.join(", ")));
    }
}

/// The top-level entries of an array attribute `[a, b, ...]` (`None` for no array).
fn split_array(text: &str) -> Option<Vec<String>> {
    let body = text.strip_prefix('[')?.strip_suffix(']')?;
    Some(split_top_level(body))
}

/// `body` split at the commas outside brackets and strings, each entry trimmed (none for an
/// empty body).
fn split_top_level(body: &str) -> Vec<String> {
    split_top(body).into_iter().map(|s| s.trim().to_string()).collect()
}

/// `text` (a `sdy.sharding_origins` dictionary) with every origin equal to `name` replaced by
/// `self`.
fn to_self(text: &str, name: &str) -> String {
    let body = text.trim();
    let body = body.strip_prefix('{').and_then(|b| b.strip_suffix('}')).unwrap_or(body);
    let entries: Vec<String> = split_top_level(body)
        .into_iter()
        .map(|item| match item.split_once(" = ") {
            Some((k, v)) if parse_string(v).is_ok_and(|v| v == name) => format!("{k} = \"self\""),
            _ => item,
        })
        .collect();
    format!("{{{}}}", entries.join(", "))
}

/// `overrideOriginsToSelf`: on each user sharding, its own axes' origin becomes `self`
/// (constraints by their origin name, function arguments and results by `input: i` and
/// `output: i`, the data flow edges of a manual computation's body arguments and results by
/// `mc_k_input: i` and `mc_k_output: i`).
fn override_to_self(p: &mut Program, values: &mut ValueIndex, uses: &Uses) -> Result<()> {
    let ops = post_order(p);
    for &op in &ops {
        if p.op_name(op) != SHARDING_CONSTRAINT {
            continue;
        }
        let (Some(origins), Some(name)) = (p.attr(op, SHARDING_ORIGINS), p.attr(op, SHARDING_ORIGIN_NAME)) else {
            continue;
        };
        let text = to_self(origins, &parse_string(name).unwrap_or_default());
        p.set_attr(op, SHARDING_ORIGINS, &text);
    }
    let name = p.intern(SHARDING_ORIGINS);
    for fi in 0..p.funcs.len() {
        for result in [false, true] {
            let spans = if result { p.funcs[fi].result_attrs.clone() } else { p.funcs[fi].arg_attrs.clone() };
            for (i, (a, b)) in spans.into_iter().enumerate() {
                let Some(&(_, t)) = p.attrs[a as usize..b as usize].iter().find(|(k, _)| *k == name) else { continue };
                let own = if result { format!("output: {i}") } else { format!("input: {i}") };
                let text = p.intern(&to_self(p.strings.get(t), &own));
                p.set_func_attr_id(fi, result, i, name, Some(text));
            }
        }
    }
    for &op in &ops {
        if p.op_name(op) != MANUAL_COMPUTATION {
            continue;
        }
        let Some(mc) = p.attr(op, SHARDING_ORIGIN_NAME).map(|t| parse_string(t).unwrap_or_default()) else {
            continue;
        };
        let args: Vec<u32> = match p.region_blocks(op, 0).next() {
            Some(entry) => p.block_args(entry).collect(),
            None => Vec::new(),
        };
        let targets = args
            .iter()
            .enumerate()
            .map(|(i, &a)| (a, format!("{mc}_input: {i}")))
            .chain(p.op_results(op).enumerate().map(|(i, r)| (r, format!("{mc}_output: {i}"))))
            .collect::<Vec<_>>();
        for (v, own) in targets {
            let Some(edge) = values.lookup_data_flow_edge(p, uses, v) else { continue };
            let Some(origins) = p.attr(edge, SHARDING_ORIGINS) else { continue };
            let text = to_self(origins, &own);
            p.set_attr(edge, SHARDING_ORIGINS, &text);
        }
    }
    Ok(())
}

/// What Shardy's verifier checks of the `sdy.propagation_edges` a pass wrote: every operand
/// or result an edge names exists on its op. Shardy's propagation names operand `i` of a
/// (function) data flow edge for its `i`-th source, and the edge of a while loop, or of a
/// function called twice, has two sources but one operand: the verifier then fails the pass,
/// and so does this (a `Program` error with the verifier's message). (Later Shardy versions
/// exempt `sdy.func_data_flow_edge`; jaxlib 0.10.2's does not.)
pub fn check_edges(p: &Program, debug: &ShardingDebug) -> Result<()> {
    for (op, axes) in &debug.op_edges {
        if p.op_name(*op) == FUNC {
            continue;
        }
        for (_, edges) in axes.iter() {
            for e in edges {
                for node in [e.source, e.target] {
                    let (kind, count, article) = match node.kind {
                        EdgeNodeKind::Operand => ("operand", p.op_operands(*op).len(), "an"),
                        EdgeNodeKind::Result => ("result", p.op_results(*op).len(), "a"),
                    };
                    if node.index < 0 || node.index as usize >= count {
                        return Err(Error::program(format!(
                            "{}: '{}' op expected a value ref to have {article} {kind} index in range [0, {count}), \
                             got: {} (sdy.propagation_edges written by propagation; Shardy's verifier rejects them \
                             the same way)",
                            p.op_where(*op),
                            p.op_name(*op),
                            node.index
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_self_replaces_only_the_named_origin() {
        assert_eq!(
            to_self(r#"{a = "input: 0", "c:(1)2" = "constraint_1"}"#, "constraint_1"),
            r#"{a = "input: 0", "c:(1)2" = "self"}"#
        );
        assert_eq!(to_self("{}", "input: 0"), "{}");
    }

    #[test]
    fn split_array_keeps_nested_commas() {
        assert_eq!(
            split_array(r#"[{a = "x, y"}, {}, {b = "input: 1", c = "output: 0"}]"#).unwrap(),
            vec![r#"{a = "x, y"}"#.to_string(), "{}".to_string(), r#"{b = "input: 1", c = "output: 0"}"#.to_string()]
        );
    }
}
