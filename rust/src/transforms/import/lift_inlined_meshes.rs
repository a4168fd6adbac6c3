//! `sdy-lift-inlined-meshes` (Shardy `transforms/import/lift_inlined_meshes.cc`): every mesh
//! inlined in a sharding becomes a reference to an `sdy.mesh` with the same mesh, created when
//! none exists (named `maximal_mesh_<id>`, `empty_mesh` or the first free of `mesh`,
//! `mesh_0`, `mesh_1`, ...); duplicate `sdy.mesh` definitions are removed and references to
//! them redirected to the first one; meshes inlined in the replica groups of StableHLO
//! collectives are lifted too; every `sdy.mesh` gets a `stablehlo.mesh` attribute describing
//! it.

use super::{mesh_of, mesh_ops};
use crate::error::Result;
use crate::fast_hash::FastMap;
use crate::ir::symbols::SymbolTable;
use crate::ir::Program;
use crate::mesh::{Mesh, MeshAxis};
use crate::name::Name;
use crate::sharding::MeshRef;
use crate::text::{parse_mesh, parse_string, print_mesh, print_symbol, quote};
use crate::transforms::PassContext;

/// The StableHLO collectives whose `replica_groups` may name a mesh, in the order Shardy's
/// pattern visits them.
const REPLICA_GROUP_OPS: &[&str] = &[
    "stablehlo.all_gather",
    "stablehlo.all_reduce",
    "stablehlo.reduce_scatter",
    "stablehlo.all_to_all",
    "stablehlo.collective_broadcast",
];

fn new_mesh_name(mesh: &Mesh) -> String {
    if let Some(d) = mesh.maximal_device() {
        format!("maximal_mesh_{d}")
    } else if mesh.is_empty() {
        "empty_mesh".into()
    } else {
        "mesh".into()
    }
}

/// `stablehlo.mesh`: the mesh as a dictionary of axes (and device ids).
fn stablehlo_mesh_dict(mesh: &Mesh) -> String {
    let axes: Vec<String> =
        mesh.axes().iter().map(|a| format!("{{name = {}, size = {} : i64}}", quote(&a.name), a.size)).collect();
    let mut out = format!("{{axes = [{}]", axes.join(", "));
    let ids = mesh.device_ids();
    if !ids.is_empty() {
        let list: Vec<String> = ids.iter().map(i64::to_string).collect();
        // jaxlib prints a one-element (splat) dense literal without brackets.
        let body = if ids.len() == 1 { list[0].clone() } else { format!("[{}]", list.join(", ")) };
        out.push_str(&format!(", device_ids = dense<{body}> : tensor<{}xi64>", ids.len()));
    }
    out.push('}');
    out
}

struct Lifter {
    symbols: SymbolTable,
    /// Where the next new mesh goes: after this op (at the module's start when `None`).
    anchor: Option<u32>,
    loc: u32,
}

impl Lifter {
    fn add_mesh(&mut self, p: &mut Program, mesh: &Mesh, name: &str) -> String {
        let attrs = [(p.intern("mesh"), p.intern(&print_mesh(mesh))), (p.intern("sym_name"), p.intern(&quote(name)))];
        let op = p.new_op("sdy.mesh", &[], &[], &attrs, self.loc);
        let block = p.module_block();
        let mut ops = p.block_ops(block).to_vec();
        let at = match self.anchor {
            Some(a) => ops.iter().position(|&o| o == a).map_or(ops.len(), |i| i + 1),
            None => 0,
        };
        ops.insert(at, op);
        p.set_block_ops(block, &ops);
        self.anchor = Some(op);
        self.symbols.insert(p, op)
    }
}

/// `#stablehlo.replica_group_mesh_axes<mesh = M, axes = [...]>`: (M, the axes text).
fn replica_groups(text: &str) -> Option<(&str, &str)> {
    let body = text.strip_prefix("#stablehlo.replica_group_mesh_axes<mesh = ")?.strip_suffix('>')?;
    if !body.ends_with(']') {
        return None;
    }
    let at = body.find(", axes = [")?;
    Some((&body[..at], &body[at + ", axes = ".len()..]))
}

/// The axes `<name = "x", size = 2>` of a `#stablehlo.mesh<...>`.
fn stablehlo_mesh_axes(text: &str) -> Vec<MeshAxis> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("<name = \"") {
        let s = &rest[at + "<name = ".len()..];
        let b = s.as_bytes();
        let mut j = 1;
        while j < b.len() && b[j] != b'"' {
            j += if b[j] == b'\\' { 2 } else { 1 };
        }
        if j >= b.len() {
            break;
        }
        let name = &s[..=j];
        let tail = &s[j + 1..];
        rest = tail;
        let Some(size) = tail.strip_prefix(", size = ") else { continue };
        let digits = size.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || !size[digits..].starts_with('>') {
            continue;
        }
        if let (Ok(name), Ok(size)) = (parse_string(name), size[..digits].parse()) {
            out.push(MeshAxis { name, size });
        }
    }
    out
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let mut lifter = Lifter { symbols: SymbolTable::new(p), anchor: None, loc: p.intern("loc(unknown)") };
    let mut by_mesh: FastMap<Mesh, String> = FastMap::default();
    let mut renamed: FastMap<String, String> = FastMap::default();
    for op in mesh_ops(p) {
        let mesh = mesh_of(p, op)?;
        let name = p.symbol_name(op).unwrap_or_default();
        if let Some(first) = by_mesh.get(&mesh) {
            renamed.insert(name, first.clone());
            lifter.symbols.erase(p, op);
        } else {
            by_mesh.insert(mesh, name);
            lifter.anchor = Some(op);
        }
    }
    p.transform_shardings(&mut |p, s, _site| {
        let name = match &s.mesh {
            MeshRef::Named(n) => match renamed.get(n.as_str()) {
                Some(new) => new.clone(),
                None => return Ok(None),
            },
            MeshRef::Inline(mesh) => match by_mesh.get(mesh) {
                Some(n) => n.clone(),
                None => {
                    let n = lifter.add_mesh(p, mesh, &new_mesh_name(mesh));
                    by_mesh.insert((**mesh).clone(), n.clone());
                    n
                }
            },
        };
        let mut new = s.clone();
        new.mesh = MeshRef::Named(Name::new(&name));
        Ok(Some(new))
    })?;

    let mut by_kind: Vec<Vec<u32>> = vec![Vec::new(); REPLICA_GROUP_OPS.len()];
    for op in p.walk(0) {
        if let Some(k) = REPLICA_GROUP_OPS.iter().position(|n| *n == p.op_name(op)) {
            if p.attr(op, "replica_groups").is_some() {
                by_kind[k].push(op);
            }
        }
    }
    let mut shlo_names: FastMap<String, String> = FastMap::default();
    for op in by_kind.into_iter().flatten() {
        let text = p.attr(op, "replica_groups").unwrap_or_default().to_string();
        let Some((mesh_text, axes_text)) = replica_groups(&text) else { continue };
        let new_name = if let Some(reference) = mesh_text.strip_prefix('@') {
            let name =
                if reference.starts_with('"') { parse_string(reference).ok() } else { Some(reference.to_string()) };
            name.and_then(|n| renamed.get(&n).cloned())
        } else if mesh_text.starts_with("#sdy.mesh") {
            let mesh = parse_mesh(mesh_text).map_err(|e| e.context(&text))?;
            Some(match by_mesh.get(&mesh) {
                Some(n) => n.clone(),
                None => {
                    let n = lifter.add_mesh(p, &mesh, &new_mesh_name(&mesh));
                    by_mesh.insert(mesh, n.clone());
                    n
                }
            })
        } else if mesh_text.starts_with("#stablehlo.mesh") {
            Some(match shlo_names.get(mesh_text) {
                Some(n) => n.clone(),
                None => {
                    let mesh = Mesh::new(stablehlo_mesh_axes(mesh_text), Vec::new())?;
                    let n = lifter.add_mesh(p, &mesh, "mesh");
                    shlo_names.insert(mesh_text.to_string(), n.clone());
                    n
                }
            })
        } else {
            None
        };
        if let Some(name) = new_name {
            let mut reference = String::new();
            print_symbol(&name, &mut reference);
            let value = format!("#stablehlo.replica_group_mesh_axes<mesh = {reference}, axes = {axes_text}>");
            p.set_attr(op, "replica_groups", &value);
        }
    }

    for op in mesh_ops(p) {
        if p.attr(op, "stablehlo.mesh").is_none() {
            let dict = stablehlo_mesh_dict(&mesh_of(p, op)?);
            p.set_attr(op, "stablehlo.mesh", &dict);
        }
    }
    Ok(())
}
