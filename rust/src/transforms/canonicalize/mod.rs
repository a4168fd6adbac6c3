//! `canonicalize{enable-patterns={sdy-collective}}`, as the last step of Shardy's export
//! pipeline runs it: MLIR's greedy pattern rewriter (`GreedyPatternRewriteDriver`, bottom-up)
//! with only Shardy's collective canonicalization patterns enabled ([`collective`], from
//! `shardy/dialect/sdy/ir/canonicalization.cc` and `.td`). Each sweep
//! - puts every op on a worklist in post-order, first offering each `stablehlo.constant` to
//!   a new `OperationFolder`: one constant per value and type is kept in the entry block of
//!   each isolated-from-above op (function, named or manual computation), hoisted to its
//!   start, and the others are replaced by it;
//! - pops ops from the back of the worklist: an op that is trivially dead (MLIR's
//!   `isOpTriviallyDead`: no used result, no memory effect, looking into the regions of ops
//!   whose effects are their body's) is erased, otherwise the first pattern that applies
//!   rewrites it; the ops a rewrite creates or changes, and the ops defining the operands of
//!   an erased op, are pushed again.
//!
//! Sweeps repeat while one changes the program, at most `max-iterations` (10) times. Region
//! simplification changes nothing on the single-block regions these programs have.

mod collective;

use super::op_properties::has_no_memory_effect;
use super::PassContext;
use crate::error::{Error, Result};
use crate::fast_hash::{FastMap, FastSet};
use crate::ir::clone::Uses;
use crate::ir::linked::LinkedBlocks;
use crate::ir::values::ValueIndex;
use crate::ir::Program;
use crate::mesh::Mesh;

/// The options MLIR's `canonicalize` takes.
pub const OPTIONS: &[&str] = &[
    "enable-patterns",
    "disable-patterns",
    "max-iterations",
    "max-num-rewrites",
    "region-simplify",
    "test-convergence",
    "top-down",
    "cse-between-iterations",
];

use crate::transforms::op_properties::TERMINATORS;
/// Ops whose memory effects are those of the ops in their regions.
const RECURSIVE_EFFECT_OPS: &[&str] = &[
    "stablehlo.if",
    "stablehlo.case",
    "stablehlo.while",
    "stablehlo.reduce",
    "stablehlo.map",
    "stablehlo.scatter",
    "stablehlo.select_and_scatter",
    "stablehlo.sort",
    "stablehlo.reduce_window",
    "sdy.named_computation",
    "sdy.manual_computation",
];
/// Ops isolated from above: constants are hoisted to the entry block of the nearest one.
const ISOLATED: &[&str] = &["func.func", "sdy.manual_computation", "sdy.named_computation", "builtin.module"];

/// What an op's memory effects are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Effect {
    None,
    /// Those of the ops in its regions.
    Recursive,
    /// A `stablehlo.custom_call`: its `has_side_effect` attribute.
    CustomCall,
    Some,
}

/// What the driver needs to know about an op name.
#[derive(Clone, Copy)]
struct Kind {
    never_dead: bool,
    effect: Effect,
    pattern: Option<collective::Pattern>,
    constant: bool,
    isolated: bool,
}

impl Kind {
    fn of(name: &str) -> Kind {
        let terminator = TERMINATORS.contains(&name);
        let effect = if terminator || has_no_memory_effect(name) {
            Effect::None
        } else if name == "stablehlo.custom_call" {
            Effect::CustomCall
        } else if RECURSIVE_EFFECT_OPS.contains(&name) {
            Effect::Recursive
        } else {
            Effect::Some
        };
        Kind {
            never_dead: terminator || matches!(name, "sdy.mesh" | "builtin.module" | "func.func"),
            effect,
            pattern: collective::Pattern::of(name),
            constant: name == "stablehlo.constant",
            isolated: ISOLATED.contains(&name),
        }
    }
}

const NONE: u32 = u32::MAX;

/// MLIR's `Worklist`: ops in push order, each at most once, popped from the back.
#[derive(Default)]
struct Worklist {
    list: Vec<u32>,
    /// Each op's position in `list` (`NONE`: not in it).
    at: Vec<u32>,
}

impl Worklist {
    fn clear(&mut self) {
        for &op in &self.list {
            if op != NONE {
                self.at[op as usize] = NONE;
            }
        }
        self.list.clear();
    }

    fn push(&mut self, op: u32) {
        if self.at.len() <= op as usize {
            self.at.resize(op as usize + 1, NONE);
        }
        if self.at[op as usize] == NONE {
            self.at[op as usize] = self.list.len() as u32;
            self.list.push(op);
        }
    }

    fn pop(&mut self) -> Option<u32> {
        while let Some(op) = self.list.pop() {
            if op != NONE {
                self.at[op as usize] = NONE;
                return Some(op);
            }
        }
        None
    }

    fn remove(&mut self, op: u32) {
        if let Some(&i) = self.at.get(op as usize).filter(|&&i| i != NONE) {
            self.list[i as usize] = NONE;
            self.at[op as usize] = NONE;
        }
    }
}

/// The driver's state: the block lists it edits, the use lists, the worklist, and what it
/// looked up. Its edits notify the worklist as MLIR's `RewriterBase` notifies the
/// `GreedyPatternRewriteDriver`: a created op and an op whose operand changed are pushed (with
/// the ops holding them), and erasing an op pushes the ops defining its operands when they are
/// left with at most one other user.
struct Rewriter {
    lists: LinkedBlocks,
    uses: Uses,
    worklist: Worklist,
    kinds: FastMap<u32, Kind>,
    values: Option<ValueIndex>,
    meshes: Option<FastMap<String, Mesh>>,
    module_block: u32,
}

impl Rewriter {
    fn kind(&mut self, p: &Program, op: u32) -> Kind {
        let name = p.ops[op as usize].name;
        *self.kinds.entry(name).or_insert_with(|| Kind::of(p.strings.get(name)))
    }

    /// The index of values, built on first use (only the patterns need it).
    fn values(&mut self, p: &Program) -> &mut ValueIndex {
        self.values.get_or_insert_with(|| ValueIndex::new(p))
    }

    /// The module's meshes, read on first use.
    fn meshes(&mut self, p: &Program) -> Result<&FastMap<String, Mesh>> {
        if self.meshes.is_none() {
            self.meshes = Some(super::common::meshes(p)?);
        }
        Ok(self.meshes.as_ref().expect("just set"))
    }

    /// The op defining `v`, if it is an op result.
    fn defining_op(&mut self, p: &Program, v: u32) -> Option<u32> {
        self.values(p).defining_op(p, v)
    }

    fn is_used(&self, v: u32) -> bool {
        self.uses.of(v).next().is_some()
    }

    /// MLIR's `addToWorklist`: `op` and the ops holding it, up to the module's top level
    /// (nothing for an op no longer in the module).
    fn push(&mut self, op: u32) {
        // The chain up to the module's block first (an op no longer in the module has none),
        // then `op` and its holders in that order.
        let module_block = self.module_block;
        let holder = |lists: &LinkedBlocks, o: u32| -> Option<Option<u32>> {
            let block = lists.block_of(o)?;
            if block == module_block {
                return Some(None);
            }
            lists.owner(block).map(Some)
        };
        let mut cur = op;
        loop {
            match holder(&self.lists, cur) {
                None => return,
                Some(None) => break,
                Some(Some(owner)) => cur = owner,
            }
        }
        let mut cur = Some(op);
        while let Some(o) = cur {
            self.worklist.push(o);
            cur = holder(&self.lists, o).flatten();
        }
    }

    /// MLIR's `replaceAllUsesWith` through the rewriter: each user, in use-list order, is
    /// modified (and pushed).
    fn replace_all_uses(&mut self, p: &mut Program, old: u32, new: u32) {
        let all: Vec<(u32, u32)> = self.uses.of(old).collect();
        for (user, i) in all {
            self.uses.set_operand(p, user, i as usize, new);
            self.push(user);
        }
    }

    /// MLIR's `addOperandsToWorklist` for `op` about to be erased.
    fn push_operand_definers(&mut self, p: &Program, op: u32) {
        for i in 0..p.op_operands(op).len() {
            let v = p.op_operands(op)[i];
            let Some(def) = self.defining_op(p, v) else { continue };
            let mut other = None;
            let mut more = false;
            for user in self.uses.of(v).map(|(u, _)| u) {
                if user == op || Some(user) == other {
                    continue;
                }
                if other.is_none() {
                    other = Some(user);
                    continue;
                }
                more = true;
                break;
            }
            if !more {
                self.push(def);
            }
        }
    }

    /// MLIR's `RewriterBase::eraseOp`: the ops nested in `op` (last first), then `op`, each
    /// notified. An error when a result of `op` is still used outside it (MLIR asserts the
    /// same).
    fn erase(&mut self, p: &Program, op: u32) -> Result<()> {
        let mut tree = self.lists.pre_order(p, op);
        if tree.len() > 1 {
            let nested: FastSet<u32> = tree.iter().copied().collect();
            for r in p.op_results(op) {
                if self.uses.of(r).any(|(user, _)| !nested.contains(&user)) {
                    return Err(used(p, op, r));
                }
            }
        } else if p.op_results(op).any(|r| self.is_used(r)) {
            let r = p.op_results(op).find(|&r| self.is_used(r)).unwrap_or_default();
            return Err(used(p, op, r));
        }
        tree.reverse();
        for o in tree {
            self.push_operand_definers(p, o);
            self.worklist.remove(o);
            self.uses.drop_op_only(p, o);
        }
        self.lists.unlink(op);
        Ok(())
    }

    /// MLIR's `RewriterBase::replaceOp` of a one-result op by `value`.
    fn replace_op(&mut self, p: &mut Program, op: u32, value: u32) -> Result<()> {
        let result = p.op_results(op).start;
        self.replace_all_uses(p, result, value);
        self.erase(p, op)
    }

    /// Puts the new op `op` right before `anchor` (the rewriter's insertion point: the op being
    /// rewritten); its first result.
    fn insert_before(&mut self, p: &Program, anchor: u32, op: u32) -> u32 {
        self.lists.insert_before(anchor, op);
        self.uses.add_op_only(p, op);
        self.push(op);
        p.op_results(op).start
    }

    /// MLIR's memory-effect check of `op`, looking into the regions of ops whose effects are
    /// their body's.
    fn effect_free(&mut self, p: &Program, op: u32) -> bool {
        let mut stack = vec![op];
        while let Some(o) = stack.pop() {
            match self.kind(p, o).effect {
                Effect::None => {}
                Effect::Some => return false,
                Effect::CustomCall => {
                    if p.attr(o, "has_side_effect").unwrap_or("false") == "true" {
                        return false;
                    }
                }
                Effect::Recursive => stack.extend(self.lists.children(p, o)),
            }
        }
        true
    }

    /// MLIR's `isOpTriviallyDead`: not a terminator (nor a function, mesh or module), no used
    /// result, no memory effect.
    fn trivially_dead(&mut self, p: &Program, op: u32) -> bool {
        if self.kind(p, op).never_dead || p.op_results(op).any(|r| self.is_used(r)) {
            return false;
        }
        self.effect_free(p, op)
    }

    /// The entry block of the region of the nearest isolated-from-above op holding `op`.
    fn insertion_block(&mut self, p: &Program, op: u32) -> Option<u32> {
        let mut block = self.lists.block_of(op)?;
        loop {
            let owner = self.lists.owner(block)?;
            if self.kind(p, owner).isolated {
                return self.lists.region_entry(block);
            }
            block = self.lists.block_of(owner)?;
        }
    }

    /// One sweep of MLIR's driver: the ops in post-order onto the worklist, each constant first
    /// offered to a new `OperationFolder` (the first of each value and type in an insertion
    /// block is kept and hoisted to the block's start, after the constants hoisted before it;
    /// the others are replaced by it and not pushed); then the worklist processed. Whether it
    /// changed the program.
    fn sweep(&mut self, p: &mut Program) -> Result<bool> {
        self.worklist.clear();
        let mut kept: FastMap<(u32, Option<u32>, u32), u32> = FastMap::default();
        let mut hoisted: FastSet<u32> = FastSet::default();
        let tops: Vec<u32> = self.lists.ops(self.module_block).collect();
        for top in tops {
            for op in self.lists.post_order(p, top) {
                if !self.lists.attached(op) {
                    continue;
                }
                if self.kind(p, op).constant && self.fold_constant(p, op, &mut kept, &mut hoisted)? {
                    continue;
                }
                self.push(op);
            }
        }
        let mut changed = false;
        while let Some(op) = self.worklist.pop() {
            if self.trivially_dead(p, op) {
                self.erase(p, op)?;
                changed = true;
                continue;
            }
            if let Some(pattern) = self.kind(p, op).pattern {
                changed |= collective::apply(self, p, op, pattern)?;
            }
        }
        Ok(changed)
    }

    /// `OperationFolder::insertKnownConstant` for the constant `op`: whether it was replaced by
    /// the constant kept before it.
    fn fold_constant(
        &mut self,
        p: &mut Program,
        op: u32,
        kept: &mut FastMap<(u32, Option<u32>, u32), u32>,
        hoisted: &mut FastSet<u32>,
    ) -> Result<bool> {
        let Some(result) = p.op_results(op).next() else { return Ok(false) };
        let Some(block) = self.insertion_block(p, op) else { return Ok(false) };
        let key = (block, p.attr_id(op, "value"), p.value_types[result as usize]);
        if let Some(&existing) = kept.get(&key) {
            let value = p.op_results(existing).start;
            self.replace_op(p, op, value)?;
            return Ok(true);
        }
        kept.insert(key, op);
        let here = self.lists.block_of(op) == Some(block);
        let at_front = here && self.lists.first(block) == Some(op);
        let after_hoisted = here && self.lists.prev(op).is_some_and(|o| hoisted.contains(&o));
        if !at_front && !after_hoisted {
            self.lists.unlink(op);
            self.lists.push_front(block, op);
        }
        hoisted.insert(op);
        Ok(false)
    }
}

fn used(p: &Program, op: u32, result: u32) -> Error {
    Error::invariant(
        "canonicalize-erase-used",
        format!("cannot erase {}: result {} still has uses", p.op_where(op), result - p.op_results(op).start),
    )
}

/// The pass: see the module documentation. Errors on a pattern selection other than
/// `enable-patterns={sdy-collective}` (MLIR's full canonicalization is not implemented) and on
/// a `max-iterations` that is not an integer.
pub fn run(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    let enabled = cx.option("enable-patterns").unwrap_or("").trim_matches(|c| matches!(c, '{' | '}' | ' '));
    if enabled != "sdy-collective" {
        return Err(Error::program(format!(
            "canonicalize: only enable-patterns={{sdy-collective}} (Shardy's export pipeline) is supported, got {{{enabled}}}"
        )));
    }
    let limit: i64 = match cx.option("max-iterations") {
        None => 10,
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| Error::program(format!("option max-iterations takes an integer, got {v:?}")))?,
    };
    let mut rw = Rewriter {
        lists: LinkedBlocks::new(p),
        uses: Uses::new(p, 0),
        worklist: Worklist::default(),
        kinds: FastMap::default(),
        values: None,
        meshes: None,
        module_block: p.module_block(),
    };
    let mut iterations = 0i64;
    loop {
        iterations += 1;
        if limit >= 0 && iterations > limit {
            break;
        }
        if !rw.sweep(p)? {
            break;
        }
    }
    rw.lists.write_back(p);
    Ok(())
}
