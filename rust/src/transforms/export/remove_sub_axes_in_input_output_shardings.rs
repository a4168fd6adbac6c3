//! `sdy-remove-sub-axes-in-input-output-shardings` (Shardy's
//! `remove_sub_axes_in_input_output_shardings.cc`): in the argument and result shardings of the
//! main function, every open dimension is cut before its first sub-axis.

use super::super::PassContext;
use super::propagate_to_func_results::main_func;
use crate::error::Result;
use crate::ir::values::{set_func_sharding, ParsedShardings};
use crate::ir::Program;
use crate::sharding::TensorSharding;
use crate::transforms::propagation::freeze::top_funcs;

fn cut(s: &TensorSharding) -> TensorSharding {
    let mut out = s.clone();
    for d in &mut out.dims {
        if !d.closed {
            let k = d.axes.iter().position(|a| a.is_sub_axis()).unwrap_or(d.axes.len());
            d.axes.truncate(k);
        }
    }
    out
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let funcs = top_funcs(p);
    let main = main_func(p, &funcs)?;
    let fi = p.func_index()[&main];
    let has_body = !p.region_blocks(main, 0).is_empty();
    let n_args = if has_body { p.block_args(p.region_blocks(main, 0).start).len() } else { 0 };
    let mut parsed = ParsedShardings::default();
    for k in 0..n_args {
        if let Some(s) = parsed.func_arg(p, fi, k)? {
            let new = cut(s);
            if new != *s {
                set_func_sharding(p, fi, k, false, Some(&new));
            }
        }
    }
    for k in 0..p.funcs[fi].result_types.len() {
        if let Some(s) = parsed.func_result(p, fi, k)? {
            let new = cut(s);
            if new != *s {
                set_func_sharding(p, fi, k, true, Some(&new));
            }
        }
    }
    Ok(())
}
