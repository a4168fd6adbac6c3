//! `sdy-apply-sharding-constraints` (Shardy `transforms/import/apply_sharding_constraints.cc`),
//! with its default options (no debug origins or edges): the input of each
//! `sdy.sharding_constraint`, and each operand of a manual computation, gets the constraint's
//! sharding when it has none, the sharding is fully closed and no other constraint on it
//! disagrees; an input that is a data-flow edge target instead has all its uses go through the
//! constraint (moved right after it). A chain of constraints also takes over the later uses of
//! the chain's input in its block. With `debug-sharding-origins` or
//! `debug-propagation-edge-sharding` it records, as Shardy's `SourceShardingHandler` does,
//! where each axis of each user sharding came from and the step of each constraint applied
//! ([`crate::transforms::propagation::source_sharding`]).

use crate::error::Result;
use crate::fast_hash::FastMap;
use crate::ir::clone::Uses;
use crate::ir::values::{result_sharding, ValueIndex};
use crate::ir::Program;
use crate::propagation::{DebugOptions, ShardingDebug};
use crate::rule::print_rule;
use crate::rules::{builtin_rule, Builtin, OpDesc, CONTEXT_OPS};
use crate::sharding::TensorSharding;
use crate::text::{parse_sharding_per_value, print_sharding};
use crate::transforms::common::post_order_of;
use crate::transforms::propagation::freeze::{user_rule, UserRule};
use crate::transforms::propagation::source_sharding::{self, Handler};
use crate::transforms::PassContext;

const SHARDING_CONSTRAINT: &str = "sdy.sharding_constraint";
const MANUAL_COMPUTATION: &str = "sdy.manual_computation";
const DATA_FLOW_EDGE: &str = "sdy.data_flow_edge";

struct Apply {
    uses: Uses,
    values: ValueIndex,
    /// Each op's block, kept up to date as constraints move and are added.
    parent: FastMap<u32, u32>,
    /// The debugging records, with a debugging option.
    debug: Option<ShardingDebug>,
}

/// How a constraint gets to sit right after the value it constrains.
enum After {
    /// Move this constraint there.
    Move(u32),
    /// Create a constraint with this sharding there (for a manual computation's operand).
    New(TensorSharding, u32),
}

impl Apply {
    fn in_shardings(p: &Program, op: u32) -> Result<Option<Vec<TensorSharding>>> {
        p.attr(op, "in_shardings")
            .map(|t| parse_sharding_per_value(t).map_err(|e| e.context(p.op_where(op))))
            .transpose()
    }

    fn used_by_constraint_with_different_sharding(&self, p: &Program, value: u32, s: &TensorSharding) -> Result<bool> {
        for (user, index) in self.uses.of(value).collect::<Vec<_>>() {
            let name = p.op_name(user);
            if name == SHARDING_CONSTRAINT && result_sharding(p, user, 0)?.as_ref() != Some(s) {
                return Ok(true);
            }
            if name == MANUAL_COMPUTATION {
                if let Some(ins) = Self::in_shardings(p, user)? {
                    if ins.get(index as usize) != Some(s) {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }

    fn used_by_constraint(&self, p: &Program, value: u32, excluded: Option<u32>) -> bool {
        self.uses
            .users(value)
            .into_iter()
            .any(|u| Some(u) != excluded && matches!(p.op_name(u), SHARDING_CONSTRAINT | MANUAL_COMPUTATION))
    }

    fn should_apply(&mut self, p: &Program, value: u32, s: &TensorSharding) -> Result<bool> {
        if self.values.shardable_value(p, &self.uses, value).is_none() {
            return Ok(false);
        }
        if self.values.get_sharding(p, &self.uses, value)?.is_some() {
            return Ok(false);
        }
        if !s.dims.iter().all(|d| d.closed) {
            return Ok(false);
        }
        Ok(!self.used_by_constraint_with_different_sharding(p, value, s)?)
    }

    fn position(&self, p: &Program, op: u32) -> Option<(u32, usize)> {
        let b = *self.parent.get(&op)?;
        p.block_ops(b).iter().position(|&o| o == op).map(|i| (b, i))
    }

    fn remove(&mut self, p: &mut Program, op: u32) {
        if let Some((b, i)) = self.position(p, op) {
            let mut ops = p.block_ops(b).to_vec();
            ops.remove(i);
            p.set_block_ops(b, &ops);
        }
    }

    /// Puts `op` right after the op defining `value`, or first in the block of a block
    /// argument (MLIR's `setInsertionPointAfterValue`).
    fn place_after_value(&mut self, p: &mut Program, op: u32, value: u32) {
        let (block, at) = match self.values.defining_op(p, value) {
            Some(d) => match self.position(p, d) {
                Some((b, i)) => (b, i + 1),
                None => return,
            },
            None => match self.values.arg_block(value) {
                Some(b) => (b, 0),
                None => return,
            },
        };
        let mut ops = p.block_ops(block).to_vec();
        ops.insert(at.min(ops.len()), op);
        p.set_block_ops(block, &ops);
        self.parent.insert(op, block);
    }

    fn apply(&mut self, p: &mut Program, op: u32, value: u32, s: &TensorSharding, after: After) -> Result<()> {
        if !self.should_apply(p, value, s)? {
            return Ok(());
        }
        let is_edge = self.values.defining_op(p, value).is_some_and(|d| p.op_name(d) == DATA_FLOW_EDGE);
        if is_edge || self.values.lookup_data_flow_edge(p, &self.uses, value).is_some() {
            let constraint = match after {
                After::Move(c) => {
                    // Python's `_move_after_value`: a block argument's constraint already first
                    // in its block stays.
                    let first = self.values.arg_block(value).map(|b| p.block_ops(b).first() == Some(&c));
                    if first != Some(true) {
                        self.remove(p, c);
                        self.place_after_value(p, c, value);
                    }
                    c
                }
                After::New(sharding, loc) => {
                    let ty = p.value_types[value as usize];
                    let attrs = [(p.intern("sharding"), p.intern(&print_sharding(&sharding)))];
                    let c = p.new_op(SHARDING_CONSTRAINT, &[value], &[ty], &attrs, loc);
                    self.place_after_value(p, c, value);
                    self.uses.add(p, c);
                    c
                }
            };
            let result = p.op_results(constraint).start;
            for (user, i) in self.uses.of(value).collect::<Vec<_>>() {
                if user != constraint {
                    self.uses.set_operand(p, user, i as usize, result);
                }
            }
            if !s.unreduced.is_empty() {
                let rank = s.rank();
                let current = self.values.get_sharding(p, &self.uses, value)?;
                let mut new = current.unwrap_or_else(|| TensorSharding::replicated(s.mesh.clone(), rank, true));
                new.unreduced = s.unreduced.clone();
                self.values.set_sharding(p, &self.uses, value, &new)?;
            }
            return Ok(());
        }
        if p.attr(op, "sdy.sharding_rule").is_none() {
            match user_rule(p, op)? {
                UserRule::Rule(rule) => p.set_attr(op, "sdy.sharding_rule", &print_rule(&rule)),
                UserRule::NoRule => {}
                UserRule::NotGiven if CONTEXT_OPS.contains(&p.op_name(op)) => {}
                UserRule::NotGiven => {
                    if let Builtin::Rule(rule) = builtin_rule(&OpDesc::of(p, op), false)? {
                        p.set_attr(op, "sdy.sharding_rule", &print_rule(&rule));
                    }
                }
            }
        }
        self.values.set_sharding(p, &self.uses, value, s)?;
        if p.attr(op, "sdy.sharding_rule").is_some() && s.rank() > 0 {
            if let Some(debug) = self.debug.as_mut() {
                Handler { values: &mut self.values, uses: &self.uses, debug }.record_constraint(p, op)?;
            }
        }
        Ok(())
    }

    fn chain_tail(&mut self, p: &Program, head: u32) -> Result<Option<u32>> {
        let input = p.op_operands(head)[0];
        if self.values.defining_op(p, input).is_some_and(|d| p.op_name(d) == SHARDING_CONSTRAINT) {
            return Ok(None);
        }
        if self.values.get_sharding(p, &self.uses, input)?.is_some() {
            return Ok(None);
        }
        if self.used_by_constraint(p, input, Some(head)) {
            return Ok(None);
        }
        let mut tail = head;
        loop {
            let users = self.uses.users(p.op_results(tail).start);
            match users.as_slice() {
                [u] if p.op_name(*u) == SHARDING_CONSTRAINT => tail = *u,
                _ => break,
            }
        }
        if tail == head || self.used_by_constraint(p, p.op_results(tail).start, None) {
            return Ok(None);
        }
        Ok(Some(tail))
    }

    fn constraint(&mut self, p: &mut Program, op: u32) -> Result<()> {
        if let Some(tail) = self.chain_tail(p, op)? {
            let (input, result) = (p.op_operands(op)[0], p.op_results(tail).start);
            let tail_at = self.position(p, tail);
            for (user, i) in self.uses.of(input).collect::<Vec<_>>() {
                let later = match (tail_at, self.position(p, user)) {
                    (Some((tb, ti)), Some((ub, ui))) => tb == ub && ti < ui,
                    _ => false,
                };
                if user != op && p.op_name(user) != "func.return" && later {
                    self.uses.set_operand(p, user, i as usize, result);
                }
            }
        }
        let value = p.op_operands(op)[0];
        let Some(s) = result_sharding(p, op, 0)? else { return Ok(()) };
        self.apply(p, op, value, &s, After::Move(op))
    }

    fn manual(&mut self, p: &mut Program, op: u32) -> Result<()> {
        let Some(ins) = Self::in_shardings(p, op)? else { return Ok(()) };
        let operands = p.op_operands(op).to_vec();
        let loc = p.ops[op as usize].loc;
        for (value, s) in operands.into_iter().zip(ins) {
            self.apply(p, op, value, &s, After::New(s.clone(), loc))?;
        }
        Ok(())
    }
}

pub fn run(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    let origins = cx.flag("debug-sharding-origins", false)?;
    let edges = cx.flag("debug-propagation-edge-sharding", false)?;
    let mut order = p.walk(0);
    order.retain(|&o| matches!(p.op_name(o), SHARDING_CONSTRAINT | MANUAL_COMPUTATION));
    if order.is_empty() && !origins && !edges {
        return Ok(()); // nothing to apply and nothing to record
    }
    let parent = p.enclosing_blocks(0);
    let mut apply = Apply { uses: Uses::new(p, 0), values: ValueIndex::new(p), parent, debug: None };
    if origins || edges {
        let mut debug = ShardingDebug::new(DebugOptions { origins, edges, ..DebugOptions::default() });
        Handler { values: &mut apply.values, uses: &apply.uses, debug: &mut debug }.prepare(p)?;
        apply.debug = Some(debug);
    }
    for op in post_order_of(p, &order) {
        if p.op_name(op) == SHARDING_CONSTRAINT {
            apply.constraint(p, op)?;
        } else {
            apply.manual(p, op)?;
        }
    }
    if let Some(debug) = apply.debug.take() {
        source_sharding::save(p, &mut apply.values, &apply.uses, &debug)?;
    }
    Ok(())
}
