//! `sdy-propagate-sharding-from-func-to-call` (Shardy
//! `transforms/import/propagate_sharding_from_func_to_call.cc`): every `func.call` without
//! result shardings gets its callee's result shardings (`getFuncResultShardings`), if it has
//! any.

use crate::error::Result;
use crate::ir::symbols::SymbolTable;
use crate::ir::Program;
use crate::text::print_sharding_per_value;
use crate::transforms::common::{callee, func_result_shardings, meshes, CALL};
use crate::transforms::PassContext;

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let symbols = SymbolTable::new(p);
    let meshes = meshes(p)?;
    for op in p.walk(0) {
        if p.op_name(op) != CALL {
            continue;
        }
        let func = callee(p, &symbols, op)?;
        if p.attr(op, "sdy.sharding").is_some() {
            continue;
        }
        if let Some(shardings) = func_result_shardings(p, func, &meshes)? {
            let text = print_sharding_per_value(&shardings);
            p.set_attr(op, "sdy.sharding", &text);
        }
    }
    Ok(())
}
