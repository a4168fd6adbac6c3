"""``sdy.named_computation`` (Shardy's form of a call, as ``sdy-import-func-calls`` writes it):
the interpreter runs its body, and the partitioner and the search inline it like a call, its
in- and out-shardings joined to the values around it (issue 26, "named computations")."""

from __future__ import annotations

import numpy as np
import shardwise as sw
from shardwise.execute.simulator import simulate
from shardwise.spmd.partition.inline import inline_calls

PROGRAM = """module {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
    %0 = sdy.named_computation<"outer">(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{}, {"y"}]>] (%arg1: tensor<8x16xf32>) {
      %1 = sdy.named_computation<"inner">(%arg1) in_shardings=[<@mesh, [{}, {"y"}]>] out_shardings=[<@mesh, [{}, {"y"}]>] (%arg2: tensor<8x16xf32>) {
        %2 = stablehlo.sine %arg2 : tensor<8x16xf32>
        sdy.return %2 : tensor<8x16xf32>
      } : (tensor<8x16xf32>) -> tensor<8x16xf32>
      %3 = stablehlo.add %1, %arg1 : tensor<8x16xf32>
      sdy.return %3 : tensor<8x16xf32>
    } : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %4 = stablehlo.multiply %0, %0 : tensor<8x16xf32>
    return %4 : tensor<8x16xf32>
  }
}"""


def test_interpreter_runs_the_body() -> None:
    x = np.linspace(-1.0, 1.0, 128, dtype=np.float32).reshape(8, 16)
    (got,) = simulate(sw.load_mlir(PROGRAM), [[x]]).outputs[0]
    np.testing.assert_allclose(got, (np.sin(x) + x) ** 2, rtol=1e-6)


def test_inlined_innermost_first_with_its_shardings_as_reshards() -> None:
    m = sw.load_mlir(PROGRAM)
    assert inline_calls(m) == 2
    names = [op.name for op in m.walk()]
    assert "sdy.named_computation" not in names and "sdy.return" not in names
    assert names.count("sdy.reshard") >= 2  # into the outer one's {x} -> the inner one's {y}, and out


def test_partition_and_search_see_through_named_computations() -> None:
    m = sw.load_mlir(PROGRAM)
    part = sw.partition(m)
    assert sw.check_partition(m, part.global_module, part.ranks, seed=0).passed
    out, report = sw.auto_shard(m, method="ilp", time_limit=5)
    assert not any(op.name == "sdy.named_computation" for op in out.walk())
    assert any(r.label.startswith("stablehlo.sine") for r in report.nodes)  # its body's ops are nodes
    searched = sw.partition(out)
    assert searched.bytes_per_device == report.comm_bytes
    assert sw.check_partition(out, searched.global_module, searched.ranks, seed=0).passed
