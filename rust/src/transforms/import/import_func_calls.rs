//! `sdy-import-func-calls` (Shardy `transforms/import/import_func_calls.cc`): every `func.call`
//! becomes an `sdy.named_computation` named after the callee's original name, holding the
//! callee's body (moved for the first call of a function, copied for the others, with a
//! warning), with the callee's argument shardings as `in_shardings`, the call's result
//! shardings as `out_shardings` and the call's other discardable attributes (and the callee's
//! `execution_thread`); the inlined functions are removed. Then every named computation gets
//! data-flow edges (the pass's `add-data-flow-edges-on-named-computations`, on by default).

/// The options of the pass.
pub const OPTIONS: &[&str] = &["add-data-flow-edges-on-named-computations"];

use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::ir::clone::{Mapping, Uses};
use crate::ir::symbols::SymbolTable;
use crate::ir::Program;
use crate::sharding::TensorSharding;
use crate::text::{print_sharding_per_value, print_string};
use crate::transforms::common::{
    callee, func_arg_shardings, has_body, meshes, original_func_name, post_order_of, walk_calls, where_,
};
use crate::transforms::import::add_data_flow_edges::add_edges;
use crate::transforms::PassContext;

const NAMED_COMPUTATION: &str = "sdy.named_computation";
const EXECUTION_THREAD: &str = "execution_thread";
/// Inherent attributes of `func.call` (the others are discardable), and its result shardings.
const NOT_COPIED: &[&str] = &["callee", "arg_attrs", "res_attrs", "no_inline", "sdy.sharding"];

pub fn run(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    let mut symbols = SymbolTable::new(p);
    let meshes = meshes(p)?;
    let calls = walk_calls(p, &symbols);
    let edges = cx.flag(OPTIONS[0], true)?;
    let has_named = || p.walk(0).into_iter().any(|o| p.op_name(o) == NAMED_COMPUTATION);
    if calls.is_empty() && !(edges && has_named()) {
        return Ok(()); // nothing to inline, no named computation to give edges
    }
    let mut parent = p.enclosing_blocks(0);
    let mut uses = Uses::new(p, 0);
    // Function name -> the named computation that got its body.
    let mut moved: FastMap<String, u32> = FastMap::default();
    let mut moved_order: Vec<String> = Vec::new();
    // The callee's argument shardings, read before its body moves away.
    let mut arg_shardings: FastMap<String, Option<Vec<TensorSharding>>> = FastMap::default();
    let mut warned = false;
    for call in calls {
        let func = callee(p, &symbols, call)?;
        let name = p.symbol_name(func).unwrap_or_default();
        let mut attrs: Vec<(String, String)> = p
            .op_attrs(call)
            .iter()
            .map(|&(k, v)| (p.strings.get(k).to_string(), p.strings.get(v).to_string()))
            .filter(|(k, _)| !NOT_COPIED.contains(&k.as_str()))
            .collect();
        let mut quoted = String::new();
        print_string(&original_func_name(p, func), &mut quoted);
        attrs.push(("name".into(), quoted));
        if let Some(thread) = p.attr(func, EXECUTION_THREAD) {
            attrs.push((EXECUTION_THREAD.into(), thread.to_string()));
        }
        if !arg_shardings.contains_key(&name) {
            arg_shardings.insert(name.clone(), func_arg_shardings(p, func, &meshes)?);
        }
        if let Some(ins) = &arg_shardings[&name] {
            attrs.push(("in_shardings".into(), print_sharding_per_value(ins)));
        }
        let results: Vec<u32> = p.op_results(call).collect();
        if !results.is_empty() {
            if let Some(outs) = p.attr(call, "sdy.sharding") {
                attrs.push(("out_shardings".into(), outs.to_string()));
            }
        }
        let interned: Vec<(u32, u32)> = attrs.iter().map(|(k, v)| (p.intern(k), p.intern(v))).collect();
        let operands = p.op_operands(call).to_vec();
        let types: Vec<u32> = results.iter().map(|&r| p.value_types[r as usize]).collect();
        let loc = p.ops[call as usize].loc;
        let named = p.new_op(NAMED_COMPUTATION, &operands, &types, &interned, loc);
        if let Some(&source) = moved.get(&name) {
            if !warned {
                cx.warn(format!(
                    "{}: function @{name} has multiple call ops, we need to clone the function body for each call",
                    where_(p, call)
                ));
                warned = true;
            }
            p.clone_regions_into(source, named, &mut Mapping::default());
            uses.add(p, named);
        } else {
            if !has_body(p, func) {
                return Err(Error::program(format!(
                    "{}: calls @{name}, a function declaration without a body, which cannot be inlined",
                    where_(p, call)
                )));
            }
            // The body moves: the named computation takes the function's region.
            let regions = p.ops[func as usize].regions;
            p.ops[named as usize].regions = regions;
            p.ops[func as usize].regions = (regions.0, regions.0);
            let entry = p.region_blocks(named, 0).start;
            if let Some(&ret) = p.block_ops(entry).last() {
                p.rename_op(ret, "sdy.return");
            }
            moved.insert(name.clone(), named);
            moved_order.push(name.clone());
            uses.add_op_only(p, named);
        }
        // In place of the call.
        let block = parent[&call];
        let ops: Vec<u32> = p.block_ops(block).iter().map(|&o| if o == call { named } else { o }).collect();
        p.set_block_ops(block, &ops);
        parent.insert(named, block);
        for (r, nr) in results.iter().zip(p.op_results(named).collect::<Vec<_>>()) {
            let old: Vec<(u32, u32)> = uses.of(*r).collect();
            for (user, i) in old {
                uses.set_operand(p, user, i as usize, nr);
            }
        }
        uses.drop_op_only(p, call);
    }
    for name in moved_order {
        if let Some(op) = symbols.lookup(&name) {
            symbols.erase(p, op);
        }
    }
    if !edges {
        return Ok(());
    }
    let mut named: Vec<u32> = p.walk(0);
    named.retain(|&o| p.op_name(o) == NAMED_COMPUTATION);
    let order = post_order_of(p, &named);
    add_edges(p, &mut uses, &order)
}
