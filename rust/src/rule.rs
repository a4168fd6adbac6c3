//! Operation sharding rules (Shardonnay RFC "Operation sharding rule"; Shardy's
//! `OpShardingRuleAttr` in `shardy/dialect/sdy/ir/attrs.td`, verified as in
//! `verifyOpShardingRuleAttr` of `shardy/dialect/sdy/ir/verifiers.cc`).
//!
//! A rule describes an operation in terms of *factors*: independent index spaces, each with a
//! size. Every dimension of every operand and result is mapped to one or more factors (several
//! factors make a *compound* dimension, major to minor: the reshape `([ij, k])->([i, j, k])`).
//! A factor has a kind: pass-through (the default), reduction (appears in operands only, like
//! a contracting dimension), need-replication (must not be sharded, like the sorted dimension
//! of a sort) or permutation (sharding it needs a collective permute, like a padded
//! dimension). Independently of its kind, a factor may block propagation.
//!
//! Submodules: [`builder`] (Shardy's `OpShardingRuleBuilder`), [`text`] (Shardy's printer and
//! parser of `#sdy.op_sharding_rule<...>`), [`einsum`] (JAX's einsum-like notation for user
//! rules).
//!
//! Invariant rule identifiers (the `rule` of an invariant error) checked here:
//! `rule-empty-dim-mapping`, `rule-factor-out-of-range`, `rule-factor-reused`,
//! `rule-size-one-in-compound`, `rule-unused-factor`, `rule-special-unsorted`,
//! `rule-special-duplicate`, `rule-special-out-of-range`, `rule-factor-in-two-kinds`,
//! `rule-reduction-in-result`, `rule-mapping-count`, `rule-no-mappings`, `rule-rank-mismatch`,
//! `rule-not-static-tensor`, `rule-negative-factor-size`, `rule-dim-size`.

pub mod builder;
pub mod einsum;
pub mod text;

use std::fmt;

use crate::error::{Error, Result};

pub use builder::RuleBuilder;
pub use einsum::{rule_from_einsum, EinsumOptions, EinsumSpec};
pub use text::{factor_symbol, parse_rule, print_rule};

/// A dimension that a factor does not map to (Shardy's `kNullDim`).
pub const NULL_DIM: i64 = -1;

/// The size Shardy gives a dynamic dimension (MLIR's `ShapedType::kDynamic`); it shows up as a
/// factor size when a rule is built for a dynamically shaped op.
pub const DYNAMIC_SIZE: i64 = i64::MIN;

/// The factors one dimension is mapped to, major to minor (Shardy `DimMappingAttr`).
pub type DimMapping = Vec<i64>;

/// One [`DimMapping`] per dimension of a tensor (Shardy `TensorMappingAttr`).
pub type TensorMapping = Vec<DimMapping>;

/// How a factor behaves when it is sharded (Shardy `FactorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FactorKind {
    /// No communication when sharded the same way in every tensor that has it.
    #[default]
    PassThrough,
    /// Sharding it leaves partial results that need an all-reduce (operands only).
    Reduction,
    /// Must be replicated: an all-gather is needed when it is sharded.
    NeedReplication,
    /// Sharding it needs a collective permute (pad, slice, concatenate dimensions).
    Permutation,
}

impl FactorKind {
    pub const ALL: [FactorKind; 4] =
        [FactorKind::PassThrough, FactorKind::Reduction, FactorKind::NeedReplication, FactorKind::Permutation];

    /// `"pass_through"`, `"reduction"`, `"need_replication"` or `"permutation"`: the keyword
    /// Shardy prints before a factor list (pass-through factors are never printed).
    pub fn name(self) -> &'static str {
        match self {
            FactorKind::PassThrough => "pass_through",
            FactorKind::Reduction => "reduction",
            FactorKind::NeedReplication => "need_replication",
            FactorKind::Permutation => "permutation",
        }
    }

    pub fn from_name(name: &str) -> Option<FactorKind> {
        FactorKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for FactorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An operation sharding rule. Factor indices are `i64` as in Shardy (so that a broken rule
/// can be represented and reported rather than rejected by the type system); every
/// constructor of this crate checks them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct OpShardingRule {
    /// Size of each factor; the index in this list is the factor's index.
    pub factor_sizes: Vec<i64>,
    pub operand_mappings: Vec<TensorMapping>,
    pub result_mappings: Vec<TensorMapping>,
    /// Sorted factor indices of each special kind; pass-through factors are the rest.
    pub reduction_factors: Vec<i64>,
    pub need_replication_factors: Vec<i64>,
    pub permutation_factors: Vec<i64>,
    /// Sorted factors along which shardings must not propagate (any kind).
    pub blocked_propagation_factors: Vec<i64>,
    /// A user's rule (printed `, custom`): always kept, never recomputed.
    pub is_custom: bool,
}

fn invalid(rule: &'static str, msg: String) -> Error {
    Error::invariant(rule, msg)
}

fn value_name(kind: &str, index: usize, count: usize) -> String {
    if count == 1 {
        kind.to_string()
    } else {
        format!("{kind} {index}")
    }
}

impl OpShardingRule {
    pub fn num_factors(&self) -> usize {
        self.factor_sizes.len()
    }

    /// The special-factor list of `kind` (empty for pass-through, which is implicit).
    pub fn factors_of_kind(&self, kind: FactorKind) -> &[i64] {
        match kind {
            FactorKind::PassThrough => &[],
            FactorKind::Reduction => &self.reduction_factors,
            FactorKind::NeedReplication => &self.need_replication_factors,
            FactorKind::Permutation => &self.permutation_factors,
        }
    }

    /// The kind of factor `factor` (pass-through unless listed in a special list).
    pub fn factor_kind(&self, factor: i64) -> FactorKind {
        [FactorKind::Reduction, FactorKind::NeedReplication, FactorKind::Permutation]
            .into_iter()
            .find(|&k| self.factors_of_kind(k).contains(&factor))
            .unwrap_or(FactorKind::PassThrough)
    }

    pub fn is_blocked(&self, factor: i64) -> bool {
        self.blocked_propagation_factors.contains(&factor)
    }

    /// Every operand mapping, then every result mapping.
    pub fn mappings(&self) -> impl Iterator<Item = &TensorMapping> {
        self.operand_mappings.iter().chain(&self.result_mappings)
    }

    /// Some dimension is mapped to more than one factor.
    pub fn has_compound_dims(&self) -> bool {
        self.mappings().flatten().any(|d| d.len() > 1)
    }

    /// Checks each dimension mapping of `mappings` and marks the factors they use in `seen`.
    fn check_mapping_list(&self, mappings: &[TensorMapping], kind: &str, seen: &mut [bool]) -> Result<()> {
        let n = self.factor_sizes.len() as i64;
        for (t, mapping) in mappings.iter().enumerate() {
            let what = value_name(kind, t, mappings.len());
            let mut here = vec![false; seen.len()];
            for (d, dim) in mapping.iter().enumerate() {
                if dim.is_empty() {
                    return Err(invalid(
                        "rule-empty-dim-mapping",
                        format!("{what} dim {d}: expected at least one factor, got none"),
                    ));
                }
                for &f in dim {
                    if f < 0 || f >= n {
                        return Err(invalid(
                            "rule-factor-out-of-range",
                            format!("{what} dim {d}: expected factor indices in [0, {n}), got {f}"),
                        ));
                    }
                    let fi = f as usize;
                    if here[fi] {
                        return Err(invalid(
                            "rule-factor-reused",
                            format!("{what} dim {d}: factor {} is used twice in the same tensor", factor_symbol(f)),
                        ));
                    }
                    if dim.len() > 1 && self.factor_sizes[fi] == 1 {
                        return Err(invalid(
                            "rule-size-one-in-compound",
                            format!(
                                "{what} dim {d}: a dimension with several factors cannot have a factor of size 1, got {}=1 in {}",
                                factor_symbol(f),
                                text::print_dim_mapping(dim)
                            ),
                        ));
                    }
                    here[fi] = true;
                    seen[fi] = true;
                }
            }
        }
        Ok(())
    }

    /// The invariants that need no operand or result types (Shardy `verifyOpShardingRuleAttr`
    /// without the type checks): every dimension has a factor, indices in range, no factor twice
    /// in one tensor, no size-1 factor in a compound dimension, every factor used, special
    /// factor lists sorted, unique, in range and disjoint, no reduction factor in a result.
    pub fn check_local(&self) -> Result<()> {
        self.check_local_inner().map_err(|e| e.context(format!("invalid sharding rule {}", print_rule(self))))
    }

    fn check_local_inner(&self) -> Result<()> {
        let n = self.factor_sizes.len();
        let mut in_operands = vec![false; n];
        let mut in_results = vec![false; n];
        self.check_mapping_list(&self.operand_mappings, "operand", &mut in_operands)?;
        self.check_mapping_list(&self.result_mappings, "result", &mut in_results)?;
        if let Some(f) = (0..n).find(|&f| !in_operands[f] && !in_results[f]) {
            return Err(invalid(
                "rule-unused-factor",
                format!(
                    "factor {}={} is in no operand or result mapping; expected every factor to be used",
                    factor_symbol(f as i64),
                    self.factor_sizes[f]
                ),
            ));
        }
        let lists = [
            ("reduction", &self.reduction_factors),
            ("need_replication", &self.need_replication_factors),
            ("permutation", &self.permutation_factors),
            ("blocked_propagation", &self.blocked_propagation_factors),
        ];
        for (name, list) in lists {
            check_special(name, list, n)?;
        }
        let mut kind_of: Vec<Option<&str>> = vec![None; n];
        for (name, list) in &lists[..3] {
            for &f in list.iter() {
                if let Some(other) = kind_of[f as usize] {
                    return Err(invalid(
                        "rule-factor-in-two-kinds",
                        format!(
                            "factor {} is both {other} and {name}; expected at most one of reduction, need_replication, permutation",
                            factor_symbol(f)
                        ),
                    ));
                }
                kind_of[f as usize] = Some(name);
            }
        }
        if let Some(&f) = self.reduction_factors.iter().find(|&&f| in_results[f as usize]) {
            return Err(invalid(
                "rule-reduction-in-result",
                format!(
                    "reduction factor {} appears in a result mapping; expected it in operands only",
                    factor_symbol(f)
                ),
            ));
        }
        Ok(())
    }

    /// Checks the rule against the op it describes: [`check_local`](Self::check_local), plus
    /// (Shardy's verifier) one mapping per operand and per result, at least one of each, every
    /// value a statically shaped ranked tensor (`None` stands for a value that is no tensor,
    /// such as a token) whose rank is its mapping's rank; plus no negative factor size.
    ///
    /// With `exact_sizes`, also the product of each dimension's factor sizes must equal the
    /// dimension's size. Shardy does not check this, and its own rules break it on purpose:
    /// pad, slice, concatenate, dynamic_slice, gather, reduce_window, fft and others map
    /// dimensions of different sizes to one factor. It holds for rules built from the einsum
    /// notation, for pointwise ops, reshapes, transposes and dots.
    pub fn validate(
        &self,
        operand_shapes: &[Option<Vec<i64>>],
        result_shapes: &[Option<Vec<i64>>],
        exact_sizes: bool,
    ) -> Result<()> {
        self.check_local()?;
        self.validate_types(operand_shapes, result_shapes, exact_sizes)
            .map_err(|e| e.context(format!("invalid sharding rule {}", print_rule(self))))
    }

    fn validate_types(
        &self,
        operand_shapes: &[Option<Vec<i64>>],
        result_shapes: &[Option<Vec<i64>>],
        exact_sizes: bool,
    ) -> Result<()> {
        for (kind, shapes, mappings) in
            [("operand", operand_shapes, &self.operand_mappings), ("result", result_shapes, &self.result_mappings)]
        {
            if shapes.len() != mappings.len() {
                return Err(invalid(
                    "rule-mapping-count",
                    format!(
                        "expected one mapping per {kind}: the op has {} {kind}s, the rule has {} mappings",
                        shapes.len(),
                        mappings.len()
                    ),
                ));
            }
            if mappings.is_empty() {
                return Err(invalid(
                    "rule-no-mappings",
                    format!("an op sharding rule needs at least one {kind}; the op has none"),
                ));
            }
            for (t, (shape, mapping)) in shapes.iter().zip(mappings.iter()).enumerate() {
                let what = value_name(kind, t, shapes.len());
                let shape = match shape {
                    Some(s) if s.iter().all(|&d| d >= 0) => s,
                    Some(s) => {
                        return Err(invalid(
                            "rule-not-static-tensor",
                            format!("{what}: expected a statically shaped tensor, got dynamic shape {s:?}"),
                        ))
                    }
                    None => {
                        return Err(invalid(
                            "rule-not-static-tensor",
                            format!(
                                "{what}: expected a statically shaped tensor, got a value that is not a ranked tensor"
                            ),
                        ))
                    }
                };
                if shape.len() != mapping.len() {
                    return Err(invalid(
                        "rule-rank-mismatch",
                        format!(
                            "{what}: expected a mapping of rank {} for shape {shape:?}, got rank {} ({})",
                            shape.len(),
                            mapping.len(),
                            text::print_tensor_mapping(mapping)
                        ),
                    ));
                }
                if exact_sizes {
                    for (d, (&size, dim)) in shape.iter().zip(mapping).enumerate() {
                        let product = dim.iter().try_fold(1i64, |p, &f| p.checked_mul(self.factor_sizes[f as usize]));
                        if product != Some(size) {
                            let sizes: Vec<String> = dim
                                .iter()
                                .map(|&f| format!("{}={}", factor_symbol(f), self.factor_sizes[f as usize]))
                                .collect();
                            return Err(invalid(
                                "rule-dim-size",
                                format!(
                                    "{what} dim {d}: expected the product of its factor sizes ({}) to equal the dimension size {size}, got {}",
                                    sizes.join(" * "),
                                    product.map_or("an overflow".to_string(), |p| p.to_string())
                                ),
                            ));
                        }
                    }
                }
            }
        }
        if let Some((f, &s)) = self.factor_sizes.iter().enumerate().find(|(_, &s)| s < 0) {
            return Err(invalid(
                "rule-negative-factor-size",
                format!("factor {}: expected a size >= 0, got {s}", factor_symbol(f as i64)),
            ));
        }
        Ok(())
    }
}

fn check_special(name: &str, list: &[i64], num_factors: usize) -> Result<()> {
    let symbols =
        || list.iter().map(|&f| if f >= 0 { factor_symbol(f) } else { f.to_string() }).collect::<Vec<_>>().join(", ");
    if let Some(&f) = list.iter().find(|&&f| f < 0 || f as usize >= num_factors) {
        return Err(invalid(
            "rule-special-out-of-range",
            format!("{name} factors: expected indices in [0, {num_factors}), got {f}"),
        ));
    }
    let mut sorted = list.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(invalid(
            "rule-special-duplicate",
            format!("{name} factors: expected each factor once, got {{{}}}", symbols()),
        ));
    }
    if !list.windows(2).all(|w| w[0] < w[1]) {
        return Err(invalid(
            "rule-special-unsorted",
            format!("{name} factors: expected them sorted by index, got {{{}}}", symbols()),
        ));
    }
    Ok(())
}

impl fmt::Display for OpShardingRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_rule(self))
    }
}
