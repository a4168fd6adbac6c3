//! `sdy-pre-order-funcs` (Shardy `transforms/import/pre_order_funcs.cc`): the functions with
//! bodies move to the end of the module in pre-order of the call graph (callers before
//! callees).

use crate::error::Result;
use crate::fast_hash::FastSet;
use crate::ir::symbols::SymbolTable;
use crate::ir::Program;
use crate::transforms::common::call_graph_rpo;
use crate::transforms::PassContext;

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let symbols = SymbolTable::new(p);
    let (rpo, _) = call_graph_rpo(p, &symbols);
    let moved: FastSet<u32> = rpo.iter().copied().collect();
    let block = p.module_block();
    let mut ops: Vec<u32> = p.block_ops(block).iter().copied().filter(|o| !moved.contains(o)).collect();
    ops.extend(rpo);
    p.set_block_ops(block, &ops);
    Ok(())
}
