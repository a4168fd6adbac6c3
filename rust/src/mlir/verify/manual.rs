//! The local shapes of `sdy.manual_computation` (openxla/shardy `dialect/sdy/ir/verifiers.cc`,
//! `verifyManualComputationValue`, checks 3 to 6): as many region arguments as operands and
//! region results as results; in each dimension sharding the manual axes come before the free
//! ones; each global dimension size divides by the size of its manual axes; and the region's
//! value has the global shape divided by them, with the global element type.

use super::shapes::dims_text;
use super::{Verifier, VerifyError};

/// The axis names of `#sdy<manual_axes{"x", "y"}>`; `None` when it does not read so.
fn manual_axes(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix("#sdy<manual_axes{")?.strip_suffix("}>")?;
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|a| crate::text::parse_string(a.trim()).ok()).collect()
}

impl<'p> Verifier<'p> {
    /// The axes that the manual computations around `op` bind as manual (Shardy's
    /// `getParentManualComputationOps`).
    fn bound_axes(&self, op: u32) -> Vec<String> {
        let mut bound = Vec::new();
        let mut m = self.manual_parent[op as usize];
        while m != u32::MAX {
            bound.extend(self.attr(m, "manual_axes").and_then(manual_axes).unwrap_or_default());
            m = self.manual_parent[m as usize];
        }
        bound
    }

    /// An op inside a manual computation: its shardings (per result, an sdy op's own, a nested
    /// computation's in and out shardings) and a nested manual computation's manual axes use
    /// no axis that an enclosing manual computation binds (Shardy's verifier, from
    /// `verifyTensorShardingAttr` and `ManualComputationOp::verify`). Shardings that do not
    /// parse were refused before (`shardings`).
    pub(super) fn bound_manual_axes(&self, op: u32) -> Result<(), VerifyError> {
        let bound = self.bound_axes(op);
        if bound.is_empty() {
            return Ok(());
        }
        let refuse = |what: &str, axis: &str| {
            self.err(
                op,
                format!("{what}: operates on axis \"{axis}\", which a parent sdy.manual_computation binds as manual"),
            )
        };
        let check = |what: &str, t: &crate::sharding::TensorSharding| -> Result<(), VerifyError> {
            match t.axis_refs().find(|a| bound.iter().any(|b| b.as_str() == a.name.as_str())) {
                Some(a) => Err(refuse(what, a.name.as_str())),
                None => Ok(()),
            }
        };
        if let Some(Ok(ts)) = self.attr(op, "sdy.sharding").map(crate::text::parse_sharding_per_value) {
            for (i, t) in ts.iter().enumerate() {
                check(&format!("result sharding {i}"), t)?;
            }
        }
        if self.p.op_name(op).starts_with("sdy.") {
            for attr in ["sharding", "out_sharding"] {
                if let Some(Ok(t)) = self.attr(op, attr).map(crate::text::parse_sharding) {
                    check(attr, &t)?;
                }
            }
            for attr in ["in_shardings", "out_shardings"] {
                if let Some(Ok(ts)) = self.attr(op, attr).map(crate::text::parse_sharding_per_value) {
                    for (i, t) in ts.iter().enumerate() {
                        check(&format!("{attr} {i}"), t)?;
                    }
                }
            }
            if let Some(axes) = self.attr(op, "manual_axes").and_then(manual_axes) {
                if let Some(a) = axes.iter().find(|a| bound.contains(a)) {
                    return Err(refuse("manual_axes", a));
                }
            }
        }
        Ok(())
    }

    pub(super) fn manual_shapes(&self, op: u32, operands: &[u32], results: &[u32]) -> Result<(), VerifyError> {
        let manual = match self.attr(op, "manual_axes") {
            None => Vec::new(),
            Some(t) => {
                manual_axes(t).ok_or_else(|| self.err(op, format!("manual_axes do not read as axis names: {t}")))?
            }
        };
        let (r0, r1) = self.p.ops[op as usize].regions;
        let Some(&(b0, b1)) = self.p.regions.get(r0 as usize).filter(|_| r0 < r1) else { return Ok(()) };
        if b0 == b1 {
            return Ok(());
        }
        let block = self.p.blocks[b0 as usize];
        let args: Vec<u32> = (block.args.0..block.args.1).collect();
        let returned =
            self.p.block_ops[block.ops.0 as usize..block.ops.1 as usize].last().map_or(&[][..], |&t| self.operands(t));
        for (attr, kind, globals, locals) in
            [("in_shardings", "operand", operands, &args[..]), ("out_shardings", "result", results, returned)]
        {
            if globals.len() != locals.len() {
                return Err(self.err(op, format!("has {} {kind}s and {} region {kind}s", globals.len(), locals.len())));
            }
            // The shardings themselves were checked against their meshes and the global types
            // (`shardings`); one that does not read or names no known mesh was refused there.
            let Some(text) = self.attr(op, attr) else { continue };
            let Ok(shardings) = crate::text::parse_sharding_per_value(text) else { continue };
            for (i, ((&g, &l), t)) in globals.iter().zip(locals).zip(&shardings).enumerate() {
                let Some(mesh) = self.mesh_of(t) else { continue };
                let (Some(global), Some(local)) = (self.dims(g), self.dims(l)) else { continue };
                let mut want = Vec::with_capacity(global.len());
                for (d, (&size, dim)) in global.iter().zip(&t.dims).enumerate() {
                    let is_manual = |a: &crate::axis::AxisRef| manual.iter().any(|m| m.as_str() == a.name.as_str());
                    if let Some(k) = dim.axes.iter().position(|a| !is_manual(a)) {
                        if let Some(a) = dim.axes[k..].iter().find(|a| is_manual(a)) {
                            return Err(self.err(
                                op,
                                format!(
                                    "{kind} sharding {i}: manual axis \"{}\" comes after a free axis in dimension {d}",
                                    a.name.as_str()
                                ),
                            ));
                        }
                    }
                    let factor = dim
                        .axes
                        .iter()
                        .filter(|a| is_manual(a))
                        .map(|a| a.size(mesh).unwrap_or(1))
                        .try_fold(1i64, i64::checked_mul)
                        .unwrap_or(i64::MAX);
                    if size < 0 || factor <= 0 {
                        // Dynamic, or axis sizes the mesh's own validation refused.
                        want.push(-1);
                    } else if size % factor != 0 {
                        return Err(self.err(
                            op,
                            format!("{kind} {i}: dimension {d} of size {size} does not divide by its manual axes' size {factor}"),
                        ));
                    } else {
                        want.push(size / factor);
                    }
                }
                if want != local || self.elem(g) != self.elem(l) {
                    return Err(self.err(
                        op,
                        format!(
                            "region {kind} {i} has type {}, expected the local shape {} of {}",
                            self.ty(l),
                            dims_text(&want),
                            self.ty(g)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_axis_names() {
        assert_eq!(manual_axes("#sdy<manual_axes{\"x\", \"y\"}>"), Some(vec!["x".to_string(), "y".to_string()]));
        assert_eq!(manual_axes("#sdy<manual_axes{}>"), Some(vec![]));
        assert_eq!(manual_axes("#sdy<manual_axes{x}>"), None);
    }
}
