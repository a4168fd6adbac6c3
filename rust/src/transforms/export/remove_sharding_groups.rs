//! `sdy-remove-sharding-groups` (Shardy's `remove_sharding_groups.cc`): every
//! `sdy.sharding_group` op leaves the program.

use super::super::PassContext;
use crate::error::Result;
use crate::fast_hash::FastSet;
use crate::ir::Program;

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let groups: FastSet<u32> = p.walk(0).into_iter().filter(|&o| p.op_name(o) == "sdy.sharding_group").collect();
    if groups.is_empty() {
        return Ok(());
    }
    let parents = p.enclosing_blocks(0);
    p.remove_ops(&groups, groups.iter().filter_map(|o| parents.get(o).copied()));
    Ok(())
}
