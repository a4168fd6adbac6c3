//! `gather` and `scatter` (Shardy `op_sharding_rule_registry.cc`, `addGatherScatterFactors`;
//! the scatter's reduction from `getCommonSupportedReductionOp` in
//! `shardy/dialect/sdy/ir/utils.cc`).
//!
//! Walking the slices (gather result, scatter updates) dimension by dimension: an offset
//! dimension maps to the next input dimension that is neither collapsed nor batching: one
//! factor when unsliced; when sliced, for scatter two need-replication factors, for gather of
//! a size-1 slice a reduction factor (input) and a need-replication factor (slices), else one
//! blocked need-replication factor. Any other slices dimension is a batch dimension shared
//! with the indices (and with the input when it is an explicit batching dimension); for
//! scatter an implicit one is a reduction factor when the update computation is a supported
//! reduction, else need-replication. Then each collapsed (inserted) input dimension gets a
//! factor (gather: reduction, need-replication when of size 1; scatter: pass-through), and
//! the index vector dimension a need-replication factor.

use super::{attrs, tuple, OpDesc, ValueDesc};
use crate::error::Result;
use crate::rule::{FactorKind, OpShardingRule, RuleBuilder, NULL_DIM};

const REDUCTIONS: &[&str] = &["stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum"];
const LOGICAL: &[&str] = &["stablehlo.and", "stablehlo.or"];

/// The dimension numbers and shapes the walk reads.
struct Dims {
    input_shape: Vec<i64>,
    slices_shape: Vec<i64>,
    indices_shape: Vec<i64>,
    index_vector_dim: i64,
    offset_dims: Vec<i64>,
    collapsed_dims: Vec<i64>,
    input_batching_dims: Vec<i64>,
    indices_batching_dims: Vec<i64>,
}

/// `add(input_dim, indices_dim, slices_dim, size, kind, blocked)`.
type Add<'a> = dyn FnMut(&mut RuleBuilder, i64, i64, i64, i64, FactorKind, bool) -> Result<()> + 'a;

/// `scatter_reduces` is `None` for gather, else whether the scatter's update computation is a
/// supported reduction.
fn add_factors(op: &OpDesc, b: &mut RuleBuilder, d: &Dims, add: &mut Add, scatter_reduces: Option<bool>) -> Result<()> {
    let is_scatter = scatter_reduces.is_some();
    if d.index_vector_dim < 0 {
        return Err(op.error(format_args!("expected index_vector_dim >= 0, got {}", d.index_vector_dim)));
    }
    if d.input_batching_dims.len() != d.indices_batching_dims.len() {
        return Err(op.error(format_args!(
            "expected as many input as indices batching dimensions, got {} and {}",
            tuple(&d.input_batching_dims),
            tuple(&d.indices_batching_dims)
        )));
    }
    let mut input_dim = 0i64;
    let mut batch_pos = 0i64;
    for (slices_dim, &slices_size) in d.slices_shape.iter().enumerate() {
        let slices_dim = slices_dim as i64;
        if d.offset_dims.contains(&slices_dim) {
            while d.collapsed_dims.contains(&input_dim) || d.input_batching_dims.contains(&input_dim) {
                input_dim += 1;
            }
            if input_dim >= d.input_shape.len() as i64 {
                return Err(op.error(format_args!(
                    "offset dimension {slices_dim} has no input dimension left in {}",
                    tuple(&d.input_shape)
                )));
            }
            let input_size = d.input_shape[input_dim as usize];
            let need = FactorKind::NeedReplication;
            if input_size == slices_size {
                add(b, input_dim, NULL_DIM, slices_dim, input_size, FactorKind::PassThrough, false)?;
            } else if is_scatter {
                add(b, input_dim, NULL_DIM, NULL_DIM, input_size, need, false)?;
                add(b, NULL_DIM, NULL_DIM, slices_dim, slices_size, need, false)?;
            } else if slices_size == 1 {
                add(b, input_dim, NULL_DIM, NULL_DIM, input_size, FactorKind::Reduction, false)?;
                add(b, NULL_DIM, NULL_DIM, slices_dim, slices_size, need, false)?;
            } else {
                add(b, input_dim, NULL_DIM, slices_dim, input_size, need, true)?;
            }
            input_dim += 1;
        } else {
            let indices_dim = if batch_pos < d.index_vector_dim { batch_pos } else { batch_pos + 1 };
            if indices_dim >= d.indices_shape.len() as i64 {
                return Err(op.error(format_args!(
                    "batch dimension {slices_dim} has no indices dimension in {}",
                    tuple(&d.indices_shape)
                )));
            }
            let explicit = d.indices_batching_dims.iter().position(|&x| x == indices_dim);
            let input_batch = explicit.map_or(NULL_DIM, |i| d.input_batching_dims[i]);
            let kind = match scatter_reduces {
                Some(reduces) if explicit.is_none() => {
                    if reduces {
                        FactorKind::Reduction
                    } else {
                        FactorKind::NeedReplication
                    }
                }
                _ => FactorKind::PassThrough,
            };
            add(b, input_batch, indices_dim, slices_dim, slices_size, kind, false)?;
            batch_pos += 1;
        }
    }
    for &c in &d.collapsed_dims {
        if !(0..d.input_shape.len() as i64).contains(&c) {
            return Err(op.error(format_args!(
                "collapsed dimension {c} out of range for input shape {}",
                tuple(&d.input_shape)
            )));
        }
        let size = d.input_shape[c as usize];
        let kind = if is_scatter {
            FactorKind::PassThrough
        } else if size == 1 {
            FactorKind::NeedReplication
        } else {
            FactorKind::Reduction
        };
        add(b, c, NULL_DIM, NULL_DIM, size, kind, false)?;
    }
    if d.index_vector_dim < d.indices_shape.len() as i64 {
        let size = d.indices_shape[d.index_vector_dim as usize];
        add(b, NULL_DIM, d.index_vector_dim, NULL_DIM, size, FactorKind::NeedReplication, false)?;
    }
    Ok(())
}

pub(super) fn gather(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    const NAME: &str = "dimension_numbers";
    let nums = attrs::structure(op, NAME, "gather")?;
    let mut b = op.builder();
    let dims = Dims {
        input_shape: op.operand_shape(0, "operand")?,
        slices_shape: op.result_shape(0, "")?,
        indices_shape: op.operand_shape(1, "start_indices")?,
        index_vector_dim: nums.int(op, NAME, "index_vector_dim", Some(0))?,
        offset_dims: nums.list("offset_dims"),
        collapsed_dims: nums.list("collapsed_slice_dims"),
        input_batching_dims: nums.list("operand_batching_dims"),
        indices_batching_dims: nums.list("start_indices_batching_dims"),
    };
    let mut add = |b: &mut RuleBuilder, input: i64, indices: i64, slices: i64, size, kind, blocked| {
        b.add_factor(&[input, indices], &[slices], size, kind, blocked).map(|_| ())
    };
    add_factors(op, &mut b, &dims, &mut add, None)?;
    Ok(Some(b.build()))
}

fn is_block_argument(v: &ValueDesc, args: &[ValueDesc], index: usize) -> bool {
    args.get(index).is_some_and(|a| v.same_value(a))
}

/// The op name of the reduction a scatter's update computation applies to every input
/// (`stablehlo.add`, `multiply`, `maximum`, `minimum`; `and`/`or` on `i1`), or `None` when it
/// is anything else: each returned value must be that op applied to the block arguments of its
/// input and its update, in either order.
pub fn scatter_reduction(op: &OpDesc) -> Option<&str> {
    let n = op.results.len();
    let block = op.regions.first()?.first()?;
    let ret = block.operations.last()?;
    if block.arguments.len() != 2 * n || ret.name != "stablehlo.return" || ret.operands.len() != n {
        return None;
    }
    let mut reduction: Option<&str> = None;
    for (i, value) in ret.operands.iter().enumerate() {
        let cur = value.defining_op.as_deref()?;
        if cur.operands.len() != 2 || !value.is_tensor {
            return None;
        }
        let logical = value.element_type == "i1" && LOGICAL.contains(&cur.name.as_str());
        if !logical && !REDUCTIONS.contains(&cur.name.as_str()) {
            return None;
        }
        match reduction {
            None => reduction = Some(&cur.name),
            Some(r) if r != cur.name => return None,
            Some(_) => {}
        }
        let (lhs, rhs, args) = (&cur.operands[0], &cur.operands[1], &block.arguments);
        if !((is_block_argument(lhs, args, i) && is_block_argument(rhs, args, i + n))
            || (is_block_argument(lhs, args, i + n) && is_block_argument(rhs, args, i)))
        {
            return None;
        }
    }
    reduction
}

pub(super) fn scatter(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    const NAME: &str = "scatter_dimension_numbers";
    let nums = attrs::structure(op, NAME, "scatter")?;
    let n = op.results.len();
    if n == 0 || op.operands.len() != 2 * n + 1 {
        return Err(op.error(format_args!(
            "expected N inputs, the indices and N updates for N results, got {} operands, {n} results",
            op.operands.len()
        )));
    }
    let mut b = op.builder();
    let dims = Dims {
        input_shape: op.operand_shape(0, "input")?,
        slices_shape: op.operand_shape(n + 1, "update")?,
        indices_shape: op.operand_shape(n, "scatter_indices")?,
        index_vector_dim: nums.int(op, NAME, "index_vector_dim", Some(0))?,
        offset_dims: nums.list("update_window_dims"),
        collapsed_dims: nums.list("inserted_window_dims"),
        input_batching_dims: nums.list("input_batching_dims"),
        indices_batching_dims: nums.list("scatter_indices_batching_dims"),
    };
    let mut add = |b: &mut RuleBuilder, input: i64, indices: i64, slices: i64, size, kind, blocked| {
        let mut operand_dims = vec![input; n];
        operand_dims.push(indices);
        operand_dims.extend(std::iter::repeat_n(slices, n));
        b.add_factor(&operand_dims, &vec![input; n], size, kind, blocked).map(|_| ())
    };
    let reduces = scatter_reduction(op).is_some();
    add_factors(op, &mut b, &dims, &mut add, Some(reduces))?;
    Ok(Some(b.build()))
}
