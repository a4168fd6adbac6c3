//! Attribute text as jaxlib prints it. The reader keeps attribute values as text; text printed
//! by MLIR is kept as it is, and the forms MLIR's printer writes differently are rewritten:
//! untyped integers (`i64`), dense literals (elements re-printed, splats collapsed, floats in
//! MLIR's `%e` form), typed float scalars, and values broken over several lines. Floats MLIR
//! would print in another form (no 6-digit `%e` form round-trips), complex literals and dialect
//! attributes MLIR prints in another spelling than they are written are `Err` (unsupported),
//! for jaxlib to read. The float rule is MLIR's `printFloatValue` (`AsmPrinter.cpp`).

/// The canonical text of attribute `value`, or `Err(reason)` when only jaxlib can tell.
pub(crate) fn canonical(value: &str) -> Result<String, String> {
    let mut v = value.trim().to_string();
    if v.contains('\n') || v.contains("  ") || v.contains("//") {
        v = collapse_whitespace(&v);
    }
    if v.starts_with('#') && !v.contains('<') && !v.contains('.') {
        return Err(format!("attribute alias {v} is not read natively"));
    }
    // Shardy's attributes as Shardy prints them (`crate::text` prints them as Shardy does).
    if v.starts_with("#sdy.sharding<") {
        if let Ok(t) = crate::text::parse_sharding(&v) {
            return Ok(crate::text::print_sharding(&t));
        }
    } else if v.starts_with("#sdy.sharding_per_value<") {
        if let Ok(ts) = crate::text::parse_sharding_per_value(&v) {
            return Ok(crate::text::print_sharding_per_value(&ts));
        }
    } else if v.starts_with("#sdy.mesh<") {
        if let Ok(m) = crate::text::parse_mesh(&v) {
            return Ok(crate::text::print_mesh(&m));
        }
    }
    if v.contains("#stablehlo.mesh<") || v.contains("#stablehlo.replica_group_mesh_axes<") {
        return stablehlo_mesh_spelling(&v);
    }
    value_at(&v, 0, false)
}

/// StableHLO's mesh attributes as jaxlib prints them: `#stablehlo.mesh<axes=[<name = "x",
/// size = 4>, ...], device_ids=dense<[3, 2, 1, 0]> : tensor<4xi64>>` (the `axes = ` and
/// `device_ids = ` of the written form without spaces, each `#stablehlo.mesh_axis<...>`
/// without its mnemonic, the device ids a canonical dense literal).
fn stablehlo_mesh_spelling(v: &str) -> Result<String, String> {
    let v = v.replace("#stablehlo.mesh<axes = [", "#stablehlo.mesh<axes=[").replace("#stablehlo.mesh_axis<", "<");
    let mut out = String::with_capacity(v.len());
    let mut rest = v.as_str();
    while let Some(i) = rest.find("device_ids") {
        out.push_str(&rest[..i]);
        let after = rest[i + "device_ids".len()..].trim_start();
        let after = after
            .strip_prefix('=')
            .ok_or_else(|| format!("stablehlo mesh: expected '=' after device_ids in {v}"))?
            .trim_start();
        // The literal `dense<...> : tensor<...>` ends where the mesh does (at its `>`).
        let mut end = after.len();
        let mut depth = 0i32;
        for (k, c) in after.char_indices() {
            match c {
                '<' | '[' | '(' => depth += 1,
                '>' | ']' | ')' if depth == 0 => {
                    end = k;
                    break;
                }
                '>' | ']' | ')' => depth -= 1,
                ',' if depth == 0 => {
                    end = k;
                    break;
                }
                _ => {}
            }
        }
        let ids = after[..end].trim();
        if !ids.starts_with("dense<") {
            return Err(format!("stablehlo mesh: device ids {ids} are not a dense literal"));
        }
        out.push_str("device_ids=");
        out.push_str(&value_at(ids, 1, false)?);
        rest = &after[end..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Deepest nesting of arrays and dictionaries whose elements are made canonical.
const MAX_NESTED: usize = 64;

/// The canonical text of one value; in an array (`in_array`) MLIR elides the `i64` of
/// integers and the `f64` of floats.
fn value_at(v: &str, depth: usize, in_array: bool) -> Result<String, String> {
    if is_int(v) {
        return Ok(if in_array { v.to_string() } else { format!("{v} : i64") });
    }
    if looks_float(v) && v.contains(['.', 'e', 'E']) {
        let f = float(v, "f64")?;
        return Ok(if in_array { f } else { format!("{f} : f64") });
    }
    if depth < MAX_NESTED && (v.starts_with('[') && v.ends_with(']') || v.starts_with('{') && v.ends_with('}')) {
        let dict = v.starts_with('{');
        let items = split_top(&v[1..v.len() - 1]);
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let item = item.trim();
            if dict {
                match item.split_once(" = ") {
                    Some((k, val)) if !k.contains(['"', '<', '{', '[']) || k.starts_with('"') => {
                        out.push(format!("{k} = {}", value_at(val.trim(), depth + 1, false)?))
                    }
                    _ => out.push(item.to_string()),
                }
            } else {
                out.push(value_at(item, depth + 1, true)?);
            }
        }
        let (open, close) = if dict { ('{', '}') } else { ('[', ']') };
        return Ok(format!("{open}{}{close}", out.join(", ")));
    }
    let v = v.to_string();
    if let Some((lit, ty)) = split_type(&v) {
        if lit.starts_with("dense<") && lit.ends_with('>') {
            let inner = &lit[6..lit.len() - 1];
            let elem = dense_element_type(ty);
            return Ok(format!("dense<{}> : {ty}", dense(inner, elem)?));
        }
        if is_float_type(ty) && looks_float(lit) {
            return Ok(format!("{} : {ty}", float(lit, ty)?));
        }
    }
    Ok(v)
}

/// Calls `visit(offset, byte)` for each byte of `text` outside brackets and string literals
/// (the `>` of `->` closes nothing).
fn at_top_level(text: &str, mut visit: impl FnMut(usize, u8)) {
    let b = text.as_bytes();
    let (mut depth, mut in_str) = (0i32, false);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            _ if in_str => {}
            b'<' | b'(' | b'[' | b'{' => depth += 1,
            b'>' if i > 0 && b[i - 1] == b'-' => {}
            b'>' | b')' | b']' | b'}' => depth -= 1,
            c if depth == 0 => visit(i, c),
            _ => {}
        }
        i += 1;
    }
}

/// `text` split at its top-level commas (outside brackets and strings); nothing for blank text.
pub(crate) fn split_top(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    at_top_level(text, |i, c| {
        if c == b',' {
            out.push(&text[start..i]);
            start = i + 1;
        }
    });
    if !text.trim().is_empty() {
        out.push(&text[start..]);
    }
    out
}

fn is_int(v: &str) -> bool {
    let digits = v.strip_prefix('-').unwrap_or(v);
    !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit())
}

/// `literal : type` split at the last top-level ` : `.
fn split_type(v: &str) -> Option<(&str, &str)> {
    let b = v.as_bytes();
    let mut last = None;
    at_top_level(v, |i, c| {
        if c == b':' && i > 0 && b[i - 1] == b' ' {
            last = Some(i);
        }
    });
    last.map(|i| (v[..i].trim_end(), v[i + 1..].trim_start()))
}

/// The element type of a ranked tensor type (`f32` of `tensor<4x8xf32>`).
pub(crate) fn element_type(ty: &str) -> Option<&str> {
    let inner = ty.strip_prefix("tensor<")?.strip_suffix('>')?;
    // The encoding after a top-level comma is not part of it (most types have none).
    let inner = if inner.contains(',') { split_top(inner).first().copied().unwrap_or(inner) } else { inner }.trim();
    let mut rest = inner;
    while let Some((head, tail)) = rest.split_once('x') {
        if head == "?" || (!head.is_empty() && head.bytes().all(|c| c.is_ascii_digit())) {
            rest = tail;
        } else {
            break;
        }
    }
    Some(rest)
}

/// The element type of a dense literal's type: [`element_type`] of a tensor, the type itself
/// otherwise.
fn dense_element_type(ty: &str) -> &str {
    element_type(ty).unwrap_or(ty)
}

fn is_float_type(t: &str) -> bool {
    matches!(t, "f16" | "bf16" | "f32" | "f64") || t.starts_with("f8") || t.starts_with("f4") || t.starts_with("f6")
}

fn looks_float(lit: &str) -> bool {
    let d = lit.strip_prefix('-').unwrap_or(lit);
    d.bytes().next().is_some_and(|c| c.is_ascii_digit())
        && !d.starts_with("0x")
        && d.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
}

/// A float literal of type `ty` as MLIR prints it (`printFloatValue` in MLIR's
/// `AsmPrinter.cpp`): APFloat's `toString(6, 0, false)` when that reads back to the same
/// value, else APFloat's default `toString()` when it has a `.`, else the bits in hexadecimal.
/// Narrow float types (f16, bf16, f8) are `Err` unless already in the 6-digit form.
fn float(lit: &str, ty: &str) -> Result<String, String> {
    let d = lit.strip_prefix('-').unwrap_or(lit);
    if d.starts_with("0x") {
        return Ok(lit.to_string());
    }
    let unsupported = || format!("float {lit} of type {ty} is printed by jaxlib in a form not read natively");
    match ty {
        "f32" => {
            let x: f32 = lit.parse().map_err(|_| unsupported())?;
            let bits = x.to_bits();
            let (e, m) = (((bits >> 23) & 0xff) as i32, (bits & 0x7f_ffff) as u64);
            let (sig, exp2) = if e == 0 { (m, -126 - 23) } else { (m | 1 << 23, e - 127 - 23) };
            let reads_back = |t: &str| t.parse::<f32>().is_ok_and(|y| y.to_bits() == bits);
            let hex = format!("0x{bits:X}");
            Ok(print_float(x.is_finite(), x.is_sign_negative(), sig, exp2, 24, reads_back, hex))
        }
        "f64" => {
            let x: f64 = lit.parse().map_err(|_| unsupported())?;
            let bits = x.to_bits();
            let (e, m) = (((bits >> 52) & 0x7ff) as i32, bits & 0xf_ffff_ffff_ffff);
            let (sig, exp2) = if e == 0 { (m, -1022 - 52) } else { (m | 1 << 52, e - 1023 - 52) };
            let reads_back = |t: &str| t.parse::<f64>().is_ok_and(|y| y.to_bits() == bits);
            let hex = format!("0x{bits:X}");
            Ok(print_float(x.is_finite(), x.is_sign_negative(), sig, exp2, 53, reads_back, hex))
        }
        _ if is_e_form(lit) => Ok(lit.to_string()),
        _ => Err(unsupported()),
    }
}

/// MLIR's printing of the float `sig * 2^exp2` (`precision` significand bits).
fn print_float(
    finite: bool,
    negative: bool,
    sig: u64,
    exp2: i32,
    precision: u32,
    reads_back: impl Fn(&str) -> bool,
    hex: String,
) -> String {
    if !finite {
        return hex;
    }
    let six = ap_to_string(negative, sig, exp2, precision, 6, 0, false);
    if reads_back(&six) {
        return six;
    }
    let default = ap_to_string(negative, sig, exp2, precision, 0, 3, true);
    if default.contains('.') {
        default
    } else {
        hex
    }
}

/// LLVM's `IEEEFloat::toString(Str, FormatPrecision, FormatMaxPadding, TruncateZero)` for a
/// finite value `(-1)^negative * sig * 2^exp2`, digit for digit (its truncation of surplus
/// digits before rounding included).
fn ap_to_string(
    negative: bool,
    sig: u64,
    exp2: i32,
    precision: u32,
    format_precision: usize,
    max_padding: i64,
    truncate_zero: bool,
) -> String {
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if sig == 0 {
        if max_padding == 0 {
            if truncate_zero {
                out.push_str("0.0E+0");
            } else {
                out.push_str("0.0");
                out.push_str(&"0".repeat(format_precision.saturating_sub(1)));
                out.push_str("e+00");
            }
        } else {
            out.push('0');
        }
        return out;
    }
    let fp = if format_precision == 0 { 2 + (precision as usize) * 59 / 196 } else { format_precision };
    let tz = sig.trailing_zeros() as i32;
    let (sig, exp2) = (sig >> tz, exp2 + tz);
    // The exact value as integer * 10^exp.
    let mut n = BigUint::from_u64(sig);
    let mut exp: i64 = 0;
    if exp2 > 0 {
        n.shl(exp2 as u32);
    } else if exp2 < 0 {
        for _ in 0..-exp2 {
            n.mul_small(5);
        }
        exp = exp2 as i64;
    }
    // AdjustToPrecision(APInt): drop surplus decimal digits by truncating division.
    let bits = n.bits();
    let required = (fp * 196).div_ceil(59); // LLVM: (FormatPrecision * 196 + 58) / 59
    let mut digits: Vec<u8> = n.to_decimal().into_bytes(); // most significant first
    if bits > required {
        let removable = (bits - required) * 59 / 196;
        if removable > 0 {
            exp += removable as i64;
            let keep = digits.len().saturating_sub(removable);
            digits.truncate(keep);
            if digits.is_empty() {
                digits.push(b'0');
            }
        }
    }
    // Trailing zeros dropped; `buffer` holds the least significant digit first, as LLVM's.
    let mut buffer: Vec<u8> = digits.iter().rev().copied().collect();
    while buffer.len() > 1 && buffer[0] == b'0' {
        buffer.remove(0);
        exp += 1;
    }
    // AdjustToPrecision(buffer): round half up on the first dropped digit.
    let count = buffer.len();
    if count > fp {
        let mut first = count - fp;
        if buffer[first - 1] < b'5' {
            while first < count && buffer[first] == b'0' {
                first += 1;
            }
            exp += first as i64;
            buffer.drain(..first);
        } else {
            let mut i = first;
            while i != count {
                if buffer[i] == b'9' {
                    first += 1;
                    i += 1;
                } else {
                    buffer[i] += 1;
                    break;
                }
            }
            if first == count {
                exp += first as i64;
                buffer = vec![b'1'];
            } else {
                exp += first as i64;
                buffer.drain(..first);
            }
        }
    }
    let nd = buffer.len() as i64;
    let scientific = if max_padding == 0 {
        true
    } else if exp >= 0 {
        exp > max_padding || nd + exp > fp as i64
    } else {
        let msd = exp + nd - 1;
        msd < 0 && -msd > max_padding
    };
    let digit = |i: i64| buffer[i as usize] as char;
    if scientific {
        let e10 = exp + nd - 1;
        out.push(digit(nd - 1));
        out.push('.');
        if nd == 1 && truncate_zero {
            out.push('0');
        } else {
            for i in 1..nd {
                out.push(digit(nd - 1 - i));
            }
        }
        if !truncate_zero && fp as i64 > nd - 1 {
            out.push_str(&"0".repeat((fp as i64 - nd + 1) as usize));
        }
        out.push(if truncate_zero { 'E' } else { 'e' });
        out.push(if e10 >= 0 { '+' } else { '-' });
        let mut e = e10.abs().to_string();
        if !truncate_zero && e.len() < 2 {
            e.insert(0, '0');
        }
        out.push_str(&e);
        return out;
    }
    if exp >= 0 {
        for i in 0..nd {
            out.push(digit(nd - 1 - i));
        }
        out.push_str(&"0".repeat(exp as usize));
        return out;
    }
    let whole = exp + nd;
    let mut i = 0;
    if whole > 0 {
        while i != whole {
            out.push(digit(nd - i - 1));
            i += 1;
        }
        out.push('.');
    } else {
        out.push_str("0.");
        out.push_str(&"0".repeat((-whole) as usize));
    }
    while i != nd {
        out.push(digit(nd - i - 1));
        i += 1;
    }
    out
}

/// The little arbitrary-precision unsigned integer `ap_to_string` needs (base 2^32 limbs,
/// least significant first).
struct BigUint(Vec<u32>);

impl BigUint {
    fn from_u64(v: u64) -> Self {
        BigUint(vec![v as u32, (v >> 32) as u32])
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let v = *limb as u64 * m as u64 + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn shl(&mut self, by: u32) {
        for _ in 0..by / 32 {
            self.0.insert(0, 0);
        }
        let r = by % 32;
        if r > 0 {
            let mut carry = 0u32;
            for limb in &mut self.0 {
                let v = ((*limb as u64) << r) | carry as u64;
                *limb = v as u32;
                carry = (v >> 32) as u32;
            }
            if carry > 0 {
                self.0.push(carry);
            }
        }
    }

    fn bits(&self) -> usize {
        let mut n = self.0.len();
        while n > 0 && self.0[n - 1] == 0 {
            n -= 1;
        }
        if n == 0 {
            return 0;
        }
        32 * (n - 1) + (32 - self.0[n - 1].leading_zeros() as usize)
    }

    fn to_decimal(&self) -> String {
        let mut limbs = self.0.clone();
        let mut chunks: Vec<u32> = Vec::new();
        while limbs.iter().any(|&l| l != 0) {
            let mut rem = 0u64;
            for limb in limbs.iter_mut().rev() {
                let v = (rem << 32) | *limb as u64;
                *limb = (v / 1_000_000_000) as u32;
                rem = v % 1_000_000_000;
            }
            chunks.push(rem as u32);
        }
        let mut s = chunks.last().map_or("0".to_string(), |c| c.to_string());
        for c in chunks.iter().rev().skip(1) {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

fn is_e_form(lit: &str) -> bool {
    let d = lit.strip_prefix('-').unwrap_or(lit);
    let Some((m, e)) = d.split_once('e') else { return false };
    let Some((i, f)) = m.split_once('.') else { return false };
    i.len() == 1
        && f.len() == 6
        && (i.bytes().chain(f.bytes())).all(|c| c.is_ascii_digit())
        && (e.starts_with('+') || e.starts_with('-'))
        && e.len() >= 3
        && e[1..].bytes().all(|c| c.is_ascii_digit())
}

/// The elements of `dense<...>` re-printed: nested lists with `, `, each element canonical, a
/// single element when all are equal (a splat). Hex blobs (`"0x..."`) are kept.
fn dense(inner: &str, elem: &str) -> Result<String, String> {
    let inner = inner.trim();
    if inner.starts_with('"') || inner.is_empty() {
        return Ok(inner.to_string());
    }
    // `complex<E>` elements are `(re,im)` pairs of `E` floats.
    let complex_part = elem.strip_prefix("complex<").and_then(|e| e.strip_suffix('>'));
    if inner.contains('(') && !complex_part.is_some_and(is_float_type) {
        return Err("complex dense literals of this element type are not read natively".into());
    }
    // Tokens: brackets, commas and element literals.
    let mut out = String::with_capacity(inner.len());
    let mut elems: Vec<String> = Vec::new();
    let mut structure: Vec<Result<usize, char>> = Vec::new();
    let b = inner.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'[' | b']' => {
                structure.push(Err(c as char));
                i += 1;
            }
            b',' | b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'(' => {
                // One complex element: `(re, im)`, each part printed as its float type prints.
                let part = complex_part.unwrap_or_default();
                let end = inner[i..].find(')').map(|k| i + k).ok_or("a complex literal without ')'")?;
                let parts: Vec<&str> = inner[i + 1..end].split(',').map(str::trim).collect();
                let [re, im] = parts[..] else {
                    return Err(format!("complex literal {} needs two parts", &inner[i..=end]));
                };
                // MLIR reads a float part only with a decimal point (`1` is an error there).
                let float_lit = |t: &str| looks_float(t) && t.contains('.');
                if !float_lit(re) || !float_lit(im) {
                    return Err(format!("complex literal {} is not read natively", &inner[i..=end]));
                }
                structure.push(Ok(elems.len()));
                elems.push(format!("({},{})", float(re, part)?, float(im, part)?));
                i = end + 1;
            }
            _ => {
                let start = i;
                while i < b.len() && !matches!(b[i], b'[' | b']' | b',' | b' ' | b'\t' | b'\n' | b'\r') {
                    i += 1;
                }
                let lit = &inner[start..i];
                let e = if is_float_type(elem) && looks_float(lit) { float(lit, elem)? } else { lit.to_string() };
                structure.push(Ok(elems.len()));
                elems.push(e);
            }
        }
    }
    if !elems.is_empty() && elems.iter().all(|e| *e == elems[0]) {
        return Ok(elems[0].clone());
    }
    let mut prev_item = false;
    for s in structure {
        match s {
            Err('[') => {
                if prev_item {
                    out.push_str(", ");
                }
                out.push('[');
                prev_item = false;
            }
            Err(_) => {
                out.push(']');
                prev_item = true;
            }
            Ok(k) => {
                if prev_item {
                    out.push_str(", ");
                }
                out.push_str(&elems[k]);
                prev_item = true;
            }
        }
    }
    Ok(out)
}

/// Whitespace outside string literals collapsed (`//` comments dropped): none after an opening
/// bracket or before a closing one, one space elsewhere.
fn collapse_whitespace(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut in_str = false;
    let mut pending_space = false;
    let mut escaped = false;
    let mut comment = false;
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        if comment {
            comment = c != '\n';
            continue;
        }
        if !in_str && c == '/' && chars.peek() == Some(&'/') {
            comment = true;
            pending_space = true;
            continue;
        }
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        if c.is_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space {
            let after_open = out.ends_with(['(', '[', '{', '<']);
            let before_close = matches!(c, ')' | ']' | '}' | '>') && !out.ends_with('-');
            if !after_open && !before_close && !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
        }
        if c == '"' {
            in_str = true;
        }
        out.push(c);
    }
    out
}
