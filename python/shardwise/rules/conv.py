"""``convolution`` with batch and feature groups (Shardy ``op_sharding_rule_registry.cc``).

Factors, in order: the batch-group count (when > 1), the per-group batch size; unless
conservative, per spatial dimension the number of windows (permutation, lhs and output) and
the window size (reduction, lhs and kernel), the larger first, each capped by what is left of
the lhs dimension and skipped when 1; the feature-group count (when > 1); the per-group input
feature size (reduction); the per-group output feature size (when > 1)."""

from __future__ import annotations

from shardwise.rules._util import builtin, operand_shape, result_shape
from shardwise.rules.attrs import attr_conv_dims, attr_int
from shardwise.rules.exceptions import OpInfoError
from shardwise.rules.opinfo import OpInfo
from shardwise.rules.rule import FactorKind, OpShardingRule, RuleBuilder


@builtin("stablehlo.convolution")
def _convolution(op: OpInfo, conservative: bool) -> OpShardingRule:
    dims = attr_conv_dims(op)
    lhs, rhs, out = operand_shape(op, 0, "lhs"), operand_shape(op, 1, "kernel"), result_shape(op, 0)
    batch_groups = attr_int(op, "batch_group_count", 1)
    feature_groups = attr_int(op, "feature_group_count", 1)
    if not len(dims.input_spatial) == len(dims.kernel_spatial) == len(dims.output_spatial):
        raise OpInfoError(f"{op.name}: expected as many input, kernel and output spatial dimensions, got {dims}")
    for shape, ds, what in (
        (lhs, (dims.input_batch, dims.input_feature, *dims.input_spatial), "lhs"),
        (rhs, (dims.kernel_input_feature, dims.kernel_output_feature, *dims.kernel_spatial), "kernel"),
        (out, (dims.output_batch, dims.output_feature, *dims.output_spatial), "output"),
    ):
        if any(not 0 <= d < len(shape) for d in ds):
            raise OpInfoError(f"{op.name}: {what} dimension numbers {ds} out of range for shape {shape}")
    b = RuleBuilder.for_op(op)
    if batch_groups > 1:
        b.add_factor([dims.input_batch, dims.kernel_output_feature], dims.output_feature, batch_groups)
    b.add_factor([dims.input_batch, -1], dims.output_batch, out[dims.output_batch])
    if not conservative:
        for lhs_dim, rhs_dim, out_dim in zip(dims.input_spatial, dims.kernel_spatial, dims.output_spatial):
            num_windows, window_size = out[out_dim], rhs[rhs_dim]
            remaining = lhs[lhs_dim]

            def spatial(size: int, contracting: bool) -> None:
                nonlocal remaining
                size = min(remaining, size)
                if size > 1:
                    if contracting:
                        b.add_factor([lhs_dim, rhs_dim], -1, size, FactorKind.REDUCTION)
                    else:
                        b.add_factor([lhs_dim, -1], out_dim, size, FactorKind.PERMUTATION)
                    remaining = _cdiv(remaining, size)

            if num_windows >= window_size:
                spatial(num_windows, False)
                spatial(window_size, True)
            else:
                spatial(window_size, True)
                spatial(num_windows, False)
    if feature_groups > 1:
        b.add_factor([dims.input_feature, dims.kernel_output_feature], dims.output_feature, feature_groups)
    b.add_factor(
        [dims.input_feature, dims.kernel_input_feature], -1, rhs[dims.kernel_input_feature], FactorKind.REDUCTION
    )
    groups = batch_groups * feature_groups
    if groups != 0:
        out_features = _cdiv(out[dims.output_feature], groups)
        if out_features > 1:
            b.add_factor([-1, dims.kernel_output_feature], dims.output_feature, out_features)
    return b.build()


def _cdiv(a: int, b: int) -> int:
    """C++ integer division (truncating toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q
