//! `sdy-export-named-computations` (Shardy's `export_named_computations.cc`): every
//! `sdy.named_computation`, innermost first, becomes a `func.call` of a new private function
//! holding its body (named after it, `name_N` on a clash, with `sdy.original_func_name`).
//! Shardings come from its data-flow edges (which are removed) or else its in/out shardings:
//! the inputs' onto the function's arguments, the outputs' onto the call.

use super::super::common::{append_func, post_order_of};
use super::super::PassContext;
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::ir::clone::Uses;
use crate::ir::symbols::SymbolTable;
use crate::ir::values::{set_func_sharding, ValueIndex};
use crate::ir::{types, FuncData, Program};
use crate::sharding::{MeshRef, TensorSharding};
use crate::text::{parse_sharding_per_value, parse_string, print_sharding_per_value, print_string};

const NAMED_COMPUTATION: &str = "sdy.named_computation";
const DATA_FLOW_EDGE: &str = "sdy.data_flow_edge";
const EXECUTION_THREAD: &str = "execution_thread";

/// Shardy's `getShardingsFromDataFlowEdges`: the shardings of the owners' edges, fully open on
/// the first named mesh where an edge has none; `None` when no edge has one on a named mesh.
pub(super) fn shardings_from_edges(
    p: &Program,
    values: &mut ValueIndex,
    uses: &Uses,
    owners: &[u32],
) -> Result<Option<Vec<TensorSharding>>> {
    let mut found = Vec::with_capacity(owners.len());
    let mut reference: Option<MeshRef> = None;
    for &owner in owners {
        let s = match values.lookup_data_flow_edge(p, uses, owner) {
            Some(edge) => crate::ir::values::result_sharding(p, edge, 0)?,
            None => None,
        };
        if let (None, Some(s)) = (&reference, &s) {
            if matches!(s.mesh, MeshRef::Named(_)) {
                reference = Some(s.mesh.clone());
            }
        }
        found.push(s);
    }
    let Some(mesh) = reference else { return Ok(None) };
    Ok(Some(
        found
            .into_iter()
            .zip(owners)
            .map(|(s, &v)| {
                s.unwrap_or_else(|| {
                    TensorSharding::replicated(
                        mesh.clone(),
                        types::rank(p.strings.get(p.value_types[v as usize])),
                        true,
                    )
                })
            })
            .collect(),
    ))
}

/// Removes the data-flow edge that is the first user of each of `values`: its uses take the
/// value back.
fn remove_edges(p: &mut Program, uses: &mut Uses, parents: &mut FastMap<u32, u32>, values: &[u32]) {
    for &v in values {
        let Some(edge) = uses.users(v).first().copied() else { continue };
        if p.op_name(edge) != DATA_FLOW_EDGE {
            continue;
        }
        let (Some(&operand), Some(result)) = (p.op_operands(edge).first(), p.op_results(edge).next()) else {
            continue;
        };
        uses.replace_all_uses(p, result, operand);
        erase(p, uses, parents, edge);
    }
}

fn erase(p: &mut Program, uses: &mut Uses, parents: &mut FastMap<u32, u32>, op: u32) {
    uses.drop_op_only(p, op);
    if let Some(block) = parents.remove(&op) {
        let kept: Vec<u32> = p.block_ops(block).iter().copied().filter(|&o| o != op).collect();
        p.set_block_ops(block, &kept);
    }
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let mut named_ops = p.walk(0);
    named_ops.retain(|&o| p.op_name(o) == NAMED_COMPUTATION);
    if named_ops.is_empty() {
        return Ok(());
    }
    let mut symbols = SymbolTable::new(p);
    let mut uses = Uses::new(p, 0);
    let mut values = ValueIndex::new(p);
    let mut parents = p.enclosing_blocks(0);
    let mut call_results: Vec<u32> = Vec::new();
    for named in post_order_of(p, &named_ops) {
        let entry = p.region_blocks(named, 0);
        if entry.is_empty() {
            return Err(Error::program(format!("{}: a named computation without a body", p.op_where(named))));
        }
        let entry = entry.start;
        let args: Vec<u32> = p.block_args(entry).collect();
        let results: Vec<u32> = p.op_results(named).collect();
        let parse = |p: &Program, name: &str| -> Result<Option<Vec<TensorSharding>>> {
            p.attr(named, name)
                .map(|t| parse_sharding_per_value(t).map_err(|e| e.context(p.op_where(named))))
                .transpose()
        };
        let in_shardings = match shardings_from_edges(p, &mut values, &uses, &args)? {
            Some(s) => Some(s),
            None => parse(p, "in_shardings")?,
        };
        let out_shardings = match shardings_from_edges(p, &mut values, &uses, &results)? {
            Some(s) => Some(s),
            None => parse(p, "out_shardings")?,
        };
        let name_text = p.attr(named, "name").unwrap_or("\"\"").to_string();
        let name = parse_string(&name_text).map_err(|e| e.context(p.op_where(named)))?;
        let loc = p.ops[named as usize].loc;
        // The function: the named computation's region moves into it.
        let mut quoted = String::new();
        print_string(&name, &mut quoted);
        let mut attrs: Vec<(u32, u32)> = vec![
            (p.intern("sym_name"), p.intern(&quoted)),
            (p.intern("sym_visibility"), p.intern("\"private\"")),
            (p.intern("sdy.original_func_name"), p.intern(&name_text)),
        ];
        if let Some(t) = p.attr_id(named, EXECUTION_THREAD) {
            attrs.push((p.intern(EXECUTION_THREAD), t));
        }
        let func = p.new_op("func.func", &[], &[], &attrs, loc);
        let regions = p.ops[named as usize].regions;
        p.ops[func as usize].regions = regions;
        p.ops[named as usize].regions = (regions.0, regions.0);
        if let Some(&ret) = p.block_ops(entry).last() {
            p.rename_op(ret, "func.return");
        }
        let arg_types: Vec<u32> = args.iter().map(|&a| p.value_types[a as usize]).collect();
        let result_types: Vec<u32> = results.iter().map(|&r| p.value_types[r as usize]).collect();
        let empty = p.attrs.len() as u32;
        p.funcs.push(FuncData {
            op: func,
            arg_attrs: vec![(empty, empty); arg_types.len()],
            result_attrs: vec![(empty, empty); result_types.len()],
            arg_types,
            result_types: result_types.clone(),
        });
        let fi = p.funcs.len() - 1;
        remove_edges(p, &mut uses, &mut parents, &args);
        if let Some(all) = &in_shardings {
            for (k, s) in all.iter().enumerate().take(args.len()) {
                set_func_sharding(p, fi, k, false, Some(s));
            }
        }
        let func_name = append_func(p, &mut symbols, func);
        // The call, in place of the named computation.
        let mut call_attrs: Vec<(u32, u32)> = p
            .op_attrs(named)
            .iter()
            .copied()
            .filter(|&(k, _)| !matches!(p.strings.get(k), "name" | "in_shardings" | "out_shardings" | EXECUTION_THREAD))
            .collect();
        let mut callee = String::new();
        crate::text::print_symbol(&func_name, &mut callee);
        call_attrs.push((p.intern("callee"), p.intern(&callee)));
        if let (Some(all), false) = (&out_shardings, results.is_empty()) {
            call_attrs.push((p.intern("sdy.sharding"), p.intern(&print_sharding_per_value(all))));
        }
        let operands = p.op_operands(named).to_vec();
        let call = p.new_op("func.call", &operands, &result_types, &call_attrs, loc);
        let block = parents
            .get(&named)
            .copied()
            .ok_or_else(|| Error::program(format!("{}: in no block", p.op_where(named))))?;
        let list: Vec<u32> =
            p.block_ops(block).iter().flat_map(|&o| if o == named { vec![call, o] } else { vec![o] }).collect();
        p.set_block_ops(block, &list);
        parents.insert(call, block);
        uses.add_op_only(p, call);
        let new_results: Vec<u32> = p.op_results(call).collect();
        for (&r, &nr) in results.iter().zip(&new_results) {
            uses.replace_all_uses(p, r, nr);
        }
        erase(p, &mut uses, &mut parents, named);
        call_results.extend(new_results);
    }
    remove_edges(p, &mut uses, &mut parents, &call_results);
    Ok(())
}
