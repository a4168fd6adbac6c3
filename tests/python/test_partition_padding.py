"""Non-divisible dimensions: padded shards (filled with NaN by ``check_partition``) never leak
into a reduction, a dot contraction or a result."""

from __future__ import annotations

import pytest
import shardwise as sw
from shardwise.importers.mlir import load_mlir
from shardwise.spmd.partition.check import check_partition

pytestmark = pytest.mark.jax

# Function inputs and outputs get divisible shardings from propagation's export steps, so the
# non-divisible shardings sit on intermediates (sharding constraints). The padding of a sliced
# block is zero; exponentials after the slice turn it into ones (negated: the row maximum of
# negative values), so any padding that reached a sum, a dot or a maximum would change it.
_PROGRAMS = {
    "reduce_over_padded_dim": """
    sdy.mesh @mesh = <["x"=4]>
    func.func @main(%arg0: tensor<10x8xf32>) -> tensor<8xf32> {
      %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {}]> : tensor<10x8xf32>
      %1 = stablehlo.exponential %0 : tensor<10x8xf32>
      %c = stablehlo.constant dense<0.0> : tensor<f32>
      %2 = stablehlo.reduce(%1 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<10x8xf32>, tensor<f32>) -> tensor<8xf32>
      return %2 : tensor<8xf32>
    }""",
    "max_over_padded_dim": """
    sdy.mesh @mesh = <["x"=4]>
    func.func @main(%arg0: tensor<8x10xf32>) -> tensor<8xf32> {
      %0 = sdy.sharding_constraint %arg0 <@mesh, [{}, {"x"}]> : tensor<8x10xf32>
      %e = stablehlo.exponential %0 : tensor<8x10xf32>
      %1 = stablehlo.negate %e : tensor<8x10xf32>
      %c = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %2 = stablehlo.reduce(%1 init: %c) applies stablehlo.maximum across dimensions = [1] : (tensor<8x10xf32>, tensor<f32>) -> tensor<8xf32>
      return %2 : tensor<8xf32>
    }""",
    "dot_contracting_padded_dim": """
    sdy.mesh @mesh = <["x"=4]>
    func.func @main(%arg0: tensor<6x10xf32>, %arg1: tensor<10x4xf32>) -> tensor<6x4xf32> {
      %0 = sdy.sharding_constraint %arg0 <@mesh, [{}, {"x"}]> : tensor<6x10xf32>
      %1 = stablehlo.exponential %0 : tensor<6x10xf32>
      %2 = sdy.sharding_constraint %arg1 <@mesh, [{"x"}, {}]> : tensor<10x4xf32>
      %3 = stablehlo.exponential %2 : tensor<10x4xf32>
      %4 = stablehlo.dot_general %1, %3, contracting_dims = [1] x [0] : (tensor<6x10xf32>, tensor<10x4xf32>) -> tensor<6x4xf32>
      return %4 : tensor<6x4xf32>
    }""",
    "padded_result": """
    sdy.mesh @mesh = <["x"=4]>
    func.func @main(%arg0: tensor<10x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<10x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
      %0 = stablehlo.tanh %arg0 : tensor<10x3xf32>
      return %0 : tensor<10x3xf32>
    }""",
}


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_padded_shards_do_not_leak(name: str) -> None:
    module = load_mlir(_PROGRAMS[name])
    part = sw.partition(module)
    # Some value really is split 4 ways along its size-10 dimension (shards of 3, padded to 12).
    mesh = part.global_module.meshes["mesh"]
    padded = [
        v
        for v in part.global_module.values()
        if v.sharding is not None
        and any(
            size == 10 and dim.axes and sum(a.full_size(mesh) if a.size is None else a.size for a in dim.axes) == 4
            for size, dim in zip(v.type.shape, v.sharding.dims)
        )
    ]
    assert padded, part.global_module.to_mlir()
    res = check_partition(module, part.global_module, part.ranks, seed=3)
    assert res.passed, [(o.index, o.max_abs, o.max_rel) for o in res.outputs]
