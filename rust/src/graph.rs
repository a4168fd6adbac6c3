//! The frozen program: a module's values and ops as flat arrays, which the solver reads without
//! touching Python objects. Ops are numbered in pre-order (an op before the ops nested in its
//! regions); values are numbered in the order the freezer meets them (block arguments of an
//! op's regions, then its results). Lists per op or value are compressed sparse rows.

use crate::error::{Error, Result};
use crate::rule::OpShardingRule;

/// Rows of `u32` items: row `i` is `items[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Csr {
    pub offsets: Vec<u32>,
    pub items: Vec<u32>,
}

impl Csr {
    /// Builds from row lengths and the concatenated items; errors when they disagree.
    pub fn from_lengths(lengths: &[u32], items: Vec<u32>, what: &str) -> Result<Csr> {
        let mut offsets = Vec::with_capacity(lengths.len() + 1);
        let mut total: u64 = 0;
        offsets.push(0);
        for &n in lengths {
            total += u64::from(n);
            if total > u64::from(u32::MAX) {
                return Err(Error::conversion(format!("{what}: more than 2^32 items")));
            }
            offsets.push(total as u32);
        }
        if total as usize != items.len() {
            return Err(Error::conversion(format!(
                "{what}: row lengths add up to {total}, but {} items were given",
                items.len()
            )));
        }
        Ok(Csr { offsets, items })
    }

    pub fn rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn row(&self, i: usize) -> &[u32] {
        &self.items[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// The transpose: for each of `n` targets, the rows that list it (in row order).
    pub fn transpose(&self, n: usize) -> Csr {
        let mut counts = vec![0u32; n + 1];
        for &t in &self.items {
            counts[t as usize + 1] += 1;
        }
        for i in 0..n {
            counts[i + 1] += counts[i];
        }
        let offsets = counts.clone();
        let mut fill = counts;
        let mut items = vec![0u32; self.items.len()];
        for r in 0..self.rows() {
            for &t in self.row(r) {
                items[fill[t as usize] as usize] = r as u32;
                fill[t as usize] += 1;
            }
        }
        Csr { offsets, items }
    }

    pub fn bytes(&self) -> usize {
        4 * (self.offsets.len() + self.items.len())
    }
}

/// Marks a value without a defining op (a block argument) and an op without a parent.
pub const NONE: u32 = u32::MAX;

/// The flat form of a program.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Distinct op names; `op_name[i]` indexes it.
    pub names: Vec<String>,
    pub op_name: Vec<u32>,
    /// The op whose region holds this op (`NONE` at top level).
    pub op_parent: Vec<u32>,
    pub operands: Csr,
    pub results: Csr,
    /// Per value, the ops using it (each use once per operand slot).
    pub users: Csr,
    /// Per value, its dimension sizes (-1 dynamic); `shape_offsets` has one more entry.
    pub shape_offsets: Vec<u32>,
    pub dims: Vec<i64>,
    /// Per value, the op defining it, or `NONE` for block arguments.
    pub value_def: Vec<u32>,
    /// Per value, the op owning the region whose block declares it (block arguments), or `NONE`.
    pub value_block_owner: Vec<u32>,
    /// Distinct sharding rules; `op_rule[i]` indexes it, or is `NONE` for an op without a rule.
    pub rules: Vec<OpShardingRule>,
    pub op_rule: Vec<u32>,
}

/// Everything the freezer collects, as flat lists.
#[derive(Debug, Clone, Default)]
pub struct GraphInput {
    pub names: Vec<String>,
    pub op_name: Vec<u32>,
    pub op_parent: Vec<u32>,
    pub operand_counts: Vec<u32>,
    pub operands: Vec<u32>,
    pub result_counts: Vec<u32>,
    pub results: Vec<u32>,
    pub ranks: Vec<u32>,
    pub dims: Vec<i64>,
    pub value_block_owner: Vec<u32>,
    pub rules: Vec<OpShardingRule>,
    /// Per op, an index into `rules` or `NONE`; empty when no rules were given.
    pub op_rule: Vec<u32>,
}

impl Graph {
    /// Builds and checks a graph: every index in range, each value defined once (by one op or
    /// as one block argument). Errors name the first offending op or value.
    pub fn new(g: GraphInput) -> Result<Graph> {
        let n_ops = g.op_name.len();
        let n_values = g.ranks.len();
        let bad = |m: String| Error::conversion(format!("frozen program: {m}"));
        if g.op_parent.len() != n_ops || g.operand_counts.len() != n_ops || g.result_counts.len() != n_ops {
            return Err(bad(format!("{n_ops} ops but per-op lists of other lengths")));
        }
        if g.value_block_owner.len() != n_values {
            return Err(bad(format!("{n_values} values but {} block owners", g.value_block_owner.len())));
        }
        if let Some(i) = g.op_name.iter().position(|&k| k as usize >= g.names.len()) {
            return Err(bad(format!("op {i} names entry {} of {} names", g.op_name[i], g.names.len())));
        }
        // Pre-order: a parent comes before the ops nested in it.
        if let Some(i) = (0..n_ops).find(|&i| g.op_parent[i] != NONE && g.op_parent[i] as usize >= i) {
            return Err(bad(format!("op {i} has parent {}, which is not an earlier op", g.op_parent[i])));
        }
        let operands = Csr::from_lengths(&g.operand_counts, g.operands, "operands")?;
        let results = Csr::from_lengths(&g.result_counts, g.results, "results")?;
        if let Some(&v) = operands.items.iter().chain(&results.items).find(|&&v| v as usize >= n_values) {
            return Err(bad(format!("value {v} out of range ({n_values} values)")));
        }
        let mut value_def = vec![NONE; n_values];
        for op in 0..n_ops {
            for &v in results.row(op) {
                if value_def[v as usize] != NONE || g.value_block_owner[v as usize] != NONE {
                    return Err(bad(format!("value {v} is defined twice (again by op {op})")));
                }
                value_def[v as usize] = op as u32;
            }
        }
        if let Some(v) = (0..n_values).find(|&v| value_def[v] == NONE && g.value_block_owner[v] == NONE) {
            return Err(bad(format!("value {v} is neither an op result nor a block argument")));
        }
        if let Some(v) =
            (0..n_values).find(|&v| g.value_block_owner[v] != NONE && g.value_block_owner[v] as usize >= n_ops)
        {
            return Err(bad(format!("value {v} belongs to op {} out of range", g.value_block_owner[v])));
        }
        let shape_csr = Csr::from_lengths(&g.ranks, vec![0; g.dims.len()], "shapes")?;
        let users = operands.transpose(n_values);
        let op_rule = if g.op_rule.is_empty() { vec![NONE; n_ops] } else { g.op_rule };
        if op_rule.len() != n_ops {
            return Err(bad(format!("{n_ops} ops but {} rule indices", op_rule.len())));
        }
        for (op, &k) in op_rule.iter().enumerate() {
            if k == NONE {
                continue;
            }
            let rule =
                g.rules.get(k as usize).ok_or_else(|| bad(format!("op {op} uses rule {k} of {}", g.rules.len())))?;
            let rank = |v: u32| g.ranks[v as usize] as usize;
            let fits = |mappings: &[crate::rule::TensorMapping], values: &[u32]| {
                mappings.len() == values.len() && mappings.iter().zip(values).all(|(m, &v)| m.len() == rank(v))
            };
            if !fits(&rule.operand_mappings, operands.row(op)) || !fits(&rule.result_mappings, results.row(op)) {
                return Err(bad(format!(
                    "the rule {} of op {op} ({}) does not fit its operands and results",
                    crate::rule::print_rule(rule),
                    g.names[g.op_name[op] as usize]
                )));
            }
        }
        Ok(Graph {
            names: g.names,
            op_name: g.op_name,
            op_parent: g.op_parent,
            operands,
            results,
            users,
            shape_offsets: shape_csr.offsets,
            dims: g.dims,
            value_def,
            value_block_owner: g.value_block_owner,
            rules: g.rules,
            op_rule,
        })
    }

    pub fn num_ops(&self) -> usize {
        self.op_name.len()
    }

    pub fn num_values(&self) -> usize {
        self.value_def.len()
    }

    pub fn shape(&self, v: usize) -> &[i64] {
        &self.dims[self.shape_offsets[v] as usize..self.shape_offsets[v + 1] as usize]
    }

    pub fn name(&self, op: usize) -> &str {
        &self.names[self.op_name[op] as usize]
    }

    /// The sharding rule of an op, if it has one.
    pub fn rule(&self, op: usize) -> Option<&OpShardingRule> {
        self.op_rule.get(op).filter(|&&k| k != NONE).map(|&k| &self.rules[k as usize])
    }

    /// Bytes held by the flat arrays (names excluded; each distinct rule counted once).
    pub fn bytes(&self) -> usize {
        let rule_bytes: usize = self
            .rules
            .iter()
            .map(|r| 8 * (r.factor_sizes.len() + r.mappings().flatten().map(|d| d.len() + 1).sum::<usize>()))
            .sum();
        rule_bytes
            + 4 * (self.op_name.len()
                + self.op_parent.len()
                + self.shape_offsets.len()
                + self.value_def.len()
                + self.value_block_owner.len()
                + self.op_rule.len())
            + 8 * self.dims.len()
            + self.operands.bytes()
            + self.results.bytes()
            + self.users.bytes()
    }
}
