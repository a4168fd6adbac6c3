//! `sdy-update-non-divisible-input-output-shardings` (Shardy's
//! `update_non_divisible_input_output_shardings.cc`): function argument and result, call result
//! and manual computation in/out shardings that do not divide their tensor shrink: each
//! dimension that is not divided keeps its longest prefix of axes (possibly ending in a
//! sub-axis) that divides it.

use super::super::common::{meshes, resolve_mesh};
use super::super::PassContext;
use crate::axis::AxisRef;
use crate::error::Result;
use crate::fast_hash::FastMap;
use crate::ir::values::{
    add_free_axes, erase_manual_axes, manual_axes, result_sharding, set_func_sharding, ParsedShardings,
};
use crate::ir::{types, Program};
use crate::mesh::Mesh;
use crate::sharding::{DimSharding, TensorSharding};
use crate::text::{parse_sharding_per_value, print_sharding_per_value};
use crate::transforms::propagation::freeze::top_funcs;

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

fn axis_size(a: &AxisRef, mesh: &Mesh) -> i64 {
    match a.sub {
        Some(sub) => sub.size,
        None => mesh.axis_size(&a.name).unwrap_or(1),
    }
}

/// `s` with each dimension that its axes do not divide cut to the longest dividing prefix
/// (its priority dropped).
fn evenly_sharded(s: &TensorSharding, shape: &[i64], mesh: &Mesh) -> TensorSharding {
    let mut out = s.clone();
    for (d, &size) in out.dims.iter_mut().zip(shape) {
        let sharded: i64 = d.axes.iter().map(|a| axis_size(a, mesh)).product();
        if sharded != 0 && size % sharded == 0 {
            continue;
        }
        let mut remaining = size;
        let mut axes = Vec::new();
        for a in &d.axes {
            let asize = axis_size(a, mesh);
            let g = gcd(asize, remaining);
            if g == 1 {
                break;
            }
            if asize == g {
                axes.push(a.clone());
                remaining /= g;
            } else {
                axes.push(AxisRef::sub(a.name, a.pre_size(), g));
                break;
            }
        }
        *d = DimSharding { axes, closed: d.closed, priority: None };
    }
    out
}

struct Even<'a> {
    meshes: &'a FastMap<String, Mesh>,
}

impl Even<'_> {
    fn mesh(&self, s: &TensorSharding) -> Result<Mesh> {
        resolve_mesh(s, self.meshes).cloned()
    }

    /// `s` made even on a value of type `ty` when that is a static tensor, else `s`.
    fn even(&self, s: &TensorSharding, ty: &str) -> Result<TensorSharding> {
        match types::tensor_shape(ty) {
            Some(shape) if shape.iter().all(|&d| d >= 0) => Ok(evenly_sharded(s, &shape, &self.mesh(s)?)),
            _ => Ok(s.clone()),
        }
    }
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let meshes = meshes(p)?;
    let e = Even { meshes: &meshes };
    let funcs = p.func_index();
    let mut parsed = ParsedShardings::default();
    for f in top_funcs(p) {
        let fi = funcs[&f];
        let entry = p.region_blocks(f, 0);
        if !entry.is_empty() {
            let args: Vec<u32> = p.block_args(entry.start).collect();
            for (k, a) in args.into_iter().enumerate() {
                if let Some(s) = parsed.func_arg(p, fi, k)? {
                    let new = e.even(s, p.strings.get(p.value_types[a as usize]))?;
                    if new != *s {
                        set_func_sharding(p, fi, k, false, Some(&new));
                    }
                }
            }
        }
        for k in 0..p.funcs[fi].result_types.len() {
            if let Some(s) = parsed.func_result(p, fi, k)? {
                let new = e.even(s, p.strings.get(p.funcs[fi].result_types[k]))?;
                if new != *s {
                    set_func_sharding(p, fi, k, true, Some(&new));
                }
            }
        }
    }
    for op in p.walk(0) {
        let name = p.op_name(op);
        if name != "func.call" && name != "sdy.manual_computation" {
            continue;
        }
        let manual = name == "sdy.manual_computation";
        if manual {
            if let Some(text) = p.attr(op, "in_shardings") {
                let outer = parse_sharding_per_value(text).map_err(|e| e.context(p.op_where(op)))?;
                if !outer.is_empty() {
                    let axes = manual_axes(p.attr(op, "manual_axes").unwrap_or(""));
                    let entry = p.region_blocks(op, 0);
                    let args: Vec<u32> =
                        if entry.is_empty() { Vec::new() } else { p.block_args(entry.start).collect() };
                    let mut new = Vec::with_capacity(outer.len());
                    for (o, a) in outer.iter().zip(&args) {
                        let inner = e.even(&erase_manual_axes(o, &axes), p.strings.get(p.value_types[*a as usize]))?;
                        new.push(add_free_axes(o, &inner, &axes));
                    }
                    let text = print_sharding_per_value(&new);
                    if p.attr(op, "in_shardings") != Some(text.as_str()) {
                        p.set_attr(op, "in_shardings", &text);
                    }
                }
            }
        }
        let results: Vec<u32> = p.op_results(op).collect();
        if results.is_empty() {
            continue;
        }
        let current: Vec<Option<TensorSharding>> =
            (0..results.len()).map(|k| result_sharding(p, op, k)).collect::<Result<_>>()?;
        let Some(all) = current.into_iter().collect::<Option<Vec<_>>>() else { continue };
        let new: Vec<TensorSharding> = all
            .iter()
            .zip(&results)
            .map(|(s, &r)| e.even(s, p.strings.get(p.value_types[r as usize])))
            .collect::<Result<_>>()?;
        if new != all {
            let slot = if manual { "out_shardings" } else { "sdy.sharding" };
            p.set_attr(op, slot, &print_sharding_per_value(&new));
        }
    }
    Ok(())
}
