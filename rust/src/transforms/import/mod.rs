//! Import passes (Shardy's `transforms/import/`, and MLIR's `symbol-dce` that the pipelines
//! run between them).

pub mod lift_inlined_meshes;
pub mod remove_size_one_axes;
pub mod symbol_dce;

use crate::error::{Error, Result};
use crate::ir::Program;
use crate::mesh::Mesh;
use crate::text::parse_mesh;

/// The top-level `sdy.mesh` ops, in order.
pub(crate) fn mesh_ops(p: &Program) -> Vec<u32> {
    p.block_ops(p.module_block()).iter().copied().filter(|&op| p.op_name(op) == "sdy.mesh").collect()
}

/// The mesh an `sdy.mesh` op defines.
pub(crate) fn mesh_of(p: &Program, op: u32) -> Result<Mesh> {
    let text = p
        .attr(op, "mesh")
        .ok_or_else(|| Error::program(format!("{}: cannot read the mesh: no mesh", where_(p, op))))?;
    parse_mesh(text).map_err(|e| Error::program(format!("{}: cannot read the mesh: {}", where_(p, op), e.message)))
}

pub(crate) fn where_(p: &Program, op: u32) -> String {
    format!("{} at {}", p.op_name(op), p.strings.get(p.ops[op as usize].loc))
}
