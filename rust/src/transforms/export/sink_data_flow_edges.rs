//! `sdy-sink-data-flow-edges` (Shardy's `sink_data_flow_edges.cc`): the shardings of the
//! `sdy.data_flow_edge` ops of each function move back onto their data-flow ops (the in and out
//! shardings of named and manual computations, the result shardings of the others) and the
//! edges are removed. The debugging options (gathering the edges' sharding origins and
//! propagation edges onto the op) are not native yet.

use super::super::PassContext;
use super::export_named_computations::shardings_from_edges;
use crate::error::{Error, Result};
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
    for option in OPTIONS {
        if cx.flag(option, false)? {
            return Err(Error::program(format!(
                "{option}: the native sdy-sink-data-flow-edges does not gather debugging records yet (the Python pass does)"
            )));
        }
    }
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
            if REGION_DATA_FLOW_OPS.contains(&name.as_str()) {
                let entry = p.region_blocks(op, 0);
                let owners: Vec<u32> = if entry.is_empty() { Vec::new() } else { p.block_args(entry.start).collect() };
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
            let results: Vec<u32> = p.op_results(op).collect();
            if let Some(all) = shardings_from_edges(p, &mut values, &uses, &results)? {
                p.set_attr(op, result_slot(&name).0, &print_sharding_per_value(&all));
            }
        }
        if erased.is_empty() {
            continue;
        }
        let parents = p.enclosing_blocks(f);
        p.remove_ops(&erased, erased.iter().filter_map(|o| parents.get(o).copied()));
    }
    Ok(())
}
