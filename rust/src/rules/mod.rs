//! Shardy's sharding rule registry (`shardy/dialect/sdy/transforms/propagation/
//! op_sharding_rule_registry.cc`, `createOpShardingRule`, as bundled in jaxlib 0.10.2): the
//! rule Shardy creates for an op, from its name, attributes and value types (and, for a few
//! ops, the producers of its operands, its region or its results' users).
//!
//! One op family per file, each mirroring its part of the registry: [`elementwise`],
//! [`collectives`], [`dot`], [`conv`], [`reshape`], [`slicing`], [`reduce`],
//! [`gather_scatter`], [`linalg`], [`custom_call`]; [`attrs`] reads the attribute texts they
//! need. The rules are built with [`RuleBuilder`] (Shardy's `OpShardingRuleBuilder`).
//!
//! An op is described by an [`OpDesc`] (Python's `shardwise.rules.OpInfo`). Users' rules and an
//! existing `sdy.sharding_rule` attribute are the Python registry's
//! (`shardwise/rules/registry.py`); this module answers for the builtin ones.
//!
//! Errors are [`ErrorKind::OpInfo`](crate::error::ErrorKind::OpInfo) (Python's `OpInfoError`)
//! when an attribute is missing or malformed or the shapes do not fit the op, and invariant
//! errors of the builder (Python's `InvalidRuleError`).

pub mod attrs;
mod collectives;
mod conv;
mod custom_call;
mod dot;
mod elementwise;
mod gather_scatter;
mod linalg;
mod reduce;
mod reshape;
mod slicing;

use crate::error::{Error, Result};
use crate::rule::{OpShardingRule, RuleBuilder, DYNAMIC_SIZE};

pub use custom_call::{custom_call_targets, NO_RULE_TARGETS};

/// A dynamic dimension in [`ValueDesc::shape`] (Python's `DYNAMIC`).
pub const DYNAMIC: i64 = -1;

/// One SSA value as a rule sees it (Python's `ValueInfo`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValueDesc {
    /// Dimension sizes of a ranked tensor, [`DYNAMIC`] for a dynamic one; empty for a scalar
    /// and for a value that is not a tensor.
    pub shape: Vec<i64>,
    /// The element type as MLIR prints it (`f32`); for a value that is not a ranked tensor,
    /// its whole type.
    pub element_type: String,
    pub is_tensor: bool,
    /// The object this description was read from: the same object twice is the same value.
    pub identity: Option<u64>,
    /// Which SSA value it is: equal ids are the same value; `None` is unknown.
    pub value_id: Option<i64>,
    /// The names of the ops that use it (only the X64Combine rule reads them).
    pub users: Vec<String>,
    /// The op that produces it, when known (rules read one producer deep).
    pub defining_op: Option<Box<OpDesc>>,
}

impl ValueDesc {
    /// A ranked tensor of `shape` and `element_type`, with no identity.
    pub fn tensor(shape: &[i64], element_type: &str) -> ValueDesc {
        ValueDesc { shape: shape.to_vec(), element_type: element_type.into(), is_tensor: true, ..Default::default() }
    }

    pub fn rank(&self) -> usize {
        if self.is_tensor {
            self.shape.len()
        } else {
            0
        }
    }

    /// The shape as Shardy sees it: empty for a value that is not a tensor, dynamic sizes as
    /// [`DYNAMIC_SIZE`] (MLIR's `kDynamic`).
    pub fn shardy_shape(&self) -> Vec<i64> {
        if !self.is_tensor {
            return Vec::new();
        }
        self.shape.iter().map(|&d| if d == DYNAMIC { DYNAMIC_SIZE } else { d }).collect()
    }

    /// Whether `self` and `other` describe the same SSA value (Python's `same_value`).
    pub fn same_value(&self, other: &ValueDesc) -> bool {
        (self.identity.is_some() && self.identity == other.identity)
            || (self.value_id.is_some() && self.value_id == other.value_id)
    }
}

/// A block of a region: its arguments and its ops, the terminator last.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BlockDesc {
    pub arguments: Vec<ValueDesc>,
    pub operations: Vec<OpDesc>,
}

/// One op as a rule sees it (Python's `OpInfo`): its name, operands, results, attributes
/// (name, MLIR text as jaxlib prints it) and regions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpDesc {
    pub name: String,
    pub operands: Vec<ValueDesc>,
    pub results: Vec<ValueDesc>,
    pub attributes: Vec<(String, String)>,
    pub regions: Vec<Vec<BlockDesc>>,
}

impl OpDesc {
    /// The text of attribute `name`, if the op has it.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attributes.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn ranks(values: &[ValueDesc]) -> Vec<usize> {
        values.iter().map(ValueDesc::rank).collect()
    }

    /// A builder for this op's operands and results (Python's `RuleBuilder.for_op`).
    pub(crate) fn builder(&self) -> RuleBuilder {
        RuleBuilder::new(&Self::ranks(&self.operands), &Self::ranks(&self.results))
    }

    pub(crate) fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::op_info(format!("{}: {message}", self.name))
    }

    fn value<'a>(&self, values: &'a [ValueDesc], i: usize, kind: &str, what: &str) -> Result<&'a ValueDesc> {
        values.get(i).ok_or_else(|| {
            let what = if what.is_empty() { String::new() } else { format!(" ({what})") };
            self.error(format_args!("expected at least {} {kind}{what}, got {}", i + 1, values.len()))
        })
    }

    pub(crate) fn operand(&self, i: usize, what: &str) -> Result<&ValueDesc> {
        self.value(&self.operands, i, "operands", what)
    }

    pub(crate) fn operand_shape(&self, i: usize, what: &str) -> Result<Vec<i64>> {
        Ok(self.operand(i, what)?.shardy_shape())
    }

    pub(crate) fn result_shape(&self, i: usize, what: &str) -> Result<Vec<i64>> {
        Ok(self.value(&self.results, i, "results", what)?.shardy_shape())
    }

    pub(crate) fn require_rank(&self, shape: &[i64], at_least: usize, what: &str) -> Result<()> {
        if shape.len() < at_least {
            return Err(self.error(format_args!("expected {what} of rank >= {at_least}, got shape {}", tuple(shape))));
        }
        Ok(())
    }

    pub(crate) fn require_dim(&self, dim: i64, shape: &[i64], what: &str) -> Result<()> {
        if !(0..shape.len() as i64).contains(&dim) {
            return Err(self.error(format_args!(
                "expected {what} in [0, {}) for shape {}, got {dim}",
                shape.len(),
                tuple(shape)
            )));
        }
        Ok(())
    }
}

impl OpDesc {
    /// The description of op `op` of a native program, without producers, users or regions:
    /// enough for every op but [`CONTEXT_OPS`].
    pub fn of(p: &crate::ir::Program, op: u32) -> OpDesc {
        let value = |v: u32| {
            let ty = p.strings.get(p.value_types[v as usize]);
            match crate::ir::types::tensor_shape(ty) {
                Some(shape) => ValueDesc {
                    shape,
                    element_type: crate::ir::types::element_type(ty).unwrap_or_default().to_string(),
                    is_tensor: true,
                    value_id: Some(i64::from(v)),
                    ..Default::default()
                },
                None => ValueDesc { element_type: ty.to_string(), value_id: Some(i64::from(v)), ..Default::default() },
            }
        };
        OpDesc {
            name: p.op_name(op).to_string(),
            operands: p.op_operands(op).iter().map(|&v| value(v)).collect(),
            results: p.op_results(op).map(value).collect(),
            attributes: p
                .op_attrs(op)
                .iter()
                .map(|&(k, v)| (p.strings.get(k).to_string(), p.strings.get(v).to_string()))
                .collect(),
            regions: Vec::new(),
        }
    }
}

/// What the registry gives an op.
#[derive(Debug, Clone, PartialEq)]
pub enum Builtin {
    /// The rule Shardy creates.
    Rule(OpShardingRule),
    /// Shardy deliberately creates none (constants, control flow, terminators, a pointwise op
    /// without a tensor result, a reshape of zero elements, ...): no warning.
    NoRule,
    /// The registry does not know the op (or custom-call target): Shardy creates none and
    /// warns.
    Unknown,
}

/// Ops Shardy's registry deliberately gives no rule, without a warning: they are handled
/// elsewhere (control flow, calls, data-flow edges, manual computations) or need no
/// propagation (constants, iota, tokens, I/O).
pub const NO_RULE_OPS: &[&str] = &[
    "builtin.module",
    "func.func",
    "func.call",
    "sdy.constant",
    "sdy.data_flow_edge",
    "sdy.func_data_flow_edge",
    "sdy.manual_computation",
    "sdy.mesh",
    "sdy.named_computation",
    "sdy.propagation_barrier",
    "sdy.sharding_group",
    "sdy.reshard",
    "stablehlo.after_all",
    "stablehlo.case",
    "stablehlo.constant",
    "stablehlo.create_token",
    "stablehlo.get_tuple_element",
    "stablehlo.infeed",
    "stablehlo.iota",
    "stablehlo.outfeed",
    "stablehlo.optimization_barrier",
    "stablehlo.partition_id",
    "stablehlo.recv",
    "stablehlo.send",
    "stablehlo.while",
];

/// Block terminators: no rule and no warning.
pub const TERMINATOR_OPS: &[&str] = &[
    "func.return",
    "stablehlo.return",
    "sdy.return",
    "mhlo.return",
    "chlo.return",
    "scf.yield",
    "cf.br",
    "cf.cond_br",
];

/// The custom-call op, whose rule is its target's.
pub const CUSTOM_CALL: &str = "stablehlo.custom_call";

type Family = fn(&OpDesc, bool) -> Result<Option<OpShardingRule>>;

/// The builtin rule function of op `name` (not `stablehlo.custom_call`: see
/// [`custom_call::target_rule`]).
fn family(name: &str) -> Option<Family> {
    let f: Family = match name {
        n if elementwise::POINTWISE_OPS.contains(&n) => elementwise::pointwise,
        "stablehlo.clamp" => elementwise::clamp,
        "stablehlo.select" => elementwise::select,
        "stablehlo.reverse" => elementwise::reverse,
        "stablehlo.bitcast_convert" => elementwise::bitcast_convert,
        "stablehlo.all_gather" => collectives::all_gather,
        "stablehlo.reduce_scatter" => collectives::reduce_scatter,
        "stablehlo.all_to_all" => collectives::all_to_all,
        "stablehlo.dot_general" => dot::dot_general,
        "stablehlo.dot" => dot::dot,
        "stablehlo.convolution" => conv::convolution,
        "stablehlo.reshape" => reshape::reshape,
        "stablehlo.broadcast_in_dim" => reshape::broadcast_in_dim,
        "stablehlo.transpose" => reshape::transpose,
        "stablehlo.concatenate" => slicing::concatenate,
        "stablehlo.pad" => slicing::pad,
        "stablehlo.slice" => slicing::slice,
        "stablehlo.dynamic_slice" => slicing::dynamic_slice,
        "stablehlo.dynamic_update_slice" => slicing::dynamic_update_slice,
        "stablehlo.reduce" => reduce::reduce,
        "stablehlo.reduce_window" => reduce::reduce_window,
        "stablehlo.select_and_scatter" => reduce::select_and_scatter,
        "stablehlo.sort" => reduce::sort,
        "stablehlo.gather" => gather_scatter::gather,
        "stablehlo.scatter" => gather_scatter::scatter,
        "stablehlo.cholesky" => linalg::cholesky,
        "stablehlo.triangular_solve" => linalg::triangular_solve,
        "stablehlo.fft" => linalg::fft,
        "stablehlo.batch_norm_inference" => linalg::batch_norm_inference,
        "stablehlo.rng_bit_generator" => linalg::rng_bit_generator,
        _ => return None,
    };
    Some(f)
}

/// The op names with a builtin rule, `stablehlo.custom_call` included (its targets:
/// [`custom_call_targets`]).
pub fn builtin_op_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = elementwise::POINTWISE_OPS.to_vec();
    names.extend([
        "stablehlo.clamp",
        "stablehlo.select",
        "stablehlo.reverse",
        "stablehlo.bitcast_convert",
        "stablehlo.all_gather",
        "stablehlo.reduce_scatter",
        "stablehlo.all_to_all",
        "stablehlo.dot_general",
        "stablehlo.dot",
        "stablehlo.convolution",
        "stablehlo.reshape",
        "stablehlo.broadcast_in_dim",
        "stablehlo.transpose",
        "stablehlo.concatenate",
        "stablehlo.pad",
        "stablehlo.slice",
        "stablehlo.dynamic_slice",
        "stablehlo.dynamic_update_slice",
        "stablehlo.reduce",
        "stablehlo.reduce_window",
        "stablehlo.select_and_scatter",
        "stablehlo.sort",
        "stablehlo.gather",
        "stablehlo.scatter",
        "stablehlo.cholesky",
        "stablehlo.triangular_solve",
        "stablehlo.fft",
        "stablehlo.batch_norm_inference",
        "stablehlo.rng_bit_generator",
        CUSTOM_CALL,
    ]);
    debug_assert!(names.iter().all(|n| *n == CUSTOM_CALL || family(n).is_some()));
    names
}

/// Ops whose rule reads more than the op itself (its name, attributes and value types): the
/// producers of its operands (`concatenate`, `dynamic_update_slice`), its region (`scatter`),
/// or its results' users (custom calls). Their rules must not be memoised by signature.
pub const CONTEXT_OPS: &[&str] =
    &["stablehlo.concatenate", "stablehlo.dynamic_update_slice", "stablehlo.scatter", CUSTOM_CALL];

/// The rule Shardy's registry creates for `op` (`conservative`: Shardy's conservative
/// propagation variants of concatenate, convolution, pad, slice, reduce_window and
/// select_and_scatter, which block the factors whose sharding would need communication).
pub fn builtin_rule(op: &OpDesc, conservative: bool) -> Result<Builtin> {
    let rule = if op.name == CUSTOM_CALL {
        let target = attrs::string(op, "call_target_name", None)?;
        match custom_call::target_rule(&target) {
            Some(f) => f(op, conservative).map_err(|e| in_op(op, e))?,
            None if NO_RULE_TARGETS.contains(&target.as_str()) => return Ok(Builtin::NoRule),
            None => return Ok(Builtin::Unknown),
        }
    } else if let Some(f) = family(&op.name) {
        f(op, conservative).map_err(|e| in_op(op, e))?
    } else if NO_RULE_OPS.contains(&op.name.as_str()) || TERMINATOR_OPS.contains(&op.name.as_str()) {
        return Ok(Builtin::NoRule);
    } else {
        return Ok(Builtin::Unknown);
    };
    Ok(rule.map_or(Builtin::NoRule, Builtin::Rule))
}

/// A builder error names the op (the families' own errors already do).
fn in_op(op: &OpDesc, e: Error) -> Error {
    match e.kind {
        crate::error::ErrorKind::Invariant { .. } => e.context(&op.name),
        _ => e,
    }
}

/// Shardy's `buildPointwise` for `op`: no rule when the first result is not a tensor (or
/// there is no result); otherwise factor `d` is dimension `d` of every value, sized by the
/// first result.
pub fn pointwise(op: &OpDesc) -> Result<Option<OpShardingRule>> {
    match op.results.first() {
        Some(r) if r.is_tensor => Ok(Some(RuleBuilder::pointwise(
            &OpDesc::ranks(&op.operands),
            &OpDesc::ranks(&op.results),
            &r.shardy_shape(),
        )?)),
        _ => Ok(None),
    }
}

/// `values` as Python prints a tuple of ints: `()`, `(4,)`, `(2, 3)` (the messages match
/// Python's).
pub(crate) fn tuple(values: &[i64]) -> String {
    match values {
        [] => "()".into(),
        [v] => format!("({v},)"),
        _ => format!("({})", join(values)),
    }
}

/// `values` as Python prints a list of ints: `[1, 0]`.
pub(crate) fn list(values: &[i64]) -> String {
    format!("[{}]", join(values))
}

fn join(values: &[i64]) -> String {
    values.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// C++ integer division (truncating toward zero), as Shardy divides.
pub(crate) fn cdiv(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    a.wrapping_div(b)
}
