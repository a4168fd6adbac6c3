//! `sdy-constant-or-scalar-splitter` (Shardy
//! `transforms/import/constant_or_scalar_splitter.cc`): every `stablehlo.constant` becomes an
//! `sdy.constant`, and each non-constant user of a constant sub-computation (constants,
//! iotas, and broadcasts, reshapes, slices, element-wise ops, named computations and calls of
//! constant-preserving functions applied to them) or of a broadcast of a scalar gets its own
//! copy; the originals left without users (but sharding groups) are removed. Called functions
//! are cloned (`sdy.original_func_name` records the original).

use crate::error::Result;
use crate::fast_hash::{FastMap, FastSet};
use crate::ir::clone::{Mapping, Uses};
use crate::ir::symbols::SymbolTable;
use crate::ir::{types, Program};
use crate::transforms::common::{
    append_func, call_graph_rpo, callee_name, clone_func_recursively, original_func_name, set_callee, CALL,
};
use crate::transforms::op_properties::{is_elementwise, is_elementwise_name, is_pure};
use crate::transforms::PassContext;

const NAMED_COMPUTATION: &str = "sdy.named_computation";
const SHARDING_GROUP: &str = "sdy.sharding_group";
use crate::transforms::op_properties::TERMINATORS;

struct Splitter {
    symbols: SymbolTable,
    uses: Uses,
    /// The `name` texts of named computations holding a non-constant op.
    non_const_named: FastSet<String>,
    /// The original names of functions holding a non-constant op.
    non_const_funcs: FastSet<String>,
    /// Ops to insert before an op, in order (applied per block after each walk).
    inserts: FastMap<u32, Vec<u32>>,
    /// Each op's block (for the ops of the program as it was read).
    parent: FastMap<u32, u32>,
    /// Each value's defining op (`u32::MAX` for block arguments), grown when values are added.
    owners: Vec<u32>,
}

/// One walk of a function body or a named computation's body.
#[derive(Default)]
struct Walk {
    /// Constant ops and constant expressions, in walk order.
    constants: Vec<u32>,
    constant_set: FastSet<u32>,
    /// Broadcasts of a scalar, in walk order.
    expansions: Vec<u32>,
    expansion_set: FastSet<u32>,
}

fn is_scalar(p: &Program, v: u32) -> bool {
    types::is_scalar(p.strings.get(p.value_types[v as usize]))
}

impl Splitter {
    /// The op whose result `v` is (`None` for a block argument).
    fn defining_op(&mut self, p: &Program, v: u32) -> Option<u32> {
        if v as usize >= self.owners.len() {
            self.owners = p.value_owners();
        }
        let o = self.owners[v as usize];
        (o != u32::MAX).then_some(o)
    }

    fn named_text(p: &Program, op: u32) -> String {
        p.attr(op, "name").unwrap_or_default().to_string()
    }

    fn constant_preserving(&mut self, p: &Program, op: u32) -> bool {
        let name = p.op_name(op);
        if name == CALL {
            let callee = callee_name(p, op).and_then(|n| self.symbols.lookup(&n));
            return callee.is_some_and(|f| !self.non_const_funcs.contains(&original_func_name(p, f)));
        }
        if name == NAMED_COMPUTATION {
            return !self.non_const_named.contains(&Self::named_text(p, op));
        }
        let candidate = is_elementwise_name(name)
            || matches!(
                name,
                "stablehlo.broadcast_in_dim"
                    | "stablehlo.reshape"
                    | "stablehlo.slice"
                    | "stablehlo.bitcast_convert"
                    | "sdy.propagation_barrier"
                    | "sdy.reshard"
            );
        if !candidate || !is_pure(p, op) {
            return false;
        }
        matches!(name, "stablehlo.broadcast_in_dim" | "stablehlo.reshape" | "stablehlo.slice") || is_elementwise(p, op)
    }

    /// A copy of the constant sub-computation that defines `result` (a scalar is shared).
    fn clone_sub_computation(&mut self, p: &mut Program, result: u32) -> u32 {
        if is_scalar(p, result) {
            return result;
        }
        let mut mapping = Mapping::default();
        self.clone_into(p, result, &mut mapping);
        mapping[&result]
    }

    fn clone_into(&mut self, p: &mut Program, result: u32, mapping: &mut Mapping) {
        if is_scalar(p, result) || mapping.contains_key(&result) {
            return;
        }
        let op = self.defining_op(p, result).expect("a constant sub-computation's values have producers");
        for v in p.op_operands(op).to_vec() {
            if self.defining_op(p, v).is_some() {
                self.clone_into(p, v, mapping);
            }
        }
        let new = p.clone_op(op, mapping);
        self.inserts.entry(op).or_default().push(new);
        self.uses.add(p, new);
        if p.op_name(new) == CALL {
            if let Some(callee) = callee_name(p, new).and_then(|n| self.symbols.lookup(&n)) {
                let clone = clone_func_recursively(p, &mut self.symbols, callee);
                let name = append_func(p, &mut self.symbols, clone);
                set_callee(p, new, &name);
            }
        }
        for user in self.uses.users(result) {
            if p.op_name(user) == SHARDING_GROUP {
                let group = p.clone_op(user, mapping);
                self.inserts.entry(op).or_default().push(group);
                self.uses.add(p, group);
            }
        }
    }

    fn process(&mut self, p: &mut Program, op: u32, func_name: &str, named: Option<u32>, w: &mut Walk) {
        let name = p.op_name(op);
        if name == "func.func" || name == SHARDING_GROUP {
            return;
        }
        if name == "sdy.constant" || name == "stablehlo.iota" {
            w.constants.push(op);
            w.constant_set.insert(op);
            return;
        }
        let preserving = self.constant_preserving(p, op);
        if preserving
            && p.op_operands(op).iter().all(|&v| self.defining_op(p, v).is_some_and(|d| w.constant_set.contains(&d)))
        {
            w.constants.push(op);
            w.constant_set.insert(op);
            return;
        }
        if !preserving && !TERMINATORS.contains(&name) {
            if let Some(n) = named {
                self.non_const_named.insert(Self::named_text(p, n));
            }
            self.non_const_funcs.insert(func_name.to_string());
        }
        if p.op_name(op) == "stablehlo.broadcast_in_dim" && p.op_operands(op).first().is_some_and(|&v| is_scalar(p, v))
        {
            w.expansions.push(op);
            w.expansion_set.insert(op);
            return;
        }
        for i in 0..p.op_operands(op).len() {
            let v = p.op_operands(op)[i];
            if let Some(d) = self.defining_op(p, v) {
                if w.constant_set.contains(&d) || w.expansion_set.contains(&d) {
                    let copy = self.clone_sub_computation(p, v);
                    self.uses.set_operand(p, op, i, copy);
                }
            }
        }
    }

    /// Walks `ops` (and the regions of ops other than named computations) with one set of
    /// constants; then inserts the copies and removes the originals left unused.
    fn walk_region(&mut self, p: &mut Program, ops: &[u32], func: u32, named: Option<u32>) {
        let func_name = original_func_name(p, func);
        let mut w = Walk::default();
        let mut stack: Vec<u32> = ops.iter().rev().copied().collect();
        while let Some(op) = stack.pop() {
            self.process(p, op, &func_name, named, &mut w);
            if p.op_name(op) == NAMED_COMPUTATION {
                continue;
            }
            let (a, b) = p.ops[op as usize].regions;
            for r in (a..b).rev() {
                let (s, e) = p.regions[r as usize];
                for blk in (s..e).rev() {
                    stack.extend(p.block_ops(blk).iter().rev());
                }
            }
        }
        self.flush(p);
        let mut erased: Vec<u32> = Vec::new();
        let mut seen: FastSet<u32> = FastSet::default();
        let order: Vec<u32> = w.expansions.iter().chain(w.constants.iter().rev()).copied().collect();
        for op in order {
            let users: Vec<u32> = p.op_results(op).flat_map(|r| self.uses.users(r)).collect();
            if !users.iter().all(|&u| p.op_name(u) == SHARDING_GROUP) {
                continue;
            }
            for u in users {
                if self.parent.contains_key(&u) && seen.insert(u) {
                    erased.push(u);
                    self.uses.drop(p, u);
                }
            }
            erased.push(op);
            self.uses.drop(p, op);
        }
        self.erase(p, &erased);
    }

    fn flush(&mut self, p: &mut Program) {
        let inserts = std::mem::take(&mut self.inserts);
        let mut blocks: Vec<u32> = inserts.keys().filter_map(|a| self.parent.get(a).copied()).collect();
        blocks.sort_unstable();
        blocks.dedup();
        for b in blocks {
            let mut out = Vec::new();
            for &op in p.block_ops(b) {
                if let Some(new) = inserts.get(&op) {
                    out.extend_from_slice(new);
                }
                out.push(op);
            }
            p.set_block_ops(b, &out);
        }
    }

    fn erase(&mut self, p: &mut Program, ops: &[u32]) {
        let gone: FastSet<u32> = ops.iter().copied().collect();
        p.remove_ops(&gone, ops.iter().filter_map(|o| self.parent.get(o).copied()));
        for op in ops {
            self.parent.remove(op);
        }
    }
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    for op in p.walk(0) {
        if p.op_name(op) == "stablehlo.constant" {
            p.rename_op(op, "sdy.constant");
        }
    }
    let parent = p.enclosing_blocks(0);
    let symbols = SymbolTable::new(p);
    let (rpo, _) = call_graph_rpo(p, &symbols);
    let uses = Uses::new(p, 0);
    let mut s = Splitter {
        symbols,
        uses,
        non_const_named: FastSet::default(),
        non_const_funcs: FastSet::default(),
        inserts: FastMap::default(),
        parent,
        owners: Vec::new(),
    };
    for &func in rpo.iter().rev() {
        // Named computations in post-order (inner ones first), then the function's body.
        let mut named: Vec<u32> = Vec::new();
        let mut stack = vec![(func, false)];
        while let Some((op, done)) = stack.pop() {
            if done {
                if p.op_name(op) == NAMED_COMPUTATION {
                    named.push(op);
                }
                continue;
            }
            stack.push((op, true));
            let (a, b) = p.ops[op as usize].regions;
            for r in (a..b).rev() {
                let (bs, be) = p.regions[r as usize];
                for blk in (bs..be).rev() {
                    for &o in p.block_ops(blk).iter().rev() {
                        stack.push((o, false));
                    }
                }
            }
        }
        for n in named {
            let entry = p.region_blocks(n, 0).start;
            let ops = p.block_ops(entry).to_vec();
            s.walk_region(p, &ops, func, Some(n));
        }
        let body = p.region_blocks(func, 0).start;
        let ops = p.block_ops(body).to_vec();
        s.walk_region(p, &ops, func, None);
    }
    Ok(())
}
