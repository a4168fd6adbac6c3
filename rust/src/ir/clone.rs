//! Deep copies of ops and functions (MLIR's `Operation::clone` with an `IRMapping`), and use
//! lists (value -> the ops using it).

use super::{BlockData, FuncData, OpData, Program};
use crate::fast_hash::FastMap;

/// Old value -> new value (MLIR's `IRMapping`).
pub type Mapping = FastMap<u32, u32>;

impl Program {
    /// A copy of `op` and everything nested in it, in no block: operands remapped through
    /// `mapping` (unmapped ones kept); results and nested block arguments added to it. A
    /// `func.func` copy gets its own function data. Recursive in the nesting depth.
    pub fn clone_op(&mut self, op: u32, mapping: &mut Mapping) -> u32 {
        let old = self.ops[op as usize];
        let operands: Vec<u32> = self.op_operands(op).iter().map(|v| mapping.get(v).copied().unwrap_or(*v)).collect();
        let result_types: Vec<u32> = self.op_results(op).map(|v| self.value_types[v as usize]).collect();
        let attrs = self.op_attrs(op).to_vec();
        let name = self.strings.get(old.name).to_string();
        let new = self.new_op(&name, &operands, &result_types, &attrs, old.loc);
        for (r, nr) in self.op_results(op).zip(self.op_results(new)) {
            mapping.insert(r, nr);
        }
        self.clone_regions_into(op, new, mapping);
        if let Some(i) = self.funcs.iter().position(|f| f.op == op) {
            let f = &self.funcs[i];
            let copy = |p: &Program, spans: &[(u32, u32)]| -> Vec<Vec<(u32, u32)>> {
                spans.iter().map(|&(a, b)| p.attrs[a as usize..b as usize].to_vec()).collect()
            };
            let (arg_attrs, result_attrs) = (copy(self, &f.arg_attrs), copy(self, &f.result_attrs));
            let (arg_types, result_types) = (f.arg_types.clone(), f.result_types.clone());
            let mut data =
                FuncData { op: new, arg_types, result_types, arg_attrs: Vec::new(), result_attrs: Vec::new() };
            for (lists, out) in [(arg_attrs, &mut data.arg_attrs), (result_attrs, &mut data.result_attrs)] {
                for list in lists {
                    let start = self.attrs.len() as u32;
                    self.attrs.extend(list);
                    out.push((start, self.attrs.len() as u32));
                }
            }
            self.funcs.push(data);
        }
        new
    }

    /// Copies of the regions of `src` become the regions of `dst` (which has none): block
    /// arguments and the results of the copied ops are added to `mapping`.
    pub fn clone_regions_into(&mut self, src: u32, dst: u32, mapping: &mut Mapping) {
        let old = self.ops[src as usize];
        let new = dst;
        // Reserve the new op's region slots, then each region's blocks, then fill.
        let (ra, rb) = old.regions;
        let g = self.regions.len() as u32;
        for _ in ra..rb {
            self.regions.push((0, 0));
        }
        self.ops[new as usize].regions = (g, g + (rb - ra));
        for (i, r) in (ra..rb).enumerate() {
            let (ba, bb) = self.regions[r as usize];
            let first = self.blocks.len() as u32;
            for b in ba..bb {
                let BlockData { args, .. } = self.blocks[b as usize];
                let start = self.value_types.len() as u32;
                for a in args.0..args.1 {
                    let t = self.value_types[a as usize];
                    self.value_types.push(t);
                    mapping.insert(a, start + (a - args.0));
                }
                self.blocks.push(BlockData { args: (start, self.value_types.len() as u32), ops: (0, 0) });
            }
            self.regions[(g as usize) + i] = (first, first + (bb - ba));
            for (k, b) in (ba..bb).enumerate() {
                let ops: Vec<u32> = self.block_ops(b).to_vec();
                let cloned: Vec<u32> = ops.into_iter().map(|o| self.clone_op(o, mapping)).collect();
                let start = self.block_ops.len() as u32;
                self.block_ops.extend(cloned);
                self.blocks[(first as usize) + k].ops = (start, self.block_ops.len() as u32);
            }
        }
    }

    /// Renames op `op` (e.g. `stablehlo.constant` to `sdy.constant`).
    pub fn rename_op(&mut self, op: u32, name: &str) {
        let n = self.intern(name);
        let OpData { name, .. } = &mut self.ops[op as usize];
        *name = n;
    }
}

/// Each value's uses, (op, operand index), in MLIR's use-list order (the most recent use
/// first: a list built from a walk is in reverse program order, and a new use goes first),
/// for the ops reached from the root. Kept in append order, read backwards.
#[derive(Default)]
pub struct Uses {
    /// By value id (grown as values are added).
    of: Vec<Vec<(u32, u32)>>,
}

impl Uses {
    /// The uses made by `root` and the ops nested in it.
    pub fn new(p: &Program, root: u32) -> Uses {
        let mut u = Uses { of: Vec::with_capacity(p.value_types.len()) };
        u.add(p, root);
        u
    }

    /// The use list of `v`, made (with those of the values before it) when missing.
    fn list_mut(&mut self, v: u32) -> &mut Vec<(u32, u32)> {
        let i = v as usize;
        if i >= self.of.len() {
            self.of.resize_with(i + 1, Vec::new);
        }
        &mut self.of[i]
    }

    /// Adds the uses made by `op` and the ops nested in it.
    pub fn add(&mut self, p: &Program, op: u32) {
        let mut stack = vec![op];
        while let Some(o) = stack.pop() {
            self.add_op_only(p, o);
            let (a, b) = p.ops[o as usize].regions;
            for r in (a..b).rev() {
                let (s, e) = p.regions[r as usize];
                for blk in (s..e).rev() {
                    stack.extend(p.block_ops(blk).iter().rev());
                }
            }
        }
    }

    /// Adds the uses made by `op` itself (its regions' ops are registered already).
    pub fn add_op_only(&mut self, p: &Program, op: u32) {
        for (i, &v) in p.op_operands(op).iter().enumerate() {
            self.list_mut(v).push((op, i as u32));
        }
    }

    /// Drops the uses made by `op` itself.
    pub fn drop_op_only(&mut self, p: &Program, op: u32) {
        for &v in p.op_operands(op) {
            if let Some(list) = self.of.get_mut(v as usize) {
                list.retain(|&(user, _)| user != op);
            }
        }
    }

    /// Drops the uses made by `op` and the ops nested in it.
    pub fn drop(&mut self, p: &Program, op: u32) {
        for o in p.walk(op) {
            self.drop_op_only(p, o);
        }
    }

    /// The uses of `v`: (op, operand index), most recent first.
    pub fn of(&self, v: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.of.get(v as usize).into_iter().flat_map(|l| l.iter().rev().copied())
    }

    /// The op of each use of `v`, most recent first (an op using it twice is there twice).
    pub fn users(&self, v: u32) -> Vec<u32> {
        self.of(v).map(|(o, _)| o).collect()
    }

    /// Makes every use of `old` use `new` (in use-list order, as MLIR's `replaceAllUsesWith`).
    pub fn replace_all_uses(&mut self, p: &mut Program, old: u32, new: u32) {
        let all: Vec<(u32, u32)> = self.of(old).collect();
        for (user, i) in all {
            self.set_operand(p, user, i as usize, new);
        }
    }

    /// Makes operand `i` of `op` be `value`, moving the use.
    pub fn set_operand(&mut self, p: &mut Program, op: u32, i: usize, value: u32) {
        let old = p.op_operands(op)[i];
        if let Some(list) = self.of.get_mut(old as usize) {
            if let Some(k) = list.iter().position(|&(o, k)| o == op && k as usize == i) {
                list.remove(k);
            }
        }
        p.set_operand(op, i, value);
        self.list_mut(value).push((op, i as u32));
    }
}
