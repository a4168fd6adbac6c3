//! The native MLIR printer: a [`Program`] as jaxlib prints it (`str(module)`: custom forms,
//! values named as MLIR names them, attribute dictionaries sorted, no locations). The custom
//! forms are the ones `ops.rs` and `sdy.rs` read; an op without one here, or whose attributes
//! are not in the shape its custom form needs, is printed in the generic form (valid MLIR that
//! both readers read, though jaxlib would print it in its custom form). Loops over an explicit
//! stack: deep nesting cannot overflow the stack.

use super::names::Names;
use super::stablehlo_print::dot_dims;
use crate::ir::{Program, Span};

/// The text of `p` in jaxlib's printed form.
pub fn print(p: &Program) -> String {
    print_checked(p).0
}

/// [`print`], and the first op of a dialect jaxlib knows (`stablehlo`, `chlo`, `sdy`, `func`,
/// `mhlo`) that was printed in the generic form, for want of its custom form here: jaxlib
/// would print that op in its custom form, so the text is not certain to be jaxlib's.
pub fn print_checked(p: &Program) -> (String, Option<u32>) {
    let mut owner = vec![u32::MAX; p.regions.len()];
    for (i, op) in p.ops.iter().enumerate() {
        for r in op.regions.0..op.regions.1 {
            owner[r as usize] = i as u32;
        }
    }
    let printer = Printer {
        p,
        names: Names::new(p),
        out: String::with_capacity(64 * p.ops.len() + 64),
        owner,
        generic_known: std::cell::Cell::new(None),
    };
    printer.module()
}

pub(crate) struct Printer<'p> {
    pub(crate) p: &'p Program,
    pub(crate) names: Names,
    out: String,
    /// The op owning each region.
    owner: Vec<u32>,
    /// The first op of a known dialect printed in the generic form.
    generic_known: std::cell::Cell<Option<u32>>,
}

/// What is left to print of an op whose regions are being printed.
pub(crate) enum Work {
    /// An op to print, at an indent; whether `func` is the default dialect there (the op is
    /// directly in a function's body: `return`, `call`).
    Op(u32, usize, bool),
    /// Literal text.
    Text(String),
    /// A region: its blocks' ops at `indent`, the entry block's header printed or not.
    Region(u32, usize, bool),
}

/// The dialects whose ops jaxlib prints with their custom printers.
const KNOWN_DIALECTS: [&str; 5] = ["stablehlo.", "chlo.", "sdy.", "func.", "mhlo."];

/// The ops of those dialects that have no custom assembly format, so that jaxlib prints them in
/// the generic form too (the StableHLO ops without `assemblyFormat` or a custom printer in
/// openxla/stablehlo `StablehloOps.td`).
const JAXLIB_GENERIC: [&str; 27] = [
    "stablehlo.all_gather",
    "stablehlo.all_reduce",
    "stablehlo.all_to_all",
    "stablehlo.async_done",
    "stablehlo.async_start",
    "stablehlo.batch_norm_grad",
    "stablehlo.batch_norm_inference",
    "stablehlo.batch_norm_training",
    "stablehlo.case",
    "stablehlo.collective_broadcast",
    "stablehlo.collective_permute",
    "stablehlo.dynamic_conv",
    "stablehlo.dynamic_gather",
    "stablehlo.gather",
    "stablehlo.if",
    "stablehlo.infeed",
    "stablehlo.map",
    "stablehlo.outfeed",
    "stablehlo.recv",
    "stablehlo.reduce_scatter",
    "stablehlo.reduce_window",
    "stablehlo.scatter",
    "stablehlo.select_and_scatter",
    "stablehlo.send",
    "stablehlo.sort",
    "stablehlo.torch_index_select",
    "stablehlo.triangular_solve",
];

fn attr_name(name: &str, out: &mut String) {
    let b = name.as_bytes();
    let bare = !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.'));
    if bare {
        out.push_str(name);
    } else {
        crate::text::print_string(name, out);
    }
}

/// The value of attribute `name` among an op's `(name, value)` pairs.
pub(crate) fn attr_value<'p>(attrs: &[(&str, &'p str)], name: &str) -> Option<&'p str> {
    attrs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// `[1, 2]` of `array<i64: 1, 2>` (`[]` of `array<i64>`).
pub(crate) fn array_list(text: &str, elem: &str) -> Option<String> {
    let inner = text.strip_prefix("array<")?.strip_suffix('>')?;
    if inner == elem {
        return Some("[]".to_string());
    }
    Some(format!("[{}]", inner.strip_prefix(elem)?.strip_prefix(": ")?))
}

/// `3` of `3 : i64`.
pub(crate) fn int_of(text: &str, ty: &str) -> Option<i64> {
    text.strip_suffix(&format!(" : {ty}"))?.parse().ok()
}

/// `GE` of `#stablehlo<comparison_direction GE>`.
pub(crate) fn enum_of<'t>(text: &'t str, kind: &str) -> Option<&'t str> {
    text.strip_prefix("#stablehlo<")?.strip_suffix('>')?.strip_prefix(kind)?.strip_prefix(' ')
}

impl<'p> Printer<'p> {
    fn s(&self, i: u32) -> &'p str {
        self.p.strings.get(i)
    }

    pub(crate) fn attrs(&self, op: u32) -> Vec<(&'p str, &'p str)> {
        let (a, b) = self.p.ops[op as usize].attrs;
        let mut v: Vec<(&str, &str)> =
            self.p.attrs[a as usize..b as usize].iter().map(|&(n, x)| (self.s(n), self.s(x))).collect();
        v.sort_by(|x, y| x.0.cmp(y.0));
        v
    }

    pub(crate) fn dict(&self, attrs: &[(&str, &str)], out: &mut String) {
        out.push('{');
        for (i, (n, v)) in attrs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            attr_name(n, out);
            if *v != "unit" {
                out.push_str(" = ");
                out.push_str(v);
            }
        }
        out.push('}');
    }

    /// ` {attrs}` of the attributes not in `elided`, or nothing.
    pub(crate) fn attr_dict(&self, attrs: &[(&str, &str)], elided: &[&str], out: &mut String) {
        let rest: Vec<(&str, &str)> = attrs.iter().filter(|(n, _)| !elided.contains(n)).copied().collect();
        if !rest.is_empty() {
            out.push(' ');
            self.dict(&rest, out);
        }
    }

    pub(crate) fn operands(&self, op: u32) -> &'p [u32] {
        let (a, b) = self.p.ops[op as usize].operands;
        &self.p.operands[a as usize..b as usize]
    }

    pub(crate) fn results(&self, op: u32) -> Span {
        self.p.ops[op as usize].results
    }

    pub(crate) fn ty(&self, v: u32) -> &'p str {
        self.s(self.p.value_types[v as usize])
    }

    pub(crate) fn value_list(&self, vs: &[u32], out: &mut String) {
        for (i, &v) in vs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&self.names.text(v));
        }
    }

    pub(crate) fn type_list(&self, vs: impl Iterator<Item = u32>, out: &mut String) {
        for (i, v) in vs.enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(self.ty(v));
        }
    }

    /// `(A, B) -> C`, `(A) -> (C, D)`, `() -> ()`.
    pub(crate) fn functional(&self, op: u32, out: &mut String) {
        let (r0, r1) = self.results(op);
        out.push('(');
        self.type_list(self.operands(op).iter().copied(), out);
        out.push_str(") -> ");
        if r1 - r0 == 1 {
            out.push_str(self.ty(r0));
        } else {
            out.push('(');
            self.type_list(r0..r1, out);
            out.push(')');
        }
    }

    /// `T` when every operand and result has type `T`, else the functional type.
    pub(crate) fn same_or_functional(&self, op: u32, out: &mut String) {
        let (r0, r1) = self.results(op);
        let mut all = self.operands(op).iter().copied().chain(r0..r1);
        let first = all.next().map(|v| self.ty(v));
        match first {
            Some(t) if all.all(|v| self.ty(v) == t) => out.push_str(t),
            _ => self.functional(op, out),
        }
    }

    /// The result names and ` = `, or nothing.
    fn lhs(&self, op: u32, out: &mut String) {
        let (r0, r1) = self.results(op);
        if r0 == r1 {
            return;
        }
        if let super::names::Name::Number(n, _) = self.names.of[r0 as usize] {
            out.push_str(&format!("%{n}"));
            if r1 - r0 > 1 {
                out.push_str(&format!(":{}", r1 - r0));
            }
        } else {
            let names: Vec<u32> = (r0..r1).collect();
            self.value_list(&names, out);
        }
        out.push_str(" = ");
    }

    fn module(mut self) -> (String, Option<u32>) {
        let p = self.p;
        if p.ops.is_empty() {
            return ("module {\n}\n".to_string(), None);
        }
        let attrs = self.attrs(0);
        let mut head = String::from("module");
        if let Some((_, name)) = attrs.iter().find(|(n, _)| *n == "sym_name") {
            head.push_str(" @");
            head.push_str(&symbol_text(name));
        }
        let rest: Vec<(&str, &str)> = attrs.iter().filter(|(n, _)| *n != "sym_name").copied().collect();
        if !rest.is_empty() {
            head.push_str(" attributes ");
            self.dict(&rest, &mut head);
        }
        head.push_str(" {\n");
        self.out.push_str(&head);
        let (r0, _) = p.ops[0].regions;
        let mut work = vec![Work::Text("}\n".into()), Work::Region(r0, 2, false)];
        self.run(&mut work);
        (self.out, self.generic_known.get())
    }

    fn run(&mut self, work: &mut Vec<Work>) {
        while let Some(w) = work.pop() {
            match w {
                Work::Text(t) => self.out.push_str(&t),
                Work::Region(r, indent, header) => {
                    let (b0, b1) = self.p.regions[r as usize];
                    let in_func =
                        self.owner[r as usize] != u32::MAX && self.p.op_name(self.owner[r as usize]) == "func.func";
                    let mut items = Vec::new();
                    for b in b0..b1 {
                        let block = self.p.blocks[b as usize];
                        let has_args = block.args.1 > block.args.0;
                        if b > b0 || (header && has_args) {
                            let mut h = " ".repeat(indent.saturating_sub(2));
                            h.push_str(&format!("^bb{}", b - b0));
                            if has_args {
                                h.push('(');
                                for (i, a) in (block.args.0..block.args.1).enumerate() {
                                    if i > 0 {
                                        h.push_str(", ");
                                    }
                                    h.push_str(&self.names.text(a));
                                    h.push_str(": ");
                                    h.push_str(self.ty(a));
                                }
                                h.push(')');
                            }
                            h.push_str(":\n");
                            items.push(Work::Text(h));
                        }
                        for &op in &self.p.block_ops[block.ops.0 as usize..block.ops.1 as usize] {
                            items.push(Work::Op(op, indent, in_func));
                        }
                    }
                    work.extend(items.into_iter().rev());
                }
                Work::Op(op, indent, in_func) => {
                    let mut line = " ".repeat(indent);
                    let mut after = Vec::new();
                    self.op(op, indent, in_func, &mut line, &mut after);
                    self.out.push_str(&line);
                    work.extend(after.into_iter().rev());
                }
            }
        }
    }

    /// Prints the op's text up to its first region into `line`; `after` gets its regions and
    /// the text between and after them, in order.
    fn op(&self, op: u32, indent: usize, in_func: bool, line: &mut String, after: &mut Vec<Work>) {
        let name = self.p.op_name(op);
        let attrs = self.attrs(op);
        let mark = line.len();
        let ok = match name {
            "func.func" => self.func(op, &attrs, indent, line, after),
            "builtin.module" => false,
            _ => {
                self.lhs(op, line);
                self.custom(op, name, &attrs, indent, in_func, line, after)
            }
        };
        if !ok {
            line.truncate(mark);
            after.clear();
            let known = KNOWN_DIALECTS.iter().any(|d| name.starts_with(d));
            if known && !JAXLIB_GENERIC.contains(&name) && self.generic_known.get().is_none() {
                self.generic_known.set(Some(op));
            }
            self.lhs(op, line);
            self.generic(op, name, &attrs, indent, line, after);
        }
    }

    fn generic(
        &self,
        op: u32,
        name: &str,
        attrs: &[(&'p str, &'p str)],
        indent: usize,
        line: &mut String,
        after: &mut Vec<Work>,
    ) {
        crate::text::print_string(name, line);
        line.push('(');
        self.value_list(self.operands(op), line);
        line.push(')');
        let known = KNOWN_DIALECTS.iter().any(|d| name.starts_with(d));
        let (props, rest): (Vec<_>, Vec<_>) = attrs.iter().partition(|(n, _)| known && !n.contains('.'));
        if !props.is_empty() {
            line.push_str(" <");
            self.dict(&props, line);
            line.push('>');
        }
        let mut tail = String::new();
        if !rest.is_empty() {
            tail.push(' ');
            self.dict(&rest, &mut tail);
        }
        tail.push_str(" : ");
        self.functional(op, &mut tail);
        tail.push('\n');
        let (q0, q1) = self.p.ops[op as usize].regions;
        if q0 == q1 {
            line.push_str(&tail);
            return;
        }
        line.push_str(" ({\n");
        let pad = " ".repeat(indent);
        for q in q0..q1 {
            if q > q0 {
                after.push(Work::Text(format!("{pad}}}, {{\n")));
            }
            after.push(Work::Region(q, indent + 2, true));
        }
        after.push(Work::Text(format!("{pad}}})") + &tail));
    }

    /// A region printed in a custom form: `{`, its ops, `}` (the caller writes the `{`).
    pub(crate) fn body(&self, op: u32, k: u32, indent: usize, close: String, after: &mut Vec<Work>) {
        let (q0, _) = self.p.ops[op as usize].regions;
        after.push(Work::Region(q0 + k, indent + 2, false));
        after.push(Work::Text(format!("{}}}{close}", " ".repeat(indent))));
    }

    fn func(
        &self,
        op: u32,
        attrs: &[(&'p str, &'p str)],
        indent: usize,
        line: &mut String,
        after: &mut Vec<Work>,
    ) -> bool {
        let Some(f) = self.p.funcs.iter().find(|f| f.op == op) else { return false };
        let get = |k: &str| attr_value(attrs, k);
        let Some(name) = get("sym_name") else { return false };
        line.push_str("func.func ");
        if let Some(vis) = get("sym_visibility") {
            line.push_str(vis.trim_matches('"'));
            line.push(' ');
        }
        line.push('@');
        line.push_str(&symbol_text(name));
        line.push('(');
        let (q0, q1) = self.p.ops[op as usize].regions;
        let body = q1 > q0 && self.p.regions[q0 as usize].1 > self.p.regions[q0 as usize].0;
        let entry = if body { Some(self.p.blocks[self.p.regions[q0 as usize].0 as usize]) } else { None };
        for (i, &t) in f.arg_types.iter().enumerate() {
            if i > 0 {
                line.push_str(", ");
            }
            if let Some(b) = entry {
                line.push_str(&self.names.text(b.args.0 + i as u32));
                line.push_str(": ");
            }
            line.push_str(self.s(t));
            self.span_dict(f.arg_attrs.get(i), line);
        }
        line.push(')');
        let any_res_attrs = f.result_attrs.iter().any(|s| s.1 > s.0);
        match f.result_types.len() {
            0 => {}
            1 if !any_res_attrs => {
                line.push_str(" -> ");
                line.push_str(self.s(f.result_types[0]));
            }
            _ => {
                line.push_str(" -> (");
                for (i, &t) in f.result_types.iter().enumerate() {
                    if i > 0 {
                        line.push_str(", ");
                    }
                    line.push_str(self.s(t));
                    self.span_dict(f.result_attrs.get(i), line);
                }
                line.push(')');
            }
        }
        let rest: Vec<(&str, &str)> =
            attrs.iter().filter(|(n, _)| !matches!(*n, "sym_name" | "sym_visibility")).copied().collect();
        if !rest.is_empty() {
            line.push_str(" attributes ");
            self.dict(&rest, line);
        }
        if body {
            line.push_str(" {\n");
            self.body(op, 0, indent, "\n".into(), after);
        } else {
            line.push('\n');
        }
        true
    }

    fn span_dict(&self, span: Option<&Span>, out: &mut String) {
        if let Some(&(a, b)) = span {
            if b > a {
                let mut v: Vec<(&str, &str)> =
                    self.p.attrs[a as usize..b as usize].iter().map(|&(n, x)| (self.s(n), self.s(x))).collect();
                v.sort_by(|x, y| x.0.cmp(y.0));
                out.push(' ');
                self.dict(&v, out);
            }
        }
    }

    /// The custom form of `op`, or false (nothing usable written) when there is none.
    #[allow(clippy::too_many_arguments)]
    fn custom(
        &self,
        op: u32,
        name: &str,
        attrs: &[(&'p str, &'p str)],
        indent: usize,
        in_func: bool,
        line: &mut String,
        after: &mut Vec<Work>,
    ) -> bool {
        let get = |k: &str| attr_value(attrs, k);
        let ops = self.operands(op);
        let (r0, r1) = self.results(op);
        let nres = r1 - r0;
        let (dialect, short) = name.split_once('.').unwrap_or(("", name));
        let has_regions = self.p.ops[op as usize].regions.1 > self.p.ops[op as usize].regions.0;
        // Writes `name operands attr-dict : types` with `form` types.
        let simple = |line: &mut String, elided: &[&str], form: &str| {
            line.push_str(name);
            if !ops.is_empty() {
                line.push(' ');
                self.value_list(ops, line);
            }
            self.attr_dict(attrs, elided, line);
            line.push_str(" : ");
            match form {
                "same" => self.same_or_functional(op, line),
                "result" => line.push_str(self.ty(r0)),
                _ => self.functional(op, line),
            }
            line.push('\n');
        };
        match (dialect, short) {
            ("func", "return") => {
                line.push_str(if in_func { "return" } else { "func.return" });
                if !ops.is_empty() {
                    line.push(' ');
                    self.value_list(ops, line);
                    self.attr_dict(attrs, &[], line);
                    line.push_str(" : ");
                    self.type_list(ops.iter().copied(), line);
                }
                line.push('\n');
                !has_regions && attrs.is_empty()
            }
            ("func", "call") => {
                let Some(callee) = get("callee") else { return false };
                line.push_str(if in_func { "call " } else { "func.call " });
                line.push_str(callee);
                line.push('(');
                self.value_list(ops, line);
                line.push(')');
                self.attr_dict(attrs, &["callee"], line);
                line.push_str(" : ");
                self.functional(op, line);
                line.push('\n');
                !has_regions
            }
            ("stablehlo" | "sdy", "return") => {
                line.push_str(name);
                if !ops.is_empty() {
                    line.push(' ');
                    self.value_list(ops, line);
                }
                self.attr_dict(attrs, &[], line);
                if !ops.is_empty() {
                    line.push_str(" : ");
                    self.type_list(ops.iter().copied(), line);
                }
                line.push('\n');
                !has_regions
            }
            ("stablehlo", "complex") if nres == 1 && ops.len() == 2 && !has_regions => {
                // StableHLO's ComplexOpType printer: the result type alone when the operands
                // share the type of its real part.
                let result = self.ty(r0);
                let real = super::ops::real_of_complex(result);
                let short = self.ty(ops[0]) == self.ty(ops[1]) && real.as_deref() == Some(self.ty(ops[0]));
                simple(line, &[], if short { "result" } else { "functional" });
                true
            }
            ("stablehlo", s) if super::ops::SAME_TYPE.contains(&s) && !has_regions => {
                // Ops whose format prints one type when all are equal (the
                // SameOperandsAndResultType printer); the rest print the functional type.
                let functional = matches!(s, "bitcast_convert" | "reshape" | "dynamic_update_slice" | "is_finite");
                simple(line, &[], if functional { "functional" } else { "same" });
                true
            }
            ("stablehlo", "select") if nres == 1 && ops.len() == 3 => {
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                self.attr_dict(attrs, &[], line);
                line.push_str(" : ");
                let (p_, a, b, r) = (self.ty(ops[0]), self.ty(ops[1]), self.ty(ops[2]), self.ty(r0));
                if a == b && b == r {
                    line.push_str(p_);
                    line.push_str(", ");
                    line.push_str(r);
                } else {
                    self.functional(op, line);
                }
                line.push('\n');
                true
            }
            ("stablehlo", "broadcast_in_dim" | "transpose" | "reverse") if ops.len() == 1 && nres == 1 => {
                let key = match short {
                    "broadcast_in_dim" => "broadcast_dimensions",
                    "transpose" => "permutation",
                    _ => "dimensions",
                };
                let Some(dims) = get(key).and_then(|t| array_list(t, "i64")) else { return false };
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                line.push_str(", dims = ");
                line.push_str(&dims);
                self.attr_dict(attrs, &[key], line);
                line.push_str(" : ");
                if short == "reverse" {
                    self.same_or_functional(op, line);
                } else {
                    self.functional(op, line);
                }
                line.push('\n');
                true
            }
            ("stablehlo", "iota") if ops.is_empty() && nres == 1 => {
                let Some(d) = get("iota_dimension").and_then(|t| int_of(t, "i64")) else { return false };
                line.push_str(&format!("{name} dim = {d}"));
                self.attr_dict(attrs, &["iota_dimension"], line);
                line.push_str(" : ");
                line.push_str(self.ty(r0));
                line.push('\n');
                true
            }
            ("stablehlo", "concatenate") if nres == 1 => {
                let Some(d) = get("dimension").and_then(|t| int_of(t, "i64")) else { return false };
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                line.push_str(&format!(", dim = {d}"));
                self.attr_dict(attrs, &["dimension"], line);
                line.push_str(" : ");
                self.functional(op, line);
                line.push('\n');
                true
            }
            ("stablehlo", "dynamic_slice") if nres == 1 => {
                let Some(sizes) = get("slice_sizes").and_then(|t| array_list(t, "i64")) else { return false };
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                line.push_str(", sizes = ");
                line.push_str(&sizes);
                self.attr_dict(attrs, &["slice_sizes"], line);
                line.push_str(" : ");
                self.functional(op, line);
                line.push('\n');
                true
            }
            ("stablehlo", "pad") if nres == 1 && ops.len() == 2 => {
                let keys = ["edge_padding_low", "edge_padding_high", "interior_padding"];
                let lists: Option<Vec<String>> =
                    keys.iter().map(|k| get(k).and_then(|t| array_list(t, "i64"))).collect();
                let Some(lists) = lists else { return false };
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                line.push_str(&format!(", low = {}, high = {}, interior = {}", lists[0], lists[1], lists[2]));
                self.attr_dict(attrs, &keys, line);
                line.push_str(" : ");
                self.functional(op, line);
                line.push('\n');
                true
            }
            ("stablehlo", "slice") if nres == 1 && ops.len() == 1 => {
                let parse = |k: &str| -> Option<Vec<i64>> {
                    let l = array_list(get(k)?, "i64")?;
                    let inner = &l[1..l.len() - 1];
                    if inner.is_empty() {
                        return Some(Vec::new());
                    }
                    inner.split(", ").map(|x| x.parse().ok()).collect()
                };
                let (Some(s), Some(l), Some(st)) = (parse("start_indices"), parse("limit_indices"), parse("strides"))
                else {
                    return false;
                };
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                line.push_str(" [");
                for i in 0..s.len() {
                    if i > 0 {
                        line.push_str(", ");
                    }
                    line.push_str(&format!("{}:{}", s[i], l.get(i).copied().unwrap_or(0)));
                    if st.get(i).copied().unwrap_or(1) != 1 {
                        line.push_str(&format!(":{}", st[i]));
                    }
                }
                line.push(']');
                self.attr_dict(attrs, &["start_indices", "limit_indices", "strides"], line);
                line.push_str(" : ");
                self.functional(op, line);
                line.push('\n');
                true
            }
            ("stablehlo", "compare") if ops.len() == 2 && nres == 1 => {
                let Some(dir) = get("comparison_direction").and_then(|t| enum_of(t, "comparison_direction")) else {
                    return false;
                };
                line.push_str(&format!("{name} {dir}, "));
                self.value_list(ops, line);
                if let Some(ct) = get("compare_type") {
                    let Some(ct) = enum_of(ct, "comparison_type") else { return false };
                    line.push_str(", ");
                    line.push_str(ct);
                }
                self.attr_dict(attrs, &["comparison_direction", "compare_type"], line);
                line.push_str(" : ");
                self.functional(op, line);
                line.push('\n');
                true
            }
            ("stablehlo", "dot_general" | "dot") if ops.len() == 2 && nres == 1 => {
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                let mut elided = vec!["precision_config"];
                if short == "dot_general" {
                    let Some(dn) = get("dot_dimension_numbers").and_then(dot_dims) else { return false };
                    line.push_str(&dn);
                    elided.push("dot_dimension_numbers");
                }
                if let Some(pc) = get("precision_config") {
                    let items: Option<Vec<&str>> = pc
                        .strip_prefix('[')
                        .and_then(|x| x.strip_suffix(']'))
                        .map(|x| x.split(", ").map(|e| enum_of(e, "precision")).collect())
                        .unwrap_or(None);
                    let Some(items) = items else { return false };
                    line.push_str(&format!(", precision = [{}]", items.join(", ")));
                }
                if let Some(alg) = get("algorithm") {
                    let Some(a) = alg.strip_prefix("#stablehlo.dot_algorithm") else { return false };
                    line.push_str(&format!(", algorithm = {a}"));
                    elided.push("algorithm");
                }
                self.attr_dict(attrs, &elided, line);
                line.push_str(" : ");
                self.functional(op, line);
                line.push('\n');
                true
            }
            ("stablehlo" | "sdy", "constant") if ops.is_empty() && nres == 1 => {
                let Some(v) = get("value") else { return false };
                let ty = self.ty(r0);
                let Some(lit) = v.strip_suffix(&format!(" : {ty}")) else { return false };
                line.push_str(name);
                self.attr_dict(attrs, &["value"], line);
                line.push(' ');
                line.push_str(lit);
                line.push_str(" : ");
                line.push_str(ty);
                line.push('\n');
                true
            }
            ("stablehlo", "custom_call") if !has_regions => {
                let Some(target) = get("call_target_name") else { return false };
                let target = super::cursor::unescape(target);
                line.push_str(name);
                line.push_str(" @");
                line.push_str(&symbol_text(&super::reader::quote(&target)));
                line.push('(');
                self.value_list(ops, line);
                line.push(')');
                self.attr_dict(attrs, &["call_target_name"], line);
                line.push_str(" : ");
                self.functional(op, line);
                line.push('\n');
                true
            }
            ("stablehlo", "optimization_barrier") if !ops.is_empty() => {
                line.push_str(name);
                self.attr_dict(attrs, &[], line);
                line.push(' ');
                self.value_list(ops, line);
                line.push_str(" : ");
                self.type_list(ops.iter().copied(), line);
                line.push('\n');
                true
            }
            ("stablehlo", "after_all" | "create_token") if nres == 1 => {
                line.push_str(name);
                if short == "after_all" {
                    line.push(' ');
                }
                self.value_list(ops, line);
                self.attr_dict(attrs, &[], line);
                line.push_str(" : ");
                line.push_str(self.ty(r0));
                line.push('\n');
                true
            }
            ("stablehlo", "fft") if ops.len() == 1 => {
                let (Some(t), Some(l)) = (
                    get("fft_type").and_then(|t| enum_of(t, "fft_type")),
                    get("fft_length").and_then(|t| array_list(t, "i64")),
                ) else {
                    return false;
                };
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                line.push_str(&format!(", type = {t}, length = {l}"));
                self.attr_dict(attrs, &["fft_type", "fft_length"], line);
                line.push_str(" : ");
                self.functional(op, line);
                line.push('\n');
                true
            }
            ("stablehlo", "cholesky") if ops.len() == 1 => {
                let Some(lower) = get("lower") else { return false };
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                line.push_str(&format!(", lower = {lower}"));
                self.attr_dict(attrs, &["lower"], line);
                line.push_str(" : ");
                self.same_or_functional(op, line);
                line.push('\n');
                true
            }
            ("stablehlo", "rng_bit_generator") if ops.len() == 1 => {
                let Some(a) = get("rng_algorithm").and_then(|t| enum_of(t, "rng_algorithm")) else { return false };
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                line.push_str(&format!(", algorithm = {a}"));
                self.attr_dict(attrs, &["rng_algorithm"], line);
                line.push_str(" : ");
                self.functional(op, line);
                line.push('\n');
                true
            }
            ("stablehlo", "convolution") if ops.len() == 2 && nres == 1 => self.convolution(op, attrs, line),
            ("stablehlo", "reduce") => self.reduce(op, attrs, indent, line, after),
            ("stablehlo", "while") => self.while_(op, attrs, indent, line, after),
            ("chlo", "top_k") if ops.len() == 1 => {
                let Some(k) = get("k").and_then(|t| int_of(t, "i64")) else { return false };
                line.push_str(&format!("{name}("));
                self.value_list(ops, line);
                line.push_str(&format!(", k = {k})"));
                self.attr_dict(attrs, &["k"], line);
                line.push_str(" : ");
                line.push_str(self.ty(ops[0]));
                line.push_str(" -> (");
                self.type_list(r0..r1, line);
                line.push_str(")\n");
                true
            }
            ("chlo", _) if ops.len() == 1 && nres == 1 && !has_regions => {
                line.push_str(name);
                line.push(' ');
                self.value_list(ops, line);
                self.attr_dict(attrs, &[], line);
                line.push_str(&format!(" : {} -> {}\n", self.ty(ops[0]), self.ty(r0)));
                true
            }
            ("sdy", _) => super::sdy_print::custom(self, op, name, short, attrs, indent, line, after),
            _ => false,
        }
    }

    // Accessors for `sdy_print`.
    pub(crate) fn names_text(&self, v: u32) -> String {
        self.names.text(v)
    }
    pub(crate) fn operands_of(&self, op: u32) -> &'p [u32] {
        self.operands(op)
    }
    pub(crate) fn results_of(&self, op: u32) -> Span {
        self.results(op)
    }
    pub(crate) fn ty_of(&self, v: u32) -> &'p str {
        self.ty(v)
    }
    pub(crate) fn write_attr_dict(&self, attrs: &[(&str, &str)], elided: &[&str], out: &mut String) {
        self.attr_dict(attrs, elided, out)
    }
    pub(crate) fn write_values(&self, vs: &[u32], out: &mut String) {
        self.value_list(vs, out)
    }
    pub(crate) fn write_same_or_functional(&self, op: u32, out: &mut String) {
        self.same_or_functional(op, out)
    }
    pub(crate) fn write_functional(&self, op: u32, out: &mut String) {
        self.functional(op, out)
    }
    pub(crate) fn write_body(&self, op: u32, indent: usize, close: String, after: &mut Vec<Work>) {
        self.body(op, 0, indent, close, after)
    }
    pub(crate) fn program(&self) -> &'p Program {
        self.p
    }
}

/// `@name` text of a `"name"` string attribute: bare when it is a valid bare symbol.
pub(crate) fn symbol_text(quoted: &str) -> String {
    let name = super::cursor::unescape(quoted);
    let mut out = String::new();
    crate::text::print_symbol(&name, &mut out);
    out.trim_start_matches('@').to_string()
}
