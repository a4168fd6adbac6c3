//! `sdy-inline-meshes` (Shardy's `transforms/import/inline_meshes.cc`): every mesh reference in
//! a sharding is replaced by the mesh itself and every `sdy.mesh` is removed.

use super::{mesh_of, mesh_ops};
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::ir::symbols::SymbolTable;
use crate::ir::Program;
use crate::mesh::Mesh;
use crate::sharding::MeshRef;
use crate::text::print_sharding;
use crate::transforms::PassContext;

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let defined = mesh_ops(p);
    let mut meshes: FastMap<String, Mesh> = FastMap::default();
    for &op in &defined {
        meshes.insert(p.symbol_name(op).unwrap_or_default(), mesh_of(p, op)?);
    }
    p.transform_shardings(&mut |_, s, _site| {
        let MeshRef::Named(name) = &s.mesh else { return Ok(None) };
        let Some(mesh) = meshes.get(name.as_str()) else {
            return Err(Error::program(format!(
                "sharding {} refers to mesh @{}, which the module does not define",
                print_sharding(s),
                name.as_str()
            )));
        };
        let mut new = s.clone();
        new.mesh = MeshRef::Inline(mesh.clone().into());
        Ok(Some(new))
    })?;
    let mut symbols = SymbolTable::new(p);
    for op in defined {
        symbols.erase(p, op);
    }
    Ok(())
}
