//! The native program as the solver reads it: the flat graph ([`crate::graph::Graph`]) with
//! each op's sharding rule, and the solver's other inputs (meshes, stored shardings, function
//! result shardings, the facts op attributes hold). The numbering is
//! `python/shardwise/propagation/freeze.py`'s: ops in pre-order over the module's top-level
//! ops (the module itself is no op of the graph); an op's results when the op is met, then,
//! block by block, the arguments of its regions' blocks before the ops of that block.

use std::sync::Arc;

use super::super::common::meshes;
use super::super::{PassContext, WarningKind};
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::graph::{Graph, GraphInput, NONE};
use crate::ir::shardings::{result_slot, REGION_DATA_FLOW_OPS};
use crate::ir::types::tensor_shape;
use crate::ir::values::{manual_axes, ParsedShardings};
use crate::ir::Program;
use crate::propagation::{ProgramFacts, PropagationDirection, SolverInput};
use crate::rule::text::parse_rule;
use crate::rule::OpShardingRule;
use crate::rules::{self, BlockDesc, Builtin, OpDesc, ValueDesc};
use crate::sharding::TensorSharding;
use crate::text::parse_sharding_per_value;

/// A frozen native program: the graph and, for each graph index, the native op or value.
pub struct Frozen {
    /// Shared with the candidate batches made over it.
    pub graph: Arc<Graph>,
    /// Graph op -> native op.
    pub ops: Vec<u32>,
    /// Graph value -> native value.
    pub values: Vec<u32>,
    /// Native value -> graph value (`NONE` for a value no op of the graph holds).
    pub value_index: Vec<u32>,
    /// Native op -> graph op (`NONE` for the module and ops outside it).
    pub op_index: Vec<u32>,
}

impl Frozen {
    pub fn value(&self, native: u32) -> Option<u32> {
        self.value_index.get(native as usize).copied().filter(|&i| i != NONE)
    }

    pub fn op(&self, native: u32) -> Option<u32> {
        self.op_index.get(native as usize).copied().filter(|&i| i != NONE)
    }
}

enum Event {
    Op(u32, u32),
    Block(u32, u32),
}

/// Shardy's `allValidShapes`: every op result is a statically shaped ranked tensor or no
/// tensor at all, and no tuple. The error is Python's (`run_propagation_pass`).
pub fn check_types(p: &Program) -> Result<()> {
    // A program has few distinct types: each is judged once.
    let mut judged: FastMap<u32, bool> = FastMap::default();
    for op in p.walk(0) {
        for (k, r) in p.op_results(op).enumerate() {
            let id = p.value_types[r as usize];
            let t = p.strings.get(id);
            let bad = *judged.entry(id).or_insert_with(|| match tensor_shape(t) {
                Some(shape) => shape.contains(&-1),
                None => t.starts_with("tuple<") || t.starts_with("tensor<"),
            });
            if bad {
                let what = if t.starts_with("tuple<") {
                    "doesn't support tuples"
                } else {
                    "only supports ranked tensors with a static shape"
                };
                return Err(Error::program(format!(
                    "{}: result {k} has type {t}; Shardy propagation {what}",
                    p.op_where(op)
                )));
            }
        }
    }
    Ok(())
}

/// Freezes `p`: its graph with each op's rule (`conservative`: Shardy's conservative
/// variants). Ops without a rule in the registry warn (`UnknownOpWarning`), in Python's
/// order (by first op of each signature). Errors on an operand used before it is defined and
/// on what the rules raise.
pub fn freeze(p: &Program, conservative: bool, cx: &mut PassContext) -> Result<Frozen> {
    let mut g = GraphInput::default();
    let mut ops = Vec::new();
    let mut values = Vec::new();
    let mut value_index = vec![NONE; p.value_types.len()];
    let mut op_index = vec![NONE; p.ops.len()];
    let mut name_ids: FastMap<u32, u32> = FastMap::default();
    // Each distinct type's shape, read once.
    let mut shapes: FastMap<u32, Vec<i64>> = FastMap::default();
    let mut add_value = |g: &mut GraphInput, values: &mut Vec<u32>, value_index: &mut Vec<u32>, v: u32, owner: u32| {
        let index = g.ranks.len() as u32;
        value_index[v as usize] = index;
        values.push(v);
        let ty = p.value_types[v as usize];
        let shape = shapes.entry(ty).or_insert_with(|| tensor_shape(p.strings.get(ty)).unwrap_or_default());
        g.ranks.push(shape.len() as u32);
        g.dims.extend_from_slice(shape);
        g.value_block_owner.push(owner);
    };
    let mut stack: Vec<Event> = Vec::new();
    let (a, b) = p.ops[0].regions;
    for r in (a..b).rev() {
        let (s, e) = p.regions[r as usize];
        for blk in (s..e).rev() {
            stack.push(Event::Block(blk, NONE));
        }
    }
    while let Some(event) = stack.pop() {
        match event {
            Event::Block(blk, owner) => {
                for v in p.block_args(blk) {
                    add_value(&mut g, &mut values, &mut value_index, v, owner);
                }
                for &o in p.block_ops(blk).iter().rev() {
                    stack.push(Event::Op(o, owner));
                }
            }
            Event::Op(op, parent) => {
                let i = ops.len() as u32;
                if op_index[op as usize] != NONE {
                    return Err(Error::program(format!("{}: appears twice in the program", p.op_where(op))));
                }
                op_index[op as usize] = i;
                ops.push(op);
                let next = name_ids.len() as u32;
                let name = *name_ids.entry(p.ops[op as usize].name).or_insert(next);
                if name == next {
                    g.names.push(p.op_name(op).to_string());
                }
                g.op_name.push(name);
                g.op_parent.push(parent);
                for (k, &v) in p.op_operands(op).iter().enumerate() {
                    match value_index.get(v as usize).copied().filter(|&x| x != NONE) {
                        Some(x) => g.operands.push(x),
                        None => {
                            return Err(Error::program(format!(
                                "{}: uses operand {k} before it is defined",
                                p.op_where(op)
                            )))
                        }
                    }
                }
                g.operand_counts.push(p.op_operands(op).len() as u32);
                let results = p.op_results(op);
                g.result_counts.push(results.len() as u32);
                for r in results {
                    g.results.push(g.ranks.len() as u32);
                    add_value(&mut g, &mut values, &mut value_index, r, NONE);
                }
                let (a, b) = p.ops[op as usize].regions;
                for r in (a..b).rev() {
                    let (s, e) = p.regions[r as usize];
                    for blk in (s..e).rev() {
                        stack.push(Event::Block(blk, i));
                    }
                }
            }
        }
    }
    let (rules, op_rule) = op_rules(p, &ops, conservative, cx)?;
    g.rules = rules;
    g.op_rule = op_rule;
    Ok(Frozen { graph: Arc::new(Graph::new(g)?), ops, values, value_index, op_index })
}

/// An op's signature: its name, attributes, operand and result types (all interned).
type Signature = (u32, Vec<(u32, u32)>, Vec<u32>, Vec<u32>);

/// What the registry gave one signature.
#[derive(Clone)]
enum Found {
    Rule(u32),
    None,
    Unknown(String),
}

/// Each op's rule, as `rule_for` gives it: the op's own `sdy.sharding_rule` first, then the
/// rule a user registered ([`USER_RULE`]), then the builtin registry. Ops whose rule reads only the op are looked up once per signature (name,
/// attributes, operand and result types); identical rules are stored once.
pub(crate) fn op_rules(
    p: &Program,
    ops: &[u32],
    conservative: bool,
    cx: &mut PassContext,
) -> Result<(Vec<OpShardingRule>, Vec<u32>)> {
    let mut rules: Vec<OpShardingRule> = Vec::new();
    let mut by_text: FastMap<String, u32> = FastMap::default();
    let mut memo: FastMap<Signature, (usize, Found)> = FastMap::default();
    let mut unknown: Vec<(usize, String)> = Vec::new();
    let mut op_rule = Vec::with_capacity(ops.len());
    let mut context: Option<Context> = None;
    let mut store = |rule: OpShardingRule| -> u32 {
        let text = crate::rule::print_rule(&rule);
        let next = rules.len() as u32;
        *by_text.entry(text).or_insert_with(|| {
            rules.push(rule);
            next
        })
    };
    for (i, &op) in ops.iter().enumerate() {
        if let Some(text) = p.attr(op, "sdy.sharding_rule") {
            if text.trim_start().starts_with("#sdy.op_sharding_rule") {
                let rule = parse_rule(text).map_err(|e| e.context(p.op_where(op)))?;
                op_rule.push(store(rule));
                continue;
            }
        }
        match user_rule(p, op)? {
            UserRule::Rule(rule) => {
                op_rule.push(store(rule));
                continue;
            }
            UserRule::NoRule => {
                op_rule.push(NONE);
                continue;
            }
            UserRule::NotGiven => {}
        }
        let name = p.op_name(op);
        let is_context = rules::CONTEXT_OPS.contains(&name);
        let key = (!is_context).then(|| {
            let types = |vs: &mut dyn Iterator<Item = u32>| vs.map(|v| p.value_types[v as usize]).collect::<Vec<_>>();
            (
                p.ops[op as usize].name,
                p.op_attrs(op).to_vec(),
                types(&mut p.op_operands(op).iter().copied()),
                types(&mut p.op_results(op)),
            )
        });
        let (class, found) = match key.as_ref().and_then(|k| memo.get(k)) {
            Some(known) => known.clone(),
            None => {
                let (builtin, desc) = registry_rule(p, op, conservative, &mut context)?;
                let found = match builtin {
                    Builtin::Rule(rule) => Found::Rule(store(rule)),
                    Builtin::NoRule => Found::None,
                    Builtin::Unknown => Found::Unknown(unknown_message(&desc)?),
                };
                if let Some(k) = key {
                    memo.insert(k, (i, found.clone()));
                }
                (i, found)
            }
        };
        match found {
            Found::Rule(k) => op_rule.push(k),
            Found::None => op_rule.push(NONE),
            Found::Unknown(message) => {
                unknown.push((class, message));
                op_rule.push(NONE);
            }
        }
    }
    unknown.sort_by_key(|(class, _)| *class);
    cx.warnings.extend(unknown.into_iter().map(|(_, m)| (WarningKind::UnknownOp, m)));
    Ok((rules, op_rule))
}

/// The attribute holding the rule a user registered for an op (`shardwise.rules.
/// register_rule` / `register_op_rule`), set by the Python side before native passes that
/// read rules run (`shardwise.passes.native`) and removed after them
/// (`shardwise-drop-user-rules`): an op sharding rule, or `"none"` where the user's rule gives
/// none. It comes after the op's own `sdy.sharding_rule` and before the builtin registry.
pub const USER_RULE: &str = "shardwise.user_rule";

/// What [`USER_RULE`] says of an op.
pub enum UserRule {
    Rule(OpShardingRule),
    NoRule,
    NotGiven,
}

/// The user's rule of `op` ([`USER_RULE`]). Errors for a rule text that does not parse.
pub fn user_rule(p: &Program, op: u32) -> Result<UserRule> {
    match p.attr(op, USER_RULE) {
        None => Ok(UserRule::NotGiven),
        Some(text) if text.trim_start().starts_with("#sdy.op_sharding_rule") => {
            Ok(UserRule::Rule(parse_rule(text).map_err(|e| e.context(p.op_where(op)))?))
        }
        Some(_) => Ok(UserRule::NoRule),
    }
}

/// The rule the builtin registry gives op `op` (its `sdy.sharding_rule` attribute not read),
/// with the description it was computed from. `context` holds what the rules of
/// [`rules::CONTEXT_OPS`] read, built at the first such op.
pub fn registry_rule(
    p: &Program,
    op: u32,
    conservative: bool,
    context: &mut Option<Context>,
) -> Result<(Builtin, OpDesc)> {
    let desc = if rules::CONTEXT_OPS.contains(&p.op_name(op)) {
        context.get_or_insert_with(|| Context::new(p)).desc(p, op)
    } else {
        OpDesc::of(p, op)
    };
    let builtin = rules::builtin_rule(&desc, conservative).map_err(|e| e.context(p.op_where(op)))?;
    Ok((builtin, desc))
}

/// `rule_for`'s warning for an op the registry does not know.
fn unknown_message(op: &OpDesc) -> Result<String> {
    if op.name == rules::CUSTOM_CALL {
        let target = rules::attrs::string(op, "call_target_name", None)?;
        return Ok(format!(
            "custom call @{target} has no sharding rule in shardwise's registry (nor in Shardy's); it gets none \
             (register one with shardwise.rules.register_rule)"
        ));
    }
    Ok(format!(
        "op {} has no sharding rule in shardwise's registry (nor in Shardy's); it gets none (register one with \
         shardwise.rules.register_op_rule)",
        python_repr(&op.name)
    ))
}

/// Python's `repr` of a string without control characters.
fn python_repr(s: &str) -> String {
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

/// What the rules of [`rules::CONTEXT_OPS`] read besides the op: its operands' producers (one
/// deep), its results' users (by name) and its regions.
pub struct Context {
    owners: Vec<u32>,
    users: FastMap<u32, Vec<String>>,
}

impl Context {
    fn new(p: &Program) -> Context {
        let mut users: FastMap<u32, Vec<String>> = FastMap::default();
        for op in p.walk(0) {
            for &v in p.op_operands(op) {
                let names = users.entry(v).or_default();
                let name = p.op_name(op);
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
        }
        for names in users.values_mut() {
            names.sort();
        }
        Context { owners: p.value_owners(), users }
    }

    /// A value seen from a user: with its producer's plain description.
    fn operand(&self, p: &Program, v: u32) -> ValueDesc {
        let mut d = self.plain(p, v);
        let owner = self.owners.get(v as usize).copied().unwrap_or(u32::MAX);
        if owner != u32::MAX {
            d.defining_op = Some(Box::new(OpDesc::of(p, owner)));
        }
        d
    }

    fn plain(&self, p: &Program, v: u32) -> ValueDesc {
        let ty = p.strings.get(p.value_types[v as usize]);
        let users = self.users.get(&v).cloned().unwrap_or_default();
        match tensor_shape(ty) {
            Some(shape) => ValueDesc {
                shape,
                element_type: crate::ir::types::element_type(ty).unwrap_or_default().to_string(),
                is_tensor: true,
                value_id: Some(i64::from(v)),
                users,
                ..Default::default()
            },
            None => {
                ValueDesc { element_type: ty.to_string(), value_id: Some(i64::from(v)), users, ..Default::default() }
            }
        }
    }

    fn desc(&self, p: &Program, op: u32) -> OpDesc {
        let mut d = OpDesc::of(p, op);
        d.operands = p.op_operands(op).iter().map(|&v| self.operand(p, v)).collect();
        d.results = p.op_results(op).map(|v| self.plain(p, v)).collect();
        let (a, b) = p.ops[op as usize].regions;
        d.regions = (a..b)
            .map(|r| {
                let (s, e) = p.regions[r as usize];
                (s..e)
                    .map(|blk| BlockDesc {
                        arguments: p.block_args(blk).map(|v| self.plain(p, v)).collect(),
                        operations: p
                            .block_ops(blk)
                            .iter()
                            .map(|&o| {
                                let mut inner = OpDesc::of(p, o);
                                inner.operands = p.op_operands(o).iter().map(|&v| self.operand(p, v)).collect();
                                inner
                            })
                            .collect(),
                    })
                    .collect()
            })
            .collect();
        d
    }
}

/// The symbol names `@name` / `@"name"` in attribute text.
fn symbols(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'@' {
            i += 1;
            continue;
        }
        i += 1;
        if i < b.len() && b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            if j < b.len() {
                if let Ok(s) = crate::text::parse_string(&text[i..=j]) {
                    out.push(s);
                }
            }
            i = j + 1;
        } else if i < b.len() && (b[i].is_ascii_alphabetic() || b[i] == b'_') {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'$' | b'.')) {
                i += 1;
            }
            out.push(text[start..i].to_string());
        }
    }
    out
}

/// `_int_attr`: the integer at the start of attribute `name`.
fn int_attr(p: &Program, op: u32, name: &str) -> Result<i64> {
    let text = p.attr(op, name);
    let t = text.unwrap_or("").trim_start();
    let digits: usize = t.char_indices().take_while(|&(k, c)| c.is_ascii_digit() || (k == 0 && c == '-')).count();
    t[..digits].parse().map_err(|_| {
        let got = match text {
            Some(t) => python_repr(t),
            None => "None".to_string(),
        };
        Error::program(format!("{}: expected an integer attribute {name}, got {got}", p.op_where(op)))
    })
}

fn direction(p: &Program, op: u32) -> Result<PropagationDirection> {
    let text = p.attr(op, "allowed_direction").unwrap_or("");
    let words: Vec<&str> = text.split(|c: char| !(c.is_alphanumeric() || c == '_')).collect();
    for (name, d) in [
        ("NONE", PropagationDirection::None),
        ("FORWARD", PropagationDirection::Forward),
        ("BACKWARD", PropagationDirection::Backward),
        ("BOTH", PropagationDirection::Both),
    ] {
        if words.contains(&name) {
            return Ok(d);
        }
    }
    Ok(match int_attr(p, op, "allowed_direction")? {
        1 => PropagationDirection::Forward,
        2 => PropagationDirection::Backward,
        3 => PropagationDirection::Both,
        _ => PropagationDirection::None,
    })
}

/// The top-level `func.func` ops, in order.
pub fn top_funcs(p: &Program) -> Vec<u32> {
    p.block_ops(p.module_block()).iter().copied().filter(|&o| p.op_name(o) == "func.func").collect()
}

/// Shardy's `getMainFuncOrDie` as Python's `_main_func` words it: the op of the module's
/// only function, or of @main among several (`None` when there is no function).
pub fn main_func(p: &Program, funcs: &[u32]) -> Result<Option<u32>> {
    match funcs {
        [] => Ok(None),
        [f] => Ok(Some(*f)),
        _ => funcs.iter().copied().find(|&f| p.symbol_name(f).as_deref() == Some("main")).map(Some).ok_or_else(|| {
            Error::program(format!(
                "the module has {} functions and none is @main; Shardy propagates the results of @main",
                funcs.len()
            ))
        }),
    }
}

/// The solver's inputs for `p` frozen as `f`; `forward` lists the native values whose uses
/// the solver visits in program order (the results of inserted group constraints).
pub fn solver_input(p: &Program, f: &Frozen, forward: &[u32]) -> Result<SolverInput> {
    let funcs = top_funcs(p);
    let func_by_name: FastMap<String, u32> = funcs.iter().filter_map(|&o| Some((p.symbol_name(o)?, o))).rev().collect();
    let g = |op: u32| f.op(op).ok_or_else(|| Error::program(format!("{}: not in the program", p.op_where(op))));
    let mut facts = ProgramFacts { main_func: main_func(p, &funcs)?.map(g).transpose()?, ..Default::default() };
    let mut symbol_users = Vec::new();
    let mut value_shardings: Vec<Option<TensorSharding>> = vec![None; f.values.len()];
    let func_index = p.func_index();
    let mut parsed = ParsedShardings::default();
    for (i, &op) in f.ops.iter().enumerate() {
        let i = i as u32;
        let name = p.op_name(op);
        match name {
            "func.call" => {
                let callee = symbols(p.attr(op, "callee").unwrap_or(""));
                if let Some(&target) = callee.first().and_then(|c| func_by_name.get(c)) {
                    facts.callees.push((i, g(target)?));
                }
            }
            "sdy.manual_computation" => {
                facts.manual_axes.push((i, manual_axes(p.attr(op, "manual_axes").unwrap_or(""))))
            }
            "sdy.sharding_group" => facts.sharding_groups.push((i, int_attr(p, op, "group_id")?)),
            "sdy.propagation_barrier" => facts.barrier_directions.push((i, direction(p, op)?)),
            "stablehlo.custom_call" => {
                if p.attr(op, "has_side_effect").map(str::trim) == Some("true") {
                    facts.side_effecting_ops.push(i);
                }
                if matches!(p.attr(op, "call_target_name").map(str::trim), Some("\"MoveToDevice\"" | "\"MoveToHost\""))
                {
                    facts.offload_ops.push(i);
                }
            }
            _ => {}
        }
        if name != "func.func" && name != "func.call" {
            for &(_, v) in p.op_attrs(op) {
                let text = p.strings.get(v);
                if text.contains('@') {
                    for s in symbols(text) {
                        if let Some(&target) = func_by_name.get(&s) {
                            symbol_users.push(g(target)?);
                        }
                    }
                }
            }
        }
        // Stored shardings: the results' slot, and the block arguments of functions and of
        // named and manual computations.
        let (slot, single) = result_slot(name);
        if let Some(id) = p.attr_id(op, slot) {
            let single = single && slot != "sdy.sharding";
            for (k, r) in p.op_results(op).enumerate() {
                let Some(s) = parsed.entry(p, op, id, single, k)? else { break };
                value_shardings[f.value_index[r as usize] as usize] = Some(s.clone());
            }
        }
        if let Some(&fi) = func_index.get(&op) {
            let entry = p.region_blocks(op, 0);
            if !entry.is_empty() {
                for (k, v) in p.block_args(entry.start).enumerate() {
                    value_shardings[f.value_index[v as usize] as usize] = parsed.func_arg(p, fi, k)?.cloned();
                }
            }
        } else if REGION_DATA_FLOW_OPS.contains(&name) {
            let entry = p.region_blocks(op, 0);
            if let (false, Some(text)) = (entry.is_empty(), p.attr(op, "in_shardings")) {
                let all = parse_sharding_per_value(text).map_err(|e| e.context(p.op_where(op)))?;
                for (v, s) in p.block_args(entry.start).zip(all) {
                    value_shardings[f.value_index[v as usize] as usize] = Some(s);
                }
            }
        }
    }
    symbol_users.sort_unstable();
    symbol_users.dedup();
    facts.symbol_users = symbol_users;
    let mut non_tensor: FastMap<u32, bool> = FastMap::default();
    facts.non_tensor_values = (0..f.values.len() as u32)
        .filter(|&v| {
            let ty = p.value_types[f.values[v as usize] as usize];
            *non_tensor.entry(ty).or_insert_with(|| tensor_shape(p.strings.get(ty)).is_none())
        })
        .collect();
    facts.forward_use_order_values = forward.iter().filter_map(|&v| f.value(v)).collect();
    let mut func_results = Vec::new();
    for &op in &funcs {
        let fi = func_index[&op];
        let n = p.funcs[fi].result_types.len();
        let rs = (0..n).map(|k| Ok(parsed.func_result(p, fi, k)?.cloned())).collect::<Result<Vec<_>>>()?;
        func_results.push((g(op)?, rs));
    }
    Ok(SolverInput { meshes: meshes(p)?.into_iter().collect(), value_shardings, func_results, facts, debug: None })
}
