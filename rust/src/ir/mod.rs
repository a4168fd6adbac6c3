//! The program as flat arenas: ops, values, blocks and regions indexed by `u32`, with every
//! name, attribute text, type text and location interned once ([`Interner`]). This is what the
//! native MLIR reader (`crate::mlir`) builds; the Python IR is built from it in one pass
//! (`python/shardwise/importers/native.py`). No PyO3 type here.
//!
//! Layout (compressed sparse rows): op `i`'s operands are
//! `operands[op.operands.0 .. op.operands.1]`; its results are the values
//! `op.results.0 .. op.results.1` (consecutive); its attributes
//! `attrs[op.attrs.0 .. op.attrs.1]`; its regions `regions[op.regions.0 .. op.regions.1]`,
//! each a range of `blocks`, each block a range of `values` (its arguments) and of `block_ops`.
//! Ops are numbered in pre-order (an op before the ops of its regions).

pub mod clone;
mod edit;
pub mod linked;
pub mod shardings;
pub mod symbols;
pub mod types;
pub mod values;

use std::hash::Hasher;

use crate::fast_hash::FastMap;

/// A half-open range `start..end` into one of [`Program`]'s arrays.
pub type Span = (u32, u32);

/// Strings stored once and named by index. The index maps each string's 64-bit hash to the
/// string (strings whose hash an earlier string took are listed apart): a map keyed by the
/// strings themselves would hold every string twice, and a program's locations alone are one
/// distinct string per op.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    pub strings: Vec<String>,
    index: FastMap<u64, u32>,
    collided: FastMap<u64, Vec<u32>>,
}

impl Interner {
    fn hash(s: &str) -> u64 {
        let mut h = crate::fast_hash::FastHasher::default();
        h.write(s.as_bytes());
        h.finish()
    }

    /// The index of `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> u32 {
        self.intern_hashed(s, Self::hash(s))
    }

    /// [`Interner::intern`] with the hash given (tests force collisions with it).
    fn intern_hashed(&mut self, s: &str, h: u64) -> u32 {
        let i = self.strings.len() as u32;
        match self.index.get(&h) {
            None => {
                self.index.insert(h, i);
            }
            Some(&j) if self.strings[j as usize] == s => return j,
            Some(_) => {
                let more = self.collided.entry(h).or_default();
                if let Some(&j) = more.iter().find(|&&j| self.strings[j as usize] == s) {
                    return j;
                }
                more.push(i);
            }
        }
        self.strings.push(s.to_string());
        i
    }

    pub fn get(&self, i: u32) -> &str {
        &self.strings[i as usize]
    }
}

/// The flag of an op location that is no interned text but an implicit location (see
/// [`ImplicitLocs`]): the other bits index [`ImplicitLocs::at`].
pub const IMPLICIT_LOC: u32 = 1 << 31;

/// The implicit locations of the ops read without one (`loc("FILE":line:column)`, as jaxlib's
/// parser gives them), kept as numbers and formatted when asked ([`Program::loc_text`]): one
/// distinct text per op would cost an allocation and an interner entry each (issue 28's
/// reading and memory targets).
#[derive(Debug, Clone, Default)]
pub struct ImplicitLocs {
    /// The source name, quoted as it is printed.
    pub source: String,
    /// `(line, column)` per implicit location.
    pub at: Vec<(u32, u32)>,
}

/// One op: its name, operands (value ids), results (value ids), attributes (name, text), regions
/// and location (an interned `loc(...)` text, or an implicit location: [`IMPLICIT_LOC`]).
#[derive(Debug, Clone, Copy)]
pub struct OpData {
    pub name: u32,
    pub operands: Span,
    pub results: Span,
    pub attrs: Span,
    pub regions: Span,
    pub loc: u32,
}

/// One block: its arguments (a range of value ids) and its ops (a range of `block_ops`).
#[derive(Debug, Clone, Copy)]
pub struct BlockData {
    pub args: Span,
    pub ops: Span,
}

/// What a `func.func` carries besides its attributes: the types of its arguments and results
/// and their attribute dictionaries (ranges of `attrs`), as `function_type`, `arg_attrs` and
/// `res_attrs` hold them in MLIR's generic form.
#[derive(Debug, Clone, Default)]
pub struct FuncData {
    pub op: u32,
    pub arg_types: Vec<u32>,
    pub result_types: Vec<u32>,
    pub arg_attrs: Vec<Span>,
    pub result_attrs: Vec<Span>,
}

/// A whole module. `module` is the `builtin.module` op (op 0); values carry interned type text.
#[derive(Debug, Clone, Default)]
pub struct Program {
    pub strings: Interner,
    pub ops: Vec<OpData>,
    pub operands: Vec<u32>,
    /// The type (interned text) of each value.
    pub value_types: Vec<u32>,
    pub attrs: Vec<(u32, u32)>,
    /// Each region's range of `blocks`.
    pub regions: Vec<Span>,
    pub blocks: Vec<BlockData>,
    pub block_ops: Vec<u32>,
    pub funcs: Vec<FuncData>,
    pub implicit_locs: ImplicitLocs,
}

impl Program {
    /// The text of location `loc` (an op's `loc`): `loc(...)`.
    pub fn loc_text(&self, loc: u32) -> std::borrow::Cow<'_, str> {
        if loc & IMPLICIT_LOC == 0 {
            return std::borrow::Cow::Borrowed(self.strings.get(loc));
        }
        let (line, column) = self.implicit_locs.at[(loc & !IMPLICIT_LOC) as usize];
        std::borrow::Cow::Owned(format!("loc({}:{line}:{column})", self.implicit_locs.source))
    }

    /// An implicit location at `line` and `column` of the source (see [`ImplicitLocs`]).
    pub fn implicit_loc(&mut self, line: u32, column: u32) -> u32 {
        let i = self.implicit_locs.at.len() as u32;
        if i >= IMPLICIT_LOC {
            let text = format!("loc({}:{line}:{column})", self.implicit_locs.source);
            return self.strings.intern(&text);
        }
        self.implicit_locs.at.push((line, column));
        i | IMPLICIT_LOC
    }

    pub fn op_name(&self, op: u32) -> &str {
        self.strings.get(self.ops[op as usize].name)
    }

    /// The attribute `name` of `op`, if it has one.
    pub fn attr(&self, op: u32, name: &str) -> Option<&str> {
        self.attr_id(op, name).map(|v| self.strings.get(v))
    }

    /// The interned text of attribute `name` of `op`, if it has one.
    pub fn attr_id(&self, op: u32, name: &str) -> Option<u32> {
        let (a, b) = self.ops[op as usize].attrs;
        self.attrs[a as usize..b as usize].iter().find(|(n, _)| self.strings.get(*n) == name).map(|&(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::Interner;

    #[test]
    fn strings_whose_hashes_collide_keep_their_own_index() {
        let mut t = Interner::default();
        let (a, b, c) = (t.intern_hashed("a", 7), t.intern_hashed("b", 7), t.intern_hashed("c", 7));
        assert_eq!((a, b, c), (0, 1, 2));
        assert_eq!((t.intern_hashed("c", 7), t.intern_hashed("a", 7), t.intern_hashed("b", 7)), (2, 0, 1));
        assert_eq!((t.get(0), t.get(1), t.get(2)), ("a", "b", "c"));
    }
}
