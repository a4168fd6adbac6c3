//! Incremental construction of rules, with the semantics of Shardy's `OpShardingRuleBuilder`
//! (`shardy/dialect/sdy/transforms/propagation/op_sharding_rule_builder.{h,cc}`):
//!
//! * a factor added with explicit dimensions ([`RuleBuilder::add_factor`]) skips tensors whose
//!   dimension is [`NULL_DIM`], and a size-1 factor is not appended to a dimension that already
//!   has a factor;
//! * a factor added for one dimension of all tensors ([`RuleBuilder::add_factor_for_all`] and
//!   the operand/result variants) skips rank-0 tensors (scalars, tokens) and is always appended;
//! * [`RuleBuilder::build`] gives each dimension that got no factor a new factor of size 1,
//!   operands first, then results, in dimension order.
//!
//! Bad arguments (a dimension list of the wrong length, a dimension out of range) are errors
//! with rule `builder-dim-count` or `builder-dim-out-of-range`, never panics.

use super::{FactorKind, OpShardingRule, TensorMapping, NULL_DIM};
use crate::error::{Error, Result};

/// A rule under construction for an op whose operands and results have the given ranks
/// (values that are not tensors, such as tokens, have rank 0).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuleBuilder {
    factor_sizes: Vec<i64>,
    operands: Vec<TensorMapping>,
    results: Vec<TensorMapping>,
    reduction: Vec<i64>,
    need_replication: Vec<i64>,
    permutation: Vec<i64>,
    blocked: Vec<i64>,
}

fn dim_error(rule: &'static str, msg: String) -> Error {
    Error::invariant(rule, msg)
}

/// Checks that `dims` has one entry per tensor, each [`NULL_DIM`] or a dimension of it.
fn check_dims(kind: &str, dims: &[i64], mappings: &[TensorMapping]) -> Result<()> {
    if dims.len() != mappings.len() {
        return Err(dim_error(
            "builder-dim-count",
            format!("expected one {kind} dimension per {kind} ({}), got {} ({dims:?})", mappings.len(), dims.len()),
        ));
    }
    for (t, (&d, m)) in dims.iter().zip(mappings).enumerate() {
        if d != NULL_DIM && (d < 0 || d as usize >= m.len()) {
            return Err(dim_error(
                "builder-dim-out-of-range",
                format!("{kind} {t} has rank {}: expected a dimension in [0, {}) or -1, got {d}", m.len(), m.len()),
            ));
        }
    }
    Ok(())
}

/// Checks that `dim` is a dimension of every tensor of rank >= 1 in `mappings`.
fn check_dim_all(kind: &str, dim: i64, mappings: &[TensorMapping]) -> Result<()> {
    for (t, m) in mappings.iter().enumerate() {
        if !m.is_empty() && (dim < 0 || dim as usize >= m.len()) {
            return Err(dim_error(
                "builder-dim-out-of-range",
                format!("{kind} {t} has rank {}: expected dimension {dim} to be in [0, {})", m.len(), m.len()),
            ));
        }
    }
    Ok(())
}

fn map_dims(mappings: &mut [TensorMapping], dims: &[i64], factor: i64, size: i64) {
    for (m, &d) in mappings.iter_mut().zip(dims) {
        if d == NULL_DIM {
            continue;
        }
        let factors = &mut m[d as usize];
        if size == 1 && !factors.is_empty() {
            continue;
        }
        factors.push(factor);
    }
}

fn map_dim_all(mappings: &mut [TensorMapping], dim: i64, factor: i64) {
    for m in mappings.iter_mut().filter(|m| !m.is_empty()) {
        m[dim as usize].push(factor);
    }
}

impl RuleBuilder {
    pub fn new(operand_ranks: &[usize], result_ranks: &[usize]) -> RuleBuilder {
        RuleBuilder {
            operands: operand_ranks.iter().map(|&r| vec![Vec::new(); r]).collect(),
            results: result_ranks.iter().map(|&r| vec![Vec::new(); r]).collect(),
            ..RuleBuilder::default()
        }
    }

    pub fn num_factors(&self) -> usize {
        self.factor_sizes.len()
    }

    fn reserve(&mut self, size: i64, kind: FactorKind, blocked: bool) -> i64 {
        let f = self.factor_sizes.len() as i64;
        self.factor_sizes.push(size);
        if blocked {
            self.blocked.push(f);
        }
        match kind {
            FactorKind::PassThrough => {}
            FactorKind::Reduction => self.reduction.push(f),
            FactorKind::NeedReplication => self.need_replication.push(f),
            FactorKind::Permutation => self.permutation.push(f),
        }
        f
    }

    /// Adds a factor of `size` and `kind` mapped to dimension `operand_dims[i]` of operand `i`
    /// and `result_dims[j]` of result `j` ([`NULL_DIM`] skips a tensor). Shardy `addFactor`.
    pub fn add_factor(
        &mut self,
        operand_dims: &[i64],
        result_dims: &[i64],
        size: i64,
        kind: FactorKind,
        blocked: bool,
    ) -> Result<&mut Self> {
        check_dims("operand", operand_dims, &self.operands)?;
        check_dims("result", result_dims, &self.results)?;
        let f = self.reserve(size, kind, blocked);
        map_dims(&mut self.operands, operand_dims, f, size);
        map_dims(&mut self.results, result_dims, f, size);
        Ok(self)
    }

    /// Adds a factor mapped to dimension `dim` of every operand of rank >= 1. Shardy
    /// `addFactorSameForAllOperands`.
    pub fn add_factor_for_all_operands(
        &mut self,
        dim: i64,
        size: i64,
        kind: FactorKind,
        blocked: bool,
    ) -> Result<&mut Self> {
        check_dim_all("operand", dim, &self.operands)?;
        let f = self.reserve(size, kind, blocked);
        map_dim_all(&mut self.operands, dim, f);
        Ok(self)
    }

    /// Adds a factor mapped to dimension `dim` of every result of rank >= 1. Shardy
    /// `addFactorSameForAllResults`.
    pub fn add_factor_for_all_results(
        &mut self,
        dim: i64,
        size: i64,
        kind: FactorKind,
        blocked: bool,
    ) -> Result<&mut Self> {
        check_dim_all("result", dim, &self.results)?;
        let f = self.reserve(size, kind, blocked);
        map_dim_all(&mut self.results, dim, f);
        Ok(self)
    }

    /// Adds a factor mapped to dimension `dim` of every operand and result of rank >= 1.
    /// Shardy's `addFactor(dim, size, ...)`.
    pub fn add_factor_for_all(&mut self, dim: i64, size: i64, kind: FactorKind, blocked: bool) -> Result<&mut Self> {
        check_dim_all("operand", dim, &self.operands)?;
        check_dim_all("result", dim, &self.results)?;
        let f = self.reserve(size, kind, blocked);
        map_dim_all(&mut self.operands, dim, f);
        map_dim_all(&mut self.results, dim, f);
        Ok(self)
    }

    /// One [`add_factor_for_all`](Self::add_factor_for_all) per dimension of `shape`, of kind
    /// `kind(dim)`, blocked when `blocked(kind)`. Shardy `addPointwise`.
    pub fn add_pointwise(
        &mut self,
        shape: &[i64],
        kind: impl Fn(usize) -> FactorKind,
        blocked: impl Fn(FactorKind) -> bool,
    ) -> Result<&mut Self> {
        for (d, &size) in shape.iter().enumerate() {
            let k = kind(d);
            self.add_factor_for_all(d as i64, size, k, blocked(k))?;
        }
        Ok(self)
    }

    /// Like [`add_pointwise`](Self::add_pointwise), for the dimensions where `pred(dim)`
    /// holds, never blocked. Shardy `addPointwiseIf`.
    pub fn add_pointwise_if(
        &mut self,
        shape: &[i64],
        pred: impl Fn(usize) -> bool,
        kind: impl Fn(usize) -> FactorKind,
    ) -> Result<&mut Self> {
        for (d, &size) in shape.iter().enumerate() {
            if pred(d) {
                self.add_factor_for_all(d as i64, size, kind(d), false)?;
            }
        }
        Ok(self)
    }

    /// A pointwise factor per dimension, sized by `in_shape`; dimensions whose sizes differ
    /// between `in_shape` and `out_shape` get `mismatch_kind` and are blocked when
    /// `mismatch_blocked`. Shardy `addPointwiseWithDiffTypeForMismatch`.
    pub fn add_pointwise_with_diff_type_for_mismatch(
        &mut self,
        in_shape: &[i64],
        out_shape: &[i64],
        mismatch_kind: FactorKind,
        mismatch_blocked: bool,
    ) -> Result<&mut Self> {
        if in_shape.len() != out_shape.len() {
            return Err(dim_error(
                "builder-dim-count",
                format!("expected shapes of equal rank, got {in_shape:?} and {out_shape:?}"),
            ));
        }
        for (d, (&i, &o)) in in_shape.iter().zip(out_shape).enumerate() {
            if i == o {
                self.add_factor_for_all(d as i64, i, FactorKind::PassThrough, false)?;
            } else {
                self.add_factor_for_all(d as i64, i, mismatch_kind, mismatch_blocked)?;
            }
        }
        Ok(self)
    }

    /// The rule built so far; every dimension without a factor gets a new size-1 factor
    /// (operands first). The builder is left unchanged. Shardy `build`.
    pub fn build(&self) -> OpShardingRule {
        let mut factor_sizes = self.factor_sizes.clone();
        let mut fill = |mappings: &[TensorMapping]| -> Vec<TensorMapping> {
            mappings
                .iter()
                .map(|m| {
                    m.iter()
                        .map(|d| {
                            if d.is_empty() {
                                factor_sizes.push(1);
                                vec![factor_sizes.len() as i64 - 1]
                            } else {
                                d.clone()
                            }
                        })
                        .collect()
                })
                .collect()
        };
        let operand_mappings = fill(&self.operands);
        let result_mappings = fill(&self.results);
        OpShardingRule {
            factor_sizes,
            operand_mappings,
            result_mappings,
            reduction_factors: self.reduction.clone(),
            need_replication_factors: self.need_replication.clone(),
            permutation_factors: self.permutation.clone(),
            blocked_propagation_factors: self.blocked.clone(),
            is_custom: false,
        }
    }

    /// The rule of a pointwise op (Shardy `buildPointwise`): factor `d` has size `shape[d]`
    /// and is dimension `d` of every operand and result. `shape` is the first result's shape;
    /// every tensor's rank must be at most its length.
    pub fn pointwise(operand_ranks: &[usize], result_ranks: &[usize], shape: &[i64]) -> Result<OpShardingRule> {
        let mut b = RuleBuilder::new(operand_ranks, result_ranks);
        for (kind, ranks) in [("operand", operand_ranks), ("result", result_ranks)] {
            if let Some((t, &r)) = ranks.iter().enumerate().find(|(_, &r)| r > shape.len()) {
                return Err(dim_error(
                    "builder-dim-out-of-range",
                    format!(
                        "pointwise rule of shape {shape:?}: expected {kind} {t} to have rank <= {}, got {r}",
                        shape.len()
                    ),
                ));
            }
        }
        b.factor_sizes = shape.to_vec();
        for m in b.operands.iter_mut().chain(b.results.iter_mut()) {
            for (d, dim) in m.iter_mut().enumerate() {
                dim.push(d as i64);
            }
        }
        Ok(b.build())
    }

    /// `num_operands` operands and `num_results` results of one shape, mapped identically
    /// (Shardy `createIdentityShardingRule`).
    pub fn identity(shape: &[i64], num_operands: usize, num_results: usize) -> OpShardingRule {
        let mut b = RuleBuilder::new(&vec![shape.len(); num_operands], &vec![shape.len(); num_results]);
        for (d, &size) in shape.iter().enumerate() {
            let f = b.reserve(size, FactorKind::PassThrough, false);
            map_dim_all(&mut b.operands, d as i64, f);
            map_dim_all(&mut b.results, d as i64, f);
        }
        b.build()
    }
}
