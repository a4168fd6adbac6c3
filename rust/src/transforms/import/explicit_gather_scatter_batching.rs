//! `sdy-explicit-gather-scatter-batching` (Shardy's `transforms/import/
//! explicit_gather_scatter_batching.cc`): the implicit batch dimension 0 of a
//! `stablehlo.gather` / `stablehlo.scatter` (dimension 0 of the operand and of the indices of
//! equal size, indexed by an iota along dimension 0, collapsed / inserted) becomes an explicit
//! batching dimension, and that index component is dropped from the indices (sliced out, or
//! left out of the concatenation that built them); then the ops left without uses are removed,
//! as MLIR's greedy rewriter does (its constant folding and hoisting are not reproduced).

use crate::error::Result;
use crate::fast_hash::FastSet;
use crate::ir::clone::Uses;
use crate::ir::linked::LinkedBlocks;
use crate::ir::values::ValueIndex;
use crate::ir::{types, Program};
use crate::transforms::op_properties::{has_no_memory_effect, TERMINATORS};
use crate::transforms::propagation::freeze::top_funcs;
use crate::transforms::PassContext;

/// The fields of `#stablehlo.gather<...>`, in their printed order; the collapsed, batching
/// (operand, indices) and index-map fields are at 1, 2, 3 and 4.
const GATHER_FIELDS: [&str; 6] = [
    "offset_dims",
    "collapsed_slice_dims",
    "operand_batching_dims",
    "start_indices_batching_dims",
    "start_index_map",
    "index_vector_dim",
];
/// The fields of `#stablehlo.scatter<...>`, as [`GATHER_FIELDS`].
const SCATTER_FIELDS: [&str; 6] = [
    "update_window_dims",
    "inserted_window_dims",
    "input_batching_dims",
    "scatter_indices_batching_dims",
    "scatter_dims_to_operand_dims",
    "index_vector_dim",
];

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    for f in top_funcs(p) {
        if p.region_blocks(f, 0).is_empty() {
            continue;
        }
        let ops = p.walk(f);
        if ops.iter().any(|&o| matches!(p.op_name(o), "stablehlo.gather" | "stablehlo.scatter")) {
            let mut b = Batcher { uses: Uses::new(p, f), values: ValueIndex::new(p), linked: LinkedBlocks::new(p) };
            for &op in ops.iter().skip(1) {
                match p.op_name(op) {
                    "stablehlo.gather" => b.batch(p, op, "dimension_numbers", "gather", &GATHER_FIELDS, 1),
                    "stablehlo.scatter" => {
                        let n = p.op_operands(op).len().saturating_sub(1) / 2;
                        b.batch(p, op, "scatter_dimension_numbers", "scatter", &SCATTER_FIELDS, n)
                    }
                    _ => {}
                }
            }
            b.linked.write_back(p);
        }
        // The greedy rewriter erases dead ops whether a pattern matched or not.
        erase_dead(p, f);
    }
    Ok(())
}

struct Batcher {
    uses: Uses,
    values: ValueIndex,
    linked: LinkedBlocks,
}

impl Batcher {
    /// Batches `op` when its batch dimension 0 is implicit (see the module docs); its indices
    /// are operand `indices_index`, its operand (or first input) operand 0.
    fn batch(
        &mut self,
        p: &mut Program,
        op: u32,
        attr: &str,
        mnemonic: &str,
        fields: &[&str; 6],
        indices_index: usize,
    ) {
        let mut dims = parse_struct(p.attr(op, attr).unwrap_or(""));
        let (collapsed_f, batching_f, indices_batching_f, map_f) = (fields[1], fields[2], fields[3], fields[4]);
        if !get(&dims, batching_f).is_empty() {
            return;
        }
        // The verifier checks the arities; an op without its operands is left alone anyway.
        let (Some(&data), Some(&indices)) = (p.op_operands(op).first(), p.op_operands(op).get(indices_index)) else {
            return;
        };
        let shape = |v: u32| types::tensor_shape(p.strings.get(p.value_types[v as usize]));
        let (Some(dt), Some(it)) = (shape(data), shape(indices)) else { return };
        if dt.is_empty() || it.is_empty() {
            return;
        }
        let ivd = get(&dims, "index_vector_dim").first().copied().unwrap_or(0);
        if ivd < 0 || ivd as usize >= it.len() || it[ivd as usize] <= 1 || it[0] != dt[0] {
            return;
        }
        let mut index_map = get(&dims, map_f).to_vec();
        let Some(removed) = index_map.iter().position(|&d| d == 0) else { return };
        if !self.iota_origin(p, indices, ivd, removed) {
            return;
        }
        index_map.remove(removed);
        let mut collapsed = get(&dims, collapsed_f).to_vec();
        let Some(at) = collapsed.iter().position(|&d| d == 0) else { return };
        collapsed.remove(at);
        let new_indices = self.slice_and_concat(p, op, indices, &it, ivd as usize, removed);
        set(&mut dims, map_f, index_map);
        set(&mut dims, collapsed_f, collapsed);
        set(&mut dims, batching_f, vec![0]);
        set(&mut dims, indices_batching_f, vec![0]);
        p.set_attr(op, attr, &print_struct(mnemonic, fields, &dims));
        self.uses.set_operand(p, op, indices_index, new_indices);
    }

    fn int_attr(p: &Program, op: u32, name: &str) -> i64 {
        p.attr(op, name).and_then(|t| t.split(':').next()).and_then(|t| t.trim().parse().ok()).unwrap_or(0)
    }

    /// Whether index component `removed` of `indices` comes from an iota along dimension 0
    /// (through reshapes, broadcasts, clamps and selects; one operand of a concatenation
    /// along the index vector dimension).
    fn iota_origin(&mut self, p: &Program, indices: u32, ivd: i64, removed: usize) -> bool {
        let mut v = indices;
        if let Some(d) = self.values.defining_op(p, v) {
            if p.op_name(d) == "stablehlo.concatenate" {
                if Self::int_attr(p, d, "dimension") != ivd || removed >= p.op_operands(d).len() {
                    return false;
                }
                v = p.op_operands(d)[removed];
            }
        }
        // Shardy's `unwrap`: through reshape, broadcast_in_dim, clamp and select.
        while let Some(d) = self.values.defining_op(p, v) {
            let operands = p.op_operands(d);
            v = match p.op_name(d) {
                "stablehlo.reshape" | "stablehlo.broadcast_in_dim" => operands[0],
                "stablehlo.clamp" => operands[1],
                "stablehlo.select" => {
                    let on_false = operands[2];
                    let is_iota =
                        self.values.defining_op(p, on_false).is_some_and(|o| p.op_name(o) == "stablehlo.iota");
                    if is_iota {
                        on_false
                    } else {
                        operands[1]
                    }
                }
                _ => break,
            };
        }
        self.values
            .defining_op(p, v)
            .is_some_and(|root| p.op_name(root) == "stablehlo.iota" && Self::int_attr(p, root, "iota_dimension") == 0)
    }

    /// `indices` without index component `removed` along dimension `ivd`: the concatenation
    /// that built them without that operand, or slices around it concatenated; new ops go
    /// before `before`.
    fn slice_and_concat(
        &mut self,
        p: &mut Program,
        before: u32,
        indices: u32,
        shape: &[i64],
        ivd: usize,
        removed: usize,
    ) -> u32 {
        let ty = p.strings.get(p.value_types[indices as usize]).to_string();
        let element = types::element_type(&ty).unwrap_or("i64").to_string();
        let total = shape[ivd];
        let mut new_shape = shape.to_vec();
        new_shape[ivd] -= 1;
        let loc = p.ops[before as usize].loc;
        let concat_attrs = |p: &mut Program| vec![(p.intern("dimension"), p.intern(&format!("{ivd} : i64")))];
        if let Some(d) = self.values.defining_op(p, indices) {
            if p.op_name(d) == "stablehlo.concatenate"
                && Self::int_attr(p, d, "dimension") == ivd as i64
                && p.op_operands(d).len() as i64 == total
            {
                let inputs: Vec<u32> =
                    p.op_operands(d).iter().enumerate().filter(|&(i, _)| i != removed).map(|(_, &v)| v).collect();
                if inputs.len() == 1 {
                    return inputs[0];
                }
                let attrs = concat_attrs(p);
                return self.insert(p, before, "stablehlo.concatenate", &inputs, &new_shape, &element, &attrs, loc);
            }
        }
        let mut parts = Vec::new();
        for (start_i, end_i) in [(0, removed as i64), (removed as i64 + 1, total)] {
            if start_i >= end_i {
                continue;
            }
            let mut start = vec![0; shape.len()];
            let mut limit = shape.to_vec();
            start[ivd] = start_i;
            limit[ivd] = end_i;
            let mut part = shape.to_vec();
            part[ivd] = end_i - start_i;
            let attrs = vec![
                (p.intern("start_indices"), p.intern(&i64_array(&start))),
                (p.intern("limit_indices"), p.intern(&i64_array(&limit))),
                (p.intern("strides"), p.intern(&i64_array(&vec![1; shape.len()]))),
            ];
            parts.push(self.insert(p, before, "stablehlo.slice", &[indices], &part, &element, &attrs, loc));
        }
        if parts.len() == 1 {
            return parts[0];
        }
        let attrs = concat_attrs(p);
        self.insert(p, before, "stablehlo.concatenate", &parts, &new_shape, &element, &attrs, loc)
    }

    /// A new op of one result of type `tensor<shape x element>` before `before`; its result.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        p: &mut Program,
        before: u32,
        name: &str,
        operands: &[u32],
        shape: &[i64],
        element: &str,
        attrs: &[(u32, u32)],
        loc: u32,
    ) -> u32 {
        let dims: String = shape.iter().map(|d| format!("{d}x")).collect();
        let ty = p.intern(&format!("tensor<{dims}{element}>"));
        let op = p.new_op(name, operands, &[ty], attrs, loc);
        self.linked.insert_before(before, op);
        self.uses.add(p, op);
        p.op_results(op).start
    }
}

/// Removes the ops of `f` without memory effects whose results are unused (terminators
/// aside), sweeping until none is left, as MLIR's greedy rewriter erases dead ops.
fn erase_dead(p: &mut Program, f: u32) {
    loop {
        let mut uses = Uses::new(p, f);
        let mut gone: FastSet<u32> = FastSet::default();
        let ops = p.walk(f);
        for &op in ops.iter().skip(1).rev() {
            let name = p.op_name(op);
            if has_no_memory_effect(name)
                && !TERMINATORS.contains(&name)
                && p.op_results(op).all(|r| uses.users(r).iter().all(|u| gone.contains(u)))
            {
                uses.drop_op_only(p, op);
                gone.insert(op);
            }
        }
        if gone.is_empty() {
            return;
        }
        let parents = p.enclosing_blocks(f);
        p.remove_ops(&gone, gone.iter().filter_map(|o| parents.get(o).copied()));
    }
}

/// The fields of a `#stablehlo.gather<...>` / `#stablehlo.scatter<...>` text, in order: a
/// list (`name = [1, 2]`) or a number (`name = 1`).
fn parse_struct(text: &str) -> Vec<(String, Vec<i64>)> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if !(b[i].is_ascii_alphanumeric() || b[i] == b'_')
            || (i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let name = &text[start..i];
        let mut j = i;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        if j >= b.len() || b[j] != b'=' {
            continue;
        }
        j += 1;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        if j < b.len() && b[j] == b'[' {
            let Some(end) = text[j..].find(']') else { break };
            let values = text[j + 1..j + end].split(',').filter_map(|x| x.trim().parse().ok()).collect();
            out.push((name.to_string(), values));
            i = j + end + 1;
        } else {
            let len =
                text[j..].bytes().enumerate().take_while(|&(k, c)| c.is_ascii_digit() || (k == 0 && c == b'-')).count();
            if let Ok(v) = text[j..j + len].parse() {
                out.push((name.to_string(), vec![v]));
            }
            i = j + len.max(1);
        }
    }
    out
}

fn get<'a>(dims: &'a [(String, Vec<i64>)], name: &str) -> &'a [i64] {
    dims.iter().find(|(n, _)| n == name).map_or(&[], |(_, v)| v)
}

fn set(dims: &mut Vec<(String, Vec<i64>)>, name: &str, values: Vec<i64>) {
    match dims.iter_mut().find(|(n, _)| n == name) {
        Some(entry) => entry.1 = values,
        None => dims.push((name.to_string(), values)),
    }
}

/// The struct attribute of `fields` (in that order; empty lists left out, `index_vector_dim`
/// always written).
fn print_struct(mnemonic: &str, fields: &[&str; 6], dims: &[(String, Vec<i64>)]) -> String {
    let mut parts = Vec::new();
    for &f in fields {
        let v = get(dims, f);
        if f == "index_vector_dim" {
            parts.push(format!("{f} = {}", v.first().copied().unwrap_or(0)));
        } else if !v.is_empty() {
            let list: Vec<String> = v.iter().map(i64::to_string).collect();
            parts.push(format!("{f} = [{}]", list.join(", ")));
        }
    }
    format!("#stablehlo.{mnemonic}<{}>", parts.join(", "))
}

fn i64_array(values: &[i64]) -> String {
    if values.is_empty() {
        return "array<i64>".to_string();
    }
    let list: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("array<i64: {}>", list.join(", "))
}
