"""The SPMD partitioner on Builder programs: simulated ranks equal the unpartitioned program."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("array_api_compat")

from shardwise import Builder, Mesh, check_partition, load_partition, partition
from shardwise.cli import main
from shardwise.errors import MeshError, ShardwiseError
from shardwise.ir.core import Module


def _check(module: Module, **kw: object) -> object:
    part = partition(module, **kw)  # type: ignore[arg-type]
    res = check_partition(module, part.global_module, part.ranks, seed=3)
    assert res.passed, [(o.max_abs, o.max_rel) for o in res.outputs]
    return part


def _megatron() -> Module:
    b = Builder(Mesh({"x": 2, "y": 4}))
    x = b.arg((32, 64), sharding=b.sharding([["x"], None]))
    w1 = b.arg((64, 128), sharding=b.sharding([None, ["y"]]))
    w2 = b.arg((128, 64), sharding=b.sharding([["y"], None]))
    h = b.tanh(b.dot_general(x, w1, contracting=((1,), (0,))))
    return b.ret(b.dot_general(h, w2, contracting=((1,), (0,))))


def test_megatron_column_then_row_has_one_all_reduce() -> None:
    part = _check(_megatron())
    kinds = [c.kind for c in part.collectives]  # type: ignore[attr-defined]
    assert kinds == ["sdy.all_reduce"]
    rank0 = part.ranks[0].func("main")  # type: ignore[attr-defined]
    assert [a.type.shape for a in rank0.args] == [(16, 64), (64, 32), (32, 64)]
    assert "stablehlo.all_reduce" in part.ranks[0].to_mlir()  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["sum", "max"])
def test_reduction_over_a_non_divisible_dim(kind: str) -> None:
    b = Builder(Mesh({"x": 2}))
    x = b.arg((9, 6), sharding=b.sharding([["x"], None]))
    out = b.reduce(b.exp(x), dims=(0,), kind=kind)
    module = b.ret(out, shardings=[b.sharding([None])])
    part = _check(module)
    assert any(c.kind == "sdy.all_reduce" for c in part.collectives)  # type: ignore[attr-defined]


def test_reshape_and_transpose() -> None:
    b = Builder(Mesh({"x": 2, "y": 2}))
    x = b.arg((8, 12), sharding=b.sharding([["x"], ["y"]]))
    y = b.transpose(b.reshape(x, (8, 3, 4)), (2, 0, 1))
    _check(b.ret(b.negate(y)))


def test_reshard_between_axis_orders_on_non_divisible_dims() -> None:
    b = Builder(Mesh({"x": 2, "y": 4}))
    x = b.arg((10, 7), sharding=b.sharding([["x"], ["y"]]))
    y = b.sharding_constraint(b.tanh(x), b.sharding([["y"], ["x"]]))
    part = _check(b.ret(b.exp(y), shardings=[b.sharding([["y"], ["x"]])]))
    assert part.collectives  # type: ignore[attr-defined]


def test_slice_along_a_sharded_dim_reads_its_neighbours_rows() -> None:
    # Rows 1..12 of 16 split 4 ways (blocks of 4 in, 3 out): rank i reads rows 3i+1..3i+3, up
    # to two of them from the previous block, by one collective-permute (halo.py), not by
    # replicating the dimension around the slice.
    b = Builder(Mesh({"x": 4}))
    x = b.arg((16, 8), sharding=b.sharding([["x"], None]))
    y = b.slice(b.tanh(x), (1, 0), (13, 8))
    part = _check(b.ret(y, shardings=[b.sharding([["x"], None])]))
    assert part.added_reshards == 0  # type: ignore[attr-defined]
    assert [(c.kind, c.bytes) for c in part.collectives] == [("sdy.collective_permute", 2 * 8 * 4)]  # type: ignore[attr-defined]


def test_mesh_argument_must_agree() -> None:
    with pytest.raises(MeshError, match="disagrees"):
        partition(_megatron(), mesh="x=4,y=2")
    assert partition(_megatron(), mesh="x=2,y=4").mesh.size == 8


def test_failed_partition_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(MeshError):
        partition(_megatron(), out, mesh={"x": 8})
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_outdir_meta_and_load_partition(tmp_path: Path) -> None:
    out = tmp_path / "p"
    partition(_megatron(), out)
    partition(_megatron(), out)  # replaces the directory
    meta = json.loads((out / "meta.json").read_text())
    assert meta["num_ranks"] == 8 and meta["mesh"]["device_ids"] == list(range(8))
    assert meta["groups"]["x"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert meta["arguments"][0]["global_shape"] == [32, 64] and meta["arguments"][0]["local_shape"] == [16, 64]
    assert meta["collectives"][0]["kind"] == "sdy.all_reduce" and meta["collectives"][0]["bytes_per_device"] > 0
    module, meta2, weights = load_partition(out, 5)
    assert meta2 == meta and module.func("main").args[1].type.shape == (64, 32)
    assert weights == {} and "weights" not in meta  # no weights given
    with pytest.raises(ShardwiseError, match="rank must be"):
        load_partition(out, 8)
    with pytest.raises(ShardwiseError, match="missing"):
        load_partition(tmp_path, 0)


def test_cli_partition_and_run(tmp_path: Path) -> None:
    src = tmp_path / "in.mlir"
    _megatron().save(str(src))
    out = tmp_path / "out"
    assert main(["partition", str(src), "-o", str(out), "--mesh", "x=2,y=4"]) == 0
    assert main(["run", str(out), "--check", "--seed", "1"]) == 0
    assert main(["partition", str(src), "-o", str(tmp_path / "bad"), "--mesh", "x=3"]) == 2
    assert not (tmp_path / "bad").exists()


def test_one_value_resharded_alike_for_several_users_moves_once() -> None:
    # h (sharded on y in its columns) feeds four matmuls that each need it replicated, as an
    # LSTM cell's gates do: one all-gather, as XLA's CSE leaves it, not four (before: four).
    b = Builder(Mesh({"x": 2, "y": 4}))
    h = b.arg((8, 32), sharding=b.sharding([["x"], ["y"]]))
    ws = [b.arg((32, 32), sharding=b.sharding([None, ["y"]])) for _ in range(4)]
    gates = [b.dot_general(h, w, contracting=((1,), (0,))) for w in ws]
    total = gates[0]
    for g in gates[1:]:
        total = b.add(total, g)
    part = _check(b.ret(total))
    kinds = [c.kind for c in part.collectives]  # type: ignore[attr-defined]
    assert kinds == ["sdy.all_gather"], kinds
    assert part.ranks[0].to_mlir().count("stablehlo.all_gather") == 1  # type: ignore[attr-defined]


def test_a_value_on_a_maximal_mesh_is_computed_alike_by_every_rank() -> None:
    # JAX puts values on one device with a maximal mesh (<[], device_ids=[0]>); its sharding
    # has no dimensions. Before, partitioning rewrote it as a rank-0 sharding of a rank-2
    # tensor and failed with IndexError in the factor projection (found by the fault campaign).
    from shardwise import load_mlir

    text = """module {
  sdy.mesh @maximal_mesh_0 = <[], device_ids=[0]>
  sdy.mesh @mesh = <["x"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh_0, []>]>} : tensor<8x8xf32>
    %1 = stablehlo.abs %0 : tensor<8x8xf32>
    return %1 : tensor<8x8xf32>
  }
}"""
    _check(load_mlir(text))
