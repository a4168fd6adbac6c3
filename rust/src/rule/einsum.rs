//! Users' rules in the einsum-like notation of JAX's custom partitioning
//! (`jax._src.custom_partitioning_sharding_rule`: `str_to_sdy_sharding_rule`,
//! `SdyShardingRule` and `sdy_sharding_rule_to_mlir`), for example `"i j, j k -> i k"`.
//!
//! The notation:
//!
//! * operands and results are separated by `->`, values by `,`, dimensions by spaces; an empty
//!   side is one scalar value;
//! * a factor name starts with a letter and continues with letters, digits and `_`;
//! * `(a b)` is a compound dimension (at least two factors, one level deep, major to minor);
//! * a leading `...` (optionally numbered, `...1`) stands for any number of leading batching
//!   dimensions, the same number and sizes wherever the same group appears;
//! * factor kinds are given by name (reduction, need_replication, permutation; blocked
//!   propagation is an extension of this crate); a factor that only appears inside compound
//!   dimensions needs an explicit size, a factor that spans a whole dimension must not have
//!   one.
//!
//! Factors are numbered in order of first appearance (operands, then results; batching
//! dimensions first within a value). A factor spanning dimensions of different sizes takes
//! the smallest. The rule is marked custom (printed `, custom`), like JAX's. Special factor
//! lists are sorted by index (JAX keeps the order given, which Shardy's verifier rejects
//! unless it is sorted).
//!
//! Errors: malformed notation is a parse error (with the byte offset); anything else an
//! invariant error with a rule starting `einsum-`: `einsum-unused-size`, `einsum-missing-size`,
//! `einsum-inferable-size`, `einsum-special-duplicate`, `einsum-special-unknown`,
//! `einsum-factor-in-two-kinds`, `einsum-value-count`, `einsum-rank-mismatch`,
//! `einsum-ellipsis-rank`, `einsum-batching-size`, `einsum-compound-size`; the finished
//! rule must then pass [`OpShardingRule::validate`].

use std::collections::HashMap;

use super::OpShardingRule;
use crate::error::{Error, Result};

/// One dimension of a value in the notation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EinsumDim {
    Factor(String),
    /// Two or more factors, major to minor.
    Compound(Vec<String>),
}

/// The dimensions of one operand or result; `batching` is the group of a leading `...`
/// (`"0"` for a bare `...`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct EinsumValue {
    pub batching: Option<String>,
    pub dims: Vec<EinsumDim>,
}

/// Factor kinds and sizes given with the notation, by factor name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EinsumOptions {
    pub reduction_factors: Vec<String>,
    pub need_replication_factors: Vec<String>,
    pub permutation_factors: Vec<String>,
    pub blocked_propagation_factors: Vec<String>,
    /// Sizes of the factors that only appear inside compound dimensions.
    pub factor_sizes: Vec<(String, i64)>,
}

/// A parsed and checked rule in the notation, to be bound to an op's shapes with
/// [`EinsumSpec::build`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EinsumSpec {
    pub operands: Vec<EinsumValue>,
    pub results: Vec<EinsumValue>,
    pub options: EinsumOptions,
}

fn invalid(rule: &'static str, msg: String) -> Error {
    Error::invariant(rule, msg)
}

fn is_factor_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Parses one side of `->` starting at byte `base` of `full`.
fn parse_side(full: &str, base: usize, side: &str) -> Result<Vec<EinsumValue>> {
    let perr = |at: usize, msg: String| Error::parse(base + at, format!("{msg} at offset {} of {full:?}", base + at));
    if side.trim().is_empty() {
        return Ok(vec![EinsumValue::default()]);
    }
    let mut values = Vec::new();
    let mut value = EinsumValue::default();
    let mut factor: Option<String> = None;
    let mut compound: Option<Vec<String>> = None;
    let chars: Vec<(usize, char)> = side.char_indices().collect();
    let mut k = 0;
    let finish_factor = |factor: &mut Option<String>, compound: &mut Option<Vec<String>>, value: &mut EinsumValue| {
        if let Some(f) = factor.take() {
            match compound {
                Some(c) => c.push(f),
                None => value.dims.push(EinsumDim::Factor(f)),
            }
        }
    };
    while k < chars.len() {
        let (at, c) = chars[k];
        k += 1;
        if c == '.' {
            if !side[at..].starts_with("...") {
                return Err(perr(at, "expected '...' (a '.' may only appear in an ellipsis)".into()));
            }
            if factor.is_some() || compound.is_some() || value.batching.is_some() || !value.dims.is_empty() {
                return Err(perr(at, "expected '...' only at the start of a value".into()));
            }
            k += 2;
            let mut digits = String::new();
            while k < chars.len() && chars[k].1.is_ascii_digit() {
                digits.push(chars[k].1);
                k += 1;
            }
            let group = if digits.is_empty() { "0".to_string() } else { digits.trim_start_matches('0').to_string() };
            value.batching = Some(if group.is_empty() { "0".to_string() } else { group });
            continue;
        }
        match c {
            c if matches!(c, '(' | ')' | ',') || c.is_whitespace() => {
                finish_factor(&mut factor, &mut compound, &mut value);
                match c {
                    '(' => {
                        if compound.is_some() {
                            return Err(perr(at, "expected one level of brackets, got nested '('".into()));
                        }
                        compound = Some(Vec::new());
                    }
                    ')' => match compound.take() {
                        None => return Err(perr(at, "expected '(' before ')'".into())),
                        Some(c) if c.len() < 2 => {
                            return Err(perr(at, format!("expected at least two factors in brackets, got {}", c.len())))
                        }
                        Some(c) => value.dims.push(EinsumDim::Compound(c)),
                    },
                    ',' => {
                        if compound.is_some() {
                            return Err(perr(at, "expected ')' before ','".into()));
                        }
                        values.push(std::mem::take(&mut value));
                    }
                    _ => {}
                }
            }
            c if is_factor_char(c) => match &mut factor {
                Some(f) => f.push(c),
                None => {
                    if !c.is_alphabetic() {
                        return Err(perr(at, format!("expected a factor name to start with a letter, got '{c}'")));
                    }
                    factor = Some(c.to_string());
                }
            },
            c => return Err(perr(at, format!("expected a factor name, '(', ')', ',', '...' or a space, got '{c}'"))),
        }
    }
    if compound.is_some() {
        return Err(perr(side.len(), "expected ')' to close the bracket".into()));
    }
    finish_factor(&mut factor, &mut compound, &mut value);
    values.push(value);
    Ok(values)
}

/// Name of the internal factor of batching dimension `j` of group `g` (not a valid user name).
fn batching_name(group: &str, j: usize) -> String {
    format!("...{group}_{j}")
}

impl EinsumSpec {
    /// Parses the notation and checks the factor names given in `options` against it.
    pub fn parse(rule: &str, options: EinsumOptions) -> Result<EinsumSpec> {
        let Some(arrow) = rule.find("->") else {
            return Err(Error::parse(rule.len(), format!("expected '->' between operands and results in {rule:?}")));
        };
        if let Some(second) = rule[arrow + 2..].find("->") {
            let at = arrow + 2 + second;
            return Err(Error::parse(at, format!("expected a single '->' in {rule:?}, got another at offset {at}")));
        }
        let operands = parse_side(rule, 0, &rule[..arrow])?;
        let results = parse_side(rule, arrow + 2, &rule[arrow + 2..])?;
        let spec = EinsumSpec { operands, results, options };
        spec.check_names()?;
        Ok(spec)
    }

    /// Every factor name, in order of first appearance, with whether it spans a whole
    /// dimension somewhere (so that its size can be inferred).
    fn factor_names(&self) -> Vec<(String, bool)> {
        let mut out: Vec<(String, bool)> = Vec::new();
        for v in self.operands.iter().chain(&self.results) {
            for d in &v.dims {
                match d {
                    EinsumDim::Factor(f) => match out.iter_mut().find(|(n, _)| n == f) {
                        Some(e) => e.1 = true,
                        None => out.push((f.clone(), true)),
                    },
                    EinsumDim::Compound(fs) => {
                        for f in fs {
                            if !out.iter().any(|(n, _)| n == f) {
                                out.push((f.clone(), false));
                            }
                        }
                    }
                }
            }
        }
        out
    }

    fn check_names(&self) -> Result<()> {
        let names = self.factor_names();
        let o = &self.options;
        for (f, _) in &o.factor_sizes {
            if !names.iter().any(|(n, _)| n == f) {
                return Err(invalid(
                    "einsum-unused-size",
                    format!("a size is given for factor {f:?}, which the rule does not use"),
                ));
            }
        }
        for (n, inferable) in &names {
            let given = o.factor_sizes.iter().any(|(f, _)| f == n);
            if !inferable && !given {
                return Err(invalid(
                    "einsum-missing-size",
                    format!("factor {n:?} only appears in compound dimensions; expected its size in factor_sizes"),
                ));
            }
            if *inferable && given {
                return Err(invalid(
                    "einsum-inferable-size",
                    format!("factor {n:?} spans a whole dimension, so its size comes from the shape; expected no size for it"),
                ));
            }
        }
        let mut kind_of: HashMap<&str, &str> = HashMap::new();
        let lists = [
            ("reduction_factors", &o.reduction_factors),
            ("need_replication_factors", &o.need_replication_factors),
            ("permutation_factors", &o.permutation_factors),
            ("blocked_propagation_factors", &o.blocked_propagation_factors),
        ];
        for (kind, list) in lists {
            for (i, f) in list.iter().enumerate() {
                if list[..i].contains(f) {
                    return Err(invalid("einsum-special-duplicate", format!("{kind} names factor {f:?} twice")));
                }
                if !names.iter().any(|(n, _)| n == f) {
                    return Err(invalid(
                        "einsum-special-unknown",
                        format!("{kind} names factor {f:?}, which the rule does not use"),
                    ));
                }
                if kind != "blocked_propagation_factors" {
                    if let Some(other) = kind_of.insert(f, kind) {
                        return Err(invalid(
                            "einsum-factor-in-two-kinds",
                            format!("factor {f:?} is in both {other} and {kind}; expected at most one kind"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Binds the rule to an op with these operand and result shapes (JAX
    /// `sdy_sharding_rule_to_mlir`) and validates the result.
    pub fn build(&self, operand_shapes: &[Vec<i64>], result_shapes: &[Vec<i64>]) -> Result<OpShardingRule> {
        for (kind, values, shapes) in
            [("operand", &self.operands, operand_shapes), ("result", &self.results, result_shapes)]
        {
            if values.len() != shapes.len() {
                return Err(invalid(
                    "einsum-value-count",
                    format!("the rule has {} {kind}s, the op has {} {kind}s", values.len(), shapes.len()),
                ));
            }
        }
        let values: Vec<(&EinsumValue, &Vec<i64>, String)> = self
            .operands
            .iter()
            .zip(operand_shapes)
            .enumerate()
            .map(|(i, (v, s))| (v, s, format!("operand {i}")))
            .chain(self.results.iter().zip(result_shapes).enumerate().map(|(i, (v, s))| (v, s, format!("result {i}"))))
            .collect();

        // Factor name -> (index, size or None while unknown), in order of first appearance.
        let mut factors: Vec<(String, Option<i64>)> = Vec::new();
        let given: HashMap<&str, i64> = self.options.factor_sizes.iter().map(|(f, s)| (f.as_str(), *s)).collect();
        let mut add = |name: &str, size: Option<i64>, batching: bool| -> Result<()> {
            match factors.iter_mut().find(|(n, _)| n == name) {
                None => factors.push((name.to_string(), size)),
                Some((_, known)) => match (*known, size) {
                    (Some(k), Some(s)) if k != s => {
                        if batching {
                            return Err(invalid(
                                "einsum-batching-size",
                                format!("batching dimension {} has two sizes: {k} and {s}", &name[3..]),
                            ));
                        }
                        *known = Some(k.min(s));
                    }
                    (None, Some(s)) => *known = Some(s),
                    _ => {}
                },
            }
            Ok(())
        };
        let mut batching_rank: HashMap<&str, usize> = HashMap::new();
        for (v, shape, what) in &values {
            let rule_rank = v.dims.len();
            let op_rank = shape.len();
            let mut brank = 0;
            if let Some(g) = &v.batching {
                let here = op_rank.saturating_sub(rule_rank);
                match batching_rank.get(g.as_str()) {
                    None => {
                        batching_rank.insert(g, here);
                    }
                    Some(&r) if r != here => {
                        return Err(invalid(
                            "einsum-ellipsis-rank",
                            format!(
                                "'...{}' stands for {r} leading dimensions elsewhere but for {here} in {what}",
                                if g == "0" { "" } else { g }
                            ),
                        ))
                    }
                    _ => {}
                }
                brank = here;
            }
            if rule_rank + brank != op_rank {
                return Err(invalid(
                    "einsum-rank-mismatch",
                    format!(
                        "{what} has rank {op_rank} (shape {shape:?}), the rule gives it rank {}",
                        rule_rank + brank
                    ),
                ));
            }
            if let Some(g) = &v.batching {
                for (j, &size) in shape.iter().enumerate().take(brank) {
                    add(&batching_name(g, j), Some(size), true)?;
                }
            }
            for (j, d) in v.dims.iter().enumerate() {
                match d {
                    EinsumDim::Factor(f) => add(f, Some(shape[j + brank]), false)?,
                    EinsumDim::Compound(fs) => {
                        for f in fs {
                            add(f, given.get(f.as_str()).copied(), false)?;
                        }
                    }
                }
            }
        }
        let index = |name: &str| factors.iter().position(|(n, _)| n == name).expect("every factor was added") as i64;
        let size_of = |name: &str| factors.iter().find(|(n, _)| n == name).and_then(|(_, s)| *s).unwrap_or(1);
        let mut mappings = Vec::with_capacity(values.len());
        for (v, shape, what) in &values {
            let brank = v.batching.as_ref().map_or(0, |g| batching_rank[g.as_str()]);
            let mut m: Vec<Vec<i64>> = Vec::with_capacity(shape.len());
            if let Some(g) = &v.batching {
                m.extend((0..brank).map(|j| vec![index(&batching_name(g, j))]));
            }
            for (j, d) in v.dims.iter().enumerate() {
                match d {
                    EinsumDim::Factor(f) => m.push(vec![index(f)]),
                    EinsumDim::Compound(fs) => {
                        let product = fs.iter().try_fold(1i64, |p, f| p.checked_mul(size_of(f)));
                        let dim_size = shape[j + brank];
                        if product != Some(dim_size) {
                            let parts: Vec<String> = fs.iter().map(|f| format!("{f}={}", size_of(f))).collect();
                            return Err(invalid(
                                "einsum-compound-size",
                                format!(
                                    "{what} dim {}: expected the compound factors ({}) to multiply to the dimension size {dim_size}, got {}",
                                    j + brank,
                                    parts.join(" * "),
                                    product.map_or("an overflow".to_string(), |p| p.to_string())
                                ),
                            ));
                        }
                        m.push(fs.iter().map(|f| index(f)).collect());
                    }
                }
            }
            mappings.push(m);
        }
        let result_mappings = mappings.split_off(self.operands.len());
        let sorted = |names: &[String]| {
            let mut v: Vec<i64> = names.iter().map(|n| index(n)).collect();
            v.sort_unstable();
            v
        };
        let o = &self.options;
        let rule = OpShardingRule {
            factor_sizes: factors.iter().map(|(_, s)| s.unwrap_or(1)).collect(),
            operand_mappings: mappings,
            result_mappings,
            reduction_factors: sorted(&o.reduction_factors),
            need_replication_factors: sorted(&o.need_replication_factors),
            permutation_factors: sorted(&o.permutation_factors),
            blocked_propagation_factors: sorted(&o.blocked_propagation_factors),
            is_custom: true,
        };
        let to_opt = |shapes: &[Vec<i64>]| shapes.iter().cloned().map(Some).collect::<Vec<_>>();
        rule.validate(&to_opt(operand_shapes), &to_opt(result_shapes), false)?;
        Ok(rule)
    }
}

/// Parses `rule` with `options` and binds it to the shapes: [`EinsumSpec::parse`] then
/// [`EinsumSpec::build`].
pub fn rule_from_einsum(
    rule: &str,
    options: EinsumOptions,
    operand_shapes: &[Vec<i64>],
    result_shapes: &[Vec<i64>],
) -> Result<OpShardingRule> {
    EinsumSpec::parse(rule, options)?.build(operand_shapes, result_shapes)
}
