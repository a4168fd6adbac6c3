//! Op properties Shardy's passes ask about (Shardy `transforms/common/op_properties.cc`, and
//! MLIR's `isPure`): element-wise ops and ops without memory effects.

use std::sync::OnceLock;

use crate::fast_hash::FastSet;
use crate::ir::{types, Program};

/// StableHLO ops with MLIR's `Elementwise` or StableHLO's `BroadcastingElementwise` trait.
pub const ELEMENTWISE_OPS: &[&str] = &[
    "stablehlo.abs",
    "stablehlo.cbrt",
    "stablehlo.ceil",
    "stablehlo.convert",
    "stablehlo.count_leading_zeros",
    "stablehlo.cosine",
    "stablehlo.exponential",
    "stablehlo.exponential_minus_one",
    "stablehlo.floor",
    "stablehlo.imag",
    "stablehlo.is_finite",
    "stablehlo.log",
    "stablehlo.log_plus_one",
    "stablehlo.logistic",
    "stablehlo.not",
    "stablehlo.negate",
    "stablehlo.popcnt",
    "stablehlo.real",
    "stablehlo.round_nearest_afz",
    "stablehlo.round_nearest_even",
    "stablehlo.rsqrt",
    "stablehlo.sign",
    "stablehlo.sine",
    "stablehlo.sqrt",
    "stablehlo.tan",
    "stablehlo.tanh",
    "stablehlo.add",
    "stablehlo.atan2",
    "stablehlo.complex",
    "stablehlo.divide",
    "stablehlo.maximum",
    "stablehlo.minimum",
    "stablehlo.multiply",
    "stablehlo.power",
    "stablehlo.remainder",
    "stablehlo.shift_left",
    "stablehlo.shift_right_arithmetic",
    "stablehlo.shift_right_logical",
    "stablehlo.subtract",
    "stablehlo.and",
    "stablehlo.or",
    "stablehlo.xor",
    "stablehlo.compare",
    "stablehlo.uniform_quantize",
    "stablehlo.uniform_dequantize",
    "stablehlo.reduce_precision",
    "stablehlo.clamp",
    "stablehlo.select",
];

/// Ops without memory effects besides the element-wise ones (speculatable when their shapes
/// are static).
pub const OTHER_NO_MEMORY_EFFECT_OPS: &[&str] = &[
    "stablehlo.constant",
    "stablehlo.iota",
    "stablehlo.create_token",
    "stablehlo.replica_id",
    "stablehlo.partition_id",
    "stablehlo.after_all",
    "stablehlo.get_tuple_element",
    "stablehlo.tuple",
    "stablehlo.dynamic_slice",
    "stablehlo.dynamic_update_slice",
    "stablehlo.broadcast",
    "stablehlo.cross-replica-sum",
    "stablehlo.dot",
    "stablehlo.einsum",
    "stablehlo.unary_einsum",
    "stablehlo.get_dimension_size",
    "stablehlo.torch_index_select",
    "stablehlo.optimization_barrier",
    "stablehlo.batch_norm_grad",
    "stablehlo.batch_norm_inference",
    "stablehlo.batch_norm_training",
    "stablehlo.bitcast_convert",
    "stablehlo.broadcast_in_dim",
    "stablehlo.cholesky",
    "stablehlo.concatenate",
    "stablehlo.convolution",
    "stablehlo.dot_general",
    "stablehlo.fft",
    "stablehlo.gather",
    "stablehlo.reshape",
    "stablehlo.pad",
    "stablehlo.reverse",
    "stablehlo.slice",
    "stablehlo.transpose",
    "stablehlo.triangular_solve",
    "stablehlo.rng_bit_generator",
    "stablehlo.set_dimension_size",
    "sdy.constant",
    "sdy.reshard",
    "sdy.propagation_barrier",
    "sdy.return",
    "stablehlo.return",
    "func.return",
];

/// The terminators of the regions the passes walk.
pub const TERMINATORS: &[&str] = &["func.return", "stablehlo.return", "sdy.return", "mhlo.return"];

fn static_shapes(p: &Program, op: u32) -> bool {
    p.op_operands(op)
        .iter()
        .copied()
        .chain(p.op_results(op))
        .all(|v| !types::has_dynamic_dim(p.strings.get(p.value_types[v as usize])))
}

/// The names of [`ELEMENTWISE_OPS`] and the other ops without memory effects, hashed once
/// (the constant splitter asks for every op).
fn no_memory_effect_names() -> &'static FastSet<&'static str> {
    static NAMES: OnceLock<FastSet<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| ELEMENTWISE_OPS.iter().chain(OTHER_NO_MEMORY_EFFECT_OPS).copied().collect())
}

/// Whether `name` is one of [`ELEMENTWISE_OPS`] (hashed once).
pub fn is_elementwise_name(name: &str) -> bool {
    static NAMES: OnceLock<FastSet<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| ELEMENTWISE_OPS.iter().copied().collect()).contains(name)
}

/// Ops without memory effects (MLIR's `MemoryEffectOpInterface` with no effects), whatever
/// their shapes.
pub fn has_no_memory_effect(name: &str) -> bool {
    no_memory_effect_names().contains(name)
}

/// MLIR's `isPure` for the ops Shardy's passes ask about: no memory effects and speculatable
/// (static shapes).
pub fn is_pure(p: &Program, op: u32) -> bool {
    has_no_memory_effect(p.op_name(op)) && static_shapes(p, op)
}

/// Shardy's `isElementwise`: element-wise StableHLO ops, a `bitcast_convert` that keeps the
/// shape, and `sdy.propagation_barrier` / `sdy.sharding_constraint` / `sdy.reshard`.
pub fn is_elementwise(p: &Program, op: u32) -> bool {
    let name = p.op_name(op);
    if is_elementwise_name(name) {
        return true;
    }
    if name == "stablehlo.bitcast_convert" {
        let shape = |v: u32| types::tensor_shape(p.strings.get(p.value_types[v as usize]));
        return shape(p.op_operands(op)[0]) == shape(p.op_results(op).start);
    }
    matches!(name, "sdy.propagation_barrier" | "sdy.sharding_constraint" | "sdy.reshard")
}
