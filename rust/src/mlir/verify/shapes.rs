//! The op signatures and shape rules of the native verifier: operand and result counts from
//! the ops' ODS definitions (openxla/stablehlo `StablehloOps.td`, openxla/shardy
//! `dialect/sdy/ir/ops.td`), and the shapes StableHLO's `TypeInference.cpp` infers for
//! element-wise ops, `reshape`, `transpose`, `broadcast_in_dim`, `concatenate`, `dot`,
//! `dot_general` and the start indices of dynamic slices; the ops that take parts of a
//! tensor are in `slicing.rs`, the windowed ones in `window.rs`.

use super::{Verifier, VerifyError};

/// How many operands or results an op takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Count {
    Exactly(usize),
    AtLeast(usize),
    Any,
}

impl Count {
    pub(super) fn admits(self, n: usize) -> bool {
        match self {
            Count::Exactly(k) => n == k,
            Count::AtLeast(k) => n >= k,
            Count::Any => true,
        }
    }

    pub(super) fn text(self) -> String {
        match self {
            Count::Exactly(k) => format!("{k}"),
            Count::AtLeast(k) => format!("at least {k}"),
            Count::Any => "any number of".into(),
        }
    }
}

/// The shape rule an op's operands and results follow (beyond their counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rule {
    None,
    /// Every operand and result has the same shape; the operands at the given positions may
    /// also be scalars (`select`'s predicate, `clamp`'s bounds).
    Elementwise(&'static [usize]),
    /// As many results as operands (`all_reduce`, `all_gather`, `all_to_all`).
    ResultPerOperand,
    /// Each result has its operand's type, up to dynamic sizes (`while`,
    /// `optimization_barrier`, `sort`: StableHLO's `inferWhileOp`, `inferOptimizationBarrierOp`,
    /// `inferSortOp`).
    ResultsAsOperands,
    /// `ResultsAsOperands`, all of one shape (`SameOperandsAndResultShape`), sorted along a
    /// `dimension` in `[-rank, rank)` (StableHLO's `verifySortOp`, sort_c4; absent: -1).
    Sort,
    /// `n` leading operands, then one start index per dimension of the first operand.
    StartIndices(usize),
    /// `n` inputs, one index tensor, `n` updates; `n` results.
    Scatter,
    Reshape,
    Transpose,
    BroadcastInDim,
    Concatenate,
    DotGeneral,
    /// `stablehlo.dot`: vector or matrix operands, the lhs's last dimension contracted with the
    /// rhs's first.
    Dot,
    /// `stablehlo.reduce`: `n` operands of which half are inputs and half init values, `n / 2`
    /// results, which drop the reduced dimensions.
    Reduce,
    /// `stablehlo.reduce_window`: the operands and results of `Reduce`; the results are the
    /// windowed inputs.
    ReduceWindow,
    /// `StartIndices(1)` whose result has the `slice_sizes`.
    DynamicSlice,
    Slice,
    Pad,
    Gather,
    Convolution,
    Iota,
    /// The result's type is the operand's (MLIR's `SameOperandsAndResultType`: the sdy ops).
    SameType,
}

const E: Rule = Rule::Elementwise(&[]);

/// Operand count, result count and shape rule of the ops verified here; `None` for the others.
pub(super) fn signature(name: &str) -> Option<(Count, Count, Rule)> {
    use Count::{Any, AtLeast, Exactly as N};
    let (dialect, op) = name.split_once('.')?;
    Some(match dialect {
        "stablehlo" => match op {
            "abs"
            | "cbrt"
            | "ceil"
            | "convert"
            | "count_leading_zeros"
            | "cosine"
            | "exponential"
            | "exponential_minus_one"
            | "floor"
            | "imag"
            | "is_finite"
            | "log"
            | "log_plus_one"
            | "logistic"
            | "not"
            | "negate"
            | "popcnt"
            | "real"
            | "round_nearest_afz"
            | "round_nearest_even"
            | "rsqrt"
            | "sign"
            | "sine"
            | "sqrt"
            | "tan"
            | "tanh"
            | "reduce_precision" => (N(1), N(1), E),
            "add"
            | "atan2"
            | "complex"
            | "divide"
            | "maximum"
            | "minimum"
            | "multiply"
            | "power"
            | "remainder"
            | "shift_left"
            | "shift_right_arithmetic"
            | "shift_right_logical"
            | "subtract"
            | "and"
            | "or"
            | "xor"
            | "compare" => (N(2), N(1), E),
            "select" => (N(3), N(1), Rule::Elementwise(&[0])),
            "clamp" => (N(3), N(1), Rule::Elementwise(&[0, 2])),
            "constant" | "create_token" | "replica_id" | "partition_id" => (N(0), N(1), Rule::None),
            "iota" => (N(0), N(1), Rule::Iota),
            "reshape" => (N(1), N(1), Rule::Reshape),
            "transpose" => (N(1), N(1), Rule::Transpose),
            "broadcast_in_dim" => (N(1), N(1), Rule::BroadcastInDim),
            "concatenate" => (AtLeast(1), N(1), Rule::Concatenate),
            "dot_general" => (N(2), N(1), Rule::DotGeneral),
            "slice" => (N(1), N(1), Rule::Slice),
            "bitcast_convert"
            | "reverse"
            | "get_tuple_element"
            | "cholesky"
            | "fft"
            | "reduce_scatter"
            | "collective_permute"
            | "collective_broadcast"
            | "broadcast" => (N(1), N(1), Rule::None),
            "real_dynamic_slice" => (N(4), N(1), Rule::None),
            "dot" => (N(2), N(1), Rule::Dot),
            "pad" => (N(2), N(1), Rule::Pad),
            "gather" => (N(2), N(1), Rule::Gather),
            "convolution" => (N(2), N(1), Rule::Convolution),
            "triangular_solve" | "dynamic_reshape" | "dynamic_broadcast_in_dim" => (N(2), N(1), Rule::None),
            "dynamic_slice" => (AtLeast(1), N(1), Rule::DynamicSlice),
            "dynamic_update_slice" => (AtLeast(2), N(1), Rule::StartIndices(2)),
            "select_and_scatter" => (N(3), N(1), Rule::None),
            "reduce" => (AtLeast(2), AtLeast(1), Rule::Reduce),
            "reduce_window" => (AtLeast(2), AtLeast(1), Rule::ReduceWindow),
            "while" | "optimization_barrier" => (Any, Any, Rule::ResultsAsOperands),
            "all_reduce" | "all_gather" | "all_to_all" => (Any, Any, Rule::ResultPerOperand),
            "sort" => (AtLeast(1), AtLeast(1), Rule::Sort),
            "scatter" => (AtLeast(3), AtLeast(1), Rule::Scatter),
            "send" => (AtLeast(1), N(1), Rule::None),
            "recv" => (N(1), AtLeast(1), Rule::None),
            "rng_bit_generator" => (N(1), N(2), Rule::None),
            "batch_norm_inference" => (N(5), N(1), Rule::None),
            "batch_norm_training" => (N(3), N(3), Rule::None),
            "batch_norm_grad" => (N(5), N(3), Rule::None),
            "case" | "if" => (N(1), Any, Rule::None),
            "after_all" => (Any, N(1), Rule::None),
            "return" => (Any, N(0), Rule::None),
            _ => return None,
        },
        "sdy" => match op {
            "sharding_constraint"
            | "reshard"
            | "data_flow_edge"
            | "propagation_barrier"
            | "all_gather"
            | "all_reduce"
            | "all_slice"
            | "all_to_all"
            | "collective_permute"
            | "reduce_scatter"
            | "replicated_to_unreduced"
            | "sharded_to_unreduced"
            | "func_data_flow_edge" => (N(1), N(1), Rule::SameType),
            "sharding_group" => (N(1), N(0), Rule::None),
            "constant" => (N(0), N(1), Rule::None),
            "mesh" => (N(0), N(0), Rule::None),
            "return" => (Any, N(0), Rule::None),
            _ => return None,
        },
        "func" => match op {
            "return" => (Any, N(0), Rule::None),
            _ => return None,
        },
        _ => return None,
    })
}

/// The dimension sizes of a ranked tensor type (`-1` for `?`); `None` for other types.
pub(super) fn tensor_dims(ty: &str) -> Option<Vec<i64>> {
    let inner = ty.strip_prefix("tensor<")?.strip_suffix('>')?;
    let inner = crate::mlir::attr::split_top(inner).first().copied().unwrap_or(inner).trim();
    let mut dims = Vec::new();
    let mut rest = inner;
    while let Some((head, tail)) = rest.split_once('x') {
        let d = if head == "?" {
            -1
        } else if !head.is_empty() && head.bytes().all(|c| c.is_ascii_digit()) {
            head.parse().ok()?
        } else {
            break;
        };
        dims.push(d);
        rest = tail;
    }
    if rest.starts_with('*') {
        return None;
    }
    Some(dims)
}

/// The integers of `array<i64: 1, 2>` (or a bracketed list `[1, 2]`).
pub(super) fn int_list(text: &str) -> Option<Vec<i64>> {
    let t = text.trim();
    let inner = if let Some(a) = t.strip_prefix("array<i64").and_then(|a| a.strip_suffix('>')) {
        a.strip_prefix(':').unwrap_or(a)
    } else {
        t.strip_prefix('[')?.strip_suffix(']')?
    };
    let inner = inner.trim();
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|x| x.trim().parse().ok()).collect()
}

/// The integer list of field `key` in a StableHLO struct attribute
/// (`#stablehlo.gather<offset_dims = [1], index_vector_dim = 1>`): empty when the field is
/// absent (StableHLO leaves empty lists out), `None` when it does not read as integers.
pub(super) fn struct_list(text: &str, key: &str) -> Option<Vec<i64>> {
    match struct_field(text, key) {
        None => Some(Vec::new()),
        Some(v) => int_list(&v[..v.find(']').map_or(v.len(), |i| i + 1)]),
    }
}

/// The text after `key = ` in a StableHLO struct attribute, `None` when the field is absent.
fn struct_field<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    let mut rest = text;
    while let Some(i) = rest.find(key) {
        let before = rest[..i].chars().next_back();
        let after = &rest[i + key.len()..];
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            if let Some(v) = after.trim_start().strip_prefix('=') {
                return Some(v.trim_start());
            }
        }
        rest = after;
    }
    None
}

/// The integer of a struct field (`index_vector_dim = 1`): 0 when the field is absent
/// (StableHLO leaves a 0 out), `None` when it does not read as an integer.
pub(super) fn struct_int(text: &str, key: &str) -> Option<i64> {
    let Some(v) = struct_field(text, key) else { return Some(0) };
    let end = v.find(|c: char| !(c.is_ascii_digit() || c == '-')).unwrap_or(v.len());
    v[..end].parse().ok()
}

/// Two sizes agree when equal or when either is dynamic.
pub(super) fn same(a: i64, b: i64) -> bool {
    a == b || a < 0 || b < 0
}

pub(super) fn same_dims(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| same(x, y))
}

pub(super) fn dims_text(d: &[i64]) -> String {
    let v: Vec<String> = d.iter().map(|&x| if x < 0 { "?".into() } else { x.to_string() }).collect();
    format!("[{}]", v.join(", "))
}

impl<'p> Verifier<'p> {
    /// The dimension sizes of `value`'s type (parsed once per distinct type).
    pub(super) fn dims(&self, value: u32) -> Option<&[i64]> {
        self.type_dims[self.p.value_types[value as usize] as usize].as_deref()
    }

    /// The element type of `value`'s type ([`crate::mlir::attr::element_type`]: `None` for no
    /// ranked tensor).
    pub(super) fn elem(&self, value: u32) -> Option<&'p str> {
        self.type_elems[self.p.value_types[value as usize] as usize]
    }

    pub(super) fn shapes(&self, op: u32, rule: Rule) -> Result<(), VerifyError> {
        let ins = self.operands(op);
        let outs: Vec<u32> = self.results(op).collect();
        match rule {
            Rule::None => {}
            Rule::Elementwise(scalars) => {
                let name = self.p.op_name(op);
                self.elementwise_types(op, name.strip_prefix("stablehlo.").unwrap_or(name))?;
                let Some(want) = outs.first().and_then(|&r| self.dims(r)) else { return Ok(()) };
                for (i, &v) in ins.iter().enumerate() {
                    let Some(d) = self.dims(v) else { continue };
                    if !(same_dims(d, want) || (scalars.contains(&i) && d.is_empty())) {
                        return Err(self.err(
                            op,
                            format!(
                                "requires the same shape for all operands and results: operand {i} has shape {}, the result {}",
                                dims_text(d),
                                dims_text(want)
                            ),
                        ));
                    }
                }
            }
            Rule::ResultPerOperand | Rule::ResultsAsOperands | Rule::Sort => {
                if ins.len() != outs.len() {
                    return Err(self.err(
                        op,
                        format!("expects one result per operand: {} operands, {} results", ins.len(), outs.len()),
                    ));
                }
                if rule == Rule::Sort {
                    self.sort(op, ins)?;
                }
                if rule != Rule::ResultPerOperand {
                    for (i, (&v, &r)) in ins.iter().zip(&outs).enumerate() {
                        let shapes_agree = match (self.dims(v), self.dims(r)) {
                            (Some(a), Some(b)) => same_dims(a, b),
                            _ => self.ty(v) == self.ty(r),
                        };
                        if !shapes_agree || self.elem(v) != self.elem(r) {
                            return Err(
                                self.err(op, format!("result {i} has type {}, its operand {}", self.ty(r), self.ty(v)))
                            );
                        }
                    }
                }
            }
            Rule::Reduce => {
                self.reduction_counts(op, ins, &outs)?;
                self.reduce(op, ins, &outs)?;
            }
            Rule::ReduceWindow => {
                self.reduction_counts(op, ins, &outs)?;
                self.reduce_window(op, ins, &outs)?;
            }
            Rule::StartIndices(lead) => self.start_indices(op, ins, lead)?,
            Rule::DynamicSlice => {
                self.start_indices(op, ins, 1)?;
                self.dynamic_slice(op, ins[0], outs[0])?;
            }
            Rule::Slice => self.slice(op, ins[0], outs[0])?,
            Rule::Pad => self.pad(op, ins[0], ins[1], outs[0])?,
            Rule::Gather => self.gather(op, ins[0], ins[1], outs[0])?,
            Rule::Convolution => self.convolution(op, ins[0], ins[1], outs[0])?,
            Rule::Iota => self.iota(op, outs[0])?,
            Rule::Scatter => {
                if ins.len() != 2 * outs.len() + 1 {
                    return Err(self.err(
                        op,
                        format!(
                            "expects one input and one update per result and one index tensor: {} operands, {} results",
                            ins.len(),
                            outs.len()
                        ),
                    ));
                }
                self.scatter(op, ins, &outs)?;
            }
            Rule::Reshape => {
                if let (Some(a), Some(b)) = (self.dims(ins[0]), self.dims(outs[0])) {
                    // Static shapes whose element counts fit in an i64 (no overflow on user input).
                    let count =
                        |d: &[i64]| d.iter().try_fold(1i64, |n, &x| if x < 0 { None } else { n.checked_mul(x) });
                    if matches!((count(a), count(b)), (Some(x), Some(y)) if x != y) {
                        return Err(self.err(
                            op,
                            format!(
                                "operand shape {} and result shape {} have different element counts",
                                dims_text(a),
                                dims_text(b)
                            ),
                        ));
                    }
                }
            }
            Rule::Transpose => self.transpose(op, ins[0], outs[0])?,
            Rule::BroadcastInDim => self.broadcast(op, ins[0], outs[0])?,
            Rule::Concatenate => self.concatenate(op, ins, outs[0])?,
            Rule::DotGeneral => self.dot_general(op, ins[0], ins[1], outs[0])?,
            Rule::Dot => self.dot(op, ins[0], ins[1], outs[0])?,
            Rule::SameType => {
                if self.ty(ins[0]) != self.ty(outs[0]) {
                    return Err(self.err(
                        op,
                        format!(
                            "requires the same type for its operand and result: {} and {}",
                            self.ty(ins[0]),
                            self.ty(outs[0])
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn reduction_counts(&self, op: u32, ins: &[u32], outs: &[u32]) -> Result<(), VerifyError> {
        if ins.len() % 2 != 0 || outs.len() != ins.len() / 2 {
            return Err(self.err(
                op,
                format!(
                    "expects as many inputs as init values and one result for each: {} operands, {} results",
                    ins.len(),
                    outs.len()
                ),
            ));
        }
        Ok(())
    }

    fn start_indices(&self, op: u32, ins: &[u32], lead: usize) -> Result<(), VerifyError> {
        if let Some(d) = self.dims(ins[0]) {
            if ins.len() != lead + d.len() {
                return Err(self.err(
                    op,
                    format!(
                        "expects {} start indices for an operand of rank {}, got {}",
                        d.len(),
                        d.len(),
                        ins.len() - lead.min(ins.len())
                    ),
                ));
            }
        }
        Ok(())
    }

    fn sort(&self, op: u32, ins: &[u32]) -> Result<(), VerifyError> {
        let Some(a) = self.common_shape(op, ins)? else { return Ok(()) };
        let dim = match self.attr(op, "dimension") {
            None => -1,
            Some(t) => crate::mlir::printer::int_of(t, "i64")
                .ok_or_else(|| self.err(op, format!("attribute 'dimension' is not an integer: {t}")))?,
        };
        let rank = a.len() as i64;
        if dim < -rank || dim >= rank {
            return Err(self.err(op, format!("dimension {dim} is out of range [-{rank}, {rank})")));
        }
        Ok(())
    }

    /// The integer list attribute `name`, or `None` when the op does not carry it (a
    /// malformed one is an error).
    pub(super) fn optional_ints(&self, op: u32, name: &str) -> Result<Option<Vec<i64>>, VerifyError> {
        match self.attr(op, name) {
            None => Ok(None),
            Some(text) => int_list(text)
                .map(Some)
                .ok_or_else(|| self.err(op, format!("attribute '{name}' is not a list of integers: {text}"))),
        }
    }

    /// The result `r` against the shape `want` the op's type inference gives.
    pub(super) fn inferred(&self, op: u32, r: u32, want: &[i64], what: &str) -> Result<(), VerifyError> {
        let Some(got) = self.dims(r) else { return Ok(()) };
        if !same_dims(got, want) {
            return Err(
                self.err(op, format!("result shape {} is not the {} of {what}", dims_text(got), dims_text(want)))
            );
        }
        Ok(())
    }

    /// The integer list attributes `names`, which must have one length (StableHLO's
    /// `AllMatchSameOperatorTrait`: `slice`'s indices and strides, `pad`'s paddings).
    pub(super) fn int_attrs<const N: usize>(&self, op: u32, names: [&str; N]) -> Result<[Vec<i64>; N], VerifyError> {
        let mut lists: [Vec<i64>; N] = std::array::from_fn(|_| Vec::new());
        for (list, name) in lists.iter_mut().zip(names) {
            *list = self.int_attr(op, name)?;
        }
        if lists.iter().any(|l| l.len() != lists[0].len()) {
            let lengths: Vec<String> = lists.iter().map(|l| l.len().to_string()).collect();
            return Err(self.err(op, format!("{} differ in length: {}", names.join(", "), lengths.join(", "))));
        }
        Ok(lists)
    }

    /// The shape the `inputs` share (compatible shapes: `reduce_c1`, `reduce_window_c2`,
    /// `scatter_c1`, `sort`'s `SameOperandsAndResultShape`), `None` when the first has none.
    pub(super) fn common_shape(&self, op: u32, inputs: &[u32]) -> Result<Option<&[i64]>, VerifyError> {
        let Some(&first) = inputs.first() else { return Ok(None) };
        let Some(a) = self.dims(first) else { return Ok(None) };
        if let Some(i) = inputs.iter().position(|&v| self.dims(v).is_some_and(|d| !same_dims(d, a))) {
            return Err(self.err(op, format!("input {i} differs in shape from input 0")));
        }
        Ok(Some(a))
    }

    pub(super) fn int_attr(&self, op: u32, name: &str) -> Result<Vec<i64>, VerifyError> {
        let text = self.attr(op, name).ok_or_else(|| self.err(op, format!("requires attribute '{name}'")))?;
        int_list(text).ok_or_else(|| self.err(op, format!("attribute '{name}' is not a list of integers: {text}")))
    }

    fn transpose(&self, op: u32, x: u32, r: u32) -> Result<(), VerifyError> {
        let perm = self.int_attr(op, "permutation")?;
        let (Some(a), Some(b)) = (self.dims(x), self.dims(r)) else { return Ok(()) };
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        if sorted != (0..a.len() as i64).collect::<Vec<_>>() {
            return Err(self.err(
                op,
                format!(
                    "permutation {} is not a permutation of the operand's {} dimensions",
                    dims_text(&perm),
                    a.len()
                ),
            ));
        }
        let want: Vec<i64> = perm.iter().map(|&p| a[p as usize]).collect();
        if !same_dims(&want, b) {
            return Err(self.err(
                op,
                format!(
                    "result shape {} is not the operand's {} permuted ({})",
                    dims_text(b),
                    dims_text(a),
                    dims_text(&want)
                ),
            ));
        }
        Ok(())
    }

    fn broadcast(&self, op: u32, x: u32, r: u32) -> Result<(), VerifyError> {
        let bd = self.int_attr(op, "broadcast_dimensions")?;
        let (Some(a), Some(b)) = (self.dims(x), self.dims(r)) else { return Ok(()) };
        if bd.len() != a.len() {
            return Err(self.err(
                op,
                format!(
                    "broadcast_dimensions {} has {} entries for an operand of rank {}",
                    dims_text(&bd),
                    bd.len(),
                    a.len()
                ),
            ));
        }
        for (i, &d) in bd.iter().enumerate() {
            if d < 0 || d as usize >= b.len() {
                return Err(
                    self.err(op, format!("broadcast dimension {d} is out of range for a result of rank {}", b.len()))
                );
            }
            if a[i] != 1 && !same(a[i], b[d as usize]) {
                return Err(self.err(
                    op,
                    format!(
                        "operand dimension {i} (size {}) maps to result dimension {d} of size {}",
                        a[i], b[d as usize]
                    ),
                ));
            }
        }
        Ok(())
    }

    fn concatenate(&self, op: u32, ins: &[u32], r: u32) -> Result<(), VerifyError> {
        let Some(dim) = self.attr(op, "dimension").and_then(|t| crate::mlir::printer::int_of(t, "i64")) else {
            return Err(self.err(op, "requires an integer attribute 'dimension'".into()));
        };
        let Some(out) = self.dims(r) else { return Ok(()) };
        if dim < 0 || dim as usize >= out.len() {
            return Err(self.err(op, format!("dimension {dim} is out of range for rank {}", out.len())));
        }
        let mut total = 0i64;
        for (i, &v) in ins.iter().enumerate() {
            let Some(d) = self.dims(v) else { return Ok(()) };
            let mut other = d.to_vec();
            let mut want = out.to_vec();
            if d.len() == out.len() {
                other[dim as usize] = -1;
                want[dim as usize] = -1;
            }
            if !same_dims(&other, &want) {
                return Err(self.err(
                    op,
                    format!(
                        "operand {i} has shape {}, which differs from the result's {} outside dimension {dim}",
                        dims_text(d),
                        dims_text(out)
                    ),
                ));
            }
            total =
                if total < 0 || d[dim as usize] < 0 { -1 } else { total.checked_add(d[dim as usize]).unwrap_or(-1) };
        }
        if !same(total, out[dim as usize]) {
            return Err(self.err(
                op,
                format!(
                    "the operands' sizes in dimension {dim} add up to {total}, the result's is {}",
                    out[dim as usize]
                ),
            ));
        }
        Ok(())
    }

    fn dot(&self, op: u32, l: u32, r: u32, out: u32) -> Result<(), VerifyError> {
        let (Some(a), Some(b), Some(o)) = (self.dims(l), self.dims(r), self.dims(out)) else { return Ok(()) };
        if !(1..=2).contains(&a.len()) || !(1..=2).contains(&b.len()) {
            return Err(
                self.err(op, format!("expects vector or matrix operands, got ranks {} and {}", a.len(), b.len()))
            );
        }
        let (p, q) = (a[a.len() - 1], b[0]);
        if !same(p, q) {
            return Err(self.err(op, format!("contracting dimension sizes differ: lhs {p}, rhs {q}")));
        }
        let want: Vec<i64> = a[..a.len() - 1].iter().chain(&b[1..]).copied().collect();
        if !same_dims(o, &want) {
            return Err(self.err(
                op,
                format!("result shape {} is not the {} of the free dimensions", dims_text(o), dims_text(&want)),
            ));
        }
        Ok(())
    }

    fn dot_general(&self, op: u32, l: u32, r: u32, out: u32) -> Result<(), VerifyError> {
        let id = self.p.attr_id(op, "dot_dimension_numbers");
        let cached = id.and_then(|id| self.dot_dims.borrow().get(&id).cloned());
        let dims = cached.unwrap_or_else(|| {
            let text = id.map_or("", |id| self.p.strings.get(id));
            let field = |k: &str| struct_list(text, k).unwrap_or_default();
            let dims = std::rc::Rc::new([
                field("lhs_batching_dimensions"),
                field("rhs_batching_dimensions"),
                field("lhs_contracting_dimensions"),
                field("rhs_contracting_dimensions"),
            ]);
            if let Some(id) = id {
                self.dot_dims.borrow_mut().insert(id, dims.clone());
            }
            dims
        });
        let [lb, rb, lc, rc] = &*dims;
        let (Some(a), Some(b), Some(o)) = (self.dims(l), self.dims(r), self.dims(out)) else { return Ok(()) };
        for (what, x, y) in [("batching", lb, rb), ("contracting", lc, rc)] {
            if x.len() != y.len() {
                return Err(self.err(
                    op,
                    format!("lhs and rhs {what} dimensions differ in number: {} and {}", dims_text(x), dims_text(y)),
                ));
            }
            for (&i, &j) in x.iter().zip(y.iter()) {
                let (Some(&p), Some(&q)) = (a.get(i as usize), b.get(j as usize)) else {
                    return Err(self.err(
                        op,
                        format!(
                            "{what} dimension out of range: lhs {i} of rank {}, rhs {j} of rank {}",
                            a.len(),
                            b.len()
                        ),
                    ));
                };
                if !same(p, q) {
                    return Err(self.err(
                        op,
                        format!("{what} dimension sizes differ: lhs dimension {i} is {p}, rhs dimension {j} is {q}"),
                    ));
                }
            }
        }
        // The result: batching dimensions, then the lhs's and the rhs's free dimensions.
        let free = |d: &[i64], batch: &[i64], contract: &[i64]| -> Vec<i64> {
            (0..d.len() as i64).filter(|i| !batch.contains(i) && !contract.contains(i)).map(|i| d[i as usize]).collect()
        };
        let mut want: Vec<i64> = lb.iter().map(|&i| a[i as usize]).collect();
        want.extend(free(a, lb, lc));
        want.extend(free(b, rb, rc));
        if !same_dims(o, &want) {
            return Err(self.err(
                op,
                format!(
                    "result shape {} is not the {} of the batching and free dimensions",
                    dims_text(o),
                    dims_text(&want)
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_types() {
        assert_eq!(tensor_dims("tensor<4x8xf32>"), Some(vec![4, 8]));
        assert_eq!(tensor_dims("tensor<f32>"), Some(vec![]));
        assert_eq!(tensor_dims("tensor<?x2xcomplex<f32>>"), Some(vec![-1, 2]));
        assert_eq!(tensor_dims("tensor<3xf32, #enc<x>>"), Some(vec![3]));
        assert_eq!(tensor_dims("tensor<*xf32>"), None);
        assert_eq!(tensor_dims("!stablehlo.token"), None);
        assert_eq!(int_list("array<i64: 1, 0>"), Some(vec![1, 0]));
        assert_eq!(int_list("array<i64>"), Some(vec![]));
        assert_eq!(int_list("[2]"), Some(vec![2]));
    }
}
