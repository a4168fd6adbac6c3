//! `convolution` with batch and feature groups (Shardy `op_sharding_rule_registry.cc`).
//! Factors, in order: the batch-group count (when > 1), the per-group batch size; unless
//! conservative, per spatial dimension the number of windows (permutation, lhs and output) and
//! the window size (reduction, lhs and kernel), the larger first, each capped by what is left
//! of the lhs dimension and skipped when 1; the feature-group count (when > 1); the per-group
//! input feature size (reduction); the per-group output feature size (when > 1).

use super::{attrs, cdiv, tuple, OpDesc};
use crate::error::Result;
use crate::rule::{FactorKind, OpShardingRule, RuleBuilder, NULL_DIM};

pub(super) fn convolution(op: &OpDesc, conservative: bool) -> Result<Option<OpShardingRule>> {
    let dims = attrs::conv_dims(op, "dimension_numbers")?;
    let (lhs, rhs) = (op.operand_shape(0, "lhs")?, op.operand_shape(1, "kernel")?);
    let out = op.result_shape(0, "")?;
    let batch_groups = attrs::int(op, "batch_group_count", Some(1))?;
    let feature_groups = attrs::int(op, "feature_group_count", Some(1))?;
    if dims.input_spatial.len() != dims.kernel_spatial.len() || dims.kernel_spatial.len() != dims.output_spatial.len() {
        return Err(op.error(format_args!("expected as many input, kernel and output spatial dimensions, got {dims}")));
    }
    let with =
        |a: i64, b: i64, spatial: &[i64]| -> Vec<i64> { [a, b].into_iter().chain(spatial.iter().copied()).collect() };
    for (shape, ds, what) in [
        (&lhs, with(dims.input_batch, dims.input_feature, &dims.input_spatial), "lhs"),
        (&rhs, with(dims.kernel_input_feature, dims.kernel_output_feature, &dims.kernel_spatial), "kernel"),
        (&out, with(dims.output_batch, dims.output_feature, &dims.output_spatial), "output"),
    ] {
        if ds.iter().any(|&d| !(0..shape.len() as i64).contains(&d)) {
            return Err(op.error(format_args!(
                "{what} dimension numbers {} out of range for shape {}",
                tuple(&ds),
                tuple(shape)
            )));
        }
    }
    let at = |shape: &[i64], d: i64| shape[d as usize];
    let mut b = op.builder();
    let pass = FactorKind::PassThrough;
    if batch_groups > 1 {
        b.add_factor(
            &[dims.input_batch, dims.kernel_output_feature],
            &[dims.output_feature],
            batch_groups,
            pass,
            false,
        )?;
    }
    b.add_factor(&[dims.input_batch, NULL_DIM], &[dims.output_batch], at(&out, dims.output_batch), pass, false)?;
    if !conservative {
        for ((&lhs_dim, &rhs_dim), &out_dim) in
            dims.input_spatial.iter().zip(&dims.kernel_spatial).zip(&dims.output_spatial)
        {
            let (num_windows, window_size) = (at(&out, out_dim), at(&rhs, rhs_dim));
            let mut remaining = at(&lhs, lhs_dim);
            let mut spatial = |b: &mut RuleBuilder, size: i64, contracting: bool| -> Result<()> {
                let size = remaining.min(size);
                if size > 1 {
                    if contracting {
                        b.add_factor(&[lhs_dim, rhs_dim], &[NULL_DIM], size, FactorKind::Reduction, false)?;
                    } else {
                        b.add_factor(&[lhs_dim, NULL_DIM], &[out_dim], size, FactorKind::Permutation, false)?;
                    }
                    remaining = cdiv(remaining, size);
                }
                Ok(())
            };
            if num_windows >= window_size {
                spatial(&mut b, num_windows, false)?;
                spatial(&mut b, window_size, true)?;
            } else {
                spatial(&mut b, window_size, true)?;
                spatial(&mut b, num_windows, false)?;
            }
        }
    }
    if feature_groups > 1 {
        b.add_factor(
            &[dims.input_feature, dims.kernel_output_feature],
            &[dims.output_feature],
            feature_groups,
            pass,
            false,
        )?;
    }
    b.add_factor(
        &[dims.input_feature, dims.kernel_input_feature],
        &[NULL_DIM],
        at(&rhs, dims.kernel_input_feature),
        FactorKind::Reduction,
        false,
    )?;
    let groups = batch_groups.wrapping_mul(feature_groups);
    if groups != 0 {
        let out_features = cdiv(at(&out, dims.output_feature), groups);
        if out_features > 1 {
            b.add_factor(&[NULL_DIM, dims.kernel_output_feature], &[dims.output_feature], out_features, pass, false)?;
        }
    }
    Ok(Some(b.build()))
}
