//! The custom (pretty) forms of `func`, `stablehlo` and `chlo` ops as jaxlib prints them, each
//! read into the op's generic shape: inherent attributes written as jaxlib prints them in the
//! generic form (`dims = [0, 1]` of `broadcast_in_dim` is `broadcast_dimensions = array<i64:
//! 0, 1>`). Grammar from openxla/stablehlo's `StablehloOps.td` assembly formats and its
//! `AssemblyFormat.cpp` / `StablehloOps.cpp` printers; `sdy` ops are in `sdy.rs`.

use super::cursor::Res;
use super::reader::{quote, OpBuild, Pending, Reader, ResultDef, Synthesized};
use super::sdy;
use crate::ir::FuncData;

/// What a custom form reads between and after its regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    /// Nothing: the head read all but the regions, which end the op.
    Nothing,
    /// `stablehlo.while`: `do` between its two regions.
    While,
    /// `attr-dict : (A, B) -> (C)` after the one region (`sdy.manual_computation`,
    /// `sdy.named_computation`).
    AttrsFunctional,
}

/// How the types after `:` are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Types {
    /// `T` (every operand and the one result) or `(A, B) -> C`.
    Same,
    /// `P, T` (`select`: predicate, then the type of both choices and the result) or functional.
    Select,
    /// `complex<E>`-typed `T`: the result's type, the operands of `T` with `E` for
    /// `complex<E>` (StableHLO's `ComplexOpType` printer), or functional.
    Complex,
    /// `T1, T2`: one per operand, and the results the same (`optimization_barrier`).
    Pairwise,
    /// `T1, T2`: one per operand, no results (`return` ops).
    Operands,
    /// `T`: the result's type; operands of the same type (`iota`, `after_all`).
    Result,
    /// `A -> R` or `A -> (R1, R2)` (chlo) or functional.
    Arrow,
    /// `(A, B) -> C` only.
    Functional,
}

/// Ops whose custom form is `operands attr-dict : T` (or a functional type).
pub(crate) const SAME_TYPE: &[&str] = &[
    "abs",
    "add",
    "and",
    "atan2",
    "bitcast_convert",
    "cbrt",
    "ceil",
    "clamp",
    "complex",
    "convert",
    "cosine",
    "count_leading_zeros",
    "divide",
    "dynamic_update_slice",
    "exponential",
    "exponential_minus_one",
    "floor",
    "imag",
    "is_finite",
    "log",
    "log_plus_one",
    "logistic",
    "maximum",
    "minimum",
    "multiply",
    "negate",
    "not",
    "or",
    "popcnt",
    "power",
    "real",
    "remainder",
    "reshape",
    "round_nearest_afz",
    "round_nearest_even",
    "rsqrt",
    "shift_left",
    "shift_right_arithmetic",
    "shift_right_logical",
    "sign",
    "sine",
    "sqrt",
    "subtract",
    "tan",
    "tanh",
    "xor",
];

/// Reads an op in its custom form up to its first region (or all of it when it has none).
pub(crate) fn custom_head<'a>(
    r: &mut Reader<'a>,
    name: &str,
    at: usize,
    names: &[ResultDef<'a>],
) -> Res<(OpBuild<'a>, Tail)> {
    let mut b = OpBuild { name: name.to_string(), at, ..Default::default() };
    let declared: usize = names.iter().map(|&(_, n)| n as usize).sum();
    let (dialect, op) = name.split_once('.').unwrap_or(("", name));
    match dialect {
        "sdy" => return sdy::custom_head(r, b, op, declared),
        "func" => return func_head(r, b, op),
        "chlo" => {
            chlo(r, &mut b, op)?;
            return Ok((b, Tail::Nothing));
        }
        "stablehlo" => {}
        _ => return Err(r.c.unsupported(at, format!("{name}: no native grammar for this op's custom form"))),
    }
    match op {
        "complex" => simple(r, &mut b, Types::Complex, declared)?,
        _ if SAME_TYPE.contains(&op) => simple(r, &mut b, Types::Same, declared)?,
        "select" => simple(r, &mut b, Types::Select, declared)?,
        "return" => simple(r, &mut b, Types::Operands, declared)?,
        "after_all" => simple(r, &mut b, Types::Result, declared)?,
        "create_token" => simple(r, &mut b, Types::Result, declared)?,
        "optimization_barrier" => {
            let mut attrs = Vec::new();
            r.opt_attr_dict(&mut attrs)?;
            b.attrs = attrs;
            if r.c.eat("(") {
                r.c.expect(")")?;
            } else {
                b.operands = r.uses()?.0;
                sig(r, &mut b, Types::Pairwise, declared)?;
            }
        }
        "broadcast_in_dim" | "transpose" | "reverse" => {
            operands_then(r, &mut b)?;
            r.c.expect_kw("dims")?;
            r.c.expect("=")?;
            let dims = i64_list(r)?;
            let attr = match op {
                "broadcast_in_dim" => "broadcast_dimensions",
                "transpose" => "permutation",
                _ => "dimensions",
            };
            b.attrs.push(r.attr(attr, &array_i64(&dims)));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "iota" => {
            r.c.expect_kw("dim")?;
            r.c.expect("=")?;
            let d = r.c.expect_int("a dimension")?;
            b.attrs.push(r.attr("iota_dimension", &format!("{d} : i64")));
            sig(r, &mut b, Types::Result, declared)?;
        }
        "concatenate" => {
            operands_then(r, &mut b)?;
            r.c.expect_kw("dim")?;
            r.c.expect("=")?;
            let d = r.c.expect_int("a dimension")?;
            b.attrs.push(r.attr("dimension", &format!("{d} : i64")));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "dynamic_slice" => {
            operands_then(r, &mut b)?;
            r.c.expect_kw("sizes")?;
            r.c.expect("=")?;
            let sizes = i64_list(r)?;
            b.attrs.push(r.attr("slice_sizes", &array_i64(&sizes)));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "pad" => {
            operands_then(r, &mut b)?;
            for (kw, attr) in
                [("low", "edge_padding_low"), ("high", "edge_padding_high"), ("interior", "interior_padding")]
            {
                r.c.expect_kw(kw)?;
                r.c.expect("=")?;
                let v = i64_list(r)?;
                b.attrs.push(r.attr(attr, &array_i64(&v)));
                r.c.eat(",");
            }
            sig(r, &mut b, Types::Same, declared)?;
        }
        "slice" => {
            b.operands = vec![r.use_()?];
            r.c.expect("[")?;
            let (mut start, mut limit, mut stride) = (Vec::new(), Vec::new(), Vec::new());
            if !r.c.eat("]") {
                loop {
                    start.push(r.c.expect_int("a start index")?);
                    r.c.expect(":")?;
                    limit.push(r.c.expect_int("a limit index")?);
                    stride.push(if r.c.eat(":") { r.c.expect_int("a stride")? } else { 1 });
                    if r.c.eat("]") {
                        break;
                    }
                    r.c.expect(",")?;
                }
            }
            b.attrs.push(r.attr("start_indices", &array_i64(&start)));
            b.attrs.push(r.attr("limit_indices", &array_i64(&limit)));
            b.attrs.push(r.attr("strides", &array_i64(&stride)));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "compare" => {
            let dir = r.c.expect_ident("a comparison direction")?;
            b.attrs.push(r.attr("comparison_direction", &format!("#stablehlo<comparison_direction {dir}>")));
            r.c.expect(",")?;
            let (ops, more) = r.uses()?;
            b.operands = ops;
            if more {
                let ty = r.c.expect_ident("a comparison type")?;
                b.attrs.push(r.attr("compare_type", &format!("#stablehlo<comparison_type {ty}>")));
            }
            sig(r, &mut b, Types::Same, declared)?;
        }
        "dot_general" | "dot" => dot(r, &mut b, op == "dot", declared)?,
        "constant" => constant(r, &mut b)?,
        "custom_call" => {
            let Some(target) = r.c.symbol()? else { return r.c.fail("'@' and the call target") };
            b.attrs.push(r.attr("call_target_name", &quote(&target)));
            b.operands = r.paren_uses()?;
            sig(r, &mut b, Types::Functional, declared)?;
        }
        "fft" => {
            operands_then(r, &mut b)?;
            r.c.expect_kw("type")?;
            r.c.expect("=")?;
            let t = r.c.expect_ident("an FFT type")?;
            b.attrs.push(r.attr("fft_type", &format!("#stablehlo<fft_type {t}>")));
            r.c.expect(",")?;
            r.c.expect_kw("length")?;
            r.c.expect("=")?;
            let l = i64_list(r)?;
            b.attrs.push(r.attr("fft_length", &array_i64(&l)));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "cholesky" => {
            operands_then(r, &mut b)?;
            r.c.expect_kw("lower")?;
            r.c.expect("=")?;
            let v = r.c.expect_ident("true or false")?;
            b.attrs.push(r.attr("lower", v));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "rng_bit_generator" => {
            operands_then(r, &mut b)?;
            r.c.expect_kw("algorithm")?;
            r.c.expect("=")?;
            let a = r.c.expect_ident("an RNG algorithm")?;
            b.attrs.push(r.attr("rng_algorithm", &format!("#stablehlo<rng_algorithm {a}>")));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "reduce_precision" => {
            operands_then(r, &mut b)?;
            r.c.expect_kw("format")?;
            r.c.expect("=")?;
            let at = r.c.pos;
            let f = r.c.expect_ident("a format such as e5m10")?;
            let bits = f.strip_prefix('e').and_then(|x| x.split_once('m'));
            let Some((e, m)) = bits.and_then(|(e, m)| Some((e.parse::<i64>().ok()?, m.parse::<i64>().ok()?))) else {
                return Err(r.c.error(at, format!("expected a format such as e5m10, got {f}")));
            };
            b.attrs.push(r.attr("exponent_bits", &format!("{e} : i32")));
            b.attrs.push(r.attr("mantissa_bits", &format!("{m} : i32")));
            sig(r, &mut b, Types::Same, declared)?;
        }
        "get_tuple_element" => {
            b.operands = vec![r.use_()?];
            r.c.expect("[")?;
            let i = r.c.expect_int("an index")?;
            r.c.expect("]")?;
            b.attrs.push(r.attr("index", &format!("{i} : i32")));
            sig(r, &mut b, Types::Functional, declared)?;
        }
        "convolution" => convolution(r, &mut b, declared)?,
        "reduce" => reduce(r, &mut b)?,
        "while" => {
            while_head(r, &mut b)?;
            return Ok((b, Tail::While));
        }
        _ => return Err(r.c.unsupported(at, format!("{name}: no native grammar for this op's custom form"))),
    }
    Ok((b, Tail::Nothing))
}

/// Reads what follows region number `done` (1-based count of regions read); whether another
/// region follows.
pub(crate) fn custom_between(r: &mut Reader<'_>, _b: &mut OpBuild<'_>, tail: &Tail, done: usize) -> Res<bool> {
    match tail {
        Tail::While if done == 1 => {
            r.c.expect_kw("do")?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Reads the rest of the op after its last region.
pub(crate) fn custom_tail<'a>(r: &mut Reader<'a>, b: &mut OpBuild<'a>, tail: &Tail) -> Res<()> {
    match tail {
        Tail::AttrsFunctional => {
            let n = b.result_types.len();
            sig(r, b, Types::Functional, n)
        }
        _ => Ok(()),
    }
}

/// `%a, %b,` up to a keyword (the comma after the last operand taken).
fn operands_then(r: &mut Reader<'_>, b: &mut OpBuild<'_>) -> Res<()> {
    let (ops, more) = r.uses()?;
    b.operands = ops;
    if !more {
        return r.c.fail("',' and a keyword after the operands");
    }
    Ok(())
}

/// `operands attr-dict : types` with the types written as `form` says.
pub(crate) fn simple(r: &mut Reader<'_>, b: &mut OpBuild<'_>, form: Types, declared: usize) -> Res<()> {
    b.operands = r.uses()?.0;
    sig(r, b, form, declared)
}

/// `attr-dict : types`: the optional attribute dictionary, the types (checked against the
/// operands' types) and the result types.
pub(crate) fn sig(r: &mut Reader<'_>, b: &mut OpBuild<'_>, form: Types, declared: usize) -> Res<()> {
    let mut attrs = Vec::new();
    r.opt_attr_dict(&mut attrs)?;
    b.attrs.extend(attrs);
    if form == Types::Operands && b.operands.is_empty() && !r.c.at(":") {
        return Ok(());
    }
    r.c.expect(":")?;
    let at = r.c.pos;
    let n = b.operands.len();
    let (inputs, results) = if r.c.peek() == Some(b'(') && form != Types::Operands && form != Types::Pairwise {
        r.function_type()?
    } else {
        let mut list = vec![r.ty()?];
        if form == Types::Arrow || (r.c.at("->") && form != Types::Functional) {
            r.c.expect("->")?;
            let results = if r.c.peek() == Some(b'(') { r.type_list_paren()? } else { vec![r.ty()?] };
            (list, results)
        } else {
            while r.c.eat(",") {
                list.push(r.ty()?);
            }
            match form {
                Types::Same if list.len() == 1 => (vec![list[0]; n], vec![list[0]; declared.max(1)]),
                Types::Select if list.len() == 2 => (vec![list[0], list[1], list[1]], vec![list[1]]),
                Types::Complex if list.len() == 1 => {
                    let text = r.p.strings.get(list[0]).to_string();
                    let Some(real) = real_of_complex(&text) else {
                        return r.c.fail("a tensor type of complex elements");
                    };
                    (vec![r.intern(&real); n], vec![list[0]])
                }
                Types::Result if list.len() == 1 => (vec![list[0]; n], vec![list[0]]),
                Types::Pairwise => (list.clone(), list),
                Types::Operands => (list, Vec::new()),
                _ => return r.c.fail("a function type '(...) -> ...'"),
            }
        }
    };
    r.check_types(&b.operands, &inputs, at)?;
    b.result_types = results;
    Ok(())
}

/// `tensor<...xE>` for `tensor<...xcomplex<E>>` (the operand type of `stablehlo.complex`
/// whose result type is given); `None` for another type.
pub(crate) fn real_of_complex(ty: &str) -> Option<String> {
    let element = super::attr::element_type(ty)?;
    let real = element.strip_prefix("complex<")?.strip_suffix('>')?;
    let at = ty.find(element)?;
    Some(format!("{}{real}{}", &ty[..at], &ty[at + element.len()..]))
}

/// `[1, -2, 3]`.
pub(crate) fn i64_list(r: &mut Reader<'_>) -> Res<Vec<i64>> {
    r.c.expect("[")?;
    if r.c.eat("]") {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(4);
    loop {
        out.push(r.c.expect_int("an integer")?);
        if r.c.eat("]") {
            return Ok(out);
        }
        r.c.expect(",")?;
    }
}

/// `array<i64: 1, 2>` (`array<i64>` when empty), as MLIR prints a `DenseI64ArrayAttr`.
pub(crate) fn array_i64(v: &[i64]) -> String {
    if v.is_empty() {
        return "array<i64>".to_string();
    }
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("array<i64: {}>", items.join(", "))
}

fn list_text(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// `dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision =
/// [DEFAULT, DEFAULT], algorithm = <...>` and `dot %a, %b, precision = [...]`.
fn dot(r: &mut Reader<'_>, b: &mut OpBuild<'_>, plain: bool, declared: usize) -> Res<()> {
    let (ops, mut more) = r.uses()?;
    b.operands = ops;
    let start = r.c.pos;
    let mut dims: Vec<(&str, Vec<i64>)> = Vec::with_capacity(4);
    // `precision` and `algorithm`, in the order written: (name, items or group).
    let mut extra: Vec<(&str, Vec<&str>)> = Vec::new();
    while more {
        let at = r.c.pos;
        let kw = r.c.expect_ident("a keyword")?;
        r.c.expect("=")?;
        match kw {
            "batching_dims" | "contracting_dims" if !plain => {
                let lhs = i64_list(r)?;
                r.c.expect_kw("x")?;
                let rhs = i64_list(r)?;
                let what = if kw == "batching_dims" { "batching" } else { "contracting" };
                dims.push((what, lhs));
                dims.push((what, rhs));
            }
            "precision" => {
                r.c.expect("[")?;
                let mut items = Vec::new();
                if !r.c.eat("]") {
                    loop {
                        items.push(r.c.expect_ident("a precision")?);
                        if r.c.eat("]") {
                            break;
                        }
                        r.c.expect(",")?;
                    }
                }
                extra.push(("precision", items));
            }
            "algorithm" => extra.push(("algorithm", vec![r.c.group()?])),
            _ => return Err(r.c.unsupported(at, format!("{}: keyword {kw} is not read natively", b.name))),
        }
        more = r.c.eat(",");
    }
    // The attributes are built once per distinct keyword text (a program's dots repeat a few):
    // `dot_dimension_numbers` (not for `dot`), then the others in the order written.
    let section = (plain, r.c.src[start..r.c.pos].trim());
    let attrs = match r.keyword_attrs.get(&section) {
        Some(attrs) => attrs.clone(),
        None => {
            let mut attrs = Vec::new();
            if !plain {
                let mut fields = Vec::new();
                for what in ["batching", "contracting"] {
                    let lists: Vec<&Vec<i64>> = dims.iter().filter(|(w, _)| *w == what).map(|(_, l)| l).collect();
                    if let [lhs, rhs] = lists[..] {
                        if !lhs.is_empty() {
                            fields.push(format!("lhs_{what}_dimensions = {}", list_text(lhs)));
                        }
                        if !rhs.is_empty() {
                            fields.push(format!("rhs_{what}_dimensions = {}", list_text(rhs)));
                        }
                    }
                }
                attrs.push(r.attr("dot_dimension_numbers", &format!("#stablehlo.dot<{}>", fields.join(", "))));
            }
            for (name, items) in extra {
                if name == "precision" {
                    let items: Vec<String> = items.iter().map(|p| format!("#stablehlo<precision {p}>")).collect();
                    attrs.push(r.attr("precision_config", &format!("[{}]", items.join(", "))));
                } else {
                    attrs.push(r.attr("algorithm", &format!("#stablehlo.dot_algorithm{}", items[0])));
                }
            }
            r.keyword_attrs.insert(section, attrs.clone());
            attrs
        }
    };
    b.attrs.splice(0..0, attrs);
    sig(r, b, Types::Same, declared)
}

/// `constant [attr-dict] dense<...> : tensor<...>` (`stablehlo.constant`, `sdy.constant`):
/// `value` is the typed literal.
pub(crate) fn constant(r: &mut Reader<'_>, b: &mut OpBuild<'_>) -> Res<()> {
    let mut attrs = Vec::new();
    r.opt_attr_dict(&mut attrs)?;
    b.attrs = attrs;
    let start = r.c.pos;
    let at = r.c.pos;
    r.c.expect_ident("a literal such as dense<...>")?;
    if r.c.b.get(r.c.pos) == Some(&b'<') {
        r.c.group()?;
    }
    let literal = r.c.src[start..r.c.pos].trim();
    r.c.expect(":")?;
    let t = r.ty()?;
    let value = r.canonical_id(literal, t, at)?;
    b.attrs.push((r.intern("value"), value));
    b.result_types = vec![t];
    Ok(())
}

/// `convolution(%lhs, %rhs) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window =
/// {stride = [..], pad = [[..], ..], lhs_dilate = [..], rhs_dilate = [..], reverse = [..]}
/// attr-dict : (A, B) -> C`.
fn convolution(r: &mut Reader<'_>, b: &mut OpBuild<'_>, declared: usize) -> Res<()> {
    b.operands = r.paren_uses()?;
    r.c.expect_kw("dim_numbers")?;
    r.c.expect("=")?;
    let dn = r.c.balanced(b",{:")?.to_string();
    b.attrs.push(r.attr("dimension_numbers", &format!("#stablehlo.conv<{dn}>")));
    if r.c.eat(",") {
        r.c.expect_kw("window")?;
        r.c.expect("=")?;
        r.c.expect("{")?;
        if !r.c.eat("}") {
            loop {
                let at = r.c.pos;
                let kw = r.c.expect_ident("a window field")?;
                r.c.expect("=")?;
                match kw {
                    "stride" | "lhs_dilate" | "rhs_dilate" => {
                        let v = i64_list(r)?;
                        let name = match kw {
                            "stride" => "window_strides",
                            "lhs_dilate" => "lhs_dilation",
                            _ => "rhs_dilation",
                        };
                        b.attrs.push(r.attr(name, &array_i64(&v)));
                    }
                    "pad" => {
                        r.c.expect("[")?;
                        let mut pairs = Vec::new();
                        if !r.c.eat("]") {
                            loop {
                                let p = i64_list(r)?;
                                pairs.push(p);
                                if r.c.eat("]") {
                                    break;
                                }
                                r.c.expect(",")?;
                            }
                        }
                        b.attrs.push(r.attr("padding", &dense_i64_2d(&pairs)));
                    }
                    "reverse" => {
                        r.c.expect("[")?;
                        let mut items = Vec::new();
                        if !r.c.eat("]") {
                            loop {
                                items.push(r.c.expect_ident("true or false")?.to_string());
                                if r.c.eat("]") {
                                    break;
                                }
                                r.c.expect(",")?;
                            }
                        }
                        let text = if items.is_empty() {
                            "array<i1>".to_string()
                        } else {
                            format!("array<i1: {}>", items.join(", "))
                        };
                        b.attrs.push(r.attr("window_reversal", &text));
                    }
                    _ => {
                        return Err(r.c.unsupported(at, format!("convolution window field {kw} is not read natively")))
                    }
                }
                if r.c.eat("}") {
                    break;
                }
                r.c.expect(",")?;
            }
        }
    }
    sig(r, b, Types::Functional, declared)
}

/// A `tensor<Nx2xi64>` literal of `pairs` as MLIR prints it: a splat `dense<v>` when every
/// element is equal.
fn dense_i64_2d(pairs: &[Vec<i64>]) -> String {
    let flat: Vec<i64> = pairs.iter().flatten().copied().collect();
    let ty = format!("tensor<{}x2xi64>", pairs.len());
    if !flat.is_empty() && flat.iter().all(|&x| x == flat[0]) {
        return format!("dense<{}> : {ty}", flat[0]);
    }
    let rows: Vec<String> = pairs.iter().map(|p| list_text(p)).collect();
    format!("dense<[{}]> : {ty}", rows.join(", "))
}

/// `reduce(%x init: %i) applies stablehlo.add across dimensions = [1] attr-dict : types`, or
/// `reduce(%x init: %i), (%y init: %j) across dimensions = [1] attr-dict : types reducer(%a:
/// T, %b: T) (%c: T, %d: T) { body }`.
fn reduce<'a>(r: &mut Reader<'a>, b: &mut OpBuild<'a>) -> Res<()> {
    let (mut inputs, mut inits) = (Vec::new(), Vec::new());
    loop {
        r.c.expect("(")?;
        inputs.push(r.use_()?);
        r.c.expect_kw("init")?;
        r.c.expect(":")?;
        inits.push(r.use_()?);
        r.c.expect(")")?;
        if !r.c.eat(",") {
            break;
        }
    }
    b.operands = inputs.iter().chain(&inits).copied().collect();
    let applies = if r.c.eat_kw("applies") { Some(r.c.expect_ident("the reduction op")?.to_string()) } else { None };
    r.c.expect_kw("across")?;
    r.c.expect_kw("dimensions")?;
    r.c.expect("=")?;
    let dims = i64_list(r)?;
    b.attrs.push(r.attr("dimensions", &array_i64(&dims)));
    let n = inputs.len();
    sig(r, b, Types::Functional, n)?;
    match applies {
        Some(op) => {
            if n != 1 {
                return Err(r.c.unsupported(b.at, "reduce: 'applies' with several inputs is not read natively"));
            }
            let arg_type = r.p.value_types[inits[0] as usize];
            b.regions.push(Pending { args: None, synthesized: Some(Synthesized { op, arg_type, n_args: 2 }) });
        }
        None => {
            r.c.expect_kw("reducer")?;
            let mut lhs = Vec::new();
            let mut rhs = Vec::new();
            for _ in 0..n {
                r.c.expect("(")?;
                for side in [&mut lhs, &mut rhs] {
                    let Some(name) = r.c.sigil_id(b'%') else { return r.c.fail("a block argument") };
                    r.c.expect(":")?;
                    let t = r.ty()?;
                    side.push((name, t));
                    r.c.eat(",");
                }
                r.c.expect(")")?;
            }
            lhs.extend(rhs);
            b.regions.push(Pending { args: Some(lhs), synthesized: None });
        }
    }
    Ok(())
}

/// `while(%iterArg = %a, %iterArg_0 = %b) : T1, T2 attributes {...} cond` (the regions and
/// `do` follow).
fn while_head<'a>(r: &mut Reader<'a>, b: &mut OpBuild<'a>) -> Res<()> {
    r.c.expect("(")?;
    let mut names = Vec::new();
    if !r.c.eat(")") {
        loop {
            let Some(name) = r.c.sigil_id(b'%') else { return r.c.fail("a loop variable") };
            r.c.expect("=")?;
            b.operands.push(r.use_()?);
            names.push(name);
            if r.c.eat(")") {
                break;
            }
            r.c.expect(",")?;
        }
    }
    let mut types = Vec::new();
    if r.c.eat(":") {
        let at = r.c.pos;
        loop {
            types.push(r.ty()?);
            if !r.c.eat(",") {
                break;
            }
        }
        r.check_types(&b.operands, &types, at)?;
    } else if !b.operands.is_empty() {
        return r.c.fail("':' and the loop variables' types");
    }
    if r.c.eat_kw("attributes") {
        let attrs = r.attr_dict()?;
        b.attrs.extend(attrs);
    }
    r.c.expect_kw("cond")?;
    let args: Vec<(&'a str, u32)> = names.into_iter().zip(types.iter().copied()).collect();
    b.result_types = types;
    b.regions.push(Pending { args: Some(args.clone()), synthesized: None });
    b.regions.push(Pending { args: Some(args), synthesized: None });
    Ok(())
}

/// `chlo.OP %a attr-dict : A -> R`, `chlo.OP %a, %b attr-dict : (A, B) -> C` and
/// `chlo.top_k(%a, k = N) : A -> (R1, R2)`.
fn chlo(r: &mut Reader<'_>, b: &mut OpBuild<'_>, op: &str) -> Res<()> {
    if op == "top_k" {
        r.c.expect("(")?;
        b.operands = vec![r.use_()?];
        r.c.expect(",")?;
        r.c.expect_kw("k")?;
        r.c.expect("=")?;
        let k = r.c.expect_int("k")?;
        r.c.expect(")")?;
        b.attrs.push(r.attr("k", &format!("{k} : i64")));
        return sig(r, b, Types::Arrow, 2);
    }
    if r.c.peek() == Some(b'(') {
        return Err(r.c.unsupported(b.at, format!("{}: no native grammar for this op's custom form", b.name)));
    }
    let (ops, more) = r.uses()?;
    if more {
        return Err(r.c.unsupported(b.at, format!("{}: no native grammar for this op's custom form", b.name)));
    }
    b.operands = ops;
    sig(r, b, if b.operands.len() == 1 { Types::Arrow } else { Types::Functional }, 1)
}

/// `func.func [visibility] @name(%a: T {attrs}, ...) -> (R {attrs}, ...) attributes {...}
/// { body }`, `func.call @f(%a) attr-dict : (A) -> R`, `return %a : T`.
fn func_head<'a>(r: &mut Reader<'a>, mut b: OpBuild<'a>, op: &str) -> Res<(OpBuild<'a>, Tail)> {
    match op {
        "return" => {
            simple(r, &mut b, Types::Operands, 0)?;
            Ok((b, Tail::Nothing))
        }
        "call" => {
            let Some(callee) = r.c.symbol()? else { return r.c.fail("'@' and the callee") };
            let mut text = String::new();
            crate::text::print_symbol(&callee, &mut text);
            b.attrs.push(r.attr("callee", &text));
            b.operands = r.paren_uses()?;
            sig(r, &mut b, Types::Functional, 0)?;
            Ok((b, Tail::Nothing))
        }
        "func" => {
            func(r, &mut b)?;
            Ok((b, Tail::Nothing))
        }
        _ => Err(r.c.unsupported(b.at, format!("{}: no native grammar for this op's custom form", b.name))),
    }
}

fn func<'a>(r: &mut Reader<'a>, b: &mut OpBuild<'a>) -> Res<()> {
    if let Some(vis) = ["public", "private", "nested"].into_iter().find(|v| r.c.eat_kw(v)) {
        b.attrs.push(r.attr("sym_visibility", &quote(vis)));
    }
    let Some(name) = r.c.symbol()? else { return r.c.fail("'@' and the function's name") };
    b.attrs.insert(0, r.attr("sym_name", &quote(&name)));
    let mut f = FuncData::default();
    let mut args: Vec<(&'a str, u32)> = Vec::new();
    r.c.expect("(")?;
    if !r.c.eat(")") {
        loop {
            let named = r.c.sigil_id(b'%');
            if named.is_some() {
                r.c.expect(":")?;
            }
            let t = r.ty()?;
            let a0 = r.p.attrs.len() as u32;
            if r.c.peek() == Some(b'{') {
                let d = r.attr_dict()?;
                r.p.attrs.extend(d);
            }
            f.arg_attrs.push((a0, r.p.attrs.len() as u32));
            f.arg_types.push(t);
            if r.c.at("loc") {
                r.c.expect_kw("loc")?;
                r.c.group()?;
            }
            if let Some(n) = named {
                args.push((n, t));
            }
            if r.c.eat(")") {
                break;
            }
            r.c.expect(",")?;
        }
    }
    if r.c.eat("->") {
        let parens = r.c.eat("(");
        if !(parens && r.c.eat(")")) {
            loop {
                let t = r.ty()?;
                let a0 = r.p.attrs.len() as u32;
                if parens && r.c.peek() == Some(b'{') {
                    let d = r.attr_dict()?;
                    r.p.attrs.extend(d);
                }
                f.result_attrs.push((a0, r.p.attrs.len() as u32));
                f.result_types.push(t);
                if !parens || r.c.eat(")") {
                    break;
                }
                r.c.expect(",")?;
            }
        }
    }
    if r.c.eat_kw("attributes") {
        let d = r.attr_dict()?;
        b.attrs.extend(d);
    }
    let has_body = r.c.peek() == Some(b'{');
    if has_body {
        if args.len() != f.arg_types.len() {
            return r.c.fail("named arguments ('%name: type') in a function with a body");
        }
        b.regions.push(Pending { args: Some(args), synthesized: None });
    } else if !args.is_empty() {
        return r.c.fail("'{' and the function's body");
    }
    b.func = Some(f);
    Ok(())
}
