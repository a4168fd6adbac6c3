//! The shardings of a [`Program`], wherever the sdy dialect keeps them (Shardy's
//! `transformShardings` / `walkShardings` in `shardy/dialect/sdy/ir/utils.cc`; the slots of
//! `shardwise/ir/slots.py`): function argument and result attributes, a named or manual
//! computation's `in_shardings` and `out_shardings`, `sharding` of constraints, reshards and
//! data-flow edges, `out_sharding` of the sdy collectives, and every other op's
//! `sdy.sharding`.

use super::Program;
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::sharding::TensorSharding;
use crate::text::{parse_sharding, parse_sharding_per_value, print_sharding, print_sharding_per_value};

/// Where a sharding sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// Argument `index` of function `func` (the `func.func` op).
    FuncArg { func: u32, index: usize },
    /// Result `index` of function `func`.
    FuncResult { func: u32, index: usize },
    /// Operand `index` of a named or manual computation (its `in_shardings`).
    Operand { op: u32, index: usize },
    /// Result `index` of `op`.
    Result { op: u32, index: usize },
    /// Entry `index` of the `sdy.sharding` of an op without results.
    NoResult { op: u32, index: usize },
}

/// Ops whose operands have shardings of their own (`in_shardings`).
pub const REGION_DATA_FLOW_OPS: &[&str] = &["sdy.named_computation", "sdy.manual_computation"];

/// The attribute holding `op_name`'s result shardings and whether it holds one sharding
/// (`#sdy.sharding`) rather than one per result (`#sdy.sharding_per_value`).
pub fn result_slot(op_name: &str) -> (&'static str, bool) {
    match op_name {
        "sdy.sharding_constraint" | "sdy.reshard" | "sdy.data_flow_edge" => ("sharding", true),
        "sdy.manual_computation" | "sdy.named_computation" => ("out_shardings", false),
        "sdy.all_gather"
        | "sdy.all_slice"
        | "sdy.all_to_all"
        | "sdy.collective_permute"
        | "sdy.all_reduce"
        | "sdy.reduce_scatter"
        | "sdy.sharded_to_unreduced"
        | "sdy.replicated_to_unreduced" => ("out_sharding", true),
        _ => ("sdy.sharding", false),
    }
}

fn read(text: &str, single: bool, what: impl Fn() -> String) -> Result<Vec<TensorSharding>> {
    let parsed = if single { parse_sharding(text).map(|s| vec![s]) } else { parse_sharding_per_value(text) };
    parsed.map_err(|e| Error::program(format!("{}: cannot read the sharding {text}: {}", what(), e.message)))
}

fn print(shardings: &[TensorSharding], single: bool) -> String {
    if single {
        print_sharding(&shardings[0])
    } else {
        print_sharding_per_value(shardings)
    }
}

/// What [`transform_shardings`] does with one sharding: `Ok(None)` keeps it.
pub type Transform<'a> = dyn FnMut(&mut Program, &TensorSharding, Site) -> Result<Option<TensorSharding>> + 'a;

impl Program {
    /// `op` and where it was read from, for messages (`stablehlo.add at loc(...)`).
    pub fn op_where(&self, op: u32) -> String {
        format!("{} at {}", self.op_name(op), self.loc_text(self.ops[op as usize].loc))
    }

    /// Calls `f` on every sharding, in pre-order over the ops (a function's argument then
    /// result shardings; a named or manual computation's in then out shardings; each op's
    /// result shardings), storing what it returns. `f` may add ops (they are not visited).
    /// Raises `Program` errors for sharding text that cannot be read.
    pub fn transform_shardings(&mut self, f: &mut Transform) -> Result<()> {
        let funcs = self.func_index();
        let sharding = self.intern("sdy.sharding");
        for op in self.walk(0) {
            if let Some(&fi) = funcs.get(&op) {
                for is_result in [false, true] {
                    let count =
                        if is_result { self.funcs[fi].result_attrs.len() } else { self.funcs[fi].arg_attrs.len() };
                    for index in 0..count {
                        let span = if is_result {
                            self.funcs[fi].result_attrs[index]
                        } else {
                            self.funcs[fi].arg_attrs[index]
                        };
                        let Some(&(_, text)) =
                            self.attrs[span.0 as usize..span.1 as usize].iter().find(|(k, _)| *k == sharding)
                        else {
                            continue;
                        };
                        let text = self.strings.get(text).to_string();
                        let s = read(&text, true, || self.op_where(op))?;
                        let site = if is_result {
                            Site::FuncResult { func: op, index }
                        } else {
                            Site::FuncArg { func: op, index }
                        };
                        if let Some(new) = f(self, &s[0], site)? {
                            let v = self.intern(&print_sharding(&new));
                            self.set_func_attr_id(fi, is_result, index, sharding, Some(v));
                        }
                    }
                }
                continue;
            }
            let name = self.op_name(op).to_string();
            if REGION_DATA_FLOW_OPS.contains(&name.as_str()) {
                self.transform_slot(op, "in_shardings", false, |index| Site::Operand { op, index }, f)?;
            }
            let (slot, single) = result_slot(&name);
            let no_results = self.ops[op as usize].results.0 == self.ops[op as usize].results.1;
            if no_results {
                self.transform_slot(op, "sdy.sharding", false, |index| Site::NoResult { op, index }, f)?;
            } else {
                self.transform_slot(op, slot, single, |index| Site::Result { op, index }, f)?;
            }
        }
        Ok(())
    }

    /// [`Program::transform_shardings`] for a transform `f` of each sharding alone (no site,
    /// no program): each distinct sharding text (programs repeat a few dozen over tens of
    /// thousands of ops) is read, transformed and printed once, and every attribute holding it
    /// gets the one result. The same shardings in the same order as `transform_shardings`;
    /// errors as there, at the first attribute holding the failing text.
    pub fn map_shardings(
        &mut self,
        f: &mut dyn FnMut(&TensorSharding) -> Result<Option<TensorSharding>>,
    ) -> Result<()> {
        let mut memo: FastMap<(u32, bool), Option<u32>> = FastMap::default();
        let funcs = self.func_index();
        let sharding = self.intern("sdy.sharding");
        for op in self.walk(0) {
            if let Some(&fi) = funcs.get(&op) {
                for is_result in [false, true] {
                    let count =
                        if is_result { self.funcs[fi].result_attrs.len() } else { self.funcs[fi].arg_attrs.len() };
                    for index in 0..count {
                        let f_data = &self.funcs[fi];
                        let span = if is_result { f_data.result_attrs[index] } else { f_data.arg_attrs[index] };
                        let Some(&(_, text)) =
                            self.attrs[span.0 as usize..span.1 as usize].iter().find(|(k, _)| *k == sharding)
                        else {
                            continue;
                        };
                        let Some(v) = self.mapped(&mut memo, text, true, op, f)? else { continue };
                        self.set_func_attr_id(fi, is_result, index, sharding, Some(v));
                    }
                }
                continue;
            }
            let name = self.op_name(op);
            let in_shardings = REGION_DATA_FLOW_OPS.contains(&name);
            let (slot, single) = result_slot(name);
            let no_results = self.ops[op as usize].results.0 == self.ops[op as usize].results.1;
            if in_shardings {
                self.map_slot(&mut memo, op, "in_shardings", false, f)?;
            }
            if no_results {
                self.map_slot(&mut memo, op, "sdy.sharding", false, f)?;
            } else {
                self.map_slot(&mut memo, op, slot, single, f)?;
            }
        }
        Ok(())
    }

    /// Attribute `slot` of `op` mapped by `f` (see [`Program::map_shardings`]).
    fn map_slot(
        &mut self,
        memo: &mut FastMap<(u32, bool), Option<u32>>,
        op: u32,
        slot: &str,
        single: bool,
        f: &mut dyn FnMut(&TensorSharding) -> Result<Option<TensorSharding>>,
    ) -> Result<()> {
        let Some(text) = self.attr_id(op, slot) else { return Ok(()) };
        if let Some(v) = self.mapped(memo, text, single, op, f)? {
            let name = self.intern(slot);
            self.set_attr_id(op, name, v);
        }
        Ok(())
    }

    /// The text (interned) that the sharding text `text` becomes under `f`, `None` when
    /// unchanged; computed once per text (`memo`). `op` names the first holder in errors.
    fn mapped(
        &mut self,
        memo: &mut FastMap<(u32, bool), Option<u32>>,
        text: u32,
        single: bool,
        op: u32,
        f: &mut dyn FnMut(&TensorSharding) -> Result<Option<TensorSharding>>,
    ) -> Result<Option<u32>> {
        if let Some(&known) = memo.get(&(text, single)) {
            return Ok(known);
        }
        let mut shardings = read(self.strings.get(text), single, || self.op_where(op))?;
        let mut changed = false;
        for s in shardings.iter_mut() {
            if let Some(new) = f(s)? {
                changed |= new != *s;
                *s = new;
            }
        }
        let out = if changed { Some(self.intern(&print(&shardings, single))) } else { None };
        memo.insert((text, single), out);
        Ok(out)
    }

    fn transform_slot(
        &mut self,
        op: u32,
        slot: &str,
        single: bool,
        site: impl Fn(usize) -> Site,
        f: &mut Transform,
    ) -> Result<()> {
        let Some(text) = self.attr(op, slot) else {
            return Ok(());
        };
        let text = text.to_string();
        let mut shardings = read(&text, single, || self.op_where(op))?;
        let mut changed = false;
        for (index, s) in shardings.iter_mut().enumerate() {
            if let Some(new) = f(self, s, site(index))? {
                changed |= new != *s;
                *s = new;
            }
        }
        if changed {
            self.set_attr(op, slot, &print(&shardings, single));
        }
        Ok(())
    }
}
