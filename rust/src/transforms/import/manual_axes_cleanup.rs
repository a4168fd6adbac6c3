//! `sdy-manual-axes-cleanup` (Shardy `transforms/import/manual_axes_cleanup.cc`): for every
//! `sdy.manual_computation`, sorts `manual_axes` in mesh order and adds the manual axes an in
//! or out sharding does not use to its replicated axes.

use crate::axis::AxisRef;
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
pub use crate::ir::values::manual_axes;
use crate::ir::{types, Program};
use crate::mesh::Mesh;
use crate::propagation::axes::{axis_set_diff, sort_and_merge_axes};
use crate::sharding::{MeshRef, TensorSharding};
use crate::text::{parse_sharding_per_value, print_sharding_per_value, print_string};
use crate::transforms::common::{meshes, post_order_of, resolve_mesh, where_};
use crate::transforms::PassContext;

const MANUAL_COMPUTATION: &str = "sdy.manual_computation";

/// The `manual_axes` text for `names`.
pub fn manual_axes_text(names: &[String]) -> String {
    let quoted: Vec<String> = names
        .iter()
        .map(|n| {
            let mut s = String::new();
            print_string(n, &mut s);
            s
        })
        .collect();
    format!("#sdy<manual_axes{{{}}}>", quoted.join(", "))
}

/// Shardy's `getCommonMeshOrRef`: the first sharding on a non-empty mesh (or the first) when
/// all non-empty meshes agree.
fn common_mesh<'a>(
    shardings: &'a [TensorSharding],
    meshes: &'a FastMap<String, Mesh>,
) -> Result<Option<(&'a TensorSharding, &'a Mesh)>> {
    let mut found: Option<(&TensorSharding, &Mesh)> = None;
    for s in shardings {
        let other = resolve_mesh(s, meshes)?;
        match found {
            None => found = Some((s, other)),
            Some((_, mesh)) if mesh.is_empty() => found = Some((s, other)),
            Some(_) if other.is_empty() => {}
            Some((_, mesh)) if other != mesh => return Ok(None),
            Some(_) => {}
        }
    }
    Ok(found)
}

/// The shardings with the manual axes they do not use added to their replicated axes (on the
/// common mesh), or `None` when none changes. Values that are not tensors keep theirs.
fn add_unused_manual_axes(
    shardings: &[TensorSharding],
    is_tensor: &[bool],
    manual: &[AxisRef],
    reference: &MeshRef,
    mesh: &Mesh,
) -> Result<Option<Vec<TensorSharding>>> {
    let mut out = Vec::with_capacity(shardings.len());
    let mut modified = false;
    for (s, &tensor) in shardings.iter().zip(is_tensor) {
        if !tensor {
            out.push(s.clone());
            continue;
        }
        let used: Vec<AxisRef> = s.axis_refs().cloned().collect();
        let unused = axis_set_diff(manual, &used, mesh)?;
        if unused.is_empty() {
            out.push(s.clone());
            continue;
        }
        let mut replicated = s.replicated.clone();
        replicated.extend(unused);
        let mut new = s.clone();
        new.replicated = sort_and_merge_axes(&replicated, mesh)?;
        new.mesh = reference.clone();
        out.push(new);
        modified = true;
    }
    Ok(modified.then_some(out))
}

fn read(p: &Program, op: u32, slot: &str) -> Result<Vec<TensorSharding>> {
    match p.attr(op, slot) {
        None => Ok(Vec::new()),
        Some(text) => parse_sharding_per_value(text).map_err(|e| e.context(where_(p, op))),
    }
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let meshes = meshes(p)?;
    // Shardy walks in post-order: inner manual computations first.
    let mut order = p.walk(0);
    order.retain(|&op| p.op_name(op) == MANUAL_COMPUTATION);
    for op in post_order_of(p, &order) {
        let ins = read(p, op, "in_shardings")?;
        let outs = read(p, op, "out_shardings")?;
        let names = manual_axes(p.attr(op, "manual_axes").unwrap_or(""));
        if ins.is_empty() && outs.is_empty() {
            let entry = p.region_blocks(op, 0).start;
            let body = p.block_ops(entry);
            if !names.is_empty() && body.first().is_none_or(|&o| p.op_name(o) != "sdy.return") {
                return Err(Error::program(format!(
                    "{}: op has manual_axes when there are no in/out shardings and the body is not empty. \
                     This isn't allowed at this stage, please contact the Shardy team or file a bug.",
                    where_(p, op)
                )));
            }
            continue;
        }
        let all: Vec<TensorSharding> = ins.iter().chain(&outs).cloned().collect();
        let Some((reference, mesh)) = common_mesh(&all, &meshes)? else {
            return Err(Error::program(format!(
                "{}: expected inputs and outputs to have a common mesh",
                where_(p, op)
            )));
        };
        let (reference, mesh) = (reference.mesh.clone(), mesh.clone());
        let position = |n: &String| mesh.axis_index(n).unwrap_or(mesh.axes().len());
        let mut sorted = names.clone();
        sorted.sort_by_key(position);
        if sorted != names {
            p.set_attr(op, "manual_axes", &manual_axes_text(&sorted));
        }
        let manual: Vec<AxisRef> = sorted.iter().map(AxisRef::full).collect();
        let tensor = |p: &Program, vs: Vec<u32>| -> Vec<bool> {
            vs.into_iter().map(|v| types::tensor_shape(p.strings.get(p.value_types[v as usize])).is_some()).collect()
        };
        if p.attr(op, "in_shardings").is_some() {
            let operands = tensor(p, p.op_operands(op).to_vec());
            if let Some(new) = add_unused_manual_axes(&ins, &operands, &manual, &reference, &mesh)? {
                p.set_attr(op, "in_shardings", &print_sharding_per_value(&new));
            }
        }
        let results: Vec<u32> = p.op_results(op).collect();
        if !results.is_empty() && outs.len() == results.len() {
            let results = tensor(p, results);
            if let Some(new) = add_unused_manual_axes(&outs, &results, &manual, &reference, &mesh)? {
                p.set_attr(op, "out_shardings", &print_sharding_per_value(&new));
            }
        }
    }
    Ok(())
}
