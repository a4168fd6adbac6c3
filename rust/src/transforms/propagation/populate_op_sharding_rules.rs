//! `sdy-populate-op-sharding-rules` (Shardy's `transforms/propagation/
//! populate_op_sharding_rules.cc`): every op of every function that has a sharding rule in the
//! registry and no `sdy.sharding_rule` yet gets its rule as that attribute. Ops the registry
//! does not know get none, with the propagation passes' warning.

use super::freeze::{op_rules, top_funcs};
use crate::error::Result;
use crate::fast_hash::FastMap;
use crate::graph::NONE;
use crate::ir::Program;
use crate::rule::text::print_rule;
use crate::transforms::PassContext;

/// The options of the pass.
pub const OPTIONS: &[&str] = &["conservative-propagation"];

pub fn run(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    let conservative = cx.flag(OPTIONS[0], false)?;
    let name = p.intern("sdy.sharding_rule");
    for f in top_funcs(p) {
        let ops: Vec<u32> = p.walk(f).into_iter().skip(1).collect();
        let (rules, op_rule) = op_rules(p, &ops, conservative, cx)?;
        // Each distinct rule printed and interned once.
        let mut texts: FastMap<u32, u32> = FastMap::default();
        for (&op, &k) in ops.iter().zip(&op_rule) {
            if k == NONE || p.attr_id(op, "sdy.sharding_rule").is_some() {
                continue;
            }
            let text = match texts.get(&k) {
                Some(&t) => t,
                None => {
                    let t = p.intern(&print_rule(&rules[k as usize]));
                    texts.insert(k, t);
                    t
                }
            };
            p.set_attr_id(op, name, text);
        }
    }
    Ok(())
}
