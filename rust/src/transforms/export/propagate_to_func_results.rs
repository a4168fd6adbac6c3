//! `sdy-propagate-to-func-results` (Shardy's `propagate_to_func_results.cc`): every function
//! but the main one takes, as its result shardings, the shardings of the values it returns
//! (none where a value has none).

use super::super::PassContext;
use crate::error::{Error, Result};
use crate::ir::clone::Uses;
use crate::ir::values::{set_func_sharding, ValueIndex};
use crate::ir::Program;
use crate::transforms::common::has_body;
use crate::transforms::propagation::freeze::top_funcs;

/// Shardy's `getMainFuncOrDie`: the only function, else `@main`.
pub fn main_func(p: &Program, funcs: &[u32]) -> Result<u32> {
    if let [f] = funcs {
        return Ok(*f);
    }
    funcs
        .iter()
        .copied()
        .find(|&f| p.symbol_name(f).as_deref() == Some("main"))
        .ok_or_else(|| Error::program("the module has no @main function (Shardy's getMainFuncOrDie)"))
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let funcs = top_funcs(p);
    let main = main_func(p, &funcs)?;
    let others: Vec<u32> = funcs.into_iter().filter(|&f| f != main && has_body(p, f)).collect();
    if others.is_empty() {
        return Ok(());
    }
    let uses = Uses::new(p, 0);
    let mut values = ValueIndex::new(p);
    let index = p.func_index();
    for f in others {
        let entry = p.region_blocks(f, 0).start;
        let Some(&ret) = p.block_ops(entry).last() else { continue };
        if p.op_name(ret) != "func.return" {
            continue;
        }
        let returned = p.op_operands(ret).to_vec();
        let fi = index[&f];
        for (k, v) in returned.into_iter().enumerate() {
            let s = values.get_sharding(p, &uses, v)?;
            set_func_sharding(p, fi, k, true, s.as_ref());
        }
    }
    Ok(())
}
