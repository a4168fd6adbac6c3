//! The custom forms of StableHLO's region-holding and window ops as jaxlib prints them
//! (`convolution`, `reduce`, `while`), and the attribute helpers they share with
//! `printer.rs`.

use super::printer::{array_list, attr_value, Printer, Work};
use crate::ir::Span;

impl<'p> Printer<'p> {
    pub(crate) fn convolution(&self, op: u32, attrs: &[(&'p str, &'p str)], line: &mut String) -> bool {
        let get = |k: &str| attr_value(attrs, k);
        let Some(dn) = get("dimension_numbers").and_then(|t| t.strip_prefix("#stablehlo.conv<")?.strip_suffix('>'))
        else {
            return false;
        };
        line.push_str("stablehlo.convolution(");
        self.value_list(self.operands(op), line);
        line.push_str(&format!(") dim_numbers = {dn}, window = {{"));
        let mut fields = Vec::new();
        for (key, kw) in [
            ("window_strides", "stride"),
            ("padding", "pad"),
            ("lhs_dilation", "lhs_dilate"),
            ("rhs_dilation", "rhs_dilate"),
            ("window_reversal", "reverse"),
        ] {
            let Some(v) = get(key) else { continue };
            let text = match key {
                "padding" => match padding_pairs(v) {
                    Some(t) => t,
                    None => return false,
                },
                "window_reversal" => match array_list(v, "i1") {
                    Some(t) => t,
                    None => return false,
                },
                _ => match array_list(v, "i64") {
                    Some(t) => t,
                    None => return false,
                },
            };
            fields.push(format!("{kw} = {text}"));
        }
        line.push_str(&fields.join(", "));
        line.push('}');
        self.attr_dict(
            attrs,
            &["dimension_numbers", "window_strides", "padding", "lhs_dilation", "rhs_dilation", "window_reversal"],
            line,
        );
        line.push_str(" : ");
        self.functional(op, line);
        line.push('\n');
        true
    }

    /// `reduce(%x init: %i) applies OP across dimensions = [..]`, or the `reducer(...)` form.
    pub(crate) fn reduce(
        &self,
        op: u32,
        attrs: &[(&'p str, &'p str)],
        indent: usize,
        line: &mut String,
        after: &mut Vec<Work>,
    ) -> bool {
        let get = |k: &str| attr_value(attrs, k);
        let ops = self.operands(op);
        let n = ops.len() / 2;
        let (q0, q1) = self.p.ops[op as usize].regions;
        if ops.len() % 2 != 0 || n == 0 || q1 - q0 != 1 {
            return false;
        }
        let Some(dims) = get("dimensions").and_then(|t| array_list(t, "i64")) else { return false };
        let (b0, b1) = self.p.regions[q0 as usize];
        if b1 - b0 != 1 {
            return false;
        }
        let block = self.p.blocks[b0 as usize];
        if (block.args.1 - block.args.0) as usize != 2 * n {
            return false;
        }
        line.push_str("stablehlo.reduce");
        for i in 0..n {
            if i > 0 {
                line.push_str(", ");
            }
            line.push_str(&format!("({} init: {})", self.names.text(ops[i]), self.names.text(ops[n + i])));
        }
        let body = &self.p.block_ops[block.ops.0 as usize..block.ops.1 as usize];
        let compact = self.compact_reducer(op, body, block.args, n);
        if let Some(inner) = compact {
            line.push_str(&format!(" applies {inner}"));
        }
        line.push_str(&format!(" across dimensions = {dims}"));
        self.attr_dict(attrs, &["dimensions"], line);
        line.push_str(" : ");
        self.functional(op, line);
        line.push('\n');
        if compact.is_none() {
            let mut h = " ".repeat(indent + 1);
            h.push_str("reducer");
            for i in 0..n as u32 {
                let (l, r) = (block.args.0 + i, block.args.0 + n as u32 + i);
                h.push_str(&format!(
                    "({}: {}, {}: {})",
                    self.names.text(l),
                    self.ty(l),
                    self.names.text(r),
                    self.ty(r)
                ));
                if (i as usize) + 1 < n {
                    h.push(' ');
                }
            }
            h.push_str("  {\n");
            line.push_str(&h);
            self.body(op, 0, indent, "\n".into(), after);
        }
        true
    }

    /// The op of a body `OP(%a, %b); return` that StableHLO prints as `applies OP`: the
    /// eligibility rules E1–E5 of `isReduceEligibleForCompactPrint` (openxla/stablehlo
    /// `AssemblyFormat.cpp`): one commutative binary StableHLO op without regions whose
    /// operands are the block's arguments, typed as a scalar of the first input's element
    /// type, and whose result the terminator returns. The inner op's attributes are not
    /// looked at, and the compact form does not print them (as jaxlib's printer).
    fn compact_reducer(&self, op: u32, body: &[u32], args: Span, n: usize) -> Option<&'p str> {
        if n != 1 || body.len() != 2 {
            return None;
        }
        let (inner, ret) = (body[0], body[1]);
        let name = self.p.op_name(inner);
        let ops = self.operands(inner);
        let (r0, r1) = self.results(inner);
        let elem = super::attr::element_type(self.ty(self.operands(op)[0]))?;
        let ok = self.p.op_name(ret) == "stablehlo.return"
            && self.operands(ret) == [r0]
            && r1 - r0 == 1
            && ops == [args.0, args.0 + 1]
            && COMMUTATIVE.contains(&name)
            && self.p.ops[inner as usize].regions.0 == self.p.ops[inner as usize].regions.1
            && self.ty(args.0) == self.ty(args.0 + 1)
            && self.ty(args.0) == self.ty(r0)
            && self.ty(args.0).strip_prefix("tensor<").and_then(|t| t.strip_suffix('>')) == Some(elem);
        ok.then_some(name)
    }

    pub(crate) fn while_(
        &self,
        op: u32,
        attrs: &[(&'p str, &'p str)],
        indent: usize,
        line: &mut String,
        after: &mut Vec<Work>,
    ) -> bool {
        let ops = self.operands(op);
        let (q0, q1) = self.p.ops[op as usize].regions;
        if q1 - q0 != 2 {
            return false;
        }
        let (b0, b1) = self.p.regions[q0 as usize];
        if b1 - b0 != 1 || self.p.blocks[b0 as usize].args.1 - self.p.blocks[b0 as usize].args.0 != ops.len() as u32 {
            return false;
        }
        let args = self.p.blocks[b0 as usize].args;
        line.push_str("stablehlo.while(");
        for (i, &v) in ops.iter().enumerate() {
            if i > 0 {
                line.push_str(", ");
            }
            line.push_str(&format!("{} = {}", self.names.text(args.0 + i as u32), self.names.text(v)));
        }
        line.push(')');
        if !ops.is_empty() {
            line.push_str(" : ");
            self.type_list(ops.iter().copied(), line);
        }
        if !attrs.is_empty() {
            line.push_str(" attributes ");
            self.dict(attrs, line);
        }
        line.push('\n');
        let pad = " ".repeat(indent);
        line.push_str(&format!("{pad}cond {{\n"));
        after.push(Work::Region(q0, indent + 2, false));
        after.push(Work::Text(format!("{pad}}} do {{\n")));
        after.push(Work::Region(q0 + 1, indent + 2, false));
        after.push(Work::Text(format!("{pad}}}\n")));
        true
    }
}

/// The binary StableHLO ops with the `Commutative` trait (`StablehloOps.td`).
const COMMUTATIVE: [&str; 7] = [
    "stablehlo.add",
    "stablehlo.and",
    "stablehlo.maximum",
    "stablehlo.minimum",
    "stablehlo.multiply",
    "stablehlo.or",
    "stablehlo.xor",
];

/// `, batching_dims = [0] x [0], contracting_dims = [2] x [1]` of `#stablehlo.dot<...>`.
pub(crate) fn dot_dims(text: &str) -> Option<String> {
    let inner = text.strip_prefix("#stablehlo.dot<")?.strip_suffix('>')?;
    let mut fields = std::collections::BTreeMap::new();
    if !inner.is_empty() {
        for part in super::attr::split_top(inner) {
            let (k, v) = part.split_once(" = ")?;
            fields.insert(k.trim(), v.trim());
        }
    }
    let known = [
        "lhs_batching_dimensions",
        "rhs_batching_dimensions",
        "lhs_contracting_dimensions",
        "rhs_contracting_dimensions",
    ];
    if fields.keys().any(|k| !known.contains(k)) {
        return None;
    }
    let mut out = String::new();
    for what in ["batching", "contracting"] {
        let l = fields.get(format!("lhs_{what}_dimensions").as_str()).copied();
        let r = fields.get(format!("rhs_{what}_dimensions").as_str()).copied();
        // StableHLO prints the contracting dimensions always, the batching ones when present.
        if l.is_some() || r.is_some() || what == "contracting" {
            out.push_str(&format!(", {what}_dims = {} x {}", l.unwrap_or("[]"), r.unwrap_or("[]")));
        }
    }
    Some(out)
}

/// `[[1, 1], [0, 2]]` of `dense<1> : tensor<2x2xi64>` or `dense<[[1, 1], [0, 2]]> : ...`.
fn padding_pairs(text: &str) -> Option<String> {
    let (lit, ty) = text.split_once(" : ")?;
    let inner = lit.strip_prefix("dense<")?.strip_suffix('>')?;
    let shape = ty.strip_prefix("tensor<")?.strip_suffix("xi64>")?;
    let (n, two) = shape.split_once('x')?;
    if two != "2" {
        return None;
    }
    let n: usize = n.parse().ok()?;
    if inner.starts_with('[') {
        return Some(inner.to_string());
    }
    let v: i64 = inner.parse().ok()?;
    let rows: Vec<String> = (0..n).map(|_| format!("[{v}, {v}]")).collect();
    Some(format!("[{}]", rows.join(", ")))
}
