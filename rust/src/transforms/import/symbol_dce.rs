//! MLIR's `symbol-dce`: removes the private symbols (`sym_visibility = "private"`) of the
//! module that no live op references, transitively.

use crate::error::Result;
use crate::fast_hash::{FastMap, FastSet};
use crate::ir::Program;
use crate::text::parse_string;
use crate::transforms::PassContext;

/// The symbols `@name` / `@"name"` in attribute text `text`.
fn symbol_refs(text: &str, out: &mut Vec<String>) {
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find('@') {
        let s = i + at + 1;
        i = s;
        if b.get(s) == Some(&b'"') {
            let mut j = s + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            if j < b.len() {
                if let Ok(name) = parse_string(&text[s..=j]) {
                    out.push(name);
                }
                i = j + 1;
            }
        } else if b.get(s).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_') {
            let end = s + text[s..]
                .bytes()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.'))
                .count();
            out.push(text[s..end].to_string());
            i = end;
        }
    }
}

/// The symbols referenced by `op` and the ops nested in it (attributes, and a function's
/// argument and result attributes).
fn referenced(p: &Program, funcs: &FastMap<u32, usize>, op: u32) -> Vec<String> {
    let mut out = Vec::new();
    for o in p.walk(op) {
        for &(_, v) in p.op_attrs(o) {
            symbol_refs(p.strings.get(v), &mut out);
        }
        if let Some(f) = p.func_data(funcs, o) {
            for &(a, b) in f.arg_attrs.iter().chain(&f.result_attrs) {
                for &(_, v) in &p.attrs[a as usize..b as usize] {
                    symbol_refs(p.strings.get(v), &mut out);
                }
            }
        }
    }
    out
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let block = p.module_block();
    let top: Vec<u32> = p.block_ops(block).to_vec();
    let mut symbols: FastMap<String, u32> = FastMap::default();
    for &op in &top {
        if let Some(name) = p.symbol_name(op) {
            symbols.entry(name).or_insert(op);
        }
    }
    let mut live: FastSet<u32> = FastSet::default();
    let mut work = Vec::new();
    for &op in &top {
        if p.symbol_name(op).is_none() || p.attr(op, "sym_visibility") != Some("\"private\"") {
            live.insert(op);
            work.push(op);
        }
    }
    if live.len() == top.len() {
        return Ok(()); // no private symbol: nothing can be removed
    }
    let funcs = p.func_index();
    while let Some(op) = work.pop() {
        for name in referenced(p, &funcs, op) {
            if let Some(&target) = symbols.get(&name) {
                if live.insert(target) {
                    work.push(target);
                }
            }
        }
    }
    let kept: Vec<u32> = top.into_iter().filter(|op| live.contains(op)).collect();
    p.set_block_ops(block, &kept);
    Ok(())
}
