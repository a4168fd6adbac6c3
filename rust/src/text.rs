//! Shardy's text form of meshes and shardings, parsed and printed byte-for-byte as Shardy prints
//! them (assembly formats in `shardy/dialect/sdy/ir/attrs.td`, `printers.cc`):
//!
//! ```text
//! #sdy.mesh<["x"=2, "y"=4], device_ids=[0, 2, 1, 3, 4, 6, 5, 7]>
//! #sdy.sharding<@mesh, [{"x", "y":(2)2, ?}p1, {}], replicated={"z"}, unreduced={"w"}>
//! #sdy.sharding<mesh<["a"=2]>, [{"a"}]>
//! #sdy.sharding_per_value<[<@mesh, [{"x"}]>, <@mesh, []>]>
//! ```
//!
//! Strings are escaped as MLIR does (`llvm::printEscapedString`): `\\` for a backslash, `\XX`
//! (upper-case hex) for `"` and every byte outside printable ASCII. Symbol names are printed bare
//! when they are MLIR bare identifiers, quoted otherwise.

use std::fmt::Write;

use crate::axis::{AxisRef, SubAxis};
use crate::error::{Error, Result};
use crate::lexer::Lexer;
use crate::mesh::{Mesh, MeshAxis};
use crate::sharding::{DimSharding, MeshRef, Reduction, TensorSharding};

// ---------------------------------------------------------------- printing

pub fn print_string(s: &str, out: &mut String) {
    out.push('"');
    for &b in s.as_bytes() {
        if b == b'\\' {
            out.push_str("\\\\");
        } else if (0x20..0x7f).contains(&b) && b != b'"' {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\{b:02X}");
        }
    }
    out.push('"');
}

/// `s` as an MLIR string literal (quotes included; [`print_string`]).
pub fn quote(s: &str) -> String {
    let mut out = String::new();
    print_string(s, &mut out);
    out
}

fn is_bare_id(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
}

pub fn print_symbol(name: &str, out: &mut String) {
    out.push('@');
    if is_bare_id(name) {
        out.push_str(name);
    } else {
        print_string(name, out);
    }
}

fn push_axis_ref(a: &AxisRef, out: &mut String) {
    print_string(&a.name, out);
    if let Some(s) = a.sub {
        let _ = write!(out, ":({}){}", s.pre_size, s.size);
    }
}

pub fn print_axis_ref(a: &AxisRef) -> String {
    let mut s = String::new();
    push_axis_ref(a, &mut s);
    s
}

fn push_axis_refs(axes: &[AxisRef], out: &mut String) {
    for (i, a) in axes.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_axis_ref(a, out);
    }
}

/// `{"x", "y":(1)2}`
pub fn print_axis_list(axes: &[AxisRef]) -> String {
    let mut s = String::from("{");
    push_axis_refs(axes, &mut s);
    s.push('}');
    s
}

/// `#sdy<axis_ref_list{"x", "y":(1)2}>`: a collective's `reduction_axes`.
pub fn print_axis_ref_list_attr(axes: &[AxisRef]) -> String {
    format!("#sdy<axis_ref_list{}>", print_axis_list(axes))
}

/// `#sdy<list_of_axis_ref_lists[{"x"}, {}]>`: a collective's axes per dimension.
pub fn print_axis_ref_lists_attr(per_dim: &[Vec<AxisRef>]) -> String {
    let dims: Vec<String> = per_dim.iter().map(|d| print_axis_list(d)).collect();
    format!("#sdy<list_of_axis_ref_lists[{}]>", dims.join(", "))
}

/// `<["x"=2, "y"=4], device_ids=[..]>` (without the `#sdy.mesh` prefix).
fn push_mesh_body(m: &Mesh, out: &mut String) {
    out.push_str("<[");
    for (i, a) in m.axes().iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        print_string(&a.name, out);
        let _ = write!(out, "={}", a.size);
    }
    out.push(']');
    if !m.device_ids().is_empty() {
        out.push_str(", device_ids=[");
        for (i, d) in m.device_ids().iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{d}");
        }
        out.push(']');
    }
    out.push('>');
}

/// `#sdy.mesh<["x"=2, "y"=4]>`
pub fn print_mesh(m: &Mesh) -> String {
    let mut s = String::from("#sdy.mesh");
    push_mesh_body(m, &mut s);
    s
}

/// `<["x"=2]>` as in `sdy.mesh @mesh = <["x"=2]>`.
pub fn print_mesh_body(m: &Mesh) -> String {
    let mut s = String::new();
    push_mesh_body(m, &mut s);
    s
}

/// `sdy.mesh @name = <["x"=2]>`, the module-level definition.
pub fn print_mesh_op(name: &str, m: &Mesh) -> String {
    let mut s = String::from("sdy.mesh ");
    print_symbol(name, &mut s);
    s.push_str(" = ");
    push_mesh_body(m, &mut s);
    s
}

pub fn print_dim_sharding(d: &DimSharding, out: &mut String) {
    out.push('{');
    push_axis_refs(&d.axes, out);
    if !d.closed {
        if !d.axes.is_empty() {
            out.push_str(", ");
        }
        out.push('?');
    }
    out.push('}');
    if let Some(p) = d.priority {
        let _ = write!(out, "p{p}");
    }
}

/// The stripped form `<@mesh, [{"x"}, {}]>` used inside per-value lists and op syntax.
pub fn print_sharding_body(t: &TensorSharding, out: &mut String) {
    out.push('<');
    match &t.mesh {
        MeshRef::Named(n) => print_symbol(n, out),
        MeshRef::Inline(m) => {
            out.push_str("mesh");
            push_mesh_body(m, out);
        }
    }
    out.push_str(", [");
    for (i, d) in t.dims.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        print_dim_sharding(d, out);
    }
    out.push(']');
    if !t.replicated.is_empty() {
        out.push_str(", replicated=");
        out.push_str(&print_axis_list(&t.replicated));
    }
    if !t.unreduced.is_empty() {
        out.push_str(", unreduced=");
        if t.reduction != Reduction::Sum {
            out.push_str(t.reduction.name());
        }
        out.push_str(&print_axis_list(&t.unreduced));
    }
    out.push('>');
}

/// `#sdy.sharding<@mesh, [...]>`
pub fn print_sharding(t: &TensorSharding) -> String {
    let mut s = String::from("#sdy.sharding");
    print_sharding_body(t, &mut s);
    s
}

/// `#sdy.sharding_per_value<[<@mesh, [...]>, ...]>`
pub fn print_sharding_per_value(ts: &[TensorSharding]) -> String {
    let mut s = String::from("#sdy.sharding_per_value<[");
    for (i, t) in ts.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        print_sharding_body(t, &mut s);
    }
    s.push_str("]>");
    s
}

// ---------------------------------------------------------------- parsing

impl Lexer<'_> {
    /// A double-quoted MLIR string with `\\`, `\"`, `\n`, `\t` and `\XX` escapes.
    fn string(&mut self) -> Result<String> {
        self.skip_ws();
        if !self.rest().starts_with('"') {
            return self.err("a quoted name");
        }
        let start = self.pos;
        let bytes = self.src.as_bytes();
        let mut i = self.pos + 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            match bytes.get(i) {
                None | Some(b'\n') => {
                    return Err(Error::parse(
                        start,
                        format!("unterminated string starting at offset {start} of {:?}", self.src),
                    ))
                }
                Some(b'"') => break,
                Some(b'\\') => {
                    let hex = |c: Option<&u8>| c.and_then(|c| (*c as char).to_digit(16));
                    match bytes.get(i + 1) {
                        Some(b'\\') => out.push(b'\\'),
                        Some(b'"') => out.push(b'"'),
                        Some(b'n') => out.push(b'\n'),
                        Some(b't') => out.push(b'\t'),
                        c => match (hex(c), hex(bytes.get(i + 2))) {
                            (Some(h), Some(l)) => {
                                out.push((h * 16 + l) as u8);
                                i += 1;
                            }
                            _ => {
                                return Err(Error::parse(
                                    i,
                                    format!("bad escape in string at offset {i} of {:?}", self.src),
                                ))
                            }
                        },
                    }
                    i += 2;
                }
                Some(&b) => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        self.pos = i + 1;
        String::from_utf8(out).map_err(|_| Error::parse(start, format!("string at offset {start} is not valid UTF-8")))
    }

    /// `@name` or `@"quoted name"`.
    fn symbol_ref(&mut self) -> Result<String> {
        self.expect("@")?;
        if self.rest().starts_with('"') {
            return self.string();
        }
        let r = self.rest();
        let mut len = 0;
        for (i, c) in r.char_indices() {
            let ok = if i == 0 {
                c.is_ascii_alphabetic() || c == '_'
            } else {
                c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.')
            };
            if !ok {
                break;
            }
            len = i + c.len_utf8();
        }
        if len == 0 {
            return self.err("a symbol name after '@'");
        }
        self.pos += len;
        Ok(r[..len].to_string())
    }

    fn axis_ref(&mut self) -> Result<AxisRef> {
        let name = self.string()?;
        if !self.eat(":") {
            return Ok(AxisRef { name: name.into(), sub: None });
        }
        self.expect("(")?;
        let pre_size = self.int()?;
        self.expect(")")?;
        let size = self.int()?;
        Ok(AxisRef { name: name.into(), sub: Some(SubAxis { pre_size, size }) })
    }

    fn axis_list(&mut self) -> Result<Vec<AxisRef>> {
        self.expect("{")?;
        self.list("}", Self::axis_ref)
    }

    fn mesh_body(&mut self, strict: bool) -> Result<Mesh> {
        let start = self.pos;
        self.expect("<")?;
        self.expect("[")?;
        let axes = self.list("]", |p| {
            let name = p.string()?;
            p.expect("=")?;
            Ok(MeshAxis { name, size: p.int()? })
        })?;
        let mut ids = Vec::new();
        if self.eat(",") {
            if !self.eat_keyword("device_ids") {
                return self.err("'device_ids'");
            }
            self.expect("=")?;
            self.expect("[")?;
            ids = self.list("]", Self::int)?;
        }
        self.expect(">")?;
        let made = if strict { Mesh::new_strict(axes, ids) } else { Mesh::new(axes, ids) };
        made.map_err(|e| e.context(format!("mesh {:?}", &self.src[start..self.pos])))
    }

    fn dim_sharding(&mut self) -> Result<DimSharding> {
        self.expect("{")?;
        let mut axes = Vec::new();
        let mut closed = true;
        if !self.eat("}") {
            loop {
                if self.eat("?") {
                    closed = false;
                    self.expect("}")?;
                    break;
                }
                axes.push(self.axis_ref()?);
                if self.eat("}") {
                    break;
                }
                self.expect(",")?;
            }
        }
        let mut priority = None;
        self.skip_ws();
        let r = self.rest();
        if r.starts_with('p') && r[1..].starts_with(|c: char| c.is_ascii_digit()) {
            self.pos += 1;
            priority = Some(self.int()?);
        }
        Ok(DimSharding { axes, closed, priority })
    }

    /// `<@mesh, [dims], replicated={..}, unreduced={..}>`
    fn sharding_body(&mut self) -> Result<TensorSharding> {
        self.expect("<")?;
        let mesh = if self.peek("@") {
            MeshRef::Named(self.symbol_ref()?.into())
        } else if self.eat("#sdy.mesh") || self.eat_keyword("mesh") {
            MeshRef::Inline(Box::new(self.mesh_body(true)?))
        } else {
            return self.err("a mesh name '@name' or an inlined 'mesh<...>'");
        };
        self.expect(",")?;
        self.expect("[")?;
        let dims = self.list("]", Self::dim_sharding)?;
        let mut replicated = Vec::new();
        let mut unreduced = Vec::new();
        let mut reduction = Reduction::Sum;
        if self.eat(",") {
            let mut progressed = false;
            if self.eat_keyword("replicated") {
                self.expect("=")?;
                replicated = self.axis_list()?;
                progressed = true;
            }
            if (!progressed || self.eat(",")) && self.eat_keyword("unreduced") {
                self.expect("=")?;
                for r in [Reduction::Max, Reduction::Min] {
                    if self.eat_keyword(r.name()) {
                        reduction = r;
                    }
                }
                unreduced = self.axis_list()?;
                progressed = true;
            }
            if !progressed {
                return self.err("'replicated=' or 'unreduced='");
            }
        }
        self.expect(">")?;
        let t = TensorSharding { mesh, dims, replicated, unreduced, reduction };
        t.check_local()?;
        Ok(t)
    }
}

fn strip_prefix(p: &mut Lexer<'_>, prefix: &str) {
    p.skip_ws();
    let _ = p.eat(prefix);
}

/// Parses one axis reference `"x"` or `"x":(2)4`, the whole input.
pub fn parse_axis_ref(text: &str) -> Result<AxisRef> {
    let mut p = Lexer::new(text);
    let a = p.axis_ref()?;
    p.done()?;
    a.check_local()?;
    Ok(a)
}

/// Parses Shardy's `#sdy<axis_ref_list{"x", "y":(1)2}>` (or the bare `{...}`): the axis
/// references of a collective's `reduction_axes` or an unreduced op's `axes`.
pub fn parse_axis_ref_list(text: &str) -> Result<Vec<AxisRef>> {
    let mut p = Lexer::new(text);
    p.skip_ws();
    let prefixed = p.eat("#sdy<axis_ref_list");
    let axes = p.axis_list()?;
    if prefixed {
        p.expect(">")?;
    }
    p.done()?;
    for a in &axes {
        a.check_local()?;
    }
    Ok(axes)
}

/// Parses Shardy's `#sdy<list_of_axis_ref_lists[{"x"}, {}]>` (or the bare `[...]`): one axis
/// list per dimension, as a collective's `gathering_axes` or `slicing_axes` hold them.
pub fn parse_axis_ref_lists(text: &str) -> Result<Vec<Vec<AxisRef>>> {
    let mut p = Lexer::new(text);
    p.skip_ws();
    let prefixed = p.eat("#sdy<list_of_axis_ref_lists");
    p.expect("[")?;
    let lists = p.list("]", Lexer::axis_list)?;
    if prefixed {
        p.expect(">")?;
    }
    p.done()?;
    for a in lists.iter().flatten() {
        a.check_local()?;
    }
    Ok(lists)
}

/// One parameter of `sdy.all_to_all`: its axes move from dimension `src` to dimension `tgt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllToAllParam {
    pub axes: Vec<AxisRef>,
    pub src: i64,
    pub tgt: i64,
}

/// Parses Shardy's `#sdy<all_to_all_param_list[{"x"}: 0->1, {"y"}: 2->3]>` (or the bare
/// `[...]`): `sdy.all_to_all`'s `params`.
pub fn parse_all_to_all_params(text: &str) -> Result<Vec<AllToAllParam>> {
    let mut p = Lexer::new(text);
    p.skip_ws();
    let prefixed = p.eat("#sdy<all_to_all_param_list");
    p.expect("[")?;
    let params = p.list("]", |p| {
        let axes = p.axis_list()?;
        p.expect(":")?;
        let src = p.int()?;
        p.expect("->")?;
        let tgt = p.int()?;
        Ok(AllToAllParam { axes, src, tgt })
    })?;
    if prefixed {
        p.expect(">")?;
    }
    p.done()?;
    for a in params.iter().flat_map(|q| &q.axes) {
        a.check_local()?;
    }
    Ok(params)
}

/// Parses one MLIR string literal (`"a\\22b"` -> `a"b`), the whole input.
/// The byte range `start..end` of each complete string literal (`"..."`, escapes skipped) in
/// `text`, quotes included, in order; an unterminated one ends the scan.
pub fn quoted_spans(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let b = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() && b[i] != b'"' {
            i += 1;
        }
        let start = i;
        let mut j = i + 1;
        while j < b.len() && b[j] != b'"' {
            j += if b[j] == b'\\' { 2 } else { 1 };
        }
        if j >= b.len() {
            i = b.len();
            return None;
        }
        i = j + 1;
        Some((start, j + 1))
    })
}

pub fn parse_string(text: &str) -> Result<String> {
    let mut p = Lexer::new(text);
    let s = p.string()?;
    p.done()?;
    Ok(s)
}

/// Parses a mesh: `#sdy.mesh<...>`, `mesh<...>`, or the bare `<...>`. Explicit iota device
/// ids are rejected, as Shardy's verifier does.
pub fn parse_mesh(text: &str) -> Result<Mesh> {
    let mut p = Lexer::new(text);
    if !p.eat("#sdy.mesh") {
        let _ = p.eat_keyword("mesh");
    }
    let m = p.mesh_body(true)?;
    p.done()?;
    Ok(m)
}

/// Parses a mesh definition `sdy.mesh @name = <...>`, returning its name and mesh.
pub fn parse_mesh_op(text: &str) -> Result<(String, Mesh)> {
    let mut p = Lexer::new(text);
    if !p.eat_keyword("sdy.mesh") {
        return p.err("'sdy.mesh'");
    }
    let name = p.symbol_ref()?;
    p.expect("=")?;
    let m = p.mesh_body(true)?;
    p.done()?;
    Ok((name, m))
}

/// Parses `#sdy.sharding<...>` or the stripped `<...>`.
pub fn parse_sharding(text: &str) -> Result<TensorSharding> {
    let mut p = Lexer::new(text);
    strip_prefix(&mut p, "#sdy.sharding");
    let t = p.sharding_body()?;
    p.done()?;
    Ok(t)
}

/// Parses `#sdy.sharding_per_value<[<...>, ...]>` or the stripped `[<...>, ...]`.
pub fn parse_sharding_per_value(text: &str) -> Result<Vec<TensorSharding>> {
    let mut p = Lexer::new(text);
    p.skip_ws();
    let prefixed = p.eat("#sdy.sharding_per_value");
    if prefixed {
        p.expect("<")?;
    }
    p.expect("[")?;
    let ts = p.list("]", Lexer::sharding_body)?;
    if prefixed {
        p.expect(">")?;
    }
    p.done()?;
    Ok(ts)
}
