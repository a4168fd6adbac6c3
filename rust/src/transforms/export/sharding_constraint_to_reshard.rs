//! `sdy-sharding-constraint-to-reshard` (Shardy's `sharding_constraint_to_reshard.cc`): every
//! `sdy.sharding_constraint` in a function becomes an `sdy.reshard` with the same input,
//! sharding and other attributes.

use super::super::PassContext;
use crate::error::Result;
use crate::ir::Program;
use crate::transforms::propagation::freeze::top_funcs;

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    for f in top_funcs(p) {
        for op in p.walk(f) {
            if p.op_name(op) == "sdy.sharding_constraint" {
                p.rename_op(op, "sdy.reshard");
            }
        }
    }
    Ok(())
}
