//! `sdy-constant-or-scalar-merger` (Shardy's `constant_or_scalar_merger.cc`): within a region,
//! identical constants (same attributes and result shardings) and identical broadcasts of the
//! same scalar are merged into the first one, function by function in post-order.

use super::super::common::post_order_of;
use super::super::PassContext;
use crate::error::Result;
use crate::fast_hash::{FastMap, FastSet};
use crate::ir::Program;
use crate::transforms::propagation::freeze::top_funcs;

const CONSTANTS: &[&str] = &["sdy.constant", "stablehlo.constant"];
const BROADCAST: &str = "stablehlo.broadcast_in_dim";

/// What decides whether two ops are alike: their region, their attributes (the result
/// shardings among them) in name order, and for a broadcast its result type and scalar.
type Key = (u32, Vec<(u32, u32)>, Option<(u32, u32)>);

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    let mut region_of_block: FastMap<u32, u32> = FastMap::default();
    for (r, &(s, e)) in p.regions.iter().enumerate() {
        for b in s..e {
            region_of_block.insert(b, r as u32);
        }
    }
    let parents = p.enclosing_blocks(0);
    let mut replaced: FastMap<u32, u32> = FastMap::default();
    let mut merged: FastSet<u32> = FastSet::default();
    let mut blocks: Vec<u32> = Vec::new();
    for f in top_funcs(p) {
        let mut seen: FastMap<Key, u32> = FastMap::default();
        for op in post_order_of(p, &p.walk(f)) {
            let name = p.op_name(op);
            let is_constant = CONSTANTS.contains(&name);
            if !is_constant && name != BROADCAST {
                continue;
            }
            let Some(&block) = parents.get(&op) else { continue };
            let region = region_of_block.get(&block).copied().unwrap_or(u32::MAX);
            let mut attrs = p.op_attrs(op).to_vec();
            attrs.sort_by(|a, b| p.strings.get(a.0).cmp(p.strings.get(b.0)));
            let key = if is_constant {
                (region, attrs, None)
            } else {
                let Some(&operand) = p.op_operands(op).first() else { continue };
                let scalar = crate::ir::types::tensor_shape(p.strings.get(p.value_types[operand as usize]))
                    .is_some_and(|s| s.is_empty());
                if !scalar {
                    continue;
                }
                let Some(result) = p.op_results(op).next() else { continue };
                let operand = replaced.get(&operand).copied().unwrap_or(operand);
                (region, attrs, Some((p.value_types[result as usize], operand)))
            };
            let kept = *seen.entry(key).or_insert(op);
            if kept != op {
                for (r, k) in p.op_results(op).zip(p.op_results(kept)) {
                    replaced.insert(r, k);
                }
                merged.insert(op);
                blocks.push(block);
            }
        }
    }
    if replaced.is_empty() {
        return Ok(());
    }
    for op in p.walk(0) {
        for i in 0..p.op_operands(op).len() {
            if let Some(&new) = replaced.get(&p.op_operands(op)[i]) {
                p.set_operand(op, i, new);
            }
        }
    }
    p.remove_ops(&merged, blocks);
    Ok(())
}
