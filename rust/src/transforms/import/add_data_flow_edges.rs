//! `sdy-add-data-flow-edges` (Shardy `transforms/import/add_data_flow_edges.cc`, with
//! `addDataFlowEdges` of `transforms/propagation/utils.cc`): an `sdy.data_flow_edge` for every
//! data-flow edge owner with a static shape (the body arguments and results of named and manual
//! computations, the results of `while`, `case` and `optimization_barrier`), right after it and
//! holding its sharding; every other use of the owner uses the edge instead.

use crate::error::Result;
use crate::fast_hash::FastMap;
use crate::ir::clone::Uses;
use crate::ir::shardings::result_slot;
use crate::ir::values::erase_manual_axes;
use crate::ir::{types, Program};
use crate::sharding::TensorSharding;
use crate::text::{parse_sharding, parse_sharding_per_value, print_sharding};
use crate::transforms::common::{post_order_of, where_};
use crate::transforms::import::manual_axes_cleanup::manual_axes;
use crate::transforms::PassContext;

const DATA_FLOW_EDGE: &str = "sdy.data_flow_edge";
const REGION_DATA_FLOW_OPS: &[&str] = &["sdy.named_computation", "sdy.manual_computation"];
const DATA_FLOW_OPS: &[&str] = &[
    "sdy.named_computation",
    "sdy.manual_computation",
    "stablehlo.while",
    "stablehlo.case",
    "stablehlo.optimization_barrier",
];

/// Entry `index` of per-value sharding attribute `slot` of `op`, if it has one.
fn slot_sharding(p: &Program, op: u32, slot: &str, index: usize) -> Result<Option<TensorSharding>> {
    let Some(text) = p.attr(op, slot) else { return Ok(None) };
    let all = parse_sharding_per_value(text).map_err(|e| e.context(where_(p, op)))?;
    Ok(all.get(index).cloned())
}

/// Where the edges go, applied once per block at the end: after an op, or at a block's start.
#[derive(Default)]
struct Inserts {
    after: FastMap<u32, Vec<u32>>,
    at_start: FastMap<u32, Vec<u32>>,
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let mut order = p.walk(0);
    order.retain(|&op| DATA_FLOW_OPS.contains(&p.op_name(op)));
    if order.is_empty() {
        return Ok(());
    }
    let mut uses = Uses::new(p, 0);
    add_edges(p, &mut uses, &post_order_of(p, &order))
}

/// The edges of the data-flow ops `ops` (taken in that order): their body arguments (named
/// and manual computations) and their results.
pub fn add_edges(p: &mut Program, uses: &mut Uses, ops: &[u32]) -> Result<()> {
    let parent = p.enclosing_blocks(0);
    let mut inserts = Inserts::default();
    for &op in ops {
        let name = p.op_name(op).to_string();
        if REGION_DATA_FLOW_OPS.contains(&name.as_str()) && !p.region_blocks(op, 0).is_empty() {
            let entry = p.region_blocks(op, 0).start;
            let manual = manual_axes(p.attr(op, "manual_axes").unwrap_or(""));
            let args: Vec<u32> = p.block_args(entry).collect();
            for (index, &arg) in args.iter().enumerate().rev() {
                let sharding = match edge_sharding(p, uses, arg)? {
                    Some(s) => Some(s),
                    None => slot_sharding(p, op, "in_shardings", index)?.map(|s| {
                        if name == "sdy.manual_computation" {
                            erase_manual_axes(&s, &manual)
                        } else {
                            s
                        }
                    }),
                };
                if let Some(edge) = add_edge(p, uses, arg, sharding, op) {
                    inserts.at_start.entry(entry).or_default().insert(0, edge);
                }
            }
        }
        let (slot, single) = result_slot(&name);
        let results: Vec<u32> = p.op_results(op).collect();
        for (index, &r) in results.iter().enumerate().rev() {
            let sharding = match edge_sharding(p, uses, r)? {
                Some(s) => Some(s),
                None if single => p.attr(op, slot).map(parse_sharding).transpose()?,
                None => slot_sharding(p, op, slot, index)?,
            };
            if let Some(edge) = add_edge(p, uses, r, sharding, op) {
                inserts.after.entry(op).or_default().insert(0, edge);
            }
        }
    }
    let mut blocks: Vec<u32> = inserts.at_start.keys().copied().collect();
    blocks.extend(inserts.after.keys().filter_map(|o| parent.get(o).copied()));
    blocks.sort_unstable();
    blocks.dedup();
    for b in blocks {
        let mut ops = inserts.at_start.get(&b).cloned().unwrap_or_default();
        for &o in p.block_ops(b) {
            ops.push(o);
            if let Some(edges) = inserts.after.get(&o) {
                ops.extend_from_slice(edges);
            }
        }
        p.set_block_ops(b, &ops);
    }
    Ok(())
}

/// The sharding of the data-flow edge already on `owner` (its single user), if there is one.
fn edge_sharding(p: &Program, uses: &Uses, owner: u32) -> Result<Option<TensorSharding>> {
    let users = uses.users(owner);
    match users.as_slice() {
        [edge] if p.op_name(*edge) == DATA_FLOW_EDGE => {
            p.attr(*edge, "sharding").map(parse_sharding).transpose().map_err(|e| e.context(where_(p, *edge)))
        }
        _ => Ok(None),
    }
}

/// A new `sdy.data_flow_edge` of `owner` holding `sharding`, which every use of `owner` now
/// uses; `None` for an owner that is not a statically shaped tensor.
fn add_edge(p: &mut Program, uses: &mut Uses, owner: u32, sharding: Option<TensorSharding>, op: u32) -> Option<u32> {
    let ty = p.value_types[owner as usize];
    let shape = types::tensor_shape(p.strings.get(ty))?;
    if shape.iter().any(|&d| d < 0) {
        return None;
    }
    let attrs: Vec<(u32, u32)> = match &sharding {
        Some(s) => vec![(p.intern("sharding"), p.intern(&print_sharding(s)))],
        None => Vec::new(),
    };
    let loc = p.ops[op as usize].loc;
    let edge = p.new_op(DATA_FLOW_EDGE, &[owner], &[ty], &attrs, loc);
    let result = p.op_results(edge).start;
    let old: Vec<(u32, u32)> = uses.of(owner).collect();
    for (user, i) in old {
        uses.set_operand(p, user, i as usize, result);
    }
    uses.add(p, edge);
    Some(edge)
}
