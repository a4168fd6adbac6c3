//! `sdy-sink-data-flow-edges` (Shardy's `sink_data_flow_edges.cc`): the shardings of the
//! `sdy.data_flow_edge` ops of each function move back onto their data-flow ops (the in and out
//! shardings of named and manual computations, the result shardings of the others) and the
//! edges are removed. With `sink-debug-sharding-origins` / `sink-debug-propagation-edge-sharding`
//! the edges' `sdy.sharding_origins` / `sdy.propagation_edges` are gathered onto the op
//! (`sdy.block_arg_*` for the edges of block arguments, `sdy.result_*` for those of results),
//! as Shardy's `saveDebugInfoDictsFromDataFlowEdges`.

use super::super::PassContext;
use super::export_named_computations::shardings_from_edges;
use crate::error::Result;
use crate::fast_hash::FastSet;
use crate::ir::clone::Uses;
use crate::ir::shardings::{result_slot, REGION_DATA_FLOW_OPS};
use crate::ir::values::{add_free_axes, manual_axes, ValueIndex, DATA_FLOW_OPS};
use crate::ir::Program;
use crate::sharding::TensorSharding;
use crate::text::{parse_sharding_per_value, print_sharding_per_value};
use crate::transforms::propagation::freeze::top_funcs;

/// The options of the pass.
pub const OPTIONS: &[&str] = &["sink-debug-sharding-origins", "sink-debug-propagation-edge-sharding"];

const EDGE: &str = "sdy.data_flow_edge";

pub fn run(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    let debug = Debug { origins: cx.flag(OPTIONS[0], false)?, edges: cx.flag(OPTIONS[1], false)? };
    for f in top_funcs(p) {
        let ops = p.walk(f);
        if !ops.iter().skip(1).any(|&o| p.op_name(o) == EDGE || DATA_FLOW_OPS.contains(&p.op_name(o))) {
            continue;
        }
        let mut uses = Uses::new(p, f);
        let mut values = ValueIndex::new(p);
        let mut erased: FastSet<u32> = FastSet::default();
        for &op in ops.iter().skip(1) {
            let name = p.op_name(op);
            if name == EDGE {
                let (Some(&operand), Some(result)) = (p.op_operands(op).first(), p.op_results(op).next()) else {
                    continue;
                };
                uses.replace_all_uses(p, result, operand);
                uses.drop_op_only(p, op);
                erased.insert(op);
                continue;
            }
            if !DATA_FLOW_OPS.contains(&name) {
                continue;
            }
            let name = name.to_string();
            let mut owners: Vec<u32> = Vec::new();
            if REGION_DATA_FLOW_OPS.contains(&name.as_str()) {
                let entry = p.region_blocks(op, 0);
                if !entry.is_empty() {
                    owners.extend(p.block_args(entry.start));
                }
                if let Some(new) = shardings_from_edges(p, &mut values, &uses, &owners)? {
                    let all: Vec<TensorSharding> = if name == "sdy.manual_computation" {
                        let outer = match p.attr(op, "in_shardings") {
                            Some(t) => parse_sharding_per_value(t).map_err(|e| e.context(p.op_where(op)))?,
                            None => Vec::new(),
                        };
                        let manual = manual_axes(p.attr(op, "manual_axes").unwrap_or(""));
                        outer.iter().zip(&new).map(|(o, n)| add_free_axes(o, n, &manual)).collect()
                    } else {
                        new
                    };
                    p.set_attr(op, "in_shardings", &print_sharding_per_value(&all));
                }
            }
            debug.gather(p, &mut values, &uses, op, &owners, "block_arg");
            let results: Vec<u32> = p.op_results(op).collect();
            if let Some(all) = shardings_from_edges(p, &mut values, &uses, &results)? {
                p.set_attr(op, result_slot(&name).0, &print_sharding_per_value(&all));
            }
            debug.gather(p, &mut values, &uses, op, &results, "result");
        }
        if erased.is_empty() {
            continue;
        }
        let parents = p.enclosing_blocks(f);
        p.remove_ops(&erased, erased.iter().filter_map(|o| parents.get(o).copied()));
    }
    Ok(())
}

/// The debugging options of the pass.
struct Debug {
    origins: bool,
    edges: bool,
}

impl Debug {
    /// Shardy's `saveDebugInfoDictsFromDataFlowEdges`: the `sdy.sharding_origins` (and
    /// non-empty `sdy.propagation_edges`) of the edges of `owners`, as a list on `op` under
    /// `sdy.{kind}_sharding_origins` / `sdy.{kind}_propagation_edges`.
    fn gather(&self, p: &mut Program, values: &mut ValueIndex, uses: &Uses, op: u32, owners: &[u32], kind: &str) {
        if !self.origins && !self.edges {
            return;
        }
        let mut origins: Vec<String> = Vec::new();
        let mut edges: Vec<String> = Vec::new();
        for &owner in owners {
            let Some(edge) = values.lookup_data_flow_edge(p, uses, owner) else { continue };
            if self.origins {
                if let Some(text) = p.attr(edge, "sdy.sharding_origins") {
                    origins.push(text.to_string());
                }
            }
            if self.edges {
                if let Some(text) = p.attr(edge, "sdy.propagation_edges") {
                    let bare: String = text.chars().filter(|c| *c != ' ').collect();
                    if bare != "#sdy.propagation_edges<[]>" {
                        edges.push(text.to_string());
                    }
                }
            }
        }
        if self.origins {
            p.set_attr(op, &format!("sdy.{kind}_sharding_origins"), &format!("[{}]", origins.join(", ")));
        }
        if self.edges {
            p.set_attr(op, &format!("sdy.{kind}_propagation_edges"), &format!("[{}]", edges.join(", ")));
        }
    }
}
