//! `sdy-insert-func-call-reshards` (Shardy's `insert_func_call_reshards.cc`,
//! `insertReshardsOnFuncResults`): where a call's result sharding differs from its callee's,
//! the call takes the callee's sharding and an `sdy.reshard` to the call's former sharding
//! (fully closed where it had none) serves the other uses.

use super::super::common::{callee_name, func_result_shardings, meshes, post_order_of};
use super::super::PassContext;
use crate::error::{Error, Result};
use crate::export::explicit_reshards::is_equivalent;
use crate::ir::clone::Uses;
use crate::ir::symbols::SymbolTable;
use crate::ir::values::{result_sharding, set_result_sharding, ValueIndex};
use crate::ir::Program;
use crate::sharding::TensorSharding;

/// Shardy's `getFullyClosedLike`.
fn fully_closed_like(s: &TensorSharding) -> TensorSharding {
    TensorSharding::replicated(s.mesh.clone(), s.rank(), false)
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let mut calls = p.walk(0);
    calls.retain(|&o| p.op_name(o) == "func.call");
    if calls.is_empty() {
        return Ok(());
    }
    let symbols = SymbolTable::new(p);
    let meshes = meshes(p)?;
    let mut uses = Uses::new(p, 0);
    let mut values = ValueIndex::new(p);
    let blocks = p.enclosing_blocks(0);
    for call in post_order_of(p, &calls) {
        let name = callee_name(p, call).unwrap_or_default();
        let f = symbols.lookup(&name).ok_or_else(|| {
            Error::program(format!("{}: calls @{name}, which the module does not define", p.op_where(call)))
        })?;
        let results: Vec<u32> = p.op_results(call).collect();
        let func_shardings = match func_result_shardings(p, f, &meshes)? {
            Some(all) => all,
            None => {
                let own: Vec<TensorSharding> = (0..results.len())
                    .map(|k| result_sharding(p, call, k))
                    .collect::<Result<Vec<_>>>()?
                    .into_iter()
                    .flatten()
                    .collect();
                if own.is_empty() {
                    continue;
                }
                own.iter().map(fully_closed_like).collect()
            }
        };
        for (s, &r) in func_shardings.iter().zip(&results) {
            let call_sharding = values.get_sharding(p, &uses, r)?;
            if is_equivalent(Some(s), call_sharding.as_ref()) {
                continue;
            }
            let loc = p.ops[call as usize].loc;
            let ty = p.value_types[r as usize];
            let reshard = p.new_op("sdy.reshard", &[r], &[ty], &[], loc);
            set_result_sharding(p, reshard, 0, &call_sharding.unwrap_or_else(|| fully_closed_like(s)))?;
            let block = blocks
                .get(&call)
                .copied()
                .ok_or_else(|| Error::program(format!("{}: in no block", p.op_where(call))))?;
            let list: Vec<u32> =
                p.block_ops(block).iter().flat_map(|&o| if o == call { vec![o, reshard] } else { vec![o] }).collect();
            p.set_block_ops(block, &list);
            let new = p.op_results(reshard).start;
            uses.replace_all_uses(p, r, new);
            uses.add(p, reshard);
        }
        for (k, s) in func_shardings.iter().enumerate().take(results.len()) {
            set_result_sharding(p, call, k, s)?;
        }
    }
    Ok(())
}
