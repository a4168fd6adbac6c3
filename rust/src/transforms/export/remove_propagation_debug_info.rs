//! `sdy-remove-propagation-debug-info` (Shardy's `remove_propagation_debug_info.cc`): the
//! sharding origins and propagation edges leave every op and every function argument and
//! result.

use super::super::PassContext;
use crate::error::Result;
use crate::ir::Program;

const DEBUG_ATTRS: &[&str] = &[
    "sdy.propagation_edges",
    "sdy.block_arg_propagation_edges",
    "sdy.result_propagation_edges",
    "sdy.sharding_origins",
    "sdy.block_arg_sharding_origins",
    "sdy.result_sharding_origins",
];

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let funcs = p.func_index();
    for op in p.walk(0) {
        if let Some(&fi) = funcs.get(&op) {
            let spans: Vec<(bool, usize, (u32, u32))> = p.funcs[fi]
                .arg_attrs
                .iter()
                .enumerate()
                .map(|(k, &s)| (false, k, s))
                .chain(p.funcs[fi].result_attrs.iter().enumerate().map(|(k, &s)| (true, k, s)))
                .collect();
            for (result, k, (a, b)) in spans {
                let list = &p.attrs[a as usize..b as usize];
                if !list.iter().any(|(n, _)| DEBUG_ATTRS.contains(&p.strings.get(*n))) {
                    continue;
                }
                let kept: Vec<(u32, u32)> =
                    list.iter().copied().filter(|(n, _)| !DEBUG_ATTRS.contains(&p.strings.get(*n))).collect();
                let start = p.attrs.len() as u32;
                p.attrs.extend(kept);
                let end = p.attrs.len() as u32;
                let f = &mut p.funcs[fi];
                let spans = if result { &mut f.result_attrs } else { &mut f.arg_attrs };
                spans[k] = (start, end);
            }
        } else if p.op_name(op) != "builtin.module" {
            for name in DEBUG_ATTRS {
                p.remove_attr(op, name);
            }
        }
    }
    Ok(())
}
