//! The text form of rules, byte for byte as Shardy prints it (`OpShardingRuleAttr`'s assembly
//! format in `shardy/dialect/sdy/ir/attrs.td`, `printFactorSizes` / `printFactorsWithType` /
//! `printIsCustomRule` in `printers.cc`, `factorSymbolString` in `utils.cc`), and its parser
//! (the grammar of `parsers.cc`):
//!
//! ```text
//! #sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=8, j=8, k=8} reduction={j}>
//! ```
//!
//! Factor `n` is written `i`..`z` for `n` <= 17 and `z_<n-17>` after that; a compound
//! dimension concatenates its factors' symbols (`ij`, `z_1z_2`). The optional parts follow in
//! a fixed order: factor sizes, `reduction=`, `need_replication=`, `permutation=`,
//! `blocked_propagation=`, then `, custom`.

use std::fmt::Write;

use super::{DimMapping, OpShardingRule, TensorMapping};
use crate::error::{Error, Result};
use crate::lexer::Lexer;

/// Shardy's `kStartAtZ`: the factor index written `z`; larger ones are `z_1`, `z_2`, ...
const START_AT_Z: i64 = (b'z' - b'i') as i64;

/// The symbol of factor `index`: `i`, `j`, ..., `z`, `z_1`, `z_2`, ... (a negative index, only
/// found in broken rules, is written `#<index>`).
pub fn factor_symbol(index: i64) -> String {
    if index < 0 {
        format!("#{index}")
    } else if index <= START_AT_Z {
        ((b'i' + index as u8) as char).to_string()
    } else {
        format!("z_{}", index - START_AT_Z)
    }
}

/// `ij` for factors `[0, 1]`.
pub fn print_dim_mapping(dim: &DimMapping) -> String {
    dim.iter().map(|&f| factor_symbol(f)).collect()
}

/// `[i, jk]`
pub fn print_tensor_mapping(m: &TensorMapping) -> String {
    let dims: Vec<String> = m.iter().map(print_dim_mapping).collect();
    format!("[{}]", dims.join(", "))
}

fn push_factor_list(out: &mut String, name: &str, factors: &[i64]) {
    if factors.is_empty() {
        return;
    }
    let _ = write!(out, " {name}={{");
    for (i, &f) in factors.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&factor_symbol(f));
    }
    out.push('}');
}

/// The body `<(...)->(...) {...} ...>` without the `#sdy.op_sharding_rule` prefix.
pub fn print_rule_body(r: &OpShardingRule) -> String {
    let mappings = |ms: &[TensorMapping]| ms.iter().map(print_tensor_mapping).collect::<Vec<_>>().join(", ");
    let mut out = format!("<({})->({})", mappings(&r.operand_mappings), mappings(&r.result_mappings));
    if !r.factor_sizes.is_empty() {
        out.push_str(" {");
        for (i, s) in r.factor_sizes.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{}={s}", factor_symbol(i as i64));
        }
        out.push('}');
    }
    push_factor_list(&mut out, "reduction", &r.reduction_factors);
    push_factor_list(&mut out, "need_replication", &r.need_replication_factors);
    push_factor_list(&mut out, "permutation", &r.permutation_factors);
    push_factor_list(&mut out, "blocked_propagation", &r.blocked_propagation_factors);
    if r.is_custom {
        out.push_str(", custom");
    }
    out.push('>');
    out
}

/// `#sdy.op_sharding_rule<([i, j])->([j, i]) {i=4, j=2}>`, as Shardy prints it.
pub fn print_rule(r: &OpShardingRule) -> String {
    format!("#sdy.op_sharding_rule{}", print_rule_body(r))
}

impl Lexer<'_> {
    /// The factor symbols of one keyword (`ij`, `z_1k`), in order.
    fn symbols(&self, start: usize, word: &str) -> Result<Vec<i64>> {
        let bytes = word.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let at = start + i;
            if bytes[i..].starts_with(b"z_") {
                let digits = bytes[i + 2..].iter().take_while(|b| b.is_ascii_digit()).count();
                let num = &word[i + 2..i + 2 + digits];
                if digits == 0 {
                    return Err(Error::parse(
                        at,
                        format!("expected a number after 'z_' at offset {at} of {:?}, got {word:?}", self.src),
                    ));
                }
                if num.starts_with('0') {
                    return Err(Error::parse(
                        at,
                        format!("expected a factor number without leading zeros after 'z_' at offset {at} of {:?}, got 'z_{num}'", self.src),
                    ));
                }
                let n: i64 =
                    num.parse().ok().filter(|n: &i64| n.checked_add(START_AT_Z).is_some()).ok_or_else(|| {
                        Error::parse(at, format!("factor number z_{num} at offset {at} of {:?} is too large", self.src))
                    })?;
                out.push(n + START_AT_Z);
                i += 2 + digits;
            } else {
                let c = bytes[i];
                if !(b'i'..=b'z').contains(&c) {
                    return Err(Error::parse(
                        at,
                        format!(
                            "expected a factor symbol 'i'..'z' or 'z_<n>' at offset {at} of {:?}, got '{}'",
                            self.src, c as char
                        ),
                    ));
                }
                out.push(i64::from(c - b'i'));
                i += 1;
            }
        }
        Ok(out)
    }

    /// A single factor symbol (one keyword naming exactly one factor).
    fn factor_symbol(&mut self) -> Result<i64> {
        let Some((start, word)) = self.bare_id() else {
            return self.err("a factor symbol");
        };
        let syms = self.symbols(start, word)?;
        if syms.len() != 1 {
            return Err(Error::parse(
                start,
                format!("expected a single factor symbol at offset {start} of {:?}, got {word:?}", self.src),
            ));
        }
        Ok(syms[0])
    }

    fn dim_mapping(&mut self) -> Result<DimMapping> {
        let Some((start, word)) = self.bare_id() else {
            return self.err("a dimension mapping such as 'i' or 'ij'");
        };
        self.symbols(start, word)
    }

    fn tensor_mapping(&mut self) -> Result<TensorMapping> {
        self.expect("[")?;
        self.list("]", Self::dim_mapping)
    }

    fn mappings(&mut self) -> Result<Vec<TensorMapping>> {
        self.expect("(")?;
        self.list(")", Self::tensor_mapping)
    }

    fn factor_sizes(&mut self) -> Result<Vec<i64>> {
        let mut sizes = Vec::new();
        if !self.eat("{") {
            return Ok(sizes);
        }
        self.list("}", |p| {
            let at = {
                p.skip_ws();
                p.pos
            };
            let f = p.factor_symbol()?;
            let expected = sizes.len() as i64;
            if f != expected {
                return Err(Error::parse(
                    at,
                    format!(
                        "expected factor sizes in index order starting at 'i' (next '{}') at offset {at} of {:?}, got '{}'",
                        factor_symbol(expected),
                        p.src,
                        factor_symbol(f)
                    ),
                ));
            }
            p.expect("=")?;
            sizes.push(p.int()?);
            Ok(())
        })?;
        Ok(sizes)
    }

    fn special(&mut self, name: &str) -> Result<Vec<i64>> {
        if !self.eat_keyword(name) {
            return Ok(Vec::new());
        }
        self.expect("=")?;
        self.expect("{")?;
        self.list("}", Self::factor_symbol)
    }
}

/// Parses `#sdy.op_sharding_rule<...>` or the bare `<...>` and checks the invariants that need
/// no types ([`OpShardingRule::check_local`]). Errors: parse errors (with the byte offset) for
/// malformed text, invariant errors for a well-formed but invalid rule.
pub fn parse_rule(text: &str) -> Result<OpShardingRule> {
    let mut p = Lexer::new(text);
    let _ = p.eat("#sdy.op_sharding_rule");
    p.expect("<")?;
    let operand_mappings = p.mappings()?;
    p.expect("->")?;
    let result_mappings = p.mappings()?;
    let factor_sizes = p.factor_sizes()?;
    let reduction_factors = p.special("reduction")?;
    let need_replication_factors = p.special("need_replication")?;
    let permutation_factors = p.special("permutation")?;
    let blocked_propagation_factors = p.special("blocked_propagation")?;
    let mut is_custom = false;
    if p.eat(",") {
        if !p.eat_keyword("custom") {
            return p.err("'custom'");
        }
        is_custom = true;
    }
    p.expect(">")?;
    p.skip_ws();
    if p.pos != text.len() {
        return p.err("end of input");
    }
    let rule = OpShardingRule {
        factor_sizes,
        operand_mappings,
        result_mappings,
        reduction_factors,
        need_replication_factors,
        permutation_factors,
        blocked_propagation_factors,
        is_custom,
    };
    rule.check_local()?;
    Ok(rule)
}
