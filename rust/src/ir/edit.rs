//! Editing a [`Program`] in place, for the native passes (`crate::transforms`).
//!
//! The arrays stay compressed sparse rows: an edit that changes the length of an op's
//! attribute list or of a block's op list appends the new list at the end of the shared array
//! and points the op or block at it (the old entries become garbage until the program is
//! written). New ops and values are appended, so numbering is no longer pre-order once a pass
//! adds ops: walks follow the blocks ([`Program::walk`]). An op removed from its block stays in
//! `ops` but is no longer reached.

use super::{BlockData, FuncData, OpData, Program, Span};
use crate::fast_hash::{FastMap, FastSet};

fn range(s: Span) -> std::ops::Range<usize> {
    s.0 as usize..s.1 as usize
}

impl Program {
    pub fn intern(&mut self, s: &str) -> u32 {
        self.strings.intern(s)
    }

    /// The ops of block `b`, in order.
    pub fn block_ops(&self, b: u32) -> &[u32] {
        &self.block_ops[range(self.blocks[b as usize].ops)]
    }

    /// Replaces the op list of block `b`. A list that fits its old place (not longer, or the
    /// last list of the shared array) is written there; a longer one moves to the end of the
    /// array, and once the garbage left behind outgrows the ops, the array is compacted. So a
    /// pass inserting ops one at a time into a large block (`sdy-insert-explicit-reshards`)
    /// no longer leaves one stale copy of the block per insertion: on a 22k-op step that was
    /// 63M entries, copied again into every table handed to Python.
    pub fn set_block_ops(&mut self, b: u32, ops: &[u32]) {
        let span = &mut self.blocks[b as usize].ops;
        let (start, len) = (span.0 as usize, ops.len());
        if len <= (span.1 - span.0) as usize {
            self.block_ops[start..start + len].copy_from_slice(ops);
            span.1 = span.0 + len as u32;
            return;
        }
        if span.1 as usize == self.block_ops.len() {
            // The last list of the array (any other list ending here is empty).
            self.block_ops.truncate(start);
            self.block_ops.extend_from_slice(ops);
            span.1 = self.block_ops.len() as u32;
            return;
        }
        let start = self.block_ops.len() as u32;
        self.block_ops.extend_from_slice(ops);
        *span = (start, self.block_ops.len() as u32);
        if self.block_ops.len() > 2 * self.ops.len() + 4096 {
            self.compact_block_ops();
        }
    }

    /// Rewrites `block_ops` with only the blocks' current lists, in block order.
    fn compact_block_ops(&mut self) {
        let mut out = Vec::with_capacity(self.ops.len());
        for block in &mut self.blocks {
            let (s, e) = (block.ops.0 as usize, block.ops.1 as usize);
            let start = out.len() as u32;
            out.extend_from_slice(&self.block_ops[s..e]);
            block.ops = (start, out.len() as u32);
        }
        self.block_ops = out;
    }

    /// Takes the ops `gone` out of `blocks` (the blocks holding them, in any order, repeats
    /// allowed): one pass over each block.
    pub fn remove_ops(&mut self, gone: &FastSet<u32>, blocks: impl IntoIterator<Item = u32>) {
        let mut blocks: Vec<u32> = blocks.into_iter().collect();
        blocks.sort_unstable();
        blocks.dedup();
        for b in blocks {
            let kept: Vec<u32> = self.block_ops(b).iter().copied().filter(|o| !gone.contains(o)).collect();
            self.set_block_ops(b, &kept);
        }
    }

    /// The blocks of op `op`'s region `r` (none when the op has no such region).
    pub fn region_blocks(&self, op: u32, r: usize) -> std::ops::Range<u32> {
        let (a, b) = self.ops[op as usize].regions;
        if a as usize + r >= b as usize {
            return 0..0;
        }
        let (s, e) = self.regions[a as usize + r];
        s..e
    }

    /// The block holding the module's top-level ops.
    pub fn module_block(&self) -> u32 {
        self.region_blocks(0, 0).start
    }

    /// The attributes of `op`, as (name, value) interned strings.
    pub fn op_attrs(&self, op: u32) -> &[(u32, u32)] {
        &self.attrs[range(self.ops[op as usize].attrs)]
    }

    /// The operands of `op`.
    pub fn op_operands(&self, op: u32) -> &[u32] {
        &self.operands[range(self.ops[op as usize].operands)]
    }

    /// The results of `op` (value ids).
    pub fn op_results(&self, op: u32) -> std::ops::Range<u32> {
        let (a, b) = self.ops[op as usize].results;
        a..b
    }

    /// Replaces operand `i` of `op`.
    pub fn set_operand(&mut self, op: u32, i: usize, value: u32) {
        let start = self.ops[op as usize].operands.0 as usize;
        self.operands[start + i] = value;
    }

    /// Replaces the attribute list of `op`.
    pub fn set_attrs(&mut self, op: u32, attrs: &[(u32, u32)]) {
        let span = &mut self.ops[op as usize].attrs;
        if (span.1 - span.0) as usize == attrs.len() {
            self.attrs[range(*span)].copy_from_slice(attrs);
            return;
        }
        let start = self.attrs.len() as u32;
        self.attrs.extend_from_slice(attrs);
        *span = (start, self.attrs.len() as u32);
    }

    /// Sets attribute `name` of `op` to `value` (text), appending it when the op has none.
    pub fn set_attr(&mut self, op: u32, name: &str, value: &str) {
        let (n, v) = (self.intern(name), self.intern(value));
        self.set_attr_id(op, n, v);
    }

    /// [`Program::set_attr`] with the name and the text interned already.
    pub fn set_attr_id(&mut self, op: u32, name: u32, value: u32) {
        let span = self.ops[op as usize].attrs;
        if let Some(slot) = self.attrs[range(span)].iter_mut().find(|(k, _)| *k == name) {
            slot.1 = value;
            return;
        }
        let mut attrs = self.op_attrs(op).to_vec();
        attrs.push((name, value));
        self.set_attrs(op, &attrs);
    }

    /// Sets (`Some`) or removes (`None`) attribute `name` (interned) of argument (`result`
    /// false) or result `index` of function `self.funcs[fi]` to `value` (interned); a new
    /// entry goes after the others.
    pub fn set_func_attr_id(&mut self, fi: usize, result: bool, index: usize, name: u32, value: Option<u32>) {
        let f = &mut self.funcs[fi];
        let (count, spans) =
            if result { (f.result_types.len(), &mut f.result_attrs) } else { (f.arg_types.len(), &mut f.arg_attrs) };
        if spans.len() < count {
            spans.resize(count, (0, 0));
        }
        let Some(&(a, b)) = spans.get(index) else { return };
        let mut list = self.attrs[a as usize..b as usize].to_vec();
        match value {
            Some(v) => match list.iter_mut().find(|(k, _)| *k == name) {
                Some(slot) => slot.1 = v,
                None => list.push((name, v)),
            },
            None => list.retain(|(k, _)| *k != name),
        }
        let start = self.attrs.len() as u32;
        self.attrs.extend(list);
        let spans = if result { &mut self.funcs[fi].result_attrs } else { &mut self.funcs[fi].arg_attrs };
        spans[index] = (start, self.attrs.len() as u32);
    }

    /// Removes attribute `name` of `op`; whether it had one.
    pub fn remove_attr(&mut self, op: u32, name: &str) -> bool {
        let attrs = self.op_attrs(op);
        let Some(i) = attrs.iter().position(|(k, _)| self.strings.get(*k) == name) else {
            return false;
        };
        let mut attrs = attrs.to_vec();
        attrs.remove(i);
        self.set_attrs(op, &attrs);
        true
    }

    /// Appends a new op without regions: its results get `result_types` (interned texts).
    /// It is in no block until a pass puts it in one ([`Program::set_block_ops`]).
    pub fn new_op(
        &mut self,
        name: &str,
        operands: &[u32],
        result_types: &[u32],
        attrs: &[(u32, u32)],
        loc: u32,
    ) -> u32 {
        let name = self.intern(name);
        let o = self.operands.len() as u32;
        self.operands.extend_from_slice(operands);
        let r = self.value_types.len() as u32;
        self.value_types.extend_from_slice(result_types);
        let a = self.attrs.len() as u32;
        self.attrs.extend_from_slice(attrs);
        let g = self.regions.len() as u32;
        let op = self.ops.len() as u32;
        self.ops.push(OpData {
            name,
            operands: (o, o + operands.len() as u32),
            results: (r, r + result_types.len() as u32),
            attrs: (a, a + attrs.len() as u32),
            regions: (g, g),
            loc,
        });
        op
    }

    /// The `func.func` data of each function op.
    pub fn func_index(&self) -> FastMap<u32, usize> {
        self.funcs.iter().enumerate().map(|(i, f)| (f.op, i)).collect()
    }

    /// The function data of op `op`, when it is a `func.func`.
    pub fn func_data(&self, index: &FastMap<u32, usize>, op: u32) -> Option<&FuncData> {
        index.get(&op).map(|&i| &self.funcs[i])
    }

    /// `op` and the ops nested in it, in pre-order (an op before the ops of its regions),
    /// following the blocks' current op lists.
    pub fn walk(&self, root: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(op) = stack.pop() {
            out.push(op);
            let (a, b) = self.ops[op as usize].regions;
            for r in (a..b).rev() {
                let (s, e) = self.regions[r as usize];
                for blk in (s..e).rev() {
                    stack.extend(self.block_ops(blk).iter().rev());
                }
            }
        }
        out
    }

    /// Each op nested under `root` mapped to where it sits: its enclosing op and block, following
    /// the blocks' current op lists (`root` itself is not a key).
    pub fn parents(&self, root: u32) -> FastMap<u32, Parent> {
        self.nested_map(root, |op, block| Parent { op, block })
    }

    /// Each op nested under `root` mapped to its enclosing block (see [`Program::parents`]).
    pub fn enclosing_blocks(&self, root: u32) -> FastMap<u32, u32> {
        self.nested_map(root, |_, block| block)
    }

    /// Each op nested under `root` mapped to `place(enclosing op, enclosing block)`; the map is
    /// sized up front when `root` is the module (op 0).
    fn nested_map<V>(&self, root: u32, place: impl Fn(u32, u32) -> V) -> FastMap<u32, V> {
        let capacity = if root == 0 { self.ops.len() } else { 0 };
        let mut out = FastMap::with_capacity_and_hasher(capacity, Default::default());
        for op in self.walk(root) {
            let (a, b) = self.ops[op as usize].regions;
            for r in a..b {
                let (s, e) = self.regions[r as usize];
                for block in s..e {
                    out.extend(self.block_ops(block).iter().map(|&o| (o, place(op, block))));
                }
            }
        }
        out
    }

    /// The symbol name of `op` (its `sym_name` string), if it has one.
    pub fn symbol_name(&self, op: u32) -> Option<String> {
        crate::text::parse_string(self.attr(op, "sym_name")?).ok()
    }

    /// Each value's defining op (`u32::MAX` for a block argument).
    pub fn value_owners(&self) -> Vec<u32> {
        let mut out = vec![u32::MAX; self.value_types.len()];
        for (i, op) in self.ops.iter().enumerate() {
            for v in op.results.0..op.results.1 {
                out[v as usize] = i as u32;
            }
        }
        out
    }

    /// The block arguments of block `b` (value ids).
    pub fn block_args(&self, b: u32) -> std::ops::Range<u32> {
        let BlockData { args, .. } = self.blocks[b as usize];
        args.0..args.1
    }
}

/// Where an op sits: the op whose region holds it and the block of that region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parent {
    pub op: u32,
    pub block: u32,
}
