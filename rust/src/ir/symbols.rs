//! The module's symbol table (MLIR's `SymbolTable` over the top-level ops): names to ops,
//! insertion with MLIR's renaming (`name_N`, one counter per table), erasure.

use super::Program;
use crate::fast_hash::FastMap;
use crate::text::quote;

/// The top-level symbols of a program.
pub struct SymbolTable {
    symbols: FastMap<String, u32>,
    counter: u32,
}

impl SymbolTable {
    pub fn new(p: &Program) -> SymbolTable {
        let mut symbols = FastMap::default();
        for &op in p.block_ops(p.module_block()) {
            if let Some(name) = p.symbol_name(op) {
                symbols.entry(name).or_insert(op);
            }
        }
        SymbolTable { symbols, counter: 0 }
    }

    pub fn lookup(&self, name: &str) -> Option<u32> {
        self.symbols.get(name).copied()
    }

    /// Registers `op` (already in the module block) under its name, renaming it `name_N` when
    /// the name is taken; returns the name it has.
    pub fn insert(&mut self, p: &mut Program, op: u32) -> String {
        let name = p.symbol_name(op).unwrap_or_default();
        match self.symbols.get(&name) {
            None => {
                self.symbols.insert(name.clone(), op);
                return name;
            }
            Some(&o) if o == op => return name,
            Some(_) => {}
        }
        let candidate = loop {
            let candidate = format!("{name}_{}", self.counter);
            self.counter += 1;
            if !self.symbols.contains_key(&candidate) {
                break candidate;
            }
        };
        p.set_attr(op, "sym_name", &quote(&candidate));
        self.symbols.insert(candidate.clone(), op);
        candidate
    }

    /// Removes `op` from the table and from the module block.
    pub fn erase(&mut self, p: &mut Program, op: u32) {
        if let Some(name) = p.symbol_name(op) {
            if self.symbols.get(&name) == Some(&op) {
                self.symbols.remove(&name);
            }
        }
        let block = p.module_block();
        let ops: Vec<u32> = p.block_ops(block).iter().copied().filter(|&o| o != op).collect();
        p.set_block_ops(block, &ops);
    }
}
