//! The sdy collectives against their operand's sharding (openxla/shardy
//! `dialect/sdy/ir/verifiers.cc`: `verifyCollectiveOp` and each collective's `verify`, as
//! jaxlib 0.10.2 applies them; each rule here was checked against it):
//! * the operand has a sharding (`all_slice`, `reduce_scatter` and `all_reduce` may take a
//!   replicated operand without one), on the result's mesh (but for `collective_permute`);
//! * `all_gather` and `sharded_to_unreduced` remove their axes from the end of each dimension;
//!   `all_slice` and `reduce_scatter` append theirs; `all_to_all` moves each parameter's axes
//!   from the end of its source dimension to the end of its target dimension;
//! * `all_reduce` keeps an equivalent sharding and reduces along axes that the operand's
//!   dimensions and replicated axes do not use;
//! * `replicated_to_unreduced` keeps the dimension shardings; `collective_permute` keeps each
//!   dimension's sharded size;
//! * the collective's own axes are axes of the mesh, none overlapping another (Shardy's
//!   `verifyAxisRefList`).
//!
//! The operand's sharding is found where it is written down: the `sdy.sharding` of the op that
//! defines it (or its `out_sharding`/`sharding`, or a computation's `out_shardings`), a
//! function argument's, or for an argument of a `while`'s regions the while's. An operand that
//! is another region's argument is not looked up, and its collective is not checked against it.

use super::{Verifier, VerifyError};
use crate::axis::AxisRef;
use crate::export::is_equivalent;
use crate::fast_hash::FastMap;
use crate::ir::Program;
use crate::mesh::Mesh;
use crate::propagation::axes::{add_axis_or_merge, prefix_without_overlap, total_axes_size};
use crate::sharding::TensorSharding;

/// Where each value comes from, built when a module has a collective.
pub(super) struct Definitions {
    /// The op whose result each value is (`u32::MAX` for a block argument).
    result_of: Vec<u32>,
    /// Arguments of the regions of `stablehlo.while`: value -> (the while op, argument index);
    /// Shardy gives them the while's result shardings.
    while_args: FastMap<u32, (u32, usize)>,
    /// Function arguments: value -> (index in `Program::funcs`, argument index).
    func_args: FastMap<u32, (usize, usize)>,
}

impl Definitions {
    pub(super) fn new(p: &Program) -> Definitions {
        let mut result_of = vec![u32::MAX; p.value_types.len()];
        for (op, data) in p.ops.iter().enumerate() {
            for v in data.results.0..data.results.1 {
                result_of[v as usize] = op as u32;
            }
        }
        let mut while_args = FastMap::default();
        for (op, data) in p.ops.iter().enumerate() {
            if p.op_name(op as u32) != "stablehlo.while" {
                continue;
            }
            for r in data.regions.0..data.regions.1 {
                let (b0, b1) = p.regions[r as usize];
                for b in b0..b1 {
                    let args = p.blocks[b as usize].args;
                    for (i, v) in (args.0..args.1).enumerate() {
                        while_args.insert(v, (op as u32, i));
                    }
                }
            }
        }
        let mut func_args = FastMap::default();
        for (fi, f) in p.funcs.iter().enumerate() {
            let (r0, r1) = p.ops[f.op as usize].regions;
            let Some(&(b0, b1)) = p.regions.get(r0 as usize).filter(|_| r0 < r1) else { continue };
            if b0 < b1 {
                let args = p.blocks[b0 as usize].args;
                for (i, v) in (args.0..args.1).enumerate() {
                    func_args.insert(v, (fi, i));
                }
            }
        }
        Definitions { result_of, while_args, func_args }
    }
}

/// What the verifier knows of a value's sharding.
enum Known {
    Sharding(TensorSharding),
    /// Written nowhere: the value has none.
    Missing,
    /// Not looked up (an argument of a region other than a function's body).
    Unknown,
}

/// Whether `name` is an sdy collective.
pub(super) fn is_collective(name: &str) -> bool {
    name.strip_prefix("sdy.").is_some_and(|n| crate::mlir::sdy::COLLECTIVES.contains(&n))
}

/// `dims` with `axes` taken off the end, as `all_gather` gathers them (Shardy's
/// `gatherAxesAlongDim`); `Err(axis)` for the first axis that is not a suffix there.
fn gather(dims: &[AxisRef], axes: &[AxisRef], mesh: &Mesh) -> Result<Vec<AxisRef>, AxisRef> {
    let mut out = dims.to_vec();
    for g in axes.iter().rev() {
        let Some(last) = out.pop() else { return Err(g.clone()) };
        if !g.suffix_of(&last, mesh).unwrap_or(false) {
            return Err(g.clone());
        }
        out.extend(prefix_without_overlap(&last, std::slice::from_ref(g)));
    }
    Ok(out)
}

fn axes_text(axes: &[AxisRef]) -> String {
    let parts: Vec<String> = axes.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

impl<'p> Verifier<'p> {
    /// The sharding written down for value `v` (see the module documentation).
    fn value_sharding(&self, v: u32) -> Known {
        let defs = self.definitions.get_or_init(|| Definitions::new(self.p));
        let parse_one = |text: &str| match crate::text::parse_sharding(text) {
            Ok(t) => Known::Sharding(t),
            Err(_) => Known::Unknown,
        };
        let (op, index) = match defs.while_args.get(&v) {
            Some(&(op, i)) => (op, i),
            None => {
                let op = defs.result_of.get(v as usize).copied().unwrap_or(u32::MAX);
                (op, if op == u32::MAX { 0 } else { (v - self.p.ops[op as usize].results.0) as usize })
            }
        };
        if op == u32::MAX {
            let Some(&(fi, i)) = defs.func_args.get(&v) else { return Known::Unknown };
            let Some(&(a0, a1)) = self.p.funcs[fi].arg_attrs.get(i) else { return Known::Missing };
            return match self.p.attrs[a0 as usize..a1 as usize].iter().find(|(k, _)| self.s(*k) == "sdy.sharding") {
                Some(&(_, text)) => parse_one(self.s(text)),
                None => Known::Missing,
            };
        }
        let per_value = |attr: &str| {
            self.attr(op, attr).map(|text| match crate::text::parse_sharding_per_value(text) {
                Ok(ts) => ts.into_iter().nth(index).map_or(Known::Unknown, Known::Sharding),
                Err(_) => Known::Unknown,
            })
        };
        if let Some(k) = per_value("sdy.sharding") {
            return k;
        }
        let name = self.p.op_name(op);
        if name == "sdy.manual_computation" || name == "sdy.named_computation" {
            return per_value("out_shardings").unwrap_or(Known::Missing);
        }
        if name.starts_with("sdy.") {
            if let Some(text) = self.attr(op, "out_sharding").or_else(|| self.attr(op, "sharding")) {
                return parse_one(text);
            }
        }
        Known::Missing
    }

    /// A collective's axes: axes of `mesh` (a sub-axis within its axis), none overlapping
    /// another (Shardy's `verifyAxisRefList` over one list or the lists of every dimension).
    fn axis_list<'a>(
        &self,
        op: u32,
        attr: &str,
        axes: impl Iterator<Item = &'a AxisRef>,
        mesh: &Mesh,
    ) -> Result<(), VerifyError> {
        let mut seen: Vec<&AxisRef> = Vec::new();
        for a in axes {
            a.check(mesh).map_err(|e| self.err(op, format!("{attr}: {}", e.message)))?;
            if let Some(b) = seen.iter().find(|b| b.overlaps(a)) {
                return Err(self.err(op, format!("{attr}: axis {a} overlaps axis {b}")));
            }
            seen.push(a);
        }
        Ok(())
    }

    /// `sdy.all_to_all`'s parameters (Shardy's `AllToAllOp::verify`): at least one; valid axes;
    /// source and target dimensions in range, none used twice, sources ascending; each
    /// parameter's axes gathered from the end of its source dimension and appended to its
    /// target dimension give the result's, and the other dimensions are the operand's.
    fn all_to_all(
        &self,
        op: u32,
        params: &[crate::text::AllToAllParam],
        operand: &TensorSharding,
        result: &TensorSharding,
        mesh: &Mesh,
    ) -> Result<(), VerifyError> {
        if params.is_empty() {
            return Err(self.err(op, "parameter list is empty".into()));
        }
        self.axis_list(op, "params", params.iter().flat_map(|q| &q.axes), mesh)?;
        let rank = result.rank() as i64;
        let mut seen = vec![false; result.rank()];
        let mut previous_src = -1;
        for q in params {
            for (dim, what) in [(q.src, "source"), (q.tgt, "target")] {
                if !(0..rank).contains(&dim) {
                    return Err(self.err(op, format!("{what} dimension {dim} is out of range [0, {rank})")));
                }
                if std::mem::replace(&mut seen[dim as usize], true) {
                    return Err(
                        self.err(op, format!("overlapping source/target dimensions in all-to-all params: {dim}"))
                    );
                }
            }
            if previous_src >= q.src {
                return Err(self.err(
                    op,
                    format!(
                        "source dimensions are not sorted in ascending order: {} appears after {previous_src}",
                        q.src
                    ),
                ));
            }
            previous_src = q.src;
        }
        let check = |d: usize, expected: &[AxisRef]| {
            if expected == result.dims[d].axes.as_slice() {
                Ok(())
            } else {
                Err(self.err(
                    op,
                    format!("result sharding doesn't match expected sharding {} on dimension {d}", axes_text(expected)),
                ))
            }
        };
        for q in params {
            let (src, tgt) = (q.src as usize, q.tgt as usize);
            let gathered = gather(&operand.dims[src].axes, &q.axes, mesh).map_err(|a| {
                self.err(op, format!("can't apply all-to-all axis {a} to operand sharding on dimension {src}"))
            })?;
            check(src, &gathered)?;
            let mut sliced = operand.dims[tgt].axes.clone();
            for a in &q.axes {
                add_axis_or_merge(&mut sliced, a.clone(), mesh).map_err(|e| self.err(op, e.message))?;
            }
            check(tgt, &sliced)?;
        }
        for (d, dim) in operand.dims.iter().enumerate() {
            if !seen[d] {
                check(d, &dim.axes)?;
            }
        }
        Ok(())
    }

    /// Checks collective `op` named `name` against its operand's sharding.
    pub(super) fn collective(&self, op: u32, name: &str) -> Result<(), VerifyError> {
        let (Some(&operand), Some(text)) = (self.operands(op).first(), self.attr(op, "out_sharding")) else {
            return Ok(());
        };
        // An out_sharding that does not parse or names no known mesh was refused before.
        let Ok(result) = crate::text::parse_sharding(text) else { return Ok(()) };
        let Some(mesh) = self.mesh_of(&result) else { return Ok(()) };
        let may_be_missing = matches!(name, "sdy.all_slice" | "sdy.reduce_scatter" | "sdy.all_reduce");
        let operand_sharding = match self.value_sharding(operand) {
            Known::Unknown => return Ok(()),
            Known::Missing if !may_be_missing => {
                return Err(self.err(op, "collective on operand without sharding".into()));
            }
            Known::Missing => TensorSharding::replicated(result.mesh.clone(), result.rank(), true),
            Known::Sharding(s) => {
                if name != "sdy.collective_permute" && self.mesh_of(&s).is_some_and(|m| m != mesh) {
                    return Err(self.err(op, "result mesh does not match operand mesh".into()));
                }
                s
            }
        };
        if operand_sharding.rank() != result.rank() {
            return Err(self.err(
                op,
                format!(
                    "result sharding has rank {} but operand sharding has rank {}",
                    result.rank(),
                    operand_sharding.rank()
                ),
            ));
        }
        let lists = |attr: &str| -> Result<Option<Vec<Vec<AxisRef>>>, VerifyError> {
            let Some(text) = self.attr(op, attr) else { return Ok(None) };
            let lists =
                crate::text::parse_axis_ref_lists(text).map_err(|e| self.err(op, format!("{attr}: {}", e.message)))?;
            self.axis_list(op, attr, lists.iter().flatten(), mesh)?;
            if lists.len() != result.rank() {
                return Err(self.err(
                    op,
                    format!("result sharding has rank {} but collective axes has rank {}", result.rank(), lists.len()),
                ));
            }
            Ok(Some(lists))
        };
        let mismatch = |expected: &[AxisRef], d: usize| {
            self.err(
                op,
                format!("result sharding doesn't match expected sharding {} on dimension {d}", axes_text(expected)),
            )
        };
        let dims = operand_sharding.dims.iter().zip(&result.dims).enumerate();
        match name {
            "sdy.all_gather" | "sdy.sharded_to_unreduced" => {
                let attr = if name == "sdy.all_gather" { "gathering_axes" } else { "axes" };
                let Some(lists) = lists(attr)? else { return Ok(()) };
                for ((d, (in_d, out_d)), axes) in dims.zip(&lists) {
                    let expected = gather(&in_d.axes, axes, mesh).map_err(|a| {
                        let kind = if name == "sdy.all_gather" { "gathering" } else { "sharded-to-unreduced" };
                        self.err(op, format!("can't apply {kind} axis {a} to operand sharding on dimension {d}"))
                    })?;
                    if expected != out_d.axes {
                        return Err(mismatch(&expected, d));
                    }
                }
            }
            "sdy.all_slice" | "sdy.reduce_scatter" => {
                let attr = if name == "sdy.all_slice" { "slicing_axes" } else { "reduce_scatter_axes" };
                let Some(lists) = lists(attr)? else { return Ok(()) };
                for ((d, (in_d, out_d)), axes) in dims.zip(&lists) {
                    let mut expected = in_d.axes.clone();
                    for a in axes {
                        add_axis_or_merge(&mut expected, a.clone(), mesh).map_err(|e| self.err(op, e.message))?;
                    }
                    if expected != out_d.axes {
                        return Err(mismatch(&expected, d));
                    }
                }
            }
            "sdy.all_reduce" => {
                if !is_equivalent(Some(&operand_sharding), Some(&result)) {
                    return Err(self.err(op, "operand and result shardings are not equivalent".into()));
                }
                let Some(text) = self.attr(op, "reduction_axes") else { return Ok(()) };
                let axes = crate::text::parse_axis_ref_list(text)
                    .map_err(|e| self.err(op, format!("reduction_axes: {}", e.message)))?;
                self.axis_list(op, "reduction_axes", axes.iter(), mesh)?;
                let used = operand_sharding.dims.iter().flat_map(|d| &d.axes).chain(&operand_sharding.replicated);
                let used: Vec<&AxisRef> = used.collect();
                if let Some(a) = axes.iter().find(|a| used.iter().any(|u| u.overlaps(a))) {
                    return Err(self.err(
                        op,
                        format!("reduction axis {a} overlaps with operand dimension sharding or replicated axes"),
                    ));
                }
            }
            "sdy.all_to_all" => {
                let Some(text) = self.attr(op, "params") else { return Ok(()) };
                let params = crate::text::parse_all_to_all_params(text)
                    .map_err(|e| self.err(op, format!("params: {}", e.message)))?;
                self.all_to_all(op, &params, &operand_sharding, &result, mesh)?;
            }
            "sdy.replicated_to_unreduced" if dims.clone().any(|(_, (i, o))| i.axes != o.axes) => {
                return Err(self.err(op, "input and output must share the same dimension shardings".into()));
            }
            "sdy.collective_permute" => {
                let Some(operand_mesh) = self.mesh_of(&operand_sharding) else { return Ok(()) };
                for (d, (in_d, out_d)) in dims {
                    if in_d.axes == out_d.axes {
                        continue;
                    }
                    let (Ok(a), Ok(b)) =
                        (total_axes_size(&in_d.axes, Some(operand_mesh)), total_axes_size(&out_d.axes, Some(mesh)))
                    else {
                        continue;
                    };
                    if a != b {
                        return Err(self.err(
                            op,
                            format!("sharded size of result doesn't match operand on dimension {d}: {b} != {a}"),
                        ));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}
