//! Writing a solve back into the native program, as `_write_back` does on the Python IR: the
//! changed result shardings into their op's result slot (a per-value slot gets fully open
//! shardings for its results without one), function argument and result shardings, the body
//! argument shardings of named and manual computations (`in_shardings`, all or none), erased
//! ops out of their blocks, and sharding rules kept (`keep-sharding-rules`: every op propagated
//! through gets its rule) or removed (every rule that is no user's custom rule).

use std::sync::Arc;

use super::freeze::Frozen;
use crate::error::Result;
use crate::fast_hash::{FastMap, FastSet};
use crate::graph::NONE;
use crate::ir::shardings::{result_slot, REGION_DATA_FLOW_OPS};
use crate::ir::types;
use crate::ir::values::set_func_sharding;
use crate::ir::Program;
use crate::propagation::SolverOutput;
use crate::rule::text::{parse_rule, print_rule};
use crate::sharding::TensorSharding;
use crate::text::{print_sharding, print_sharding_per_value};

type FuncShardings = Vec<(u32, Vec<Option<TensorSharding>>)>;

/// The shardings stored before a solve: the values that had one (most have none, and a dense
/// copy costs 96 bytes per value at the pass's peak) and the functions' results.
#[derive(Debug, Clone)]
pub struct Stored {
    pub values: FastMap<u32, TensorSharding>,
    pub funcs: FuncShardings,
}

impl Stored {
    /// What `value_shardings` and `func_results` (the solver's input) hold.
    pub fn of(value_shardings: &[Option<TensorSharding>], func_results: &FuncShardings) -> Self {
        let values = value_shardings.iter().enumerate().filter_map(|(v, s)| Some((v as u32, s.clone()?))).collect();
        Stored { values, funcs: func_results.clone() }
    }
}

/// Writes `out` and `new_values` (a solve of `p` frozen as `f`, from the stored shardings
/// `before`; the values' shardings as the solver shares them) into `p`.
pub fn write_back(
    p: &mut Program,
    f: &Frozen,
    before: &Stored,
    out: &SolverOutput,
    new_values: &[Option<Arc<TensorSharding>>],
    keep_rules: bool,
) -> Result<()> {
    let (old, old_funcs) = (&before.values, &before.funcs);
    let changed = |v: u32, new: &Option<Arc<TensorSharding>>| new.as_deref() != old.get(&v);
    let func_index = p.func_index();
    let mut slot_texts = SlotTexts::default();
    for (gi, &op) in f.ops.iter().enumerate() {
        // Results.
        let results = f.graph.results.row(gi);
        if results.iter().any(|&r| changed(r, &new_values[r as usize])) {
            let all: Vec<Option<&TensorSharding>> =
                results.iter().map(|&r| new_values[r as usize].as_deref()).collect();
            write_slot(p, op, &all, &mut slot_texts);
        }
        // Block arguments.
        let (a, b) = p.ops[op as usize].regions;
        if a == b {
            continue;
        }
        let entry = p.region_blocks(op, 0);
        if entry.is_empty() {
            continue;
        }
        let args: Vec<u32> = p.block_args(entry.start).map(|v| f.value_index[v as usize]).collect();
        if let Some(&fi) = func_index.get(&op) {
            for (k, &v) in args.iter().enumerate() {
                if changed(v, &new_values[v as usize]) {
                    set_func_sharding(p, fi, k, false, new_values[v as usize].as_deref());
                }
            }
        } else if REGION_DATA_FLOW_OPS.contains(&p.op_name(op)) && !args.is_empty() {
            let all: Option<Vec<TensorSharding>> =
                args.iter().map(|&v| new_values[v as usize].as_deref().cloned()).collect();
            match all {
                Some(all) => {
                    let text = print_sharding_per_value(&all);
                    if p.attr(op, "in_shardings") != Some(text.as_str()) {
                        p.set_attr(op, "in_shardings", &text);
                    }
                }
                None => {
                    p.remove_attr(op, "in_shardings");
                }
            }
        }
    }
    // Function results.
    let old_funcs: FastMap<u32, &Vec<Option<TensorSharding>>> = old_funcs.iter().map(|(f, rs)| (*f, rs)).collect();
    for (gf, rs) in &out.func_results {
        let op = f.ops[*gf as usize];
        let Some(&fi) = func_index.get(&op) else { continue };
        for (k, s) in rs.iter().enumerate() {
            if old_funcs.get(gf).and_then(|old| old.get(k)) != Some(s) {
                set_func_sharding(p, fi, k, true, s.as_ref());
            }
        }
    }
    // Erased ops.
    if !out.erased_ops.is_empty() {
        let erased: FastSet<u32> = out.erased_ops.iter().map(|&o| f.ops[o as usize]).collect();
        let parents = p.enclosing_blocks(0);
        p.remove_ops(&erased, erased.iter().filter_map(|o| parents.get(o).copied()));
    }
    // Sharding rules.
    if keep_rules {
        // Each distinct rule printed and interned once.
        let name = p.intern("sdy.sharding_rule");
        let mut texts: FastMap<u32, u32> = FastMap::default();
        for &gi in &out.rule_ops {
            let op = f.ops[gi as usize];
            if p.attr_id(op, "sdy.sharding_rule").is_some() {
                continue;
            }
            let k = f.graph.op_rule[gi as usize];
            if k == NONE {
                continue;
            }
            let text = match texts.get(&k) {
                Some(&t) => t,
                None => {
                    let t = p.intern(&print_rule(&f.graph.rules[k as usize]));
                    texts.insert(k, t);
                    t
                }
            };
            p.set_attr_id(op, name, text);
        }
    } else {
        for &op in &f.ops {
            if let Some(text) = p.attr(op, "sdy.sharding_rule") {
                if !parse_rule(text).is_ok_and(|r| r.is_custom) {
                    p.remove_attr(op, "sdy.sharding_rule");
                }
            }
        }
    }
    Ok(())
}

/// Writes `op`'s result shardings `all` into its result slot: removed when none has one; a
/// per-value slot fills the others with fully open shardings on the mesh of the first.
///
/// The texts are kept by op name, each result's sharding by address (the solver shares one
/// allocation among the values it gave the same sharding; 0 for none) and, when a result has
/// none, the results' types (`texts`): ops with the same shardings print them once.
fn write_slot(p: &mut Program, op: u32, all: &[Option<&TensorSharding>], texts: &mut SlotTexts) {
    let (slot, single) = result_slot(p.op_name(op));
    let Some(reference) = all.iter().flatten().next().copied() else {
        p.remove_attr(op, slot);
        return;
    };
    let addresses: Vec<usize> = all.iter().map(|s| s.map_or(0, |s| s as *const TensorSharding as usize)).collect();
    let types: Vec<u32> = if all.iter().any(Option::is_none) {
        p.op_results(op).map(|r| p.value_types[r as usize]).collect()
    } else {
        Vec::new()
    };
    let key = (p.ops[op as usize].name, addresses, types);
    let text = match texts.get(&key) {
        Some(&t) => t,
        None => {
            let t = slot_text(p, op, all, reference, slot, single);
            let t = p.intern(&t);
            texts.insert(key, t);
            t
        }
    };
    if p.attr_id(op, slot) != Some(text) {
        let name = p.intern(slot);
        p.set_attr_id(op, name, text);
    }
}

/// Printed result-slot texts (see [`write_slot`]).
type SlotTexts = FastMap<(u32, Vec<usize>, Vec<u32>), u32>;

/// The text of `op`'s result slot holding `all` (`reference`: the first sharding of them).
fn slot_text(
    p: &Program,
    op: u32,
    all: &[Option<&TensorSharding>],
    reference: &TensorSharding,
    slot: &str,
    single: bool,
) -> String {
    if single && slot != "sdy.sharding" && all.len() == 1 {
        print_sharding(reference)
    } else {
        let filled: Vec<TensorSharding> = p
            .op_results(op)
            .zip(all)
            .map(|(r, s)| match s {
                Some(s) => (*s).clone(),
                None => TensorSharding::replicated(
                    reference.mesh.clone(),
                    types::rank(p.strings.get(p.value_types[r as usize])),
                    true,
                ),
            })
            .collect();
        print_sharding_per_value(&filled)
    }
}
