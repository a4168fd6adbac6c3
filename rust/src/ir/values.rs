//! Where a value's sharding lives, and reading and writing it (Shardy's `getSharding`,
//! `setSharding` and `getShardableValue` in `shardy/dialect/sdy/ir/utils.cc`): an op result
//! in its op's result slot ([`super::shardings::result_slot`]), a function argument in its
//! argument attributes, a data-flow edge owner in its `sdy.data_flow_edge`, the body argument
//! of a named or manual computation in the op's `in_shardings`.

use std::borrow::Cow;
use std::collections::hash_map::Entry;

use super::clone::Uses;
use super::shardings::{result_slot, REGION_DATA_FLOW_OPS};
use super::{types, Program, Span};
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::sharding::{DimSharding, TensorSharding};
use crate::text::{
    parse_sharding, parse_sharding_per_value, parse_string, print_sharding, print_sharding_per_value, quoted_spans,
};

const DATA_FLOW_EDGE: &str = "sdy.data_flow_edge";
/// Every op implementing Shardy's `ShardableDataFlowOpInterface`.
pub const DATA_FLOW_OPS: &[&str] = &[
    "sdy.named_computation",
    "sdy.manual_computation",
    "stablehlo.while",
    "stablehlo.case",
    "stablehlo.optimization_barrier",
];

/// Each value's place: its defining op, or its block and position; each block's op.
pub struct ValueIndex {
    owner: Vec<u32>,
    /// How many ops `owner` has read.
    ops_seen: usize,
    arg_of: FastMap<u32, (u32, u32)>,
    block_owner: FastMap<u32, u32>,
    funcs: FastMap<u32, usize>,
    /// Sharding attribute texts read so far.
    parsed: ParsedShardings,
}

impl ValueIndex {
    pub fn new(p: &Program) -> ValueIndex {
        let mut arg_of = FastMap::default();
        let mut block_owner = FastMap::default();
        for op in 0..p.ops.len() as u32 {
            let (a, b) = p.ops[op as usize].regions;
            for r in a..b {
                let (s, e) = p.regions[r as usize];
                for blk in s..e {
                    block_owner.insert(blk, op);
                    for (i, v) in p.block_args(blk).enumerate() {
                        arg_of.insert(v, (blk, i as u32));
                    }
                }
            }
        }
        ValueIndex {
            owner: p.value_owners(),
            ops_seen: p.ops.len(),
            arg_of,
            block_owner,
            funcs: p.func_index(),
            parsed: ParsedShardings::default(),
        }
    }

    /// Takes in the values added since (op results only).
    /// Ops are only appended, so only the ops added since the last look are read.
    fn refresh(&mut self, p: &Program) {
        if self.owner.len() < p.value_types.len() {
            self.owner.resize(p.value_types.len(), u32::MAX);
            for op in self.ops_seen..p.ops.len() {
                let (a, b) = p.ops[op].results;
                for v in a..b {
                    self.owner[v as usize] = op as u32;
                }
            }
            self.ops_seen = p.ops.len();
        }
    }

    /// The op defining `v`, if it is a result.
    pub fn defining_op(&mut self, p: &Program, v: u32) -> Option<u32> {
        self.refresh(p);
        let o = self.owner[v as usize];
        (o != u32::MAX).then_some(o)
    }

    /// Shardy's `getOwningOp`: the defining op of a result, the op whose region holds the
    /// block of a block argument.
    pub fn owning_op(&mut self, p: &Program, v: u32) -> Option<u32> {
        self.defining_op(p, v).or_else(|| self.arg_of.get(&v).and_then(|(b, _)| self.block_owner.get(b).copied()))
    }

    /// The block whose argument `v` is.
    pub fn arg_block(&self, v: u32) -> Option<u32> {
        self.arg_of.get(&v).map(|&(b, _)| b)
    }

    fn arg_index(&self, v: u32) -> Option<usize> {
        self.arg_of.get(&v).map(|&(_, i)| i as usize)
    }

    /// The position of result `v` among its op's results.
    fn result_index(&mut self, p: &Program, v: u32) -> Option<(u32, usize)> {
        let op = self.defining_op(p, v)?;
        Some((op, (v - p.ops[op as usize].results.0) as usize))
    }

    /// `getEdgeOwnerFromTarget`: a `while`'s block argument maps to its result; any other
    /// target is its own owner.
    fn edge_owner_from_target(&mut self, p: &Program, op: u32, target: u32) -> u32 {
        if p.op_name(op) == "stablehlo.while" {
            if let Some(i) = self.arg_index(target) {
                return p.op_results(op).start + i as u32;
            }
        }
        target
    }

    /// `DataFlowEdgeOp::lookup(Value)`: the edge of the owner `target` belongs to.
    pub fn lookup_data_flow_edge(&mut self, p: &Program, uses: &Uses, target: u32) -> Option<u32> {
        let op = self.owning_op(p, target)?;
        if !DATA_FLOW_OPS.contains(&p.op_name(op)) {
            return None;
        }
        let owner = self.edge_owner_from_target(p, op, target);
        let users = uses.users(owner);
        match users.as_slice() {
            [edge] if p.op_name(*edge) == DATA_FLOW_EDGE => Some(*edge),
            _ => None,
        }
    }

    /// Shardy's `getShardableValue`: where the sharding of `v` is held (its data-flow edge,
    /// itself, or its edge owner); `None` for the arguments of other region ops.
    pub fn shardable_value(&mut self, p: &Program, uses: &Uses, v: u32) -> Option<u32> {
        if let Some(op) = self.defining_op(p, v) {
            if !DATA_FLOW_OPS.contains(&p.op_name(op)) {
                return Some(v);
            }
        }
        if let Some(edge) = self.lookup_data_flow_edge(p, uses, v) {
            return Some(p.op_results(edge).start);
        }
        if self.defining_op(p, v).is_some() {
            return Some(v);
        }
        let op = self.owning_op(p, v)?;
        let name = p.op_name(op);
        if name == "func.func" {
            return Some(v);
        }
        if DATA_FLOW_OPS.contains(&name) {
            return Some(self.edge_owner_from_target(p, op, v));
        }
        if name == "stablehlo.async_start" {
            return self.arg_index(v).and_then(|i| p.op_operands(op).get(i).copied());
        }
        None
    }

    /// The sharding of `v` (Shardy's `getSharding(Value)`).
    pub fn get_sharding(&mut self, p: &Program, uses: &Uses, v: u32) -> Result<Option<TensorSharding>> {
        Ok(self.sharding_of(p, uses, v)?.map(Cow::into_owned))
    }

    /// [`get_sharding`](Self::get_sharding) without a copy where the sharding is an entry of an
    /// op's sharding attribute (the common case: it is borrowed from the parsed texts).
    pub fn sharding_of(&mut self, p: &Program, uses: &Uses, v: u32) -> Result<Option<Cow<'_, TensorSharding>>> {
        let Some(v) = self.shardable_value(p, uses, v) else { return Ok(None) };
        if let Some((op, index)) = self.result_index(p, v) {
            return Ok(self.slot_entry(p, op, result_slot(p.op_name(op)).0, index)?.map(Cow::Borrowed));
        }
        let Some(op) = self.owning_op(p, v) else { return Ok(None) };
        let index = self.arg_index(v).unwrap_or(0);
        let name = p.op_name(op);
        if REGION_DATA_FLOW_OPS.contains(&name) {
            if name == "sdy.manual_computation" {
                let manual = manual_axes(p.attr(op, "manual_axes").unwrap_or(""));
                let Some(s) = self.slot_entry(p, op, "in_shardings", index)? else { return Ok(None) };
                return Ok(Some(Cow::Owned(erase_manual_axes(s, &manual))));
            }
            return Ok(self.slot_entry(p, op, "in_shardings", index)?.map(Cow::Borrowed));
        }
        if let Some(&fi) = self.funcs.get(&op) {
            return Ok(self.parsed.func_arg(p, fi, index)?.map(Cow::Borrowed));
        }
        Ok(None)
    }

    /// [`func_result_sharding`], each distinct text parsed once.
    pub fn func_result_sharding(&mut self, p: &Program, fi: usize, index: usize) -> Result<Option<&TensorSharding>> {
        self.parsed.func_result(p, fi, index)
    }

    /// [`slot_entry`], each distinct attribute text parsed once.
    fn slot_entry(&mut self, p: &Program, op: u32, slot: &str, index: usize) -> Result<Option<&TensorSharding>> {
        let Some(id) = p.attr_id(op, slot) else { return Ok(None) };
        let single = result_slot(p.op_name(op)).1 && slot != "in_shardings" && slot != "sdy.sharding";
        self.parsed.entry(p, op, id, single, index)
    }

    /// Sets the sharding of `v` (Shardy's `setSharding(Value, sharding)`): an op's other results
    /// without a sharding get a fully open one on the same mesh.
    pub fn set_sharding(&mut self, p: &mut Program, uses: &Uses, v: u32, s: &TensorSharding) -> Result<()> {
        let Some(v) = self.shardable_value(p, uses, v) else { return Ok(()) };
        if let Some((op, index)) = self.result_index(p, v) {
            return set_result_sharding(p, op, index, s);
        }
        let Some(op) = self.owning_op(p, v) else { return Ok(()) };
        let index = self.arg_index(v).unwrap_or(0);
        let name = p.op_name(op).to_string();
        if REGION_DATA_FLOW_OPS.contains(&name.as_str()) {
            return set_block_arg_owner_sharding(p, op, index, s);
        }
        if let Some(&fi) = self.funcs.get(&op) {
            set_func_arg_sharding(p, fi, index, s);
        }
        Ok(())
    }
}

/// Entry `index` of the per-value (or single) sharding attribute `slot` of `op`.
fn slot_entry(p: &Program, op: u32, slot: &str, index: usize) -> Result<Option<TensorSharding>> {
    let Some(text) = p.attr(op, slot) else { return Ok(None) };
    let single = result_slot(p.op_name(op)).1 && slot != "in_shardings" && slot != "sdy.sharding";
    let all = if single { parse_sharding(text).map(|s| vec![s]) } else { parse_sharding_per_value(text) };
    Ok(all.map_err(|e| e.context(p.op_where(op)))?.get(index).cloned())
}

/// The sharding of result `index` of `op`, from its result slot.
pub fn result_sharding(p: &Program, op: u32, index: usize) -> Result<Option<TensorSharding>> {
    slot_entry(p, op, result_slot(p.op_name(op)).0, index)
}

/// Sets the sharding of result `index` of `op`; its other results without one get a fully open
/// sharding on the same mesh (Shardy's `getOpenShardingsWithShardingAtIndex`).
pub fn set_result_sharding(p: &mut Program, op: u32, index: usize, s: &TensorSharding) -> Result<()> {
    let (slot, single) = result_slot(p.op_name(op));
    if single {
        p.set_attr(op, slot, &print_sharding(s));
        return Ok(());
    }
    let results: Vec<u32> = p.op_results(op).collect();
    let mut all = match p.attr(op, slot) {
        Some(text) => parse_sharding_per_value(text).map_err(|e| e.context(p.op_where(op)))?,
        None => results
            .iter()
            .map(|&r| {
                TensorSharding::replicated(s.mesh.clone(), types::rank(p.strings.get(p.value_types[r as usize])), true)
            })
            .collect(),
    };
    if index >= all.len() {
        return Err(Error::program(format!("{}: no result {index} to shard", p.op_where(op))));
    }
    all[index] = s.clone();
    p.set_attr(op, slot, &print_sharding_per_value(&all));
    Ok(())
}

/// Sharding attribute texts parsed once each (interned text, as one sharding or one per
/// value): a program repeats few, and parsing one costs thousands of instructions.
#[derive(Default)]
pub struct ParsedShardings(FastMap<(u32, bool), Vec<TensorSharding>>);

impl ParsedShardings {
    /// Entry `index` of the sharding text `id` that `op` holds (one sharding when `single`,
    /// else one per value); errors name `op`.
    pub fn entry(
        &mut self,
        p: &Program,
        op: u32,
        id: u32,
        single: bool,
        index: usize,
    ) -> Result<Option<&TensorSharding>> {
        let all = match self.0.entry((id, single)) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let text = p.strings.get(id);
                let all = if single { parse_sharding(text).map(|s| vec![s]) } else { parse_sharding_per_value(text) };
                e.insert(all.map_err(|err| err.context(p.op_where(op)))?)
            }
        };
        Ok(all.get(index))
    }

    /// [`func_arg_sharding`], parsed once per text.
    pub fn func_arg(&mut self, p: &Program, fi: usize, index: usize) -> Result<Option<&TensorSharding>> {
        let Some(span) = func_arg_span(p, fi, index) else { return Ok(None) };
        self.func_entry(p, fi, span)
    }

    /// [`func_result_sharding`], parsed once per text.
    pub fn func_result(&mut self, p: &Program, fi: usize, index: usize) -> Result<Option<&TensorSharding>> {
        let Some(&span) = p.funcs[fi].result_attrs.get(index) else { return Ok(None) };
        self.func_entry(p, fi, span)
    }

    fn func_entry(&mut self, p: &Program, fi: usize, span: Span) -> Result<Option<&TensorSharding>> {
        let Some(id) = sharding_text_id(p, span) else { return Ok(None) };
        self.entry(p, p.funcs[fi].op, id, true, 0)
    }
}

/// The interned `sdy.sharding` text among the function argument or result attributes `span`.
fn sharding_text_id(p: &Program, (a, b): Span) -> Option<u32> {
    p.attrs[a as usize..b as usize].iter().find(|(k, _)| p.strings.get(*k) == "sdy.sharding").map(|&(_, v)| v)
}

/// `span`'s `sdy.sharding` parsed; errors name function `p.funcs[fi]`.
fn func_sharding(p: &Program, fi: usize, span: Span) -> Result<Option<TensorSharding>> {
    let Some(id) = sharding_text_id(p, span) else { return Ok(None) };
    parse_sharding(p.strings.get(id)).map(Some).map_err(|e| e.context(p.op_where(p.funcs[fi].op)))
}

fn func_arg_span(p: &Program, fi: usize, index: usize) -> Option<Span> {
    p.funcs[fi].arg_attrs.get(index).copied()
}

/// The `sdy.sharding` of argument `index` of function `p.funcs[fi]`.
pub fn func_arg_sharding(p: &Program, fi: usize, index: usize) -> Result<Option<TensorSharding>> {
    let Some(span) = func_arg_span(p, fi, index) else { return Ok(None) };
    func_sharding(p, fi, span)
}

/// The `sdy.sharding` of result `index` of function `p.funcs[fi]`.
pub fn func_result_sharding(p: &Program, fi: usize, index: usize) -> Result<Option<TensorSharding>> {
    let Some(&span) = p.funcs[fi].result_attrs.get(index) else { return Ok(None) };
    func_sharding(p, fi, span)
}

fn set_func_arg_sharding(p: &mut Program, fi: usize, index: usize, s: &TensorSharding) {
    set_func_sharding(p, fi, index, false, Some(s));
}

/// Sets (`Some`) or removes (`None`) the `sdy.sharding` of argument (`result` false) or
/// result `index` of function `p.funcs[fi]`; a new entry goes after the others.
pub fn set_func_sharding(p: &mut Program, fi: usize, index: usize, result: bool, s: Option<&TensorSharding>) {
    let name = p.intern("sdy.sharding");
    let value = s.map(|s| p.intern(&print_sharding(s)));
    p.set_func_attr_id(fi, result, index, name, value);
}

/// `setBlockArgumentEdgeOwnerSharding` of a named or manual computation.
fn set_block_arg_owner_sharding(p: &mut Program, op: u32, index: usize, s: &TensorSharding) -> Result<()> {
    let entry = p.region_blocks(op, 0).start;
    let manual = p.op_name(op) == "sdy.manual_computation";
    let mut all = match p.attr(op, "in_shardings") {
        Some(text) => parse_sharding_per_value(text).map_err(|e| e.context(p.op_where(op)))?,
        None => {
            if manual {
                return Err(Error::program(format!("{}: manual computation without in_shardings", p.op_where(op))));
            }
            p.block_args(entry)
                .map(|a| {
                    TensorSharding::replicated(
                        s.mesh.clone(),
                        types::rank(p.strings.get(p.value_types[a as usize])),
                        true,
                    )
                })
                .collect()
        }
    };
    if index >= all.len() {
        return Err(Error::program(format!("{}: no operand {index} to shard", p.op_where(op))));
    }
    all[index] = if manual {
        add_free_axes(&all[index], s, &manual_axes(p.attr(op, "manual_axes").unwrap_or("")))
    } else {
        s.clone()
    };
    p.set_attr(op, "in_shardings", &print_sharding_per_value(&all));
    Ok(())
}

/// The names in `#sdy<manual_axes{"x", "y"}>`.
pub fn manual_axes(text: &str) -> Vec<String> {
    quoted_spans(text).filter_map(|(start, end)| parse_string(&text[start..end]).ok()).collect()
}

fn first_free(d: &DimSharding, manual: &[String]) -> usize {
    d.axes.iter().take_while(|a| manual.iter().any(|m| *m == *a.name)).count()
}

/// Shardy's `eraseManualAxes`: the sharding inside a manual computation.
pub fn erase_manual_axes(s: &TensorSharding, manual: &[String]) -> TensorSharding {
    if manual.is_empty() {
        return s.clone();
    }
    let is_manual = |name: &str| manual.iter().any(|m| m == name);
    let mut out = s.clone();
    for d in &mut out.dims {
        let k = first_free(d, manual);
        d.axes.drain(..k);
    }
    out.replicated.retain(|a| !is_manual(&a.name));
    out.unreduced.retain(|a| !is_manual(&a.name));
    out
}

/// Shardy's `addFreeAxesToManualComputationSharding`: the manual axes of `outer` then the
/// axes of `new` per dim (open/closed and priority of `new`); replicated and unreduced axes of
/// `outer`.
pub fn add_free_axes(outer: &TensorSharding, new: &TensorSharding, manual: &[String]) -> TensorSharding {
    let mut out = new.clone();
    out.dims = outer
        .dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut axes = d.axes[..first_free(d, manual)].to_vec();
            match new.dims.get(i) {
                Some(nd) => {
                    axes.extend(nd.axes.iter().cloned());
                    DimSharding { axes, closed: nd.closed, priority: nd.priority }
                }
                None => DimSharding { axes, closed: d.closed, priority: d.priority },
            }
        })
        .collect();
    out.replicated = outer.replicated.clone();
    out.unreduced = outer.unreduced.clone();
    out.reduction = if outer.unreduced.is_empty() { crate::sharding::Reduction::Sum } else { outer.reduction };
    out
}
