//! Sharding groups (Shardy `ShardingGroupMap::syncGroupMemberShardings`,
//! `transforms/import/sharding_group_import.cc`) and the manual computations' checks
//! (`ManualComputationOp::verify`, `ir/verifiers.cc`).

use std::sync::Arc;

use super::{GroupConflict, Solver};
use crate::error::{Error, Result};
use crate::propagation::program::OpKind;
use crate::propagation::transforms::is_fully_open;
use crate::sharding::TensorSharding;

impl<'g> Solver<'g> {
    /// Shardy `ShardingGroupMap::syncGroupMemberShardings`: every member of a group gets the
    /// group's common sharding. Groups whose members disagree are returned (and left alone).
    pub fn sync_sharding_groups(&mut self) -> Vec<GroupConflict> {
        let mut conflicts = Vec::new();
        for g in 0..self.prog.groups.len() {
            let (id, members) = self.prog.groups[g].clone();
            let mut common: Option<TensorSharding> = None;
            let mut conflict = false;
            if members.len() == 1 {
                common = self.get_sharding(members[0]);
            } else {
                for &m in &members {
                    let Some(c) = self.get_sharding(m) else { continue };
                    if is_fully_open(&c) {
                        continue;
                    }
                    match &common {
                        None => common = Some(c),
                        Some(s) if *s != c => {
                            conflict = true;
                            break;
                        }
                        Some(_) => {}
                    }
                }
            }
            let Some(sharding) = common else { continue };
            if conflict {
                conflicts.push(GroupConflict { group_id: id, members, sharding });
                continue;
            }
            for m in members {
                self.set_sharding(m, Arc::new(sharding.clone()));
            }
        }
        conflicts
    }

    /// Checks what Shardy's verifier checks of the shardings propagation writes on manual
    /// computations: in each dimension of an in or out sharding, the manual axes come before
    /// the free ones (propagation from outside can break it, and Shardy then fails
    /// verification after the pass).
    pub fn verify_manual_computations(&self) -> Result<()> {
        for op in 0..self.alive.len() as u32 {
            if !self.is_alive(op) || self.prog.kind[op as usize] != OpKind::ManualComputation {
                continue;
            }
            let manual = self.prog.manual_axes.get(&op).map_or(&[][..], Vec::as_slice);
            let lists = [("operand", self.prog.block_args.row(op as usize)), ("result", self.prog.results(op))];
            for (what, values) in lists {
                for (i, &v) in values.iter().enumerate() {
                    let Some(s) = &self.raw[v as usize] else { continue };
                    for (d, dim) in s.dims.iter().enumerate() {
                        let is_manual = |a: &crate::axis::AxisRef| manual.iter().any(|m| a.name == *m);
                        let first_free = dim.axes.iter().position(|a| !is_manual(a)).unwrap_or(dim.axes.len());
                        if let Some(a) = dim.axes[first_free..].iter().find(|a| is_manual(a)) {
                            return Err(Error::invariant(
                                "manual-axis-after-free-axis",
                                format!(
                                    "sdy.manual_computation (op {op}): {what} sharding at index {i} must have all manual axes come before free axes in its dimension sharding at index {d}; saw manual axis {a} after free axis {} in {}",
                                    dim.axes[first_free],
                                    crate::text::print_sharding(s)
                                ),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
