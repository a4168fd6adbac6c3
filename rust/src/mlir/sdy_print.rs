//! The custom forms of Shardy's `sdy` ops as jaxlib prints them (the inverse of `sdy.rs`).

use super::printer::{attr_value, Printer, Work};

/// Writes the custom form of sdy op `op` into `line` (its regions into `after`); false when
/// it has none here or its attributes are not in the shape the form needs.
#[allow(clippy::too_many_arguments)]
pub(crate) fn custom<'p>(
    pr: &Printer<'p>,
    op: u32,
    name: &str,
    short: &str,
    attrs: &[(&'p str, &'p str)],
    indent: usize,
    line: &mut String,
    after: &mut Vec<Work>,
) -> bool {
    let get = |k: &str| attr_value(attrs, k);
    let ops = pr.operands_of(op);
    let (r0, r1) = pr.results_of(op);
    let p = pr.program();
    let has_regions = p.ops[op as usize].regions.1 > p.ops[op as usize].regions.0;
    let strip = |v: &'p str, prefix: &str| v.strip_prefix(prefix).map(str::to_string);
    match short {
        "mesh" => {
            let (Some(sym), Some(mesh)) = (get("sym_name"), get("mesh").and_then(|m| strip(m, "#sdy.mesh"))) else {
                return false;
            };
            let sym = super::cursor::unescape(sym);
            let mut s = String::new();
            crate::text::print_symbol(&sym, &mut s);
            line.push_str(&format!("sdy.mesh {s} = {mesh}"));
            pr.write_attr_dict(attrs, &["sym_name", "mesh"], line);
            line.push('\n');
            ops.is_empty() && r0 == r1
        }
        "sharding_constraint" | "reshard" if ops.len() == 1 && r1 - r0 == 1 => {
            let Some(sh) = get("sharding").and_then(|v| strip(v, "#sdy.sharding")) else { return false };
            line.push_str(&format!("{name} {} {sh}", pr.names_text(ops[0])));
            pr.write_attr_dict(attrs, &["sharding"], line);
            line.push_str(" : ");
            pr.write_same_or_functional(op, line);
            line.push('\n');
            true
        }
        "data_flow_edge" | "func_data_flow_edge" if ops.len() == 1 && r1 - r0 == 1 => {
            line.push_str(&format!("{name} {}", pr.names_text(ops[0])));
            let mut elided = vec![];
            if short == "data_flow_edge" {
                if let Some(v) = get("sharding") {
                    let Some(sh) = strip(v, "#sdy.sharding") else { return false };
                    line.push_str(&format!(" sharding={sh}"));
                    elided.push("sharding");
                }
            }
            pr.write_attr_dict(attrs, &elided, line);
            line.push_str(" : ");
            pr.write_same_or_functional(op, line);
            line.push('\n');
            true
        }
        "propagation_barrier" if ops.len() == 1 && r1 - r0 == 1 => {
            let d = match get("allowed_direction") {
                Some("0 : i32") => "NONE",
                Some("1 : i32") => "FORWARD",
                Some("2 : i32") => "BACKWARD",
                Some("3 : i32") => "BOTH",
                _ => return false,
            };
            line.push_str(&format!("{name} {} allowed_direction={d}", pr.names_text(ops[0])));
            pr.write_attr_dict(attrs, &["allowed_direction"], line);
            line.push_str(" : ");
            pr.write_same_or_functional(op, line);
            line.push('\n');
            true
        }
        "sharding_group" if ops.len() == 1 && r0 == r1 => {
            let Some(g) = get("group_id").and_then(|v| v.strip_suffix(" : i64")) else { return false };
            line.push_str(&format!("{name} {} group_id={g}", pr.names_text(ops[0])));
            pr.write_attr_dict(attrs, &["group_id"], line);
            line.push_str(&format!(" : {}\n", pr.ty_of(ops[0])));
            true
        }
        _ if super::sdy::COLLECTIVES.contains(&short) && ops.len() == 1 && r1 - r0 == 1 => {
            let mut elided = vec!["out_sharding"];
            line.push_str(name);
            if short != "collective_permute" {
                let (attr, kind) = super::sdy::collective_axes_attr(short);
                let kind = format!("#sdy<{kind}");
                let Some(axes) = get(attr).and_then(|v| v.strip_prefix(kind.as_str())?.strip_suffix('>')) else {
                    return false;
                };
                line.push(' ');
                line.push_str(axes);
                elided.push(attr);
            }
            let Some(out) = get("out_sharding").and_then(|v| strip(v, "#sdy.sharding")) else { return false };
            line.push_str(&format!(" {} out_sharding={out}", pr.names_text(ops[0])));
            pr.write_attr_dict(attrs, &elided, line);
            line.push_str(" : ");
            pr.write_same_or_functional(op, line);
            line.push('\n');
            true
        }
        "return" => {
            line.push_str(name);
            if !ops.is_empty() {
                line.push(' ');
                pr.write_values(ops, line);
            }
            pr.write_attr_dict(attrs, &[], line);
            if !ops.is_empty() {
                line.push_str(" : ");
                let types: Vec<&str> = ops.iter().map(|&v| pr.ty_of(v)).collect();
                line.push_str(&types.join(", "));
            }
            line.push('\n');
            !has_regions
        }
        "manual_computation" | "named_computation" if has_regions => {
            let (q0, q1) = p.ops[op as usize].regions;
            if q1 - q0 != 1 || p.regions[q0 as usize].1 - p.regions[q0 as usize].0 != 1 {
                return false;
            }
            let block = p.blocks[p.regions[q0 as usize].0 as usize];
            line.push_str(name);
            let mut elided = vec!["in_shardings", "out_shardings"];
            if short == "named_computation" {
                let Some(n) = get("name") else { return false };
                line.push_str(&format!("<{n}>"));
                elided.push("name");
            }
            line.push('(');
            pr.write_values(ops, line);
            line.push(')');
            for key in ["in_shardings", "out_shardings"] {
                match get(key) {
                    Some(v) => {
                        let Some(list) = v.strip_prefix("#sdy.sharding_per_value<").and_then(|x| x.strip_suffix('>'))
                        else {
                            return false;
                        };
                        line.push_str(&format!(" {key}={list}"));
                    }
                    None if short == "manual_computation" => return false,
                    None => {}
                }
            }
            if short == "manual_computation" {
                let Some(axes) = get("manual_axes").and_then(|v| v.strip_prefix("#sdy<manual_axes")?.strip_suffix('>'))
                else {
                    return false;
                };
                line.push_str(&format!(" manual_axes={axes}"));
                elided.push("manual_axes");
            }
            line.push_str(" (");
            for (i, a) in (block.args.0..block.args.1).enumerate() {
                if i > 0 {
                    line.push_str(", ");
                }
                line.push_str(&format!("{}: {}", pr.names_text(a), pr.ty_of(a)));
            }
            line.push_str(") {\n");
            let mut close = String::new();
            pr.write_attr_dict(attrs, &elided, &mut close);
            close.push_str(" : ");
            pr.write_functional(op, &mut close);
            close.push('\n');
            pr.write_body(op, indent, close, after);
            true
        }
        _ => false,
    }
}
