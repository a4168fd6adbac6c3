//! `sdy-add-func-data-flow-edges` (Shardy's `transforms/import/add_func_data_flow_edges.cc`,
//! the `dedup-functions-fully` import): an `sdy.func_data_flow_edge` for every statically
//! shaped argument of every function but the main one (at the start of its body) and for every
//! such result of every `func.call` (right after it), holding the value's sharding; every
//! other use of the value uses the edge instead.

use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::ir::clone::Uses;
use crate::ir::values::ValueIndex;
use crate::ir::{types, Program};
use crate::text::print_sharding_per_value;
use crate::transforms::propagation::freeze::{main_func, top_funcs};
use crate::transforms::PassContext;

const EDGE: &str = "sdy.func_data_flow_edge";

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let funcs = top_funcs(p);
    let Some(main) = main_func(p, &funcs)? else {
        return Err(Error::program("the module has no function (Shardy's getMainFuncOrDie)".to_string()));
    };
    let mut uses = Uses::new(p, 0);
    let mut values = ValueIndex::new(p);
    for &f in &funcs {
        let body = p.region_blocks(f, 0);
        if f == main || body.is_empty() {
            continue;
        }
        let entry = body.start;
        let loc = p.ops[f as usize].loc;
        let args: Vec<u32> = p.block_args(entry).collect();
        let mut edges = Vec::new();
        for arg in args {
            if let Some(edge) = add_edge(p, &mut uses, &mut values, arg, loc)? {
                edges.push(edge);
            }
        }
        if !edges.is_empty() {
            edges.extend_from_slice(p.block_ops(entry));
            p.set_block_ops(entry, &edges);
        }
    }
    let parent = p.enclosing_blocks(0);
    let mut after: FastMap<u32, Vec<u32>> = FastMap::default();
    for call in p.walk(0) {
        if p.op_name(call) != "func.call" {
            continue;
        }
        let loc = p.ops[call as usize].loc;
        let results: Vec<u32> = p.op_results(call).collect();
        for r in results {
            if let Some(edge) = add_edge(p, &mut uses, &mut values, r, loc)? {
                after.entry(call).or_default().push(edge);
            }
        }
    }
    let mut blocks: Vec<u32> = after.keys().filter_map(|o| parent.get(o).copied()).collect();
    blocks.sort_unstable();
    blocks.dedup();
    for b in blocks {
        let mut ops = Vec::new();
        for &o in p.block_ops(b) {
            ops.push(o);
            if let Some(edges) = after.get(&o) {
                ops.extend_from_slice(edges);
            }
        }
        p.set_block_ops(b, &ops);
    }
    Ok(())
}

/// A new edge of `v` holding its sharding, which every other use of `v` now uses; `None` for
/// a value that is not a statically shaped tensor.
fn add_edge(p: &mut Program, uses: &mut Uses, values: &mut ValueIndex, v: u32, loc: u32) -> Result<Option<u32>> {
    let ty = p.value_types[v as usize];
    match types::tensor_shape(p.strings.get(ty)) {
        Some(shape) if shape.iter().all(|&d| d >= 0) => {}
        _ => return Ok(None),
    }
    let sharding = values.get_sharding(p, uses, v)?;
    let attrs: Vec<(u32, u32)> = match &sharding {
        Some(s) => vec![(p.intern("sdy.sharding"), p.intern(&print_sharding_per_value(std::slice::from_ref(s))))],
        None => Vec::new(),
    };
    let edge = p.new_op(EDGE, &[v], &[ty], &attrs, loc);
    let result = p.op_results(edge).start;
    let old: Vec<(u32, u32)> = uses.of(v).collect();
    for (user, i) in old {
        uses.set_operand(p, user, i as usize, result);
    }
    uses.add(p, edge);
    Ok(Some(edge))
}
