//! `sdy-unflatten-call-graph` (Shardy's `unflatten_call_graph.cc`): calls of functions cloned
//! from one original (`sdy.original_func_name`) with the same manual axes and the same argument
//! and result shardings call one of them, the first called; with `dedup-functions-fully`
//! shardings are ignored and the most called variant is kept. `sdy.original_func_name` and
//! `sdy.func_manual_axes` are removed.

use super::super::common::set_callee;
use super::super::common::{callee_name, func_arg_shardings, func_result_shardings, meshes, original_func_name};
use super::super::PassContext;
use crate::error::{Error, Result};
use crate::ir::symbols::SymbolTable;
use crate::ir::Program;
use crate::sharding::TensorSharding;
use crate::text::print_sharding;
use crate::transforms::propagation::freeze::top_funcs;
use std::collections::HashMap;

const FUNC_MANUAL_AXES: &str = "sdy.func_manual_axes";

type Key = (String, Option<String>, Option<Vec<String>>, Option<Vec<String>>);

pub fn run(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    let fully = cx.flag("dedup-functions-fully", false)?;
    let symbols = SymbolTable::new(p);
    let meshes = meshes(p)?;
    let texts = |all: Option<Vec<TensorSharding>>| all.map(|v| v.iter().map(print_sharding).collect::<Vec<_>>());
    let key = |p: &Program, f: u32, ignore: bool| -> Result<Key> {
        let base = (original_func_name(p, f), p.attr(f, FUNC_MANUAL_AXES).map(str::to_string));
        if ignore {
            return Ok((base.0, base.1, None, None));
        }
        Ok((base.0, base.1, texts(func_arg_shardings(p, f, &meshes)?), texts(func_result_shardings(p, f, &meshes)?)))
    };
    let calls: Vec<u32> = p.walk(0).into_iter().filter(|&o| p.op_name(o) == "func.call").collect();
    let mut callees = Vec::with_capacity(calls.len());
    for &call in &calls {
        let name = callee_name(p, call).unwrap_or_default();
        let f = symbols.lookup(&name).ok_or_else(|| {
            Error::program(format!("{}: calls @{name}, which the module does not define", p.op_where(call)))
        })?;
        callees.push(f);
    }
    let mut cache: HashMap<Key, u32> = HashMap::new();
    for &f in &callees {
        cache.entry(key(p, f, fully)?).or_insert(f);
    }
    if fully {
        let mut counts: HashMap<Key, usize> = HashMap::new();
        for &f in &callees {
            let k = key(p, f, true)?;
            let fk = key(p, f, false)?;
            let n = {
                let c = counts.entry(fk).or_insert(0);
                *c += 1;
                *c
            };
            let cached = cache[&k];
            if n > counts.get(&key(p, cached, false)?).copied().unwrap_or(0) {
                cache.insert(k, f);
            }
        }
    }
    for (&call, &f) in calls.iter().zip(&callees) {
        let target = cache[&key(p, f, fully)?];
        let name = p.symbol_name(target).unwrap_or_default();
        set_callee(p, call, &name);
    }
    for f in top_funcs(p) {
        p.remove_attr(f, "sdy.original_func_name");
        p.remove_attr(f, FUNC_MANUAL_AXES);
    }
    Ok(())
}
