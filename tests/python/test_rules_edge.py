"""``shardwise.rules`` against Shardy on hand-written edge cases: scatter update computations
Shardy does or does not recognise as reductions, existing rules, custom-call targets with and
without rules, X64Combine feeding rng_bit_generator, constant and variable
dynamic_update_slice indices, concatenations of slices, tokens, unknown ops, many factors
(symbols past ``z``), size-0 and size-1 dimensions."""

from __future__ import annotations

import warnings

import pytest
from shardwise.rules import OpInfo, UnknownOpWarning, ValueInfo, rule_for
from test_rules_mlir import compare_module

pytestmark = pytest.mark.jax


def _scatter(region: str, elt: str = "f32", inputs: int = 1) -> str:
    ins = ", ".join(f"tensor<3x4x{elt}>" for _ in range(inputs))
    ups = ", ".join(f"tensor<2x4x{elt}>" for _ in range(inputs))
    args = ", ".join(["%x"] * inputs + ["%i"] + ["%u"] * inputs)
    return f"""
  %s{{n}}:{inputs} = "stablehlo.scatter"({args}) ({{
{region}
  }}) {{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0],
        scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}}
      : ({ins}, tensor<2x1xi32>, {ups}) -> ({ins})"""


def _region(body: str, elt: str = "f32", n: int = 1) -> str:
    args = ", ".join(f"%b{k}: tensor<{elt}>" for k in range(2 * n))
    return f"  ^bb0({args}):\n{body}"


SCATTERS = [
    (_region("    %r = stablehlo.maximum %b0, %b1 : tensor<f32>\n    stablehlo.return %r : tensor<f32>"), "f32", 1),
    (_region("    %r = stablehlo.minimum %b1, %b0 : tensor<f32>\n    stablehlo.return %r : tensor<f32>"), "f32", 1),
    (_region("    %r = stablehlo.multiply %b0, %b1 : tensor<f32>\n    stablehlo.return %r : tensor<f32>"), "f32", 1),
    (_region("    %r = stablehlo.subtract %b0, %b1 : tensor<f32>\n    stablehlo.return %r : tensor<f32>"), "f32", 1),
    (_region("    stablehlo.return %b1 : tensor<f32>"), "f32", 1),
    (_region("    %r = stablehlo.add %b0, %b0 : tensor<f32>\n    stablehlo.return %r : tensor<f32>"), "f32", 1),
    (_region("    %r = stablehlo.or %b0, %b1 : tensor<i1>\n    stablehlo.return %r : tensor<i1>", "i1"), "i1", 1),
    (_region("    %r = stablehlo.and %b1, %b0 : tensor<i1>\n    stablehlo.return %r : tensor<i1>", "i1"), "i1", 1),
    (_region("    %r = stablehlo.or %b0, %b1 : tensor<i32>\n    stablehlo.return %r : tensor<i32>", "i32"), "i32", 1),
    (_region("    %r = stablehlo.xor %b0, %b1 : tensor<i1>\n    stablehlo.return %r : tensor<i1>", "i1"), "i1", 1),
    (
        _region(
            "    %r = stablehlo.add %b0, %b2 : tensor<f32>\n    %q = stablehlo.add %b3, %b1 : tensor<f32>\n"
            "    stablehlo.return %r, %q : tensor<f32>, tensor<f32>",
            "f32",
            2,
        ),
        "f32",
        2,
    ),
    (
        _region(
            "    %r = stablehlo.add %b0, %b2 : tensor<f32>\n    %q = stablehlo.add %b1, %b2 : tensor<f32>\n"
            "    stablehlo.return %r, %q : tensor<f32>, tensor<f32>",
            "f32",
            2,
        ),
        "f32",
        2,
    ),
]


def _scatter_module() -> str:
    funcs = []
    for n, (region, elt, inputs) in enumerate(SCATTERS):
        ins = ", ".join(f"tensor<3x4x{elt}>" for _ in range(inputs))
        funcs.append(
            f"func.func @s{n}(%x: tensor<3x4x{elt}>, %i: tensor<2x1xi32>, %u: tensor<2x4x{elt}>) -> ({ins}) {{"
            + _scatter(region, elt, inputs).replace("{n}", str(n))
            + f"\n  return {', '.join(f'%s{n}#{k}' for k in range(inputs))} : {ins}\n}}"
        )
    return "\n".join(funcs)


EDGE_MODULE = r"""
sdy.mesh @mesh = <["x"=2, "y"=4]>

func.func @custom_calls(%a: tensor<8x4xf32>, %t: !stablehlo.token, %k: tensor<2xui32>) -> (tensor<8x4xf32>, tensor<2xui64>) {
  %0 = stablehlo.custom_call @annotate_device_placement(%a) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = stablehlo.custom_call @_SPMDInternalOp_RotateRight(%0) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = stablehlo.custom_call @InvertDiagBlocksLowerTriangular(%1) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %3 = stablehlo.custom_call @Cholesky(%2) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %4 = stablehlo.custom_call @tpu_custom_call(%3) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %5 = stablehlo.custom_call @xla_ffi_python_cpu_callback(%4) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %6 = stablehlo.custom_call @MoveToHost(%t) : (!stablehlo.token) -> !stablehlo.token
  %7 = stablehlo.custom_call @some_unknown_target(%5) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %8 = stablehlo.custom_call @another_unknown(%7) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=4}, custom>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %9 = stablehlo.add %8, %8 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, k])->([i, l]) {i=8, j=4, k=4, l=4} need_replication={j, k, l}>} : tensor<8x4xf32>
  %10 = stablehlo.custom_call @X64Combine(%k, %k) : (tensor<2xui32>, tensor<2xui32>) -> tensor<2xui64>
  %11 = stablehlo.custom_call @X64Combine(%k, %k) : (tensor<2xui32>, tensor<2xui32>) -> tensor<2xui64>
  %s, %o = stablehlo.rng_bit_generator %11, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4x8xui32>)
  %12:2 = stablehlo.custom_call @_SPMDInternalOp_MultiSlice(%9) : (tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>)
  %13 = stablehlo.custom_call @Sharding(%12#0) {mhlo.sharding = "{replicated}"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %13, %10 : tensor<8x4xf32>, tensor<2xui64>
}

func.func @dus(%x: tensor<10x8xf32>, %u: tensor<2x8xf32>, %i: tensor<i32>) -> (tensor<10x8xf32>, tensor<10x8xf32>, tensor<10x8xf32>) {
  %c0 = stablehlo.constant dense<1> : tensor<i32>
  %c1 = sdy.constant dense<0> : tensor<i32>
  %0 = stablehlo.dynamic_update_slice %x, %u, %c0, %c1 : (tensor<10x8xf32>, tensor<2x8xf32>, tensor<i32>, tensor<i32>) -> tensor<10x8xf32>
  %1 = stablehlo.dynamic_update_slice %x, %u, %i, %c1 : (tensor<10x8xf32>, tensor<2x8xf32>, tensor<i32>, tensor<i32>) -> tensor<10x8xf32>
  %n = stablehlo.negate %c0 : tensor<i32>
  %2 = stablehlo.dynamic_update_slice %x, %u, %n, %c0 : (tensor<10x8xf32>, tensor<2x8xf32>, tensor<i32>, tensor<i32>) -> tensor<10x8xf32>
  return %0, %1, %2 : tensor<10x8xf32>, tensor<10x8xf32>, tensor<10x8xf32>
}

func.func @concats(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x10xf32>, tensor<4x14xf32>, tensor<4x16xf32>, tensor<4x12xf32>) {
  %a = stablehlo.slice %x [0:4, 0:2] : (tensor<4x8xf32>) -> tensor<4x2xf32>
  %b = stablehlo.slice %y [0:4, 2:8] : (tensor<4x8xf32>) -> tensor<4x6xf32>
  %c = stablehlo.slice %x [0:4, 4:8] : (tensor<4x8xf32>) -> tensor<4x4xf32>
  %0 = stablehlo.concatenate %a, %x, dim = 1 : (tensor<4x2xf32>, tensor<4x8xf32>) -> tensor<4x10xf32>
  %1 = stablehlo.concatenate %b, %y, dim = 1 : (tensor<4x6xf32>, tensor<4x8xf32>) -> tensor<4x14xf32>
  %2 = stablehlo.concatenate %x, %y, dim = 1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  %3 = stablehlo.concatenate %a, %c, %a, %b, dim = 1 : (tensor<4x2xf32>, tensor<4x4xf32>, tensor<4x2xf32>, tensor<4x6xf32>) -> tensor<4x14xf32>
  %4 = stablehlo.concatenate %c, %y, dim = 1 : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x12xf32>
  return %0, %1, %2, %4 : tensor<4x10xf32>, tensor<4x14xf32>, tensor<4x16xf32>, tensor<4x12xf32>
}

func.func @many_factors(%a: tensor<1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x3xf32>, %b: tensor<2x3x4x5x6x7x8x9x10x11xf32>) -> (tensor<1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x3xf32>, tensor<3x1024xf32>, tensor<2x3x4x5x6x7x8x9x10x11xf32>) {
  %0 = stablehlo.add %a, %a : tensor<1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x3xf32>
  %1 = stablehlo.reshape %a : (tensor<1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x3xf32>) -> tensor<3x1024xf32>
  %2 = stablehlo.dot_general %b, %b, batching_dims = [0, 1, 2, 3, 4] x [0, 1, 2, 3, 4], contracting_dims = [5, 6] x [5, 6] : (tensor<2x3x4x5x6x7x8x9x10x11xf32>, tensor<2x3x4x5x6x7x8x9x10x11xf32>) -> tensor<2x3x4x5x6x9x10x11x9x10x11xf32>
  %3 = stablehlo.transpose %b, dims = [9, 8, 7, 6, 5, 4, 3, 2, 1, 0] : (tensor<2x3x4x5x6x7x8x9x10x11xf32>) -> tensor<11x10x9x8x7x6x5x4x3x2xf32>
  return %0, %1, %b : tensor<1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x1x2x3xf32>, tensor<3x1024xf32>, tensor<2x3x4x5x6x7x8x9x10x11xf32>
}

func.func @odd_sizes(%a: tensor<0x4xf32>, %b: tensor<1x1xf32>, %c: tensor<4x1x1xf32>) -> (tensor<0x4xf32>, tensor<1xf32>, tensor<4x1x1xf32>, tensor<4x1x1xf32>) {
  %0 = stablehlo.add %a, %a : tensor<0x4xf32>
  %1 = stablehlo.reshape %b : (tensor<1x1xf32>) -> tensor<1xf32>
  %2 = "stablehlo.sort"(%c) <{dimension = 0 : i64, is_stable = false}> ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %p = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }) : (tensor<4x1x1xf32>) -> tensor<4x1x1xf32>
  %3 = "stablehlo.sort"(%c) <{dimension = 2 : i64, is_stable = false}> ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %p = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }) : (tensor<4x1x1xf32>) -> tensor<4x1x1xf32>
  return %0, %1, %2, %3 : tensor<0x4xf32>, tensor<1xf32>, tensor<4x1x1xf32>, tensor<4x1x1xf32>
}

func.func @structural(%a: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = sdy.named_computation<"foo">(%a) (%arg1: tensor<8x4xf32>) {
    %1 = stablehlo.abs %arg1 : tensor<8x4xf32>
    sdy.return %1 : tensor<8x4xf32>
  } : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = sdy.propagation_barrier %0 allowed_direction=NONE : tensor<8x4xf32>
  %3 = sdy.reshard %2 <@mesh, [{"x"}, {}]> : tensor<8x4xf32>
  %4 = stablehlo.optimization_barrier %3 : tensor<8x4xf32>
  %5 = stablehlo.partition_id : tensor<ui32>
  %6 = stablehlo.create_token : !stablehlo.token
  %7 = stablehlo.after_all %6 : !stablehlo.token
  %8 = stablehlo.cosine %4 : tensor<8x4xf32>
  %9 = stablehlo.clamp %8, %8, %8 : tensor<8x4xf32>
  %v = stablehlo.slice %9 [0:8, 0:1] : (tensor<8x4xf32>) -> tensor<8x1xf32>
  %w = stablehlo.reshape %v : (tensor<8x1xf32>) -> tensor<8xf32>
  %10 = "stablehlo.batch_norm_inference"(%9, %w, %w, %w, %w) {epsilon = 1.0e-3 : f32, feature_index = 0 : i64} : (tensor<8x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x4xf32>
  return %10 : tensor<8x4xf32>
}
"""


def test_edge_cases_match_shardy() -> None:
    for text in (EDGE_MODULE, _scatter_module()):
        for conservative in (False, True):
            c = compare_module(text, conservative)
            assert c.matches == c.ops, c.mismatches
            assert c.ruled > 10


def test_scatter_reductions_are_recognised_like_shardy() -> None:
    """The scatter module's rules differ between recognised and unrecognised reductions."""
    c = compare_module(_scatter_module())
    assert c.matches == c.ops
    ours = [m for m in c.by_op if m == "stablehlo.scatter"]
    assert ours and c.by_op["stablehlo.scatter"] == len(SCATTERS)


def test_unknown_ops_warn_and_known_no_rule_ops_do_not() -> None:
    v = ValueInfo((4,))
    with pytest.warns(UnknownOpWarning, match="mydialect.frobnicate"):
        assert rule_for(OpInfo("mydialect.frobnicate", (v,), (v,))) is None
    with pytest.warns(UnknownOpWarning, match="@my_target"):
        assert rule_for(OpInfo("stablehlo.custom_call", (v,), (v,), {"call_target_name": '"my_target"'})) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in (
            "stablehlo.iota",
            "stablehlo.while",
            "func.call",
            "sdy.manual_computation",
            "func.return",
            "stablehlo.return",
        ):
            assert rule_for(OpInfo(name, (v,), (v,))) is None
        tpu = OpInfo("stablehlo.custom_call", (v,), (v,), {"call_target_name": '"tpu_custom_call"'})
        assert rule_for(tpu) is None
