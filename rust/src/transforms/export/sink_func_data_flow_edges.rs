//! `sdy-sink-func-data-flow-edges` (Shardy's `transforms/export/
//! sink_func_data_flow_edges.cc`): the sharding of each `sdy.func_data_flow_edge` moves onto its
//! operand (a fully open one when the edge has none but the operand has one) and the edge is
//! removed, its uses taking the operand back.

use super::super::PassContext;
use crate::error::Result;
use crate::fast_hash::FastSet;
use crate::ir::clone::Uses;
use crate::ir::values::ValueIndex;
use crate::ir::Program;
use crate::sharding::TensorSharding;
use crate::transforms::propagation::freeze::top_funcs;

const EDGE: &str = "sdy.func_data_flow_edge";

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    for f in top_funcs(p) {
        let ops = p.walk(f);
        if !ops.iter().any(|&o| p.op_name(o) == EDGE) {
            continue;
        }
        let mut uses = Uses::new(p, f);
        let mut values = ValueIndex::new(p);
        let mut erased: FastSet<u32> = FastSet::default();
        for &op in ops.iter().skip(1) {
            if p.op_name(op) != EDGE {
                continue;
            }
            let (Some(&operand), Some(result)) = (p.op_operands(op).first(), p.op_results(op).next()) else {
                continue;
            };
            let operand_sharding = values.get_sharding(p, &uses, operand)?;
            let sharding = values.get_sharding(p, &uses, result)?;
            if let Some(s) = sharding {
                values.set_sharding(p, &uses, operand, &s)?;
            } else if let Some(s) = operand_sharding {
                values.set_sharding(p, &uses, operand, &TensorSharding::replicated(s.mesh.clone(), s.rank(), true))?;
            }
            uses.replace_all_uses(p, result, operand);
            uses.drop_op_only(p, op);
            erased.insert(op);
        }
        let parents = p.enclosing_blocks(f);
        p.remove_ops(&erased, erased.iter().filter_map(|o| parents.get(o).copied()));
    }
    Ok(())
}
