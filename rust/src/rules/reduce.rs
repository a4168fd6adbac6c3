//! Reductions and windowed ops: `reduce`, `reduce_window`, `select_and_scatter`, `sort`
//! (Shardy `op_sharding_rule_registry.cc`).

use super::{attrs, list, tuple, OpDesc};
use crate::error::Result;
use crate::rule::{FactorKind, OpShardingRule, NULL_DIM};

/// Reduced dimensions are reduction factors of the inputs; the others map input to result
/// dimensions in order. Init values (scalars) get no factor.
pub(super) fn reduce(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let n = op.operands.len() / 2;
    if n == 0 || op.operands.len() != 2 * n || op.results.len() != n {
        return Err(op.error(format_args!(
            "expected N inputs, N init values and N results, got {} operands, {} results",
            op.operands.len(),
            op.results.len()
        )));
    }
    let reduced = attrs::ints(op, "dimensions", None)?;
    let shape = op.operand_shape(0, "")?;
    let mut b = op.builder();
    let mut out = 0;
    for (d, &size) in shape.iter().enumerate() {
        let d = d as i64;
        let operands: Vec<i64> = std::iter::repeat_n(d, n).chain(std::iter::repeat_n(NULL_DIM, n)).collect();
        if reduced.contains(&d) {
            b.add_factor(&operands, &vec![NULL_DIM; n], size, FactorKind::Reduction, false)?;
        } else {
            b.add_factor(&operands, &vec![out; n], size, FactorKind::PassThrough, false)?;
            out += 1;
        }
    }
    Ok(Some(b.build()))
}

/// A window dimension maps input to output one to one: size 1, stride 1, no padding.
fn window_passthrough(op: &OpDesc, window: &[i64], strides: &[i64], dim: usize) -> Result<bool> {
    if let Some(text) = op.attr("padding") {
        let (_, pad) = attrs::dense_ints(op, "padding")?;
        if 2 * dim + 1 >= pad.len() {
            return Err(op.error(format_args!(
                "attribute 'padding' has no entry for dimension {dim}: {}",
                attrs::py_repr(text)
            )));
        }
        if pad[2 * dim] != 0 || pad[2 * dim + 1] != 0 {
            return Ok(false);
        }
    }
    for (values, name) in [(strides, "window_strides"), (window, "window_dimensions")] {
        if !values.is_empty() && dim >= values.len() {
            return Err(op.error(format_args!(
                "attribute {} has no entry for dimension {dim}: {}",
                attrs::py_repr(name),
                list(values)
            )));
        }
    }
    Ok((strides.is_empty() || strides[dim] == 1) && (window.is_empty() || window[dim] == 1))
}

/// Pointwise sized by the result (the number of windows); a dimension is a permutation factor
/// unless its window is trivial, blocked when conservative.
pub(super) fn reduce_window(op: &OpDesc, conservative: bool) -> Result<Option<OpShardingRule>> {
    let window = attrs::ints(op, "window_dimensions", Some(&[]))?;
    let strides = attrs::ints(op, "window_strides", Some(&[]))?;
    let out = op.result_shape(0, "")?;
    let mut b = op.builder();
    for (d, &size) in out.iter().enumerate() {
        let kind = if window_passthrough(op, &window, &strides, d)? {
            FactorKind::PassThrough
        } else {
            FactorKind::Permutation
        };
        b.add_factor_for_all(d as i64, size, kind, conservative && kind == FactorKind::Permutation)?;
    }
    Ok(Some(b.build()))
}

/// Trivial window dimensions are pointwise. Otherwise the source dimension gets a
/// need-replication factor and the operand/result dimension a permutation factor, both
/// blocked when conservative.
pub(super) fn select_and_scatter(op: &OpDesc, conservative: bool) -> Result<Option<OpShardingRule>> {
    let window = attrs::ints(op, "window_dimensions", Some(&[]))?;
    let strides = attrs::ints(op, "window_strides", Some(&[]))?;
    let out = op.result_shape(0, "")?;
    let source = op.operand_shape(1, "source")?;
    if source.len() != out.len() {
        return Err(op.error(format_args!(
            "expected source and result of equal rank, got {} and {}",
            tuple(&source),
            tuple(&out)
        )));
    }
    let mut b = op.builder();
    for (d, &size) in out.iter().enumerate() {
        let di = d as i64;
        if window_passthrough(op, &window, &strides, d)? {
            b.add_factor_for_all(di, size, FactorKind::PassThrough, false)?;
            continue;
        }
        b.add_factor(&[NULL_DIM, di, NULL_DIM], &[NULL_DIM], source[d], FactorKind::NeedReplication, conservative)?;
        b.add_factor(&[di, NULL_DIM, NULL_DIM], &[di], size, FactorKind::Permutation, conservative)?;
    }
    Ok(Some(b.build()))
}

/// The sorted dimension needs replication (blocked when every other dimension has size 1);
/// the others are batch dimensions.
pub(super) fn sort(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let dim = attrs::int(op, "dimension", Some(-1))?; // StableHLO's default; Shardy compares the raw value
    let shape = op.operand_shape(0, "")?;
    let blocked = shape.iter().enumerate().all(|(d, &size)| d as i64 == dim || size == 1);
    let mut b = op.builder();
    for (d, &size) in shape.iter().enumerate() {
        let di = d as i64;
        if di == dim {
            b.add_factor_for_all(di, size, FactorKind::NeedReplication, blocked)?;
        } else {
            b.add_factor_for_all(di, size, FactorKind::PassThrough, false)?;
        }
    }
    Ok(Some(b.build()))
}
