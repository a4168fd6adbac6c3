//! `sdy-flatten-call-graph` (Shardy `transforms/import/flatten_call_graph.cc`): every function
//! is called at most once: each call after the first of a function (in `walkCalls` order)
//! calls a fresh recursive copy of it (`name_N`, with `sdy.original_func_name`).

use crate::error::Result;
use crate::fast_hash::FastSet;
use crate::ir::symbols::SymbolTable;
use crate::ir::Program;
use crate::transforms::common::{append_func, callee, clone_func_recursively, set_callee, walk_calls};
use crate::transforms::PassContext;

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let mut symbols = SymbolTable::new(p);
    let mut seen: FastSet<String> = FastSet::default();
    for call in walk_calls(p, &symbols) {
        let func = callee(p, &symbols, call)?;
        if seen.insert(p.symbol_name(func).unwrap_or_default()) {
            continue;
        }
        let clone = clone_func_recursively(p, &mut symbols, func);
        let name = append_func(p, &mut symbols, clone);
        set_callee(p, call, &name);
    }
    Ok(())
}
