//! Readers of the MLIR attribute texts the rules need, as jaxlib prints them (`str(attr)`).
//!
//! Every reader takes the op (for messages) and the attribute name, and fails with an
//! `OpInfo` error naming the op, the attribute, what was expected and what was got when the
//! attribute is missing (unless a default is given) or malformed.

use super::{tuple, OpDesc};
use crate::error::{Error, Result};

fn bad(op: &OpDesc, name: &str, expected: &str, text: &str) -> Error {
    op.error(format_args!("attribute {}: expected {expected}, got {}", py_repr(name), py_repr(text)))
}

fn required<'a>(op: &'a OpDesc, name: &str, expected: &str) -> Result<&'a str> {
    op.attr(name).ok_or_else(|| {
        let mut names: Vec<&str> = op.attributes.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        let known = if names.is_empty() { "none".to_string() } else { names.join(", ") };
        op.error(format_args!("missing attribute {} ({expected}); attributes present: {known}", py_repr(name)))
    })
}

/// A string as Python's `repr` prints it (for messages that match Python's).
pub fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

fn digits_end(s: &str, from: usize) -> usize {
    from + s[from..].bytes().take_while(u8::is_ascii_digit).count()
}

/// `-?\d+` then optionally `: type` (`1 : i64`, a bare `1`).
fn parse_int(text: &str) -> Option<i64> {
    let t = text.trim_start();
    let sign = usize::from(t.starts_with('-'));
    let end = digits_end(t, sign);
    if end == sign {
        return None;
    }
    let value = t[..end].parse().ok()?;
    let rest = t[end..].trim_start();
    if rest.is_empty() {
        return Some(value);
    }
    let ty = rest.strip_prefix(':')?.trim_start();
    let letters = ty.bytes().take_while(u8::is_ascii_lowercase).count();
    if letters == 0 {
        return None;
    }
    let end = digits_end(ty, letters);
    ty[end..].trim().is_empty().then_some(value)
}

/// `1 : i64` (or a bare `1`).
pub fn int(op: &OpDesc, name: &str, default: Option<i64>) -> Result<i64> {
    const EXPECTED: &str = "an integer such as '1 : i64'";
    let text = match (op.attr(name), default) {
        (Some(t), _) => t,
        (None, Some(d)) => return Ok(d),
        (None, None) => required(op, name, EXPECTED)?,
    };
    parse_int(text).ok_or_else(|| bad(op, name, EXPECTED, text))
}

/// `true` / `false` (a missing optional attribute is `default`).
pub fn boolean(op: &OpDesc, name: &str, default: Option<bool>) -> Result<bool> {
    const EXPECTED: &str = "'true' or 'false'";
    let text = match (op.attr(name), default) {
        (Some(t), _) => t,
        (None, Some(d)) => return Ok(d),
        (None, None) => required(op, name, EXPECTED)?,
    };
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(op, name, EXPECTED, text)),
    }
}

/// Comma-separated integers (empty text: none).
fn int_list(text: &str) -> Option<Vec<i64>> {
    let body = text.trim();
    if body.is_empty() {
        return Some(Vec::new());
    }
    body.split(',').map(|x| x.trim().parse().ok()).collect()
}

/// The values of `array<iN: ...>`, or `None` when `text` is not one.
fn array_values(text: &str) -> Option<Option<Vec<i64>>> {
    let inner = text.trim().strip_prefix("array<")?.strip_suffix('>')?.trim_start();
    let width = inner.strip_prefix('i')?;
    let end = digits_end(width, 0);
    if end == 0 {
        return None;
    }
    let rest = width[end..].trim_start();
    if rest.is_empty() {
        return Some(Some(Vec::new()));
    }
    Some(int_list(rest.strip_prefix(':')?))
}

/// A list of integers: `array<i64: 1, 0>`, `array<i64>` (empty), or a 1-D
/// `dense<[1, 0]> : tensor<2xi64>`.
pub fn ints(op: &OpDesc, name: &str, default: Option<&[i64]>) -> Result<Vec<i64>> {
    const EXPECTED: &str = "an integer array such as 'array<i64: 1, 0>'";
    let text = match (op.attr(name), default) {
        (Some(t), _) => t,
        (None, Some(d)) => return Ok(d.to_vec()),
        (None, None) => required(op, name, EXPECTED)?,
    };
    match array_values(text) {
        Some(Some(values)) => return Ok(values),
        Some(None) => {}
        None if text.trim_start().starts_with("dense<") => return Ok(dense_ints(op, name)?.1),
        None => {}
    }
    Err(bad(op, name, EXPECTED, text))
}

/// The tensor type of a dense attribute: (dimension text, element kind, bit width).
fn dense_type(ty: &str) -> Option<(&str, &str, u32)> {
    // `([0-9x]*?)x?([a-z]+)(\d+)`: the shortest dimension text that leaves `x?` letters digits.
    for k in 0..=ty.len() {
        if !ty[..k].bytes().all(|c| c.is_ascii_digit() || c == b'x') {
            return None;
        }
        let rest = &ty[k..];
        for rest in [rest.strip_prefix('x'), Some(rest)].into_iter().flatten() {
            let letters = rest.bytes().take_while(u8::is_ascii_lowercase).count();
            let end = digits_end(rest, letters);
            if letters > 0 && end > letters && end == rest.len() {
                return Some((&ty[..k], &rest[..letters], rest[letters..].parse().ok()?));
            }
        }
    }
    None
}

/// The body and tensor type of `dense<BODY> : tensor<TYPE>`.
fn dense_parts(text: &str) -> Option<(&str, &str)> {
    let t = text.trim();
    let inner = t.strip_prefix("dense<")?.strip_suffix('>')?;
    // The last `>`, then `:`, then `tensor<`, with optional spaces between.
    let mut search = inner.len();
    while let Some(at) = inner[..search].rfind("tensor<") {
        let before = inner[..at].trim_end();
        if let Some(before) = before.strip_suffix(':') {
            if let Some(body) = before.trim_end().strip_suffix('>') {
                return Some((body, &inner[at + "tensor<".len()..]));
            }
        }
        search = at;
    }
    None
}

/// An integer elements attribute `dense<...> : tensor<4x2xi64>`: (shape, row-major flat
/// values). Splats (`dense<0>`), nested lists and hex (`dense<"0x...">`) forms.
pub fn dense_ints(op: &OpDesc, name: &str) -> Result<(Vec<i64>, Vec<i64>)> {
    let expected = "integer elements such as 'dense<0> : tensor<2x2xi64>'";
    let text = required(op, name, expected)?;
    let Some(((body, ty), (dims, kind, bits))) = dense_parts(text).and_then(|p| Some((p, dense_type(p.1)?))) else {
        return Err(bad(op, name, expected, text));
    };
    let _ = ty;
    let shape: Vec<i64> = match dims.split('x').filter(|d| !d.is_empty()).map(str::parse).collect() {
        Ok(s) => s,
        Err(_) => return Err(bad(op, name, expected, text)),
    };
    let count: i64 = shape.iter().product();
    let body = body.trim();
    let flat = if let Some(hex) = body.strip_prefix("\"0x").and_then(|h| h.strip_suffix('"')) {
        let width = (bits as usize / 8).max(1);
        let signed = kind == "i" || kind == "si";
        hex_values(hex, width, signed).map(|mut values| {
            if values.len() == 1 && count != 1 {
                values = vec![values[0]; count.max(0) as usize];
            }
            values
        })
    } else {
        int_list(&body.replace(['[', ']'], "")).map(|mut values| {
            if values.len() == 1 && count != 1 && !body.contains('[') {
                values = vec![values[0]; count.max(0) as usize];
            }
            values
        })
    };
    match flat {
        Some(values) if values.len() as i64 == count => Ok((shape, values)),
        _ => Err(bad(op, name, &format!("{count} integers for shape {}", super::list(&shape)), text)),
    }
}

/// Little-endian integers of `width` bytes from hex text (the last may be shorter).
fn hex_values(hex: &str, width: usize, signed: bool) -> Option<Vec<i64>> {
    if hex.len() % 2 != 0 || width > 8 {
        return None;
    }
    let bytes: Vec<u8> =
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect::<Option<_>>()?;
    Some(
        bytes
            .chunks(width)
            .map(|chunk| {
                let mut v: u64 = 0;
                for (i, &b) in chunk.iter().enumerate() {
                    v |= u64::from(b) << (8 * i);
                }
                let bits = 8 * chunk.len() as u32;
                if signed && bits < 64 && v >> (bits - 1) & 1 == 1 {
                    (v | (!0u64 << bits)) as i64
                } else {
                    v as i64
                }
            })
            .collect(),
    )
}

/// The value of an MLIR string literal `"..."` with `\\`, `\"`, `\n`, `\t` and `\XX`
/// escapes, or `None` when `text` is not one.
pub fn parse_string(text: &str) -> Option<String> {
    let t = text.trim().as_bytes();
    if t.len() < 2 || t[0] != b'"' || t[t.len() - 1] != b'"' {
        return None;
    }
    let body = &t[1..t.len() - 1];
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'\\' => match body.get(i + 1) {
                Some(&c @ (b'\\' | b'"')) => {
                    out.push(c);
                    i += 2;
                }
                Some(b'n') => {
                    out.push(b'\n');
                    i += 2;
                }
                Some(b't') => {
                    out.push(b'\t');
                    i += 2;
                }
                _ => {
                    let hex = std::str::from_utf8(body.get(i + 1..i + 3)?).ok()?;
                    out.push(u8::from_str_radix(hex, 16).ok()?);
                    i += 3;
                }
            },
            b'"' => return None,
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A string attribute `"text"`.
pub fn string(op: &OpDesc, name: &str, default: Option<&str>) -> Result<String> {
    const EXPECTED: &str = "a string such as '\"name\"'";
    let text = match (op.attr(name), default) {
        (Some(t), _) => t,
        (None, Some(d)) => return Ok(d.to_string()),
        (None, None) => required(op, name, EXPECTED)?,
    };
    parse_string(text).ok_or_else(|| bad(op, name, EXPECTED, text))
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn word_end(s: &str, from: usize) -> usize {
    from + s[from..].bytes().take_while(|&c| is_word(c)).count()
}

/// The case of an enum attribute `#stablehlo<transpose NO_TRANSPOSE>` -> `NO_TRANSPOSE`.
pub fn enum_case(op: &OpDesc, name: &str, default: Option<&str>) -> Result<String> {
    const EXPECTED: &str = "an enum such as '#stablehlo<transpose NO_TRANSPOSE>'";
    let text = match (op.attr(name), default) {
        (Some(t), _) => t,
        (None, Some(d)) => return Ok(d.to_string()),
        (None, None) => required(op, name, EXPECTED)?,
    };
    let parse = || -> Option<String> {
        let t = text.trim_start().strip_prefix('#')?;
        let dialect = word_end(t, 0);
        let t = t[dialect..].strip_prefix('<').filter(|_| dialect > 0)?.trim_start();
        let kind = word_end(t, 0);
        let rest = &t[kind..];
        let spaces = rest.len() - rest.trim_start().len();
        if kind == 0 || spaces == 0 {
            return None;
        }
        let rest = rest.trim_start();
        let case = word_end(rest, 0);
        let tail = rest[case..].trim_start().strip_prefix('>')?;
        (case > 0 && tail.trim().is_empty()).then(|| rest[..case].to_string())
    };
    parse().ok_or_else(|| bad(op, name, EXPECTED, text))
}

/// One field of a struct attribute: a list of integers or an integer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    List(Vec<i64>),
    Int(i64),
}

/// The fields of a struct attribute, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Struct(pub Vec<(String, Field)>);

impl Struct {
    fn get(&self, key: &str) -> Option<&Field> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The list `key` (an integer is a one-element list; absent: empty).
    pub fn list(&self, key: &str) -> Vec<i64> {
        match self.get(key) {
            Some(Field::List(v)) => v.clone(),
            Some(Field::Int(v)) => vec![*v],
            None => Vec::new(),
        }
    }

    /// The integer `key` (`default` when absent).
    pub fn int(&self, op: &OpDesc, name: &str, key: &str, default: Option<i64>) -> Result<i64> {
        match (self.get(key), default) {
            (Some(Field::Int(v)), _) => Ok(*v),
            (None, Some(d)) => Ok(d),
            (got, _) => {
                let got = match got {
                    Some(Field::List(v)) => tuple(v),
                    _ => "None".into(),
                };
                Err(op.error(format_args!(
                    "attribute {}: expected an integer field {}, got {got}",
                    py_repr(name),
                    py_repr(key)
                )))
            }
        }
    }
}

impl std::fmt::Display for Struct {
    /// As Python prints the dict of fields: `{'lhs_batching_dimensions': (0,), 'x': 1}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut seen: Vec<(&str, &Field)> = Vec::new();
        for (k, v) in &self.0 {
            match seen.iter_mut().find(|(s, _)| s == k) {
                Some(slot) => slot.1 = v,
                None => seen.push((k, v)),
            }
        }
        let items: Vec<String> = seen
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Field::List(l) => tuple(l),
                    Field::Int(i) => i.to_string(),
                };
                format!("{}: {v}", py_repr(k))
            })
            .collect();
        write!(f, "{{{}}}", items.join(", "))
    }
}

/// `\s*(\w+)\s*=\s*(\[[^\]]*\]|-?\d+)\s*(,|$)` at `pos` of `body`: (key, value text, end).
fn field_at(body: &str, pos: usize) -> Option<(&str, &str, usize)> {
    let lead = body[pos..].len() - body[pos..].trim_start().len();
    let start = pos + lead;
    let key_end = word_end(body, start);
    if key_end == start {
        return None;
    }
    let after_key = &body[key_end..];
    let eq = key_end + after_key.len() - after_key.trim_start().len();
    let after_eq = body[eq..].strip_prefix('=')?;
    let vstart = eq + 1 + after_eq.len() - after_eq.trim_start().len();
    let vend = if body[vstart..].starts_with('[') {
        vstart + body[vstart..].find(']')? + 1
    } else {
        let sign = usize::from(body[vstart..].starts_with('-'));
        let end = digits_end(body, vstart + sign);
        if end == vstart + sign {
            return None;
        }
        end
    };
    let rest = &body[vend..];
    let trimmed = rest.trim_start();
    let after_ws = vend + rest.len() - trimmed.len();
    let end = if trimmed.starts_with(',') {
        after_ws + 1
    } else if trimmed.is_empty() || trimmed == "\n" {
        after_ws
    } else {
        return None;
    };
    Some((&body[start..key_end], &body[vstart..vend], end))
}

/// The fields of a struct attribute such as `#stablehlo.dot<lhs_contracting_dimensions =
/// [1], rhs_contracting_dimensions = [0]>` (`mnemonic` `dot`); absent fields are absent
/// (empty lists are not printed).
pub fn structure(op: &OpDesc, name: &str, mnemonic: &str) -> Result<Struct> {
    let text = required(op, name, &format!("'#stablehlo.{mnemonic}<...>'"))?;
    struct_text(op, name, mnemonic, text)
}

fn struct_text(op: &OpDesc, name: &str, mnemonic: &str, text: &str) -> Result<Struct> {
    let prefix = format!("#stablehlo.{mnemonic}<");
    let t = text.trim();
    let Some(body) = t.strip_prefix(&prefix).and_then(|b| b.strip_suffix('>')) else {
        return Err(bad(op, name, &format!("'{prefix}...>'"), text));
    };
    let mut out = Struct::default();
    let mut pos = 0;
    while pos < body.len() && !body[pos..].trim().is_empty() {
        let Some((key, value, end)) = field_at(body, pos) else {
            return Err(bad(op, name, &format!("fields 'name = [..]' or 'name = n' in '{prefix}...>'"), text));
        };
        let field = if let Some(list) = value.strip_prefix('[') {
            match int_list(&list[..list.len() - 1]) {
                Some(values) => Field::List(values),
                None => return Err(bad(op, name, &format!("integers in field {}", py_repr(key)), text)),
            }
        } else {
            match value.parse() {
                Ok(v) => Field::Int(v),
                Err(_) => return Err(bad(op, name, &format!("integers in field {}", py_repr(key)), text)),
            }
        };
        out.0.push((key.to_string(), field));
        pos = end;
    }
    Ok(out)
}

/// `#stablehlo.conv<...>` dimension numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvDims {
    pub input_batch: i64,
    pub input_feature: i64,
    pub input_spatial: Vec<i64>,
    pub kernel_input_feature: i64,
    pub kernel_output_feature: i64,
    pub kernel_spatial: Vec<i64>,
    pub output_batch: i64,
    pub output_feature: i64,
    pub output_spatial: Vec<i64>,
}

impl std::fmt::Display for ConvDims {
    /// As Python prints its `ConvDims` dataclass.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ConvDims(input_batch={}, input_feature={}, input_spatial={}, kernel_input_feature={}, \
             kernel_output_feature={}, kernel_spatial={}, output_batch={}, output_feature={}, output_spatial={})",
            self.input_batch,
            self.input_feature,
            tuple(&self.input_spatial),
            self.kernel_input_feature,
            self.kernel_output_feature,
            tuple(&self.kernel_spatial),
            self.output_batch,
            self.output_feature,
            tuple(&self.output_spatial)
        )
    }
}

/// One `[b, 0, 1, f]` part: (position of `a`, position of `b`, positions of the spatial
/// dimensions in order).
fn conv_part(part: &str, a: &str, b: &str) -> Option<(i64, i64, Vec<i64>)> {
    let part = part.trim();
    let inner = part.strip_prefix('[')?.strip_suffix(']')?;
    let (mut pa, mut pb) = (-1, -1);
    let mut spatial: Vec<(i64, i64)> = Vec::new();
    for (pos, item) in inner.split(',').map(str::trim).enumerate() {
        let pos = pos as i64;
        if item == a {
            pa = pos;
        } else if item == b {
            pb = pos;
        } else if !item.is_empty() && item.bytes().all(|c| c.is_ascii_digit()) {
            let k: i64 = item.parse().ok()?;
            match spatial.iter_mut().find(|(s, _)| *s == k) {
                Some(slot) => slot.1 = pos,
                None => spatial.push((k, pos)),
            }
        } else {
            return None;
        }
    }
    spatial.sort_unstable();
    if pa < 0 || pb < 0 || spatial.iter().enumerate().any(|(i, (k, _))| *k != i as i64) {
        return None;
    }
    Some((pa, pb, spatial.into_iter().map(|(_, p)| p).collect()))
}

/// The compact `#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>` or the
/// `#stablehlo.conv<raw input_batch_dimension = 0, ...>` form.
pub fn conv_dims(op: &OpDesc, name: &str) -> Result<ConvDims> {
    const EXPECTED: &str = "'#stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>' or the 'raw' form";
    let text = required(op, name, "'#stablehlo.conv<...>'")?;
    let Some(body) = text.trim().strip_prefix("#stablehlo.conv<").and_then(|b| b.strip_suffix('>')) else {
        return Err(bad(op, name, EXPECTED, text));
    };
    let body = body.trim();
    if let Some(raw) = body.strip_prefix("raw") {
        let fields = struct_text(op, name, "raw", &format!("#stablehlo.raw<{raw}>"))?;
        let int = |key: &str| fields.int(op, name, key, None).map_err(|_| bad(op, name, EXPECTED, text));
        return Ok(ConvDims {
            input_batch: int("input_batch_dimension")?,
            input_feature: int("input_feature_dimension")?,
            input_spatial: fields.list("input_spatial_dimensions"),
            kernel_input_feature: int("kernel_input_feature_dimension")?,
            kernel_output_feature: int("kernel_output_feature_dimension")?,
            kernel_spatial: fields.list("kernel_spatial_dimensions"),
            output_batch: int("output_batch_dimension")?,
            output_feature: int("output_feature_dimension")?,
            output_spatial: fields.list("output_spatial_dimensions"),
        });
    }
    let parts = || -> Option<ConvDims> {
        // `(\[[^\]]*\])\s*x\s*(\[[^\]]*\])\s*->\s*(\[[^\]]*\])$`
        let bracket = |s: &str| -> Option<usize> { (s.starts_with('[')).then(|| s.find(']').map(|i| i + 1))? };
        let l_end = bracket(body)?;
        let rest = body[l_end..].trim_start().strip_prefix('x')?.trim_start();
        let r_end = bracket(rest)?;
        let rest2 = rest[r_end..].trim_start().strip_prefix("->")?.trim_start();
        let o_end = bracket(rest2)?;
        if o_end != rest2.len() {
            return None;
        }
        let lhs = conv_part(&body[..l_end], "b", "f")?;
        let rhs = conv_part(&rest[..r_end], "i", "o")?;
        let out = conv_part(rest2, "b", "f")?;
        Some(ConvDims {
            input_batch: lhs.0,
            input_feature: lhs.1,
            input_spatial: lhs.2,
            kernel_input_feature: rhs.0,
            kernel_output_feature: rhs.1,
            kernel_spatial: rhs.2,
            output_batch: out.0,
            output_feature: out.1,
            output_spatial: out.2,
        })
    };
    parts().ok_or_else(|| bad(op, name, EXPECTED, text))
}
