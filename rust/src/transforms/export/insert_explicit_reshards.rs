//! `sdy-insert-explicit-reshards` (Shardy's `insert_explicit_reshards.cc` and
//! `explicit_reshards_util.cc`), as `python/shardwise/passes/explicit_reshards.py` runs it:
//! all-reduces where unreduced axes become replicated, the collectives that make tensors
//! unreduced, reshards of call operands to the callee's argument shardings, and per op with a
//! sharding rule the reshards and all-reduces [`crate::export::plan_op`] decides (without
//! `enable-full-version`: only the reshard that makes a dot compatible and the all-reduce of an
//! unreduced result). This file walks the program and inserts the ops.

use std::borrow::Cow;

use super::super::common::{callee_name, func_arg_shardings, meshes, post_order_of, resolve_mesh};
use super::super::propagation::freeze::{registry_rule, top_funcs, user_rule, Context, UserRule};
use super::super::PassContext;
use crate::axis::AxisRef;
use crate::error::{Error, Result};
use crate::export::explicit_reshards::{
    all_reduce_to_replicated, is_equivalent, plan_op, unreduced_collectives, OpReshards, OpShardings, Version,
};
use crate::fast_hash::{FastMap, FastSet};
use crate::ir::clone::Uses;
use crate::ir::symbols::SymbolTable;
use crate::ir::values::{
    add_free_axes, erase_manual_axes, manual_axes, result_sharding, set_result_sharding, ValueIndex,
};
use crate::ir::{types, Program};
use crate::mesh::Mesh;
use crate::rule::text::parse_rule;
use crate::rule::OpShardingRule;
use crate::rules::{Builtin, CONTEXT_OPS};
use crate::sharding::{MeshRef, TensorSharding};
use crate::text::{parse_sharding_per_value, print_axis_ref_list_attr, print_axis_ref_lists_attr};

const CALL: &str = "func.call";
const RESHARD: &str = "sdy.reshard";
const ALL_REDUCE: &str = "sdy.all_reduce";
const BARRIER: &str = "sdy.propagation_barrier";
const MANUAL: &str = "sdy.manual_computation";
use crate::transforms::op_properties::TERMINATORS;
const REGION_DATA_FLOW: &[&str] = &["sdy.named_computation", MANUAL];
const DATA_FLOW: &[&str] =
    &["sdy.named_computation", MANUAL, "stablehlo.while", "stablehlo.case", "stablehlo.optimization_barrier"];
const UNREDUCED_OPS: &[&str] = &["sdy.sharded_to_unreduced", "sdy.replicated_to_unreduced"];

/// A program error of the plans names the op (as `ProgramError`s do); other
/// errors (an invalid sharding) pass unchanged.
fn in_op(p: &Program, op: u32, e: Error) -> Error {
    match e.kind {
        crate::error::ErrorKind::Program => Error::program(format!("{}: {}", p.op_where(op), e.message)),
        _ => e,
    }
}

fn fully_closed(mesh: MeshRef, rank: usize) -> TensorSharding {
    TensorSharding::replicated(mesh, rank, false)
}

/// A memo key: op name, version, operand count, attributes, and per value its type, sharding
/// and sharding through propagation barriers (shardings by their index in
/// `Reshards::sharding_ids`, `NO_SHARDING` for none: equal indices are equal shardings).
type Key = (u32, bool, usize, Vec<(u32, u32)>, Vec<(u32, u32, u32)>);

/// The index of no sharding in a [`Key`].
const NO_SHARDING: u32 = u32::MAX;

/// The sharding of `v` ([`ValueIndex::sharding_of`]), or for a value without one that an op of
/// [`UNREDUCED_OPS`] defines, that op's first result sharding; borrowed where it is an entry
/// of a sharding attribute.
fn sharding_in<'v>(
    values: &'v mut ValueIndex,
    uses: &Uses,
    p: &Program,
    v: u32,
) -> Result<Option<Cow<'v, TensorSharding>>> {
    let unreduced = match values.defining_op(p, v) {
        Some(d) if UNREDUCED_OPS.contains(&p.op_name(d)) => Some(d),
        _ => None,
    };
    if let Some(s) = values.sharding_of(p, uses, v)? {
        return Ok(Some(s));
    }
    match unreduced {
        Some(d) => Ok(result_sharding(p, d, 0)?.map(Cow::Owned)),
        None => Ok(None),
    }
}

struct Reshards<'a> {
    full: bool,
    meshes: &'a FastMap<String, Mesh>,
    symbols: &'a SymbolTable,
    uses: Uses,
    values: ValueIndex,
    /// Op -> its block, kept up to date as ops are inserted.
    blocks: FastMap<u32, u32>,
    /// The insertion point: new ops go before `next` in `block` (at the end when `None`).
    at: (u32, Option<u32>),
    inserted: usize,
    unchanged: FastSet<Key>,
    erased: FastSet<u32>,
    context: Option<Context>,
    /// Sharding rules read from `sdy.sharding_rule` texts (interned text -> rule): ops of a
    /// kind share one text.
    rules: FastMap<u32, OpShardingRule>,
    /// The distinct shardings the memo keys name, by index (each is hashed once per value
    /// instead of with the whole key, and keys hold no copies).
    sharding_ids: FastMap<TensorSharding, u32>,
    /// Whether a sharding may have unreduced axes: one of the program's sharding texts names
    /// them, or the pass wrote such a sharding. Without them and without the full version, an
    /// op other than a dot keeps its operands and results ([`Reshards::op_tail`]).
    maybe_unreduced: bool,
}

fn is_dot(name: &str) -> bool {
    name == "stablehlo.dot" || name == "stablehlo.dot_general"
}

/// Whether a sharding text of `p` names unreduced axes.
fn names_unreduced(p: &Program) -> bool {
    p.strings.strings.iter().any(|s| s.starts_with("#sdy.sharding") && s.contains("unreduced"))
}

impl Reshards<'_> {
    fn where_(p: &Program, op: u32) -> String {
        p.op_where(op)
    }

    fn sharding(&mut self, p: &Program, v: u32) -> Result<Option<TensorSharding>> {
        Ok(sharding_in(&mut self.values, &self.uses, p, v)?.map(Cow::into_owned))
    }

    fn mesh(&self, s: &TensorSharding) -> Result<Mesh> {
        resolve_mesh(s, self.meshes).cloned()
    }

    fn block_of(&self, p: &Program, op: u32) -> Result<u32> {
        self.blocks.get(&op).copied().ok_or_else(|| Error::program(format!("{}: in no block", p.op_where(op))))
    }

    fn before(&mut self, p: &Program, op: u32) -> Result<()> {
        self.at = (self.block_of(p, op)?, Some(op));
        Ok(())
    }

    fn after(&mut self, p: &Program, op: u32) -> Result<()> {
        let block = self.block_of(p, op)?;
        let ops = p.block_ops(block);
        let next = ops.iter().position(|&o| o == op).and_then(|i| ops.get(i + 1).copied());
        self.at = (block, next);
        Ok(())
    }

    fn after_value(&mut self, p: &Program, v: u32) -> Result<()> {
        match self.values.defining_op(p, v) {
            Some(d) => self.after(p, d),
            None => {
                let block = self
                    .values
                    .arg_block(v)
                    .ok_or_else(|| Error::program(format!("value {v} is no result and no block argument")))?;
                self.at = (block, p.block_ops(block).first().copied());
                Ok(())
            }
        }
    }

    fn loc_of(&mut self, p: &mut Program, v: u32) -> u32 {
        match self.values.defining_op(p, v) {
            Some(d) => p.ops[d as usize].loc,
            None => p.intern("loc(unknown)"),
        }
    }

    /// A new op `name` of `operand` (result of its type), with `attrs` and the result sharding,
    /// at the insertion point; its result.
    fn new_op(
        &mut self,
        p: &mut Program,
        name: &str,
        operand: u32,
        attrs: &[(&str, String)],
        sharding: Option<&TensorSharding>,
        loc: u32,
    ) -> Result<u32> {
        let attrs: Vec<(u32, u32)> = attrs.iter().map(|(k, v)| (p.intern(k), p.intern(v))).collect();
        let ty = p.value_types[operand as usize];
        let op = p.new_op(name, &[operand], &[ty], &attrs, loc);
        if let Some(s) = sharding {
            self.maybe_unreduced |= !s.unreduced.is_empty();
            set_result_sharding(p, op, 0, s)?;
        }
        let (block, next) = self.at;
        let mut list = p.block_ops(block).to_vec();
        match next.and_then(|n| list.iter().position(|&o| o == n)) {
            Some(i) => list.insert(i, op),
            None => list.push(op),
        }
        p.set_block_ops(block, &list);
        self.blocks.insert(op, block);
        self.uses.add(p, op);
        self.inserted += 1;
        Ok(p.op_results(op).start)
    }

    fn operand(p: &Program, user: u32, index: usize) -> Result<u32> {
        p.op_operands(user)
            .get(index)
            .copied()
            .ok_or_else(|| Error::program(format!("{}: no operand {index}", p.op_where(user))))
    }

    /// Shardy's `insertAllReduceIfUnreducedToReplicated`.
    fn all_reduce_if_unreduced_to_replicated(
        &mut self,
        p: &mut Program,
        user: u32,
        index: usize,
        source: Option<TensorSharding>,
        target: Option<&TensorSharding>,
    ) -> Result<Option<TensorSharding>> {
        let Some(source) = source else { return Ok(None) };
        if source.unreduced.is_empty() {
            return Ok(Some(source));
        }
        let mesh = self.mesh(&source)?;
        let mut target_unreduced: &[AxisRef] = &[];
        if let Some(t) = target {
            target_unreduced = &t.unreduced;
            if self.mesh(t)? != mesh {
                return Err(Error::program(format!(
                    "{}: source and user shardings have different meshes for unreduced axes",
                    Self::where_(p, user)
                )));
            }
        }
        let Some((axes, new)) = all_reduce_to_replicated(&source, target_unreduced, &mesh)? else {
            return Ok(Some(source));
        };
        let v = Self::operand(p, user, index)?;
        let loc = self.loc_of(p, v);
        let r =
            self.new_op(p, ALL_REDUCE, v, &[("reduction_axes", print_axis_ref_list_attr(&axes))], Some(&new), loc)?;
        self.uses.set_operand(p, user, index, r);
        Ok(Some(new))
    }

    /// Shardy's `insertUnreducedCollectives`.
    fn unreduced_collectives(
        &mut self,
        p: &mut Program,
        user: u32,
        index: usize,
        out: Option<&TensorSharding>,
    ) -> Result<Option<TensorSharding>> {
        let inp = Self::operand(p, user, index)?;
        let ins = self.sharding(p, inp)?;
        let (Some(ins), Some(out)) = (ins, out) else { return Ok(None) };
        if out.unreduced.is_empty() {
            return Ok(None);
        }
        let mesh = self.mesh(&ins)?;
        if self.mesh(out)? != mesh {
            return Err(Error::program(format!(
                "{}: input and output shardings have different meshes; the result has unreduced axes",
                Self::where_(p, user)
            )));
        }
        let plan = unreduced_collectives(&ins, out, &mesh).map_err(|e| in_op(p, user, e))?;
        let Some(plan) = plan else { return Ok(None) };
        if plan.last().is_none() {
            return Ok(None);
        }
        let (mut result, loc) = (inp, self.loc_of(p, inp));
        let mut last = None;
        if let Some(s) = &plan.reshard {
            result = self.new_op(p, RESHARD, result, &[], Some(s), loc)?;
            last = Some(s.clone());
        }
        if let Some((axes, s)) = &plan.replicated_to_unreduced {
            result = self.new_op(
                p,
                "sdy.replicated_to_unreduced",
                result,
                &[("axes", print_axis_ref_list_attr(axes))],
                Some(s),
                loc,
            )?;
            last = Some(s.clone());
        }
        if let Some((axes, _)) = &plan.sharded_to_unreduced {
            result = self.new_op(
                p,
                "sdy.sharded_to_unreduced",
                result,
                &[("axes", print_axis_ref_lists_attr(axes))],
                Some(out),
                loc,
            )?;
            last = Some(out.clone());
        }
        self.uses.set_operand(p, user, index, result);
        Ok(last)
    }

    /// Shardy's `insertExplicitReshardsToTargetSharding`.
    fn reshard_to_target(
        &mut self,
        p: &mut Program,
        user: u32,
        index: usize,
        target: Option<&TensorSharding>,
        after_operand: bool,
        full: bool,
    ) -> Result<()> {
        let operand = Self::operand(p, user, index)?;
        let mut source = self.sharding(p, operand)?;
        if after_operand {
            self.after_value(p, operand)?;
        }
        if source.is_some() {
            source = self.all_reduce_if_unreduced_to_replicated(p, user, index, source, target)?;
        }
        if let Some(new) = self.unreduced_collectives(p, user, index, target)? {
            source = Some(new);
        }
        if full && !is_equivalent(source.as_ref(), target) {
            let operand = Self::operand(p, user, index)?;
            let target = match (target, &source) {
                (Some(t), _) => t.clone(),
                (None, Some(s)) => fully_closed(s.mesh.clone(), s.rank()),
                (None, None) => return Ok(()),
            };
            let loc = self.loc_of(p, operand);
            let r = self.new_op(p, RESHARD, operand, &[], Some(&target), loc)?;
            self.uses.set_operand(p, user, index, r);
        }
        Ok(())
    }

    fn in_shardings(p: &Program, op: u32) -> Result<Option<Vec<TensorSharding>>> {
        p.attr(op, "in_shardings")
            .map(|t| parse_sharding_per_value(t).map_err(|e| e.context(p.op_where(op))))
            .transpose()
    }

    /// The terminator of the entry block of region `r` of `op`.
    fn terminator(p: &Program, op: u32, r: usize) -> Result<u32> {
        let blocks = p.region_blocks(op, r);
        (!blocks.is_empty())
            .then(|| p.block_ops(blocks.start).last().copied())
            .flatten()
            .ok_or_else(|| Error::program(format!("{}: region {r} has no terminator", p.op_where(op))))
    }

    fn data_flow_op(&mut self, p: &mut Program, op: u32, full: bool) -> Result<()> {
        let name = p.op_name(op).to_string();
        let results: Vec<u32> = p.op_results(op).collect();
        let mut owners: Vec<(usize, bool)> = (0..results.len()).map(|i| (i, false)).collect();
        if REGION_DATA_FLOW.contains(&name.as_str()) {
            let entry = p.region_blocks(op, 0);
            if !entry.is_empty() {
                owners.extend((0..p.block_args(entry.start).len()).map(|i| (i, true)));
            }
        }
        let manual = (name == MANUAL).then(|| manual_axes(p.attr(op, "manual_axes").unwrap_or("")));
        let in_shardings = Self::in_shardings(p, op)?;
        for (index, is_arg) in owners {
            let target = if let Some(manual) = &manual {
                if is_arg {
                    let outer = in_shardings.as_ref().and_then(|all| all.get(index)).ok_or_else(|| {
                        Error::program(format!("{}: no in_sharding for operand {index}", p.op_where(op)))
                    })?;
                    Some(add_free_axes(outer, &erase_manual_axes(outer, manual), manual))
                } else {
                    result_sharding(p, op, index)?.map(|s| erase_manual_axes(&s, manual))
                }
            } else if is_arg {
                in_shardings.as_ref().and_then(|all| all.get(index).cloned())
            } else {
                result_sharding(p, op, index)?
            };
            let sources: Vec<(u32, usize)> = match name.as_str() {
                "stablehlo.while" => vec![(op, index), (Self::terminator(p, op, 1)?, index)],
                "stablehlo.case" => {
                    let (a, b) = p.ops[op as usize].regions;
                    (0..(b - a) as usize).map(|r| Ok((Self::terminator(p, op, r)?, index))).collect::<Result<_>>()?
                }
                "stablehlo.optimization_barrier" => vec![(op, index)],
                _ if is_arg => vec![(op, index)],
                _ => vec![(Self::terminator(p, op, 0)?, index)],
            };
            for (user, i) in sources {
                self.reshard_to_target(p, user, i, target.as_ref(), true, full)?;
            }
        }
        Ok(())
    }

    fn call(&mut self, p: &mut Program, op: u32) -> Result<()> {
        let name = callee_name(p, op).unwrap_or_default();
        let callee = self.symbols.lookup(&name).ok_or_else(|| {
            Error::program(format!("{}: calls @{name}, which the module does not define", p.op_where(op)))
        })?;
        let targets = match func_arg_shardings(p, callee, self.meshes)? {
            Some(t) => t,
            None => {
                let mut reference = None;
                for v in p.op_operands(op).to_vec() {
                    if let Some(s) = self.sharding(p, v)? {
                        if !self.mesh(&s)?.is_maximal() {
                            reference = Some(s);
                            break;
                        }
                    }
                }
                let Some(reference) = reference else { return Ok(()) };
                p.op_operands(op)
                    .iter()
                    .map(|&v| {
                        fully_closed(reference.mesh.clone(), types::rank(p.strings.get(p.value_types[v as usize])))
                    })
                    .collect()
            }
        };
        self.before(p, op)?;
        for (i, t) in targets.iter().enumerate() {
            self.reshard_to_target(p, op, i, Some(t), true, true)?;
        }
        Ok(())
    }

    fn all_reduce_on_op(&mut self, p: &mut Program, op: u32) -> Result<()> {
        let results: Vec<u32> = p.op_results(op).collect();
        if results.is_empty() {
            for v in p.op_operands(op).to_vec() {
                if self.sharding(p, v)?.is_some_and(|s| !s.unreduced.is_empty()) {
                    return Err(Error::program(format!(
                        "{}: some operands have unreduced axes but the operation has no results",
                        p.op_where(op)
                    )));
                }
            }
            return Ok(());
        }
        let first = self.sharding(p, results[0])?;
        let first_unreduced = first.as_ref().map(|s| s.unreduced.clone()).unwrap_or_default();
        for &r in &results[1..] {
            let s = self.sharding(p, r)?;
            if s.map(|s| s.unreduced).unwrap_or_default() != first_unreduced {
                return Err(Error::program(format!(
                    "{}: unreduced axes mismatch between results of a multi-result op",
                    p.op_where(op)
                )));
            }
        }
        self.before(p, op)?;
        for i in 0..p.op_operands(op).len() {
            let v = p.op_operands(op)[i];
            let s = self.sharding(p, v)?;
            if s.is_some() {
                self.all_reduce_if_unreduced_to_replicated(p, op, i, s, first.as_ref())?;
            }
        }
        Ok(())
    }

    fn rule(&mut self, p: &Program, op: u32) -> Result<Option<OpShardingRule>> {
        if let Some(text) = p.attr_id(op, "sdy.sharding_rule") {
            if let Some(rule) = self.rules.get(&text) {
                return Ok(Some(rule.clone()));
            }
            let rule = parse_rule(p.strings.get(text)).map_err(|e| e.context(p.op_where(op)))?;
            self.rules.insert(text, rule.clone());
            return Ok(Some(rule));
        }
        match user_rule(p, op)? {
            UserRule::Rule(rule) => return Ok(Some(rule)),
            UserRule::NoRule => return Ok(None),
            UserRule::NotGiven => {}
        }
        match registry_rule(p, op, false, &mut self.context)?.0 {
            Builtin::Rule(r) => Ok(Some(r)),
            Builtin::NoRule | Builtin::Unknown => Ok(None),
        }
    }

    /// Shardy's `getMesh`: the mesh all shardings share (device order aside), the most used
    /// one among the sharded tensors; `None` without shardings, for differing or maximal
    /// meshes.
    fn common_mesh(&self, shardings: &[Option<TensorSharding>]) -> Result<Option<(String, Mesh)>> {
        let mut reference: Option<&TensorSharding> = None;
        let mut mesh: Option<Mesh> = None;
        for s in shardings.iter().flatten() {
            let other = self.mesh(s)?;
            match &mesh {
                None => {
                    mesh = Some(other);
                    reference = Some(s);
                    continue;
                }
                Some(m) if m.is_empty() => {
                    mesh = Some(other);
                    reference = Some(s);
                    continue;
                }
                Some(_) if other.is_empty() => continue,
                Some(m) => {
                    if other.is_maximal() != m.is_maximal() || other.axes() != m.axes() {
                        return Ok(None);
                    }
                }
            }
            if other.device_ids().is_empty() {
                mesh = Some(other);
                reference = Some(s);
            }
        }
        let (Some(reference), Some(mesh)) = (reference, mesh) else { return Ok(None) };
        let MeshRef::Named(ref_name) = &reference.mesh else { return Ok(None) };
        if mesh.is_maximal() {
            return Ok(None);
        }
        let ref_name: String = ref_name.to_string();
        let mut best = (ref_name.clone(), mesh);
        let mut counts: FastMap<String, usize> = FastMap::default();
        let mut top = 0;
        for s in shardings.iter().flatten() {
            if s.dims.iter().all(|d| d.axes.is_empty()) {
                continue;
            }
            let name = match &s.mesh {
                MeshRef::Named(n) => n.to_string(),
                MeshRef::Inline(_) => ref_name.clone(),
            };
            let c = counts.entry(name.clone()).or_insert(0);
            *c += 1;
            if *c > top {
                top = *c;
                best = (name, self.mesh(s)?);
            }
        }
        Ok(Some(best))
    }

    fn full_version(&mut self, p: &Program, op: u32) -> Result<bool> {
        let name = p.op_name(op);
        if self.full || name == "mhlo.ragged_dot" || name == CALL {
            return Ok(true);
        }
        if name == "stablehlo.concatenate" {
            let Some(r) = p.op_results(op).next() else { return Ok(false) };
            let result = self.sharding(p, r)?;
            for v in p.op_operands(op).to_vec() {
                if self.sharding(p, v)? != result {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    fn op(&mut self, p: &mut Program, op: u32) -> Result<()> {
        let name = p.op_name(op).to_string();
        let n = name.as_str();
        let has_regions = p.ops[op as usize].regions.0 < p.ops[op as usize].regions.1;
        let special = TERMINATORS.contains(&n)
            || DATA_FLOW.contains(&n)
            || matches!(n, CALL | RESHARD | "stablehlo.concatenate" | "mhlo.ragged_dot");
        if !self.full && !special && !CONTEXT_OPS.contains(&n) && !has_regions {
            // Without the full version only dots and ops with unreduced shardings change.
            if !self.maybe_unreduced && !is_dot(n) {
                return Ok(());
            }
            return self.memoised_tail(p, op, false);
        }
        if TERMINATORS.contains(&n) {
            return Ok(());
        }
        let full = self.full_version(p, op)?;
        if DATA_FLOW.contains(&n) {
            return self.data_flow_op(p, op, full);
        }
        if n == CALL {
            return self.call(p, op);
        }
        if n == RESHARD {
            self.before(p, op)?;
            let s = result_sharding(p, op, 0)?;
            if self.unreduced_collectives(p, op, 0, s.as_ref())?.is_some() {
                let result = p.op_results(op).start;
                let operand = Self::operand(p, op, 0)?;
                self.uses.replace_all_uses(p, result, operand);
                self.uses.drop_op_only(p, op);
                let block = self.block_of(p, op)?;
                let kept: Vec<u32> = p.block_ops(block).iter().copied().filter(|&o| o != op).collect();
                p.set_block_ops(block, &kept);
                self.blocks.remove(&op);
                self.erased.insert(op);
                return Ok(());
            }
        }
        if CONTEXT_OPS.contains(&n) || has_regions {
            self.op_tail(p, op, full)
        } else {
            self.memoised_tail(p, op, full)
        }
    }

    /// The sharding of `v` looked up through propagation barriers.
    fn bypass(&mut self, p: &Program, mut v: u32) -> Result<Option<TensorSharding>> {
        while let Some(d) = self.values.defining_op(p, v).filter(|&d| p.op_name(d) == BARRIER) {
            match p.op_operands(d).first() {
                Some(&x) => v = x,
                None => break,
            }
        }
        self.sharding(p, v)
    }

    /// The index of `v`'s sharding (through propagation barriers when `through`) among the
    /// shardings memo keys name ([`Key`]); hashed by reference, copied once per distinct sharding.
    fn sharding_id(&mut self, p: &Program, mut v: u32, through: bool) -> Result<u32> {
        if through {
            while let Some(d) = self.values.defining_op(p, v).filter(|&d| p.op_name(d) == BARRIER) {
                match p.op_operands(d).first() {
                    Some(&x) => v = x,
                    None => break,
                }
            }
        }
        let next = self.sharding_ids.len() as u32;
        let Self { values, uses, sharding_ids, .. } = self;
        let Some(s) = sharding_in(values, uses, p, v)? else { return Ok(NO_SHARDING) };
        if let Some(&id) = sharding_ids.get(s.as_ref()) {
            return Ok(id);
        }
        sharding_ids.insert(s.into_owned(), next);
        Ok(next)
    }

    fn memoised_tail(&mut self, p: &mut Program, op: u32, full: bool) -> Result<()> {
        let mut signature = Vec::new();
        let values: Vec<u32> = p.op_operands(op).iter().copied().chain(p.op_results(op)).collect();
        for v in values {
            let s = self.sharding_id(p, v, false)?;
            let through = match self.values.defining_op(p, v) {
                Some(d) if p.op_name(d) == BARRIER => self.sharding_id(p, v, true)?,
                _ => s,
            };
            signature.push((p.value_types[v as usize], s, through));
        }
        let key: Key = (p.ops[op as usize].name, full, p.op_operands(op).len(), p.op_attrs(op).to_vec(), signature);
        if self.unchanged.contains(&key) {
            return Ok(());
        }
        let before = self.inserted;
        self.op_tail(p, op, full)?;
        if self.inserted == before {
            self.unchanged.insert(key);
        }
        Ok(())
    }

    fn other_device_order(&self, s: Option<&TensorSharding>, mesh: &Mesh) -> Result<bool> {
        match s {
            Some(s) if s.dims.iter().any(|d| !d.axes.is_empty()) => Ok(self.mesh(s)?.device_ids() != mesh.device_ids()),
            _ => Ok(false),
        }
    }

    fn num_elements(p: &Program, v: u32) -> (i64, bool) {
        match types::tensor_shape(p.strings.get(p.value_types[v as usize])) {
            Some(shape) => (shape.iter().product(), shape.iter().all(|&d| d >= 0)),
            None => (1, false),
        }
    }

    fn op_tail(&mut self, p: &mut Program, op: u32, full: bool) -> Result<()> {
        self.all_reduce_on_op(p, op)?;
        let Some(rule) = self.rule(p, op)? else { return Ok(()) };
        if rule.is_custom {
            return Ok(());
        }
        let operands = p.op_operands(op).to_vec();
        let results: Vec<u32> = p.op_results(op).collect();
        let ins = operands.iter().map(|&v| self.bypass(p, v)).collect::<Result<Vec<_>>>()?;
        let outs = results.iter().map(|&v| self.bypass(p, v)).collect::<Result<Vec<_>>>()?;
        let all: Vec<Option<TensorSharding>> = ins.iter().chain(&outs).cloned().collect();
        let Some((mesh_name, mesh)) = self.common_mesh(&all)? else { return Ok(()) };
        let name = p.op_name(op).to_string();
        let version = if full {
            Version::Full
        } else if is_dot(&name) {
            Version::Dot
        } else if outs.first().and_then(|s| s.as_ref()).is_some_and(|s| !s.unreduced.is_empty()) {
            Version::Basic
        } else {
            return Ok(());
        };
        let count = ins.len() + outs.len();
        let values: Vec<u32> = operands.iter().copied().chain(results.iter().copied()).collect();
        let (mut sizes, mut order) = (vec![0i64; count], vec![false; count]);
        let mut direct: Option<Vec<Option<TensorSharding>>> = None;
        let mut direct_order: Option<Vec<bool>> = None;
        if full {
            sizes = values
                .iter()
                .map(|&v| {
                    let (n, is_static) = Self::num_elements(p, v);
                    if is_static && types::tensor_shape(p.strings.get(p.value_types[v as usize])).is_some() {
                        n
                    } else {
                        0
                    }
                })
                .collect();
            order = all.iter().map(|s| self.other_device_order(s.as_ref(), &mesh)).collect::<Result<_>>()?;
            if name == "stablehlo.reshape" {
                let d = operands.iter().map(|&v| self.sharding(p, v)).collect::<Result<Vec<_>>>()?;
                if d != ins {
                    direct_order =
                        Some(d.iter().map(|s| self.other_device_order(s.as_ref(), &mesh)).collect::<Result<_>>()?);
                    direct = Some(d);
                }
            }
        } else if version == Version::Dot {
            sizes = values.iter().map(|&v| Self::num_elements(p, v).0).collect();
        }
        let plan = plan_op(&OpShardings {
            rule: &rule,
            operands: &ins,
            results: &outs,
            direct_operands: direct.as_deref(),
            mesh_name: &mesh_name,
            mesh: &mesh,
            sizes: &sizes,
            other_device_order: &order,
            direct_other_device_order: direct_order.as_deref(),
            version,
            is_reshape: name == "stablehlo.reshape",
        })
        .map_err(|e| in_op(p, op, e))?;
        self.apply(p, op, &plan, &mesh_name)
    }

    fn apply(&mut self, p: &mut Program, op: u32, plan: &OpReshards, mesh_name: &str) -> Result<()> {
        let reference = MeshRef::Named(mesh_name.into());
        if plan.operands.iter().any(Option::is_some) {
            self.before(p, op)?;
        }
        for (i, w) in plan.operands.iter().enumerate() {
            if let Some(w) = w {
                let operand = Self::operand(p, op, i)?;
                let loc = self.loc_of(p, operand);
                let r = self.new_op(p, RESHARD, operand, &[], Some(w), loc)?;
                self.uses.set_operand(p, op, i, r);
            }
        }
        let loc = p.ops[op as usize].loc;
        let results: Vec<u32> = p.op_results(op).collect();
        if plan.results.iter().any(Option::is_some) {
            self.after(p, op)?;
        }
        for (i, w) in plan.results.iter().enumerate() {
            let (Some(w), Some(&result)) = (w, results.get(i)) else { continue };
            let current = match self.sharding(p, result)? {
                Some(s) => s,
                None => fully_closed(reference.clone(), types::rank(p.strings.get(p.value_types[result as usize]))),
            };
            let back = self.new_op(p, RESHARD, result, &[], Some(&current), loc)?;
            self.replace_uses_except(p, result, back);
            self.maybe_unreduced |= !w.unreduced.is_empty();
            self.values.set_sharding(p, &self.uses, result, w)?;
        }
        if plan.all_reduce_axes.is_empty() || results.is_empty() {
            return Ok(());
        }
        let axes = print_axis_ref_list_attr(&plan.all_reduce_axes);
        self.after(p, op)?;
        for r in results {
            let s = match self.sharding(p, r)? {
                Some(s) => s,
                None => fully_closed(reference.clone(), types::rank(p.strings.get(p.value_types[r as usize]))),
            };
            let ar = self.new_op(p, ALL_REDUCE, r, &[("reduction_axes", axes.clone())], Some(&s), loc)?;
            self.replace_uses_except(p, r, ar);
        }
        Ok(())
    }

    /// Every use of `old` but the one by the op defining `new` takes `new`.
    fn replace_uses_except(&mut self, p: &mut Program, old: u32, new: u32) {
        let except = self.values.defining_op(p, new);
        let all: Vec<(u32, u32)> = self.uses.of(old).filter(|&(o, _)| Some(o) != except).collect();
        for (user, i) in all {
            self.uses.set_operand(p, user, i as usize, new);
        }
    }

    fn run_func(&mut self, p: &mut Program, func: u32, fi: usize) -> Result<()> {
        for op in post_order_of(p, &p.walk(func)) {
            if op == func || self.erased.contains(&op) {
                continue;
            }
            self.op(p, op)?;
        }
        let entry = p.region_blocks(func, 0);
        if entry.is_empty() {
            return Ok(());
        }
        let Some(&ret) = p.block_ops(entry.start).last() else { return Ok(()) };
        self.before(p, ret)?;
        for i in 0..p.op_operands(ret).len() {
            let target = self.values.func_result_sharding(p, fi, i)?.cloned();
            let full = self.full;
            self.reshard_to_target(p, ret, i, target.as_ref(), false, full)?;
        }
        Ok(())
    }
}

pub fn run(p: &mut Program, cx: &mut PassContext) -> Result<()> {
    let full = cx.flag("enable-full-version", false)?;
    let meshes = meshes(p)?;
    let funcs = p.func_index();
    for f in top_funcs(p) {
        if p.region_blocks(f, 0).is_empty() {
            continue;
        }
        let symbols = SymbolTable::new(p);
        let mut r = Reshards {
            full,
            meshes: &meshes,
            symbols: &symbols,
            uses: Uses::new(p, 0),
            values: ValueIndex::new(p),
            blocks: p.enclosing_blocks(0),
            at: (0, None),
            inserted: 0,
            unchanged: FastSet::default(),
            erased: FastSet::default(),
            context: None,
            rules: FastMap::default(),
            sharding_ids: FastMap::default(),
            maybe_unreduced: names_unreduced(p),
        };
        r.run_func(p, f, funcs[&f])?;
    }
    Ok(())
}
