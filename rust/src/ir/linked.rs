//! The blocks' op lists as doubly linked lists, for a pass that inserts, erases and moves
//! many ops one at a time (MLIR's `Block::getOperations()` is such a list): each edit is
//! O(1) instead of the O(block) of rewriting a block's slice of [`Program::block_ops`].
//! [`LinkedBlocks::write_back`] stores the lists that changed back into the program.

use super::Program;

const NONE: u32 = u32::MAX;

/// Every block's ops as a linked list, with each op's block and each block's owner op.
pub struct LinkedBlocks {
    prev: Vec<u32>,
    next: Vec<u32>,
    block_of: Vec<u32>,
    first: Vec<u32>,
    last: Vec<u32>,
    owner: Vec<u32>,
    /// The first block of the region holding each block.
    region_entry: Vec<u32>,
    changed: Vec<bool>,
}

impl LinkedBlocks {
    /// The lists of every block of `p` reached from the module op.
    pub fn new(p: &Program) -> LinkedBlocks {
        let (n_ops, n_blocks) = (p.ops.len(), p.blocks.len());
        let mut l = LinkedBlocks {
            prev: vec![NONE; n_ops],
            next: vec![NONE; n_ops],
            block_of: vec![NONE; n_ops],
            first: vec![NONE; n_blocks],
            last: vec![NONE; n_blocks],
            owner: vec![NONE; n_blocks],
            region_entry: vec![NONE; n_blocks],
            changed: vec![false; n_blocks],
        };
        for op in p.walk(0) {
            let (a, b) = p.ops[op as usize].regions;
            for r in a..b {
                let (s, e) = p.regions[r as usize];
                for block in s..e {
                    l.owner[block as usize] = op;
                    l.region_entry[block as usize] = s;
                    let mut before = NONE;
                    for &o in p.block_ops(block) {
                        l.block_of[o as usize] = block;
                        l.prev[o as usize] = before;
                        if before == NONE {
                            l.first[block as usize] = o;
                        } else {
                            l.next[before as usize] = o;
                        }
                        before = o;
                    }
                    l.last[block as usize] = before;
                }
            }
        }
        l
    }

    fn get(v: &[u32], i: u32) -> Option<u32> {
        v.get(i as usize).copied().filter(|&x| x != NONE)
    }

    /// Makes room for ops added to the program since (`new_op`).
    fn grow(&mut self, op: u32) {
        let n = op as usize + 1;
        if self.prev.len() < n {
            self.prev.resize(n, NONE);
            self.next.resize(n, NONE);
            self.block_of.resize(n, NONE);
        }
    }

    /// The block holding `op`; `None` once it is unlinked (or never linked).
    pub fn block_of(&self, op: u32) -> Option<u32> {
        Self::get(&self.block_of, op)
    }

    /// The op whose region holds `block`.
    pub fn owner(&self, block: u32) -> Option<u32> {
        Self::get(&self.owner, block)
    }

    /// The entry block of the region holding `block`.
    pub fn region_entry(&self, block: u32) -> Option<u32> {
        Self::get(&self.region_entry, block)
    }

    pub fn first(&self, block: u32) -> Option<u32> {
        Self::get(&self.first, block)
    }

    /// The op before `op` in its block.
    pub fn prev(&self, op: u32) -> Option<u32> {
        Self::get(&self.prev, op)
    }

    /// The ops of `block`, in order.
    pub fn ops(&self, block: u32) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(self.first(block), |&o| Self::get(&self.next, o))
    }

    /// Whether `op` is still nested in the module (every op above it linked).
    pub fn attached(&self, mut op: u32) -> bool {
        while op != 0 {
            let Some(block) = self.block_of(op) else { return false };
            let Some(owner) = self.owner(block) else { return false };
            op = owner;
        }
        true
    }

    /// Takes `op` out of its block (nothing when it is in none).
    pub fn unlink(&mut self, op: u32) {
        let Some(block) = self.block_of(op) else { return };
        let (before, after) = (self.prev[op as usize], self.next[op as usize]);
        match before {
            NONE => self.first[block as usize] = after,
            b => self.next[b as usize] = after,
        }
        match after {
            NONE => self.last[block as usize] = before,
            a => self.prev[a as usize] = before,
        }
        self.prev[op as usize] = NONE;
        self.next[op as usize] = NONE;
        self.block_of[op as usize] = NONE;
        self.changed[block as usize] = true;
    }

    /// Puts `op` (in no block) right before `anchor`.
    pub fn insert_before(&mut self, anchor: u32, op: u32) {
        self.grow(op.max(anchor));
        let Some(block) = self.block_of(anchor) else { return };
        let before = self.prev[anchor as usize];
        self.prev[op as usize] = before;
        self.next[op as usize] = anchor;
        self.prev[anchor as usize] = op;
        match before {
            NONE => self.first[block as usize] = op,
            b => self.next[b as usize] = op,
        }
        self.block_of[op as usize] = block;
        self.changed[block as usize] = true;
    }

    /// Puts `op` (in no block) first in `block`.
    pub fn push_front(&mut self, block: u32, op: u32) {
        self.grow(op);
        match self.first(block) {
            Some(head) => self.insert_before(head, op),
            None => {
                self.first[block as usize] = op;
                self.last[block as usize] = op;
                self.block_of[op as usize] = block;
                self.changed[block as usize] = true;
            }
        }
    }

    /// Stores the lists of the blocks that changed in `p`.
    pub fn write_back(&mut self, p: &mut Program) {
        for block in 0..self.changed.len() as u32 {
            if std::mem::take(&mut self.changed[block as usize]) {
                let ops: Vec<u32> = self.ops(block).collect();
                p.set_block_ops(block, &ops);
            }
        }
    }
}

impl LinkedBlocks {
    /// The blocks of `op`'s regions, in order.
    fn blocks_of(p: &Program, op: u32) -> impl DoubleEndedIterator<Item = u32> + '_ {
        let (a, b) = p.ops.get(op as usize).map_or((0, 0), |o| o.regions);
        (a..b).flat_map(move |r| {
            let (s, e) = p.regions[r as usize];
            s..e
        })
    }

    /// `root` and the ops nested in it in post-order (MLIR's default walk: an op after the
    /// ops of its regions), following the lists.
    pub fn post_order(&self, p: &Program, root: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack = vec![(root, false)];
        while let Some((op, expanded)) = stack.pop() {
            if expanded {
                out.push(op);
                continue;
            }
            stack.push((op, true));
            let children: Vec<u32> = Self::blocks_of(p, op).flat_map(|b| self.ops(b)).collect();
            stack.extend(children.into_iter().rev().map(|o| (o, false)));
        }
        out
    }

    /// The ops directly in `op`'s regions, in order.
    pub fn children(&self, p: &Program, op: u32) -> Vec<u32> {
        Self::blocks_of(p, op).flat_map(|b| self.ops(b)).collect()
    }

    /// Whether `a` comes before `b` in their block (both in `block`).
    pub fn is_before(&self, block: u32, a: u32, b: u32) -> bool {
        self.ops(block).find(|&o| o == a || o == b) == Some(a) && a != b
    }
}

impl LinkedBlocks {
    /// `root` and the ops nested in it in pre-order (an op before the ops of its regions),
    /// following the lists.
    pub fn pre_order(&self, p: &Program, root: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(op) = stack.pop() {
            out.push(op);
            let children = self.children(p, op);
            stack.extend(children.into_iter().rev());
        }
        out
    }
}
