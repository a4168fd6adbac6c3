//! Helpers the native passes share (Shardy's `shardy/dialect/sdy/ir/utils.cc` and
//! `transforms/common/`): callees, the module's meshes, function shardings.

use crate::error::{Error, Result};
use crate::fast_hash::{FastMap, FastSet};
use crate::ir::symbols::SymbolTable;
use crate::ir::{types, Program};
use crate::mesh::Mesh;
use crate::sharding::{MeshRef, TensorSharding};
use crate::text::{parse_mesh, parse_sharding, parse_string};

pub const CALL: &str = "func.call";

/// `op` and where it was read from, for messages.
pub fn where_(p: &Program, op: u32) -> String {
    p.op_where(op)
}

/// The callee of a `func.call` (without `@`).
pub fn callee_name(p: &Program, call: u32) -> Option<String> {
    let text = p.attr(call, "callee")?.strip_prefix('@')?;
    if text.starts_with('"') {
        parse_string(text).ok()
    } else {
        Some(text.to_string())
    }
}

/// The `func.func` a call calls; a `Program` error naming the call when there is none.
pub fn callee(p: &Program, symbols: &SymbolTable, call: u32) -> Result<u32> {
    let name = callee_name(p, call).unwrap_or_default();
    match symbols.lookup(&name) {
        Some(f) if p.op_name(f) == "func.func" => Ok(f),
        _ => Err(Error::program(format!("{}: calls @{name}, which the module does not define", where_(p, call)))),
    }
}

/// The top-level `sdy.mesh` ops, in order.
pub fn mesh_ops(p: &Program) -> Vec<u32> {
    p.block_ops(p.module_block()).iter().copied().filter(|&op| p.op_name(op) == "sdy.mesh").collect()
}

/// The mesh an `sdy.mesh` op defines.
pub fn mesh_of(p: &Program, op: u32) -> Result<Mesh> {
    let text = p
        .attr(op, "mesh")
        .ok_or_else(|| Error::program(format!("{}: cannot read the mesh: no mesh", where_(p, op))))?;
    parse_mesh(text).map_err(|e| Error::program(format!("{}: cannot read the mesh: {}", where_(p, op), e.message)))
}

/// The module's meshes by name (a name defined twice: the first).
pub fn meshes(p: &Program) -> Result<FastMap<String, Mesh>> {
    let mut out = FastMap::default();
    for op in mesh_ops(p) {
        let mesh = mesh_of(p, op)?;
        out.entry(p.symbol_name(op).unwrap_or_default()).or_insert(mesh);
    }
    Ok(out)
}

/// The mesh of `s`, inlined or named (`None` for a name the module does not define).
pub fn mesh_of_sharding<'a>(s: &'a TensorSharding, meshes: &'a FastMap<String, Mesh>) -> Option<&'a Mesh> {
    match &s.mesh {
        MeshRef::Inline(m) => Some(m),
        MeshRef::Named(n) => meshes.get(n.as_str()),
    }
}

/// The mesh of `s`; a `Program` error when it names a mesh the module does not define.
pub fn resolve_mesh<'a>(s: &'a TensorSharding, meshes: &'a FastMap<String, Mesh>) -> Result<&'a Mesh> {
    mesh_of_sharding(s, meshes).ok_or_else(|| {
        let name = match &s.mesh {
            MeshRef::Named(n) => n.as_str(),
            MeshRef::Inline(_) => "",
        };
        Error::program(format!(
            "sharding {} refers to mesh @{name}, which the module does not define",
            crate::text::print_sharding(s)
        ))
    })
}

/// Whether function op `f` has a body.
pub fn has_body(p: &Program, f: u32) -> bool {
    p.ops[f as usize].regions.0 < p.ops[f as usize].regions.1 && !p.region_blocks(f, 0).is_empty()
}

/// The functions with bodies in reverse post-order of MLIR's `CallGraph` from its external
/// node (Shardy's `iterateFuncs(preOrder=true)`): callers before callees, functions in module
/// order otherwise; and the `func.call` ops of each, in program order.
pub fn call_graph_rpo(p: &Program, symbols: &SymbolTable) -> (Vec<u32>, FastMap<u32, Vec<u32>>) {
    let funcs: Vec<u32> = p
        .block_ops(p.module_block())
        .iter()
        .copied()
        .filter(|&f| p.op_name(f) == "func.func" && has_body(p, f))
        .collect();
    let mut edges: FastMap<u32, Vec<u32>> = FastMap::default();
    let mut calls: FastMap<u32, Vec<u32>> = FastMap::default();
    for &f in &funcs {
        let mut out = Vec::new();
        let mut in_f = Vec::new();
        for op in p.walk(f) {
            if p.op_name(op) != CALL {
                continue;
            }
            in_f.push(op);
            let target = callee_name(p, op).and_then(|n| symbols.lookup(&n));
            if let Some(c) = target {
                if p.op_name(c) == "func.func" && has_body(p, c) && !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        edges.insert(f, out);
        calls.insert(f, in_f);
    }
    let mut visited: crate::fast_hash::FastSet<u32> = Default::default();
    let mut post = Vec::new();
    for &root in &funcs {
        if !visited.insert(root) {
            continue;
        }
        let mut stack: Vec<(u32, usize)> = vec![(root, 0)];
        while let Some(&mut (node, ref mut i)) = stack.last_mut() {
            let children = &edges[&node];
            if *i < children.len() {
                let c = children[*i];
                *i += 1;
                if visited.insert(c) {
                    stack.push((c, 0));
                }
            } else {
                stack.pop();
                post.push(node);
            }
        }
    }
    post.reverse();
    (post, calls)
}

/// `sdy.original_func_name` of function op `f` if set, else its name (`getOriginalFuncName`).
pub fn original_func_name(p: &Program, f: u32) -> String {
    p.attr(f, "sdy.original_func_name")
        .and_then(|t| parse_string(t).ok())
        .unwrap_or_else(|| p.symbol_name(f).unwrap_or_default())
}

/// Makes `call` call `@name`.
pub fn set_callee(p: &mut Program, call: u32, name: &str) {
    let mut text = String::new();
    crate::text::print_symbol(name, &mut text);
    p.set_attr(call, "callee", &text);
}

/// Appends function `f` to the module and registers it (renamed `name_N` when its name is
/// taken); its name.
pub fn append_func(p: &mut Program, symbols: &mut SymbolTable, f: u32) -> String {
    let block = p.module_block();
    let mut ops = p.block_ops(block).to_vec();
    ops.push(f);
    p.set_block_ops(block, &ops);
    symbols.insert(p, f)
}

/// Shardy's `cloneFuncRecursively`: a copy of `func` (in no block) marked with
/// `sdy.original_func_name`, whose calls call fresh recursive copies of their callees
/// (appended to the module first, renamed `name_N`).
pub fn clone_func_recursively(p: &mut Program, symbols: &mut SymbolTable, func: u32) -> u32 {
    let mut mapping = crate::ir::clone::Mapping::default();
    let new = p.clone_op(func, &mut mapping);
    let mut original = String::new();
    crate::text::print_string(&original_func_name(p, func), &mut original);
    p.set_attr(new, "sdy.original_func_name", &original);
    // Calls have no regions: post-order is program order.
    let calls: Vec<u32> = p.walk(new).into_iter().filter(|&o| p.op_name(o) == CALL).collect();
    for call in calls {
        if let Some(callee) = callee_name(p, call).and_then(|n| symbols.lookup(&n)) {
            let clone = clone_func_recursively(p, symbols, callee);
            let name = append_func(p, symbols, clone);
            set_callee(p, call, &name);
        }
    }
    new
}

/// The `func.call` ops in the order of Shardy's `walkCalls`: functions in post-order of the
/// call graph (callees first), calls of a function in program order.
pub fn walk_calls(p: &Program, symbols: &SymbolTable) -> Vec<u32> {
    let (rpo, mut calls) = call_graph_rpo(p, symbols);
    rpo.iter().rev().flat_map(|f| calls.remove(f).unwrap_or_default()).collect()
}

/// `ops` (in pre-order) rearranged so that an op comes after the ops nested in it.
pub fn post_order_of(p: &Program, ops: &[u32]) -> Vec<u32> {
    let spans = pre_order_spans(p);
    let span = |op: u32| spans.get(op as usize).copied().filter(|&(start, _)| start != u32::MAX);
    if ops.iter().any(|&op| span(op).is_none()) {
        return post_order_by_walks(p, ops);
    }
    let mut out: Vec<u32> = Vec::with_capacity(ops.len());
    let mut open: Vec<u32> = Vec::new();
    for &op in ops {
        let (at, _) = spans[op as usize];
        while let Some(&top) = open.last() {
            let (start, end) = spans[top as usize];
            if start < at && at < end {
                break;
            }
            out.push(top);
            open.pop();
        }
        open.push(op);
    }
    out.extend(open.into_iter().rev());
    out
}

/// Each op's pre-order position in the module (op 0) and the position after the ops nested in
/// it (`u32::MAX` for ops outside it): the ops nested in `t` are those at `(start, end)`.
fn pre_order_spans(p: &Program) -> Vec<(u32, u32)> {
    let mut spans = vec![(u32::MAX, u32::MAX); p.ops.len()];
    let mut next = 0u32;
    // (op, entered): an op is pushed again to close its span after the ops nested in it.
    let mut stack = vec![(0u32, false)];
    while let Some((op, entered)) = stack.pop() {
        if entered {
            spans[op as usize].1 = next;
            continue;
        }
        spans[op as usize].0 = next;
        next += 1;
        stack.push((op, true));
        let (a, b) = p.ops[op as usize].regions;
        for r in (a..b).rev() {
            let (s, e) = p.regions[r as usize];
            for blk in (s..e).rev() {
                stack.extend(p.block_ops(blk).iter().rev().map(|&o| (o, false)));
            }
        }
    }
    spans
}

/// [`post_order_of`] for ops outside the module: what each op nests found by walking it.
fn post_order_by_walks(p: &Program, ops: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::with_capacity(ops.len());
    let mut open: Vec<(u32, FastSet<u32>)> = Vec::new();
    for &op in ops {
        while let Some((top, inside)) = open.last() {
            if inside.contains(&op) {
                break;
            }
            out.push(*top);
            open.pop();
        }
        open.push((op, p.walk(op).into_iter().skip(1).collect()));
    }
    out.extend(open.into_iter().rev().map(|(top, _)| top));
    out
}

/// The `sdy.sharding` of each argument (or, with `results`, result) of function `func`
/// (`None` where it has none).
fn func_shardings_raw(p: &Program, func: u32, results: bool) -> Result<Vec<Option<TensorSharding>>> {
    let index = p.func_index();
    let Some(f) = p.func_data(&index, func) else { return Ok(Vec::new()) };
    let spans = if results { &f.result_attrs } else { &f.arg_attrs };
    spans
        .iter()
        .map(|&(a, b)| {
            let text = p.attrs[a as usize..b as usize]
                .iter()
                .find(|(k, _)| p.strings.get(*k) == "sdy.sharding")
                .map(|&(_, v)| p.strings.get(v));
            text.map(|t| parse_sharding(t).map_err(|e| e.context(where_(p, func)))).transpose()
        })
        .collect()
}

/// Shardy's `getFuncArgShardings` (or, with `results`, `getFuncResultShardings`): the
/// shardings of `func`, fully open on the mesh of the first sharding not on a maximal mesh
/// where missing; `None` when it has no such sharding.
fn func_shardings(
    p: &Program,
    func: u32,
    meshes: &FastMap<String, Mesh>,
    results: bool,
) -> Result<Option<Vec<TensorSharding>>> {
    let shardings = func_shardings_raw(p, func, results)?;
    let reference = shardings.iter().flatten().find(|s| mesh_of_sharding(s, meshes).is_none_or(|m| !m.is_maximal()));
    let Some(reference) = reference else { return Ok(None) };
    let index = p.func_index();
    let types = p.func_data(&index, func).map(|f| if results { f.result_types.clone() } else { f.arg_types.clone() });
    Ok(Some(
        shardings
            .iter()
            .zip(types.unwrap_or_default())
            .map(|(s, t)| match s {
                Some(s) => s.clone(),
                None => TensorSharding::replicated(reference.mesh.clone(), types::rank(p.strings.get(t)), true),
            })
            .collect(),
    ))
}

/// Shardy's `getFuncArgShardings` (see [`func_shardings`]).
pub fn func_arg_shardings(
    p: &Program,
    func: u32,
    meshes: &FastMap<String, Mesh>,
) -> Result<Option<Vec<TensorSharding>>> {
    func_shardings(p, func, meshes, false)
}

/// Shardy's `getFuncResultShardings` (see [`func_shardings`]).
pub fn func_result_shardings(
    p: &Program,
    func: u32,
    meshes: &FastMap<String, Mesh>,
) -> Result<Option<Vec<TensorSharding>>> {
    func_shardings(p, func, meshes, true)
}
