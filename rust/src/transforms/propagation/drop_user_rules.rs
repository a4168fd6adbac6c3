//! `shardwise-drop-user-rules` (shardwise's own, not Shardy's): every op loses the rule a user
//! registered ([`super::freeze::USER_RULE`]), which the Python side sets before native passes
//! that read rules run and this pass removes after them.

use super::freeze::USER_RULE;
use crate::error::Result;
use crate::ir::Program;
use crate::transforms::PassContext;

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    for op in p.walk(0) {
        if p.attr(op, USER_RULE).is_some() {
            p.remove_attr(op, USER_RULE);
        }
    }
    Ok(())
}
