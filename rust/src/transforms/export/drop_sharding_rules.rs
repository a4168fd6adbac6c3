//! `sdy-drop-sharding-rules` (Shardy's `drop_sharding_rules.cc`): every op of every function
//! loses its `sdy.sharding_rule`, except users' custom rules.

use super::super::PassContext;
use crate::error::Result;
use crate::ir::Program;
use crate::transforms::propagation::freeze::top_funcs;

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    for f in top_funcs(p) {
        for op in p.walk(f) {
            if p.attr(op, "sdy.sharding_rule").is_some_and(|t| !t.trim_end().ends_with("custom>")) {
                p.remove_attr(op, "sdy.sharding_rule");
            }
        }
    }
    Ok(())
}
