//! The custom forms of Shardy's `sdy` ops as jaxlib prints them, read into the generic shape
//! (`sdy.sharding_constraint %x <@mesh, [...]> : T` has the inherent attribute
//! `sharding = #sdy.sharding<@mesh, [...]>`). Grammar from openxla/shardy's
//! `dialect/sdy/ir/ops.td` assembly formats and its `parsers.cc`/`printers.cc`.

use super::cursor::Res;
use super::ops::{sig, Tail, Types};
use super::reader::{quote, OpBuild, Pending, Reader};

pub(crate) fn custom_head<'a>(
    r: &mut Reader<'a>,
    mut b: OpBuild<'a>,
    op: &str,
    declared: usize,
) -> Res<(OpBuild<'a>, Tail)> {
    match op {
        "mesh" => {
            let Some(name) = r.c.symbol()? else { return r.c.fail("'@' and the mesh's name") };
            r.c.expect("=")?;
            // `<["x"=2]>`, or the whole attribute `#sdy.mesh<["x"=2]>`.
            r.c.eat("#sdy.mesh");
            let g = r.c.group()?;
            b.attrs.push(r.attr("sym_name", &quote(&name)));
            b.attrs.push(r.attr("mesh", &format!("#sdy.mesh{g}")));
            let mut attrs = Vec::new();
            r.opt_attr_dict(&mut attrs)?;
            b.attrs.extend(attrs);
        }
        "sharding_constraint" | "reshard" => {
            b.operands = vec![r.use_()?];
            let g = r.c.group()?;
            b.attrs.push(r.attr("sharding", &format!("#sdy.sharding{g}")));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "data_flow_edge" => {
            b.operands = vec![r.use_()?];
            if r.c.eat_kw("sharding") {
                r.c.expect("=")?;
                let g = r.c.group()?;
                b.attrs.push(r.attr("sharding", &format!("#sdy.sharding{g}")));
            }
            sig(r, &mut b, Types::Same, declared)?;
        }
        "func_data_flow_edge" => {
            b.operands = vec![r.use_()?];
            sig(r, &mut b, Types::Same, declared)?;
        }
        "propagation_barrier" => {
            b.operands = vec![r.use_()?];
            r.c.expect_kw("allowed_direction")?;
            r.c.expect("=")?;
            let at = r.c.pos;
            let d = r.c.expect_ident("a propagation direction")?;
            // Shardy's PropagationDirection enum.
            let v = match d {
                "NONE" => 0,
                "FORWARD" => 1,
                "BACKWARD" => 2,
                "BOTH" => 3,
                _ => return Err(r.c.error(at, format!("expected NONE, FORWARD, BACKWARD or BOTH, got {d}"))),
            };
            b.attrs.push(r.attr("allowed_direction", &format!("{v} : i32")));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "sharding_group" => {
            b.operands = vec![r.use_()?];
            r.c.expect_kw("group_id")?;
            r.c.expect("=")?;
            let g = r.c.expect_int("a group id")?;
            b.attrs.push(r.attr("group_id", &format!("{g} : i64")));
            sig(r, &mut b, Types::Operands, 0)?;
        }
        _ if COLLECTIVES.contains(&op) => {
            if op != "collective_permute" {
                let g = r.c.group()?;
                let (attr, kind) = collective_axes_attr(op);
                b.attrs.push(r.attr(attr, &format!("#sdy<{kind}{g}>")));
            }
            b.operands = vec![r.use_()?];
            r.c.expect_kw("out_sharding")?;
            r.c.expect("=")?;
            let g = r.c.group()?;
            b.attrs.push(r.attr("out_sharding", &format!("#sdy.sharding{g}")));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "constant" => super::ops::constant(r, &mut b)?,
        "return" => {
            b.operands = r.uses()?.0;
            sig(r, &mut b, Types::Operands, 0)?;
        }
        "manual_computation" | "named_computation" => {
            if op == "named_computation" {
                r.c.expect("<")?;
                let Some(name) = r.c.string_lit()? else { return r.c.fail("the computation's name") };
                b.attrs.push(r.attr("name", name));
                r.c.expect(">")?;
            }
            b.operands = r.paren_uses()?;
            for (kw, attr) in [("in_shardings", "in_shardings"), ("out_shardings", "out_shardings")] {
                if r.c.eat_kw(kw) {
                    r.c.expect("=")?;
                    let g = r.c.group()?;
                    b.attrs.push(r.attr(attr, &format!("#sdy.sharding_per_value<{g}>")));
                } else if op == "manual_computation" {
                    return r.c.fail(kw);
                }
            }
            if op == "manual_computation" {
                r.c.expect_kw("manual_axes")?;
                r.c.expect("=")?;
                let g = r.c.group()?;
                b.attrs.push(r.attr("manual_axes", &format!("#sdy<manual_axes{g}>")));
            }
            r.c.expect("(")?;
            let mut args = Vec::new();
            if !r.c.eat(")") {
                loop {
                    let Some(name) = r.c.sigil_id(b'%') else { return r.c.fail("a block argument") };
                    r.c.expect(":")?;
                    let t = r.ty()?;
                    args.push((name, t));
                    if r.c.eat(")") {
                        break;
                    }
                    r.c.expect(",")?;
                }
            }
            b.result_types = vec![0; declared];
            b.regions.push(Pending { args: Some(args), synthesized: None });
            return Ok((b, Tail::AttrsFunctional));
        }
        _ => return Err(r.c.unsupported(b.at, format!("{}: no native grammar for this op's custom form", b.name))),
    }
    Ok((b, Tail::Nothing))
}

/// The sdy collectives (without the `sdy.` prefix): `axes %operand out_sharding=<...> : T`,
/// `collective_permute` without axes. The reader, the printer and the verifier's
/// `collectives.rs` take this list.
pub(crate) const COLLECTIVES: [&str; 8] = [
    "all_gather",
    "all_slice",
    "all_reduce",
    "all_to_all",
    "collective_permute",
    "reduce_scatter",
    "replicated_to_unreduced",
    "sharded_to_unreduced",
];

/// The attribute that holds a collective's own axes (all but `collective_permute`'s) and the
/// `#sdy<KIND...>` form of its value, as the custom assembly elides them; shared by the reader
/// and the printer (`sdy_print.rs`).
pub(super) fn collective_axes_attr(op: &str) -> (&'static str, &'static str) {
    match op {
        "all_reduce" => ("reduction_axes", "axis_ref_list"),
        "replicated_to_unreduced" => ("axes", "axis_ref_list"),
        "sharded_to_unreduced" => ("axes", "list_of_axis_ref_lists"),
        "all_gather" => ("gathering_axes", "list_of_axis_ref_lists"),
        "all_slice" => ("slicing_axes", "list_of_axis_ref_lists"),
        "reduce_scatter" => ("reduce_scatter_axes", "list_of_axis_ref_lists"),
        _ => ("params", "all_to_all_param_list"),
    }
}
