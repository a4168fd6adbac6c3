//! A native verifier for what a written module must satisfy before it is printed: the subset of
//! the dialects' verifiers that shardwise's passes, its writer and a user's `Builder` program
//! can break. It lets `to_mlir` print natively without jaxlib's parse, which verifies with every
//! dialect's verifier.
//!
//! Checked (each from the verifier named):
//! * operand and result counts of the `stablehlo`, `sdy` and `func` ops in `shapes.rs`'s
//!   table (the ops' ODS definitions in openxla/stablehlo `StablehloOps.td` and openxla/shardy
//!   `dialect/sdy/ir/ops.td`);
//! * shapes of element-wise ops (MLIR's `SameOperandsAndResultShape`, with the scalar operands
//!   `select` and `clamp` allow), `reshape` (element counts), `transpose` (a permutation),
//!   `broadcast_in_dim`, `concatenate`, `dot` and `dot_general` (dimension sizes), the start
//!   indices of `dynamic_slice` and `dynamic_update_slice`, and the attributes and result
//!   shapes of `slice`, `dynamic_slice`, `pad`, `gather`, `scatter`, `iota`, `reduce`
//!   (`slicing.rs`),
//!   `convolution` and `reduce_window` (`window.rs`), as StableHLO's `TypeInference.cpp`
//!   infers them; one type for the operand and result of the sdy ops that have one of each
//!   (`SameOperandsAndResultType`);
//! * terminators: a function body ends in `func.return` with the function's result types, a
//!   StableHLO region in `stablehlo.return`, an sdy region in `sdy.return`; what the regions
//!   of `while`, `reduce`, `reduce_window`, `scatter`, `case`, `if`, `sort` and the sdy
//!   computations take and return ([`Verifier::contract`]);
//! * `func.call`: the callee exists and the operand and result types are its signature's;
//!   function and mesh symbols are unique;
//! * sharding rules (`sdy.sharding_rule`): one mapping per operand and result, of its rank
//!   ([`crate::rule::OpShardingRule::validate`], Shardy's `verifyOpShardingRuleAttr`);
//! * shardings (`sdy.sharding` on function arguments, results and ops, and the inherent
//!   sharding attributes of sdy ops): they parse, name a mesh the module defines, have one
//!   sharding per value, and pass [`crate::sharding::TensorSharding::validate`] against the
//!   mesh and the tensor's shape (Shardy's `verifyTensorShardingAttr`; a value of another
//!   type, a token, takes a sharding of rank 0);
//! * the local shapes of `sdy.manual_computation`'s region (`manual.rs`, Shardy's
//!   `verifyManualComputationValue`), and that no sharding or nested manual computation inside
//!   it uses an axis it binds as manual (Shardy's `getParentManualComputationOps` check in
//!   `verifyTensorShardingAttr`);
//! * the sdy collectives against the sharding of their operand (`collectives.rs`, Shardy's
//!   `verifyCollectiveOp` and the collectives' verifiers);
//! * the element types of the element-wise ops (`element_types.rs`).
//!
//! What is not checked: element types of the other ops (but a manual computation's), the type
//! inference of the other ops (`select_and_scatter`, `sort`'s comparator, ...), attribute
//! contents beyond those above. Each distinct type is parsed once, and each
//! distinct (shardings, types) pair validated once.

use std::collections::HashSet;
use std::fmt;

use crate::fast_hash::FastMap;
use crate::ir::Program;
use crate::mesh::Mesh;
use crate::sharding::{MeshRef, TensorSharding};

mod collectives;
mod element_types;
mod manual;
mod shapes;
mod slicing;
mod window;

use shapes::{signature, tensor_dims, Count, Rule};

/// Why a module does not verify: the op (its place in a pre-order walk from the module op,
/// its name and location text) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    pub op: u32,
    pub name: String,
    pub loc: String,
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: '{}' op {}", self.loc, self.name, self.message)
    }
}

impl std::error::Error for VerifyError {}

/// What a region takes or returns.
enum Want {
    Types(Vec<u32>),
    Count(usize),
    Unchecked,
}

struct Verifier<'p> {
    p: &'p Program,
    meshes: FastMap<String, Mesh>,
    /// Function name -> op index.
    funcs: FastMap<String, u32>,
    /// Each function op's index in `p.funcs`.
    func_data: FastMap<u32, usize>,
    /// (sharding text, type text) pairs already validated.
    checked: HashSet<(u32, u32)>,
    /// (per-value sharding text, value types) pairs already validated.
    checked_per_value: HashSet<(u32, Vec<u32>)>,
    /// Each op's place in a pre-order walk from the module op (`u32::MAX` if unreachable).
    position: Vec<u32>,
    /// Each op's nearest enclosing `sdy.manual_computation` (`u32::MAX` for none).
    manual_parent: Vec<u32>,
    /// Where each value comes from, built at the first collective (`collectives.rs`).
    definitions: std::cell::OnceCell<collectives::Definitions>,
    /// The dimension sizes of each type (by interned string; `None` for other strings).
    type_dims: Vec<Option<Vec<i64>>>,
    /// The element type of each tensor type (by interned string; `None` for other strings).
    type_elems: Vec<Option<&'p str>>,
    /// Each op name's signature (by interned string), looked up once.
    signatures: FastMap<u32, Option<(Count, Count, Rule)>>,
    /// The batching and contracting dimensions (lhs, rhs) of each `dot_dimension_numbers`
    /// text (by interned string), read once.
    dot_dims: std::cell::RefCell<FastMap<u32, std::rc::Rc<[Vec<i64>; 4]>>>,
}

/// Verifies `p` (see the module documentation); the first violation found, in op order.
pub fn verify(p: &Program) -> Result<(), VerifyError> {
    let mut v = Verifier {
        p,
        meshes: FastMap::default(),
        funcs: FastMap::default(),
        func_data: p.funcs.iter().enumerate().map(|(i, f)| (f.op, i)).collect(),
        checked: HashSet::new(),
        checked_per_value: HashSet::new(),
        position: vec![u32::MAX; p.ops.len()],
        manual_parent: vec![u32::MAX; p.ops.len()],
        definitions: std::cell::OnceCell::new(),
        type_dims: vec![None; p.strings.strings.len()],
        type_elems: vec![None; p.strings.strings.len()],
        signatures: FastMap::default(),
        dot_dims: std::cell::RefCell::default(),
    };
    for &t in &p.value_types {
        if v.type_dims[t as usize].is_none() {
            v.type_dims[t as usize] = tensor_dims(p.strings.get(t));
        }
        if v.type_elems[t as usize].is_none() {
            v.type_elems[t as usize] = crate::mlir::attr::element_type(p.strings.get(t));
        }
    }
    let order = pre_order(p);
    for (i, &op) in order.iter().enumerate() {
        v.position[op as usize] = i as u32;
        // Pre-order: an op's parent is placed (and has its own enclosing manual computation)
        // before the op's regions are visited.
        let enclosing = if p.op_name(op) == "sdy.manual_computation" { op } else { v.manual_parent[op as usize] };
        let (r0, r1) = p.ops[op as usize].regions;
        for r in r0..r1 {
            let (b0, b1) = p.regions[r as usize];
            for b in b0..b1 {
                let ops = p.blocks[b as usize].ops;
                for &child in &p.block_ops[ops.0 as usize..ops.1 as usize] {
                    v.manual_parent[child as usize] = enclosing;
                }
            }
        }
    }
    v.symbols(&order)?;
    for &op in &order {
        v.op(op)?;
    }
    Ok(())
}

/// The ops reachable from the module op (op 0), in pre-order (an op before the ops of its
/// regions), over an explicit stack.
fn pre_order(p: &Program) -> Vec<u32> {
    let mut out = Vec::with_capacity(p.ops.len());
    if p.ops.is_empty() {
        return out;
    }
    let mut stack = vec![0u32];
    while let Some(op) = stack.pop() {
        out.push(op);
        let (r0, r1) = p.ops[op as usize].regions;
        for r in (r0..r1).rev() {
            let (b0, b1) = p.regions[r as usize];
            for b in (b0..b1).rev() {
                let ops = p.blocks[b as usize].ops;
                stack.extend(p.block_ops[ops.0 as usize..ops.1 as usize].iter().rev());
            }
        }
    }
    out
}

impl<'p> Verifier<'p> {
    fn s(&self, i: u32) -> &'p str {
        self.p.strings.get(i)
    }

    fn err(&self, op: u32, message: String) -> VerifyError {
        VerifyError {
            op: self.position[op as usize],
            name: self.p.op_name(op).to_string(),
            loc: self.p.loc_text(self.p.ops[op as usize].loc).into_owned(),
            message,
        }
    }

    fn operands(&self, op: u32) -> &'p [u32] {
        let (a, b) = self.p.ops[op as usize].operands;
        &self.p.operands[a as usize..b as usize]
    }

    fn results(&self, op: u32) -> std::ops::Range<u32> {
        let (a, b) = self.p.ops[op as usize].results;
        a..b
    }

    fn ty(&self, value: u32) -> &'p str {
        self.s(self.p.value_types[value as usize])
    }

    fn attr(&self, op: u32, name: &str) -> Option<&'p str> {
        self.p.attr(op, name)
    }

    /// Functions and meshes: unique names, meshes parsed.
    fn symbols(&mut self, order: &[u32]) -> Result<(), VerifyError> {
        for &op in order {
            let kind = self.p.op_name(op);
            if kind != "func.func" && kind != "sdy.mesh" {
                continue;
            }
            let Some(sym) = self.attr(op, "sym_name") else {
                return Err(self.err(op, "requires a 'sym_name' attribute".into()));
            };
            let name = crate::text::parse_string(sym).map_err(|e| self.err(op, format!("bad sym_name: {e}")))?;
            if kind == "func.func" {
                if self.funcs.insert(name.clone(), op).is_some() {
                    return Err(self.err(op, format!("redefinition of symbol @{name}")));
                }
            } else {
                let text = self.attr(op, "mesh").unwrap_or("");
                let mesh = crate::text::parse_mesh(text).map_err(|e| self.err(op, format!("invalid mesh: {e}")))?;
                if self.meshes.insert(name.clone(), mesh).is_some() {
                    return Err(self.err(op, format!("redefinition of symbol @{name}")));
                }
            }
        }
        Ok(())
    }

    fn op(&mut self, op: u32) -> Result<(), VerifyError> {
        let name = self.p.op_name(op);
        let n_in = self.operands(op).len();
        let n_out = self.results(op).len();
        let id = self.p.ops[op as usize].name;
        let sig = *self.signatures.entry(id).or_insert_with(|| signature(name));
        if let Some((ins, outs, rule)) = sig {
            if !ins.admits(n_in) {
                return Err(self.err(op, format!("expects {} operands, got {n_in}", ins.text())));
            }
            if !outs.admits(n_out) {
                return Err(self.err(op, format!("expects {} results, got {n_out}", outs.text())));
            }
            self.shapes(op, rule)?;
        }
        match name {
            "func.func" => self.func(op)?,
            "func.call" => self.call(op)?,
            _ => {}
        }
        self.terminators(op)?;
        self.shardings(op)
    }

    fn func(&self, op: u32) -> Result<(), VerifyError> {
        let Some(&fi) = self.func_data.get(&op) else { return Ok(()) };
        let f = &self.p.funcs[fi];
        let (r0, r1) = self.p.ops[op as usize].regions;
        if r0 == r1 {
            return Ok(()); // a declaration
        }
        let (b0, _) = self.p.regions[r0 as usize];
        let block = self.p.blocks[b0 as usize];
        let args: Vec<u32> = (block.args.0..block.args.1).map(|a| self.p.value_types[a as usize]).collect();
        if args != f.arg_types {
            return Err(self.err(op, "the entry block's argument types differ from the function type's".into()));
        }
        if let Some(&last) = self.p.block_ops[block.ops.0 as usize..block.ops.1 as usize].last() {
            if self.p.op_name(last) == "func.return" {
                let got: Vec<u32> = self.operands(last).iter().map(|&v| self.p.value_types[v as usize]).collect();
                if got != f.result_types {
                    let names = |t: &[u32]| t.iter().map(|&x| self.s(x)).collect::<Vec<_>>().join(", ");
                    return Err(self.err(
                        last,
                        format!(
                            "has operand types ({}), but the enclosing function returns ({})",
                            names(&got),
                            names(&f.result_types)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn call(&self, op: u32) -> Result<(), VerifyError> {
        let callee = self.attr(op, "callee").unwrap_or("");
        let sym = callee.strip_prefix('@').unwrap_or("");
        let name =
            if sym.starts_with('"') { crate::text::parse_string(sym).unwrap_or_default() } else { sym.to_string() };
        let Some(&f) = self.funcs.get(&name) else {
            return Err(self.err(op, format!("calls {callee}, which is not a function of the module")));
        };
        let Some(&fi) = self.func_data.get(&f) else { return Ok(()) };
        let fd = &self.p.funcs[fi];
        let ins: Vec<u32> = self.operands(op).iter().map(|&v| self.p.value_types[v as usize]).collect();
        let outs: Vec<u32> = self.results(op).map(|v| self.p.value_types[v as usize]).collect();
        if ins != fd.arg_types || outs != fd.result_types {
            return Err(self.err(op, format!("operand or result types differ from the signature of {callee}")));
        }
        Ok(())
    }

    /// Every block of the op's regions ends in the terminator its dialect requires, and each
    /// region of the ops in [`Self::contract`] takes and returns what the op's verifier says.
    fn terminators(&self, op: u32) -> Result<(), VerifyError> {
        let (r0, r1) = self.p.ops[op as usize].regions;
        if r0 == r1 {
            return Ok(());
        }
        let name = self.p.op_name(op);
        let want = if name == "func.func" {
            "func.return"
        } else if name.starts_with("stablehlo.") {
            "stablehlo.return"
        } else if name == "sdy.manual_computation" || name == "sdy.named_computation" {
            "sdy.return"
        } else {
            return Ok(());
        };
        for r in r0..r1 {
            let (b0, b1) = self.p.regions[r as usize];
            for b in b0..b1 {
                let block = self.p.blocks[b as usize];
                let last = self.p.block_ops[block.ops.0 as usize..block.ops.1 as usize].last();
                let Some(&t) = last.filter(|&&t| self.p.op_name(t) == want) else {
                    return Err(self.err(op, format!("has a block that does not end in '{want}'")));
                };
                if b > b0 {
                    continue;
                }
                let (args, returns) = self.contract(op, name, r - r0);
                let arg_types: Vec<u32> =
                    (block.args.0..block.args.1).map(|a| self.p.value_types[a as usize]).collect();
                let ret_types: Vec<u32> = self.operands(t).iter().map(|&v| self.p.value_types[v as usize]).collect();
                for (what, want, got, at) in [("takes", args, arg_types, op), ("returns", returns, ret_types, t)] {
                    let ok = match &want {
                        Want::Types(w) => *w == got,
                        Want::Count(n) => *n == got.len(),
                        Want::Unchecked => true,
                    };
                    if !ok {
                        let names = |t: &[u32]| t.iter().map(|&x| self.s(x)).collect::<Vec<_>>().join(", ");
                        let expected = match want {
                            Want::Types(w) => format!("({})", names(&w)),
                            Want::Count(n) => format!("{n} values"),
                            Want::Unchecked => String::new(),
                        };
                        return Err(self.err(
                            at,
                            format!("region {} of '{name}' {what} ({}), expected {expected}", r - r0, names(&got)),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// What region `k` of `op` takes (its entry block's arguments) and returns (its
    /// terminator's operands), from the ops' verifiers (StableHLO's `verifyWhileOp`,
    /// `verifyReduceOp`, `verifyCaseOp`, `verifySortOp`, `verifyScatterOp`; Shardy's
    /// `NamedComputationOp::verify` and `ManualComputationOp::verify`, counts only, the
    /// latter's types being local).
    fn contract(&self, op: u32, name: &str, k: u32) -> (Want, Want) {
        let ins: Vec<u32> = self.operands(op).iter().map(|&v| self.p.value_types[v as usize]).collect();
        let outs: Vec<u32> = self.results(op).map(|v| self.p.value_types[v as usize]).collect();
        let n = outs.len();
        match name {
            "stablehlo.while" if k == 0 => (Want::Types(ins), Want::Count(1)),
            "stablehlo.while" => (Want::Types(ins.clone()), Want::Types(ins)),
            "stablehlo.reduce" | "stablehlo.reduce_window" | "stablehlo.scatter" => {
                (Want::Count(2 * n), Want::Count(n))
            }
            "stablehlo.case" | "stablehlo.if" => (Want::Count(0), Want::Types(outs)),
            "stablehlo.sort" => (Want::Count(2 * n), Want::Count(1)),
            "sdy.named_computation" => (Want::Types(ins), Want::Types(outs)),
            "sdy.manual_computation" => (Want::Count(ins.len()), Want::Count(n)),
            _ => (Want::Unchecked, Want::Unchecked),
        }
    }

    /// Checks one sharding attribute text against the type of the value it annotates.
    fn sharding(&mut self, op: u32, text: u32, what: &str, value_type: Option<u32>) -> Result<(), VerifyError> {
        if !self.checked.insert((text, value_type.unwrap_or(u32::MAX))) {
            return Ok(());
        }
        let t = crate::text::parse_sharding(self.s(text)).map_err(|e| self.err(op, format!("{what}: {e}")))?;
        self.validate(op, &t, what, value_type)
    }

    /// The mesh a sharding is bound to, inline or one of the module's; `None` for an unknown name.
    fn mesh_of<'t>(&'t self, t: &'t TensorSharding) -> Option<&'t Mesh> {
        match &t.mesh {
            MeshRef::Inline(m) => Some(m),
            MeshRef::Named(n) => self.meshes.get(n.as_str()),
        }
    }

    fn validate(&self, op: u32, t: &TensorSharding, what: &str, value_type: Option<u32>) -> Result<(), VerifyError> {
        let Some(mesh) = self.mesh_of(t) else {
            let name = if let MeshRef::Named(n) = &t.mesh { n.as_str() } else { "" };
            return Err(self.err(op, format!("{what}: unknown mesh @{name}")));
        };
        // A value of another type than a tensor (a token) takes a sharding of rank 0.
        let shape = value_type.and_then(|ty| {
            let ty = self.s(ty);
            if ty.starts_with("tensor<") {
                tensor_dims(ty)
            } else {
                Some(Vec::new())
            }
        });
        t.validate(mesh, shape.as_deref(), false).map_err(|e| self.err(op, format!("{what}: {}", e.message)))
    }

    /// Checks a per-value sharding attribute (`text`: its interned text) against `values`.
    fn per_value(&mut self, op: u32, text: u32, what: &str, values: &[u32]) -> Result<(), VerifyError> {
        // A propagated program holds few distinct (shardings, types) pairs: each is checked once.
        let key = (text, values.iter().map(|&v| self.p.value_types[v as usize]).collect::<Vec<u32>>());
        if !self.checked_per_value.insert(key) {
            return Ok(());
        }
        let text = self.s(text);
        let ts = crate::text::parse_sharding_per_value(text).map_err(|e| self.err(op, format!("{what}: {e}")))?;
        if ts.len() != values.len() {
            return Err(self.err(op, format!("{what}: {} shardings for {} values", ts.len(), values.len())));
        }
        for (i, (t, &v)) in ts.iter().zip(values).enumerate() {
            self.validate(op, t, &format!("{what} {i}"), Some(self.p.value_types[v as usize]))?;
        }
        Ok(())
    }

    fn shardings(&mut self, op: u32) -> Result<(), VerifyError> {
        let name = self.p.op_name(op);
        if name == "func.func" {
            if let Some(&fi) = self.func_data.get(&op) {
                let f = &self.p.funcs[fi];
                for (what, attrs, types) in
                    [("argument", &f.arg_attrs, &f.arg_types), ("result", &f.result_attrs, &f.result_types)]
                {
                    for (i, (&(a0, a1), &ty)) in attrs.iter().zip(types.iter()).enumerate() {
                        for &(k, v) in &self.p.attrs[a0 as usize..a1 as usize] {
                            if self.s(k) == "sdy.sharding" {
                                self.sharding(op, v, &format!("{what} {i}"), Some(ty))?;
                            }
                        }
                    }
                }
            }
            return Ok(());
        }
        let results: Vec<u32> = self.results(op).collect();
        let operands = self.operands(op);
        if let Some(text) = self.attr(op, "sdy.sharding_rule") {
            let shapes = |vs: &mut dyn Iterator<Item = u32>| -> Vec<Option<Vec<i64>>> {
                vs.map(|v| self.dims(v).map(<[i64]>::to_vec)).collect()
            };
            let ins = shapes(&mut operands.iter().copied());
            let outs = shapes(&mut results.iter().copied());
            crate::rule::parse_rule(text)
                .and_then(|rule| rule.validate(&ins, &outs, false))
                .map_err(|e| self.err(op, format!("sdy.sharding_rule: {}", e.message)))?;
        }
        if let Some(text) = self.p.attr_id(op, "sdy.sharding") {
            // A result-less op (a side-effecting custom call) may carry a maximal sharding.
            if !results.is_empty() {
                self.per_value(op, text, "result sharding", &results)?;
            }
        }
        match name {
            "sdy.sharding_constraint"
            | "sdy.reshard"
            | "sdy.data_flow_edge"
            | "sdy.all_gather"
            | "sdy.all_reduce"
            | "sdy.all_slice"
            | "sdy.all_to_all"
            | "sdy.collective_permute"
            | "sdy.reduce_scatter"
            | "sdy.replicated_to_unreduced"
            | "sdy.sharded_to_unreduced" => {
                let (a, b) = self.p.ops[op as usize].attrs;
                for &(k, v) in &self.p.attrs[a as usize..b as usize] {
                    if self.s(k) == "sharding" || self.s(k) == "out_sharding" {
                        let ty = results.first().map(|&r| self.p.value_types[r as usize]);
                        self.sharding(op, v, "sharding", ty)?;
                    }
                }
            }
            "sdy.manual_computation" | "sdy.named_computation" => {
                for (attr, values) in [("in_shardings", operands), ("out_shardings", &results[..])] {
                    if let Some(text) = self.p.attr_id(op, attr) {
                        self.per_value(op, text, attr, values)?;
                    }
                }
                if name == "sdy.manual_computation" {
                    self.manual_shapes(op, operands, &results)?;
                }
            }
            _ => {}
        }
        if self.manual_parent[op as usize] != u32::MAX {
            self.bound_manual_axes(op)?;
        }
        if collectives::is_collective(name) {
            self.collective(op, name)?;
        }
        Ok(())
    }
}
