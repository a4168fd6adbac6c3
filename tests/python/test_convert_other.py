"""MindSpore, hidet and DTensor conversions, on the examples of their own documents."""

from __future__ import annotations

import pytest
from shardwise import AxisRef, ConversionError, DimSharding, Mesh, TensorSharding

MESH = Mesh({"x": 2, "y": 4})


def test_mindspore_matmul_example() -> None:
    # mindspore-sharding-propagation.md: MatMul(X, W) with strategy ((2, 1), (1, 4)) on 8 devices:
    # device matrix [2, 1, 4]; X split in 2 along rows, W in 4 along columns; device 0-3 hold X0.
    x = TensorSharding.from_mindspore_layout((2, 1, 4), (2, 1))
    w = TensorSharding.from_mindspore_layout((2, 1, 4), (1, 0))
    assert x.to_mindspore_strategy() == (2, 1) and w.to_mindspore_strategy() == (1, 4)
    assert [x.device_ranges((4, 4), d)[0] for d in range(8)] == [(0, 2)] * 4 + [(2, 4)] * 4
    # W0 on devices 0 and 4, W1 on 1 and 5, ...
    assert [w.device_ranges((4, 8), d)[1] for d in range(8)] == [(0, 2), (2, 4), (4, 6), (6, 8)] * 2
    assert TensorSharding.from_mindspore_strategy((2, 1), 8).to_mindspore_strategy() == (2, 1)
    assert (
        str(TensorSharding.from_mindspore_strategy((2, 4), 8, mesh_name=None))
        == '#sdy.sharding<mesh<["d1"=2, "d0"=4]>, [{"d1"}, {"d0"}]>'
    )
    rep = TensorSharding.from_mindspore_strategy((1, 2), 8, mesh_name=None)
    assert str(rep) == '#sdy.sharding<mesh<["d2"=4, "d1"=1, "d0"=2]>, [{}, {"d0"}]>'


def test_mindspore_layout_round_trip_with_sub_axes() -> None:
    t = TensorSharding(MESH, [[AxisRef("y", 2, 2)], ["x", AxisRef("y", 1, 2)]])
    dm, tm = t.to_mindspore_layout()
    assert (dm, tm) == ((2, 2, 2), (0, (2, 1)))
    assert TensorSharding.from_mindspore_layout(dm, tm, MESH) == t
    assert TensorSharding(MESH, [["x"], None]).to_mindspore_layout() == ((2, 4), (1, -1))


def test_mindspore_errors() -> None:
    with pytest.raises(ConversionError, match="unreduced"):
        TensorSharding(MESH, [None], unreduced=["x"]).to_mindspore_layout()
    with pytest.raises(ConversionError, match="explicit device order"):
        TensorSharding(Mesh({"x": 2}, device_ids=[1, 0]), [["x"]]).to_mindspore_layout()
    with pytest.raises(ConversionError, match="does not divide 8 devices"):
        TensorSharding.from_mindspore_strategy((3, 1), 8)
    with pytest.raises(ConversionError, match="does not split mesh"):
        TensorSharding.from_mindspore_layout((4, 2), (1, 0), MESH)
    with pytest.raises(ConversionError, match="out of range"):
        TensorSharding.from_mindspore_layout((2, 4), (2, -1))
    with pytest.raises(ConversionError, match="open dims"):
        TensorSharding(MESH, [DimSharding(["x"], closed=False)]).to_mindspore_layout()
    assert TensorSharding(MESH, [DimSharding(["x"], closed=False)]).to_mindspore_layout(strict=False) == ((2, 4), (1,))


def test_hidet() -> None:
    # hidet RFC: on a 2x2 (machine, gpu) mesh, (S^{0,1}, R) is ({0, 1}, {}) and (S^1, S^0) is ({1}, {0}).
    mesh = Mesh({"m": 2, "g": 2})
    assert TensorSharding.from_hidet([{0, 1}, set()], mesh) == TensorSharding(mesh, [["m", "g"], None])
    assert TensorSharding.from_hidet([{1}, {0}], mesh).to_hidet() == [{1}, {0}]
    with pytest.raises(ConversionError, match="mesh order"):
        TensorSharding(mesh, [["g", "m"]]).to_hidet()
    with pytest.raises(ConversionError, match="sub-axes"):
        TensorSharding(MESH, [[AxisRef("y", 1, 2)]]).to_hidet()
    with pytest.raises(ConversionError, match="outside mesh"):
        TensorSharding.from_hidet([{2}], mesh)


def test_dtensor() -> None:
    assert TensorSharding(MESH, [["x"], None]).to_dtensor_placements() == (("shard", 0), ("replicate",))
    t = TensorSharding(MESH, [["x", "y"]])
    assert t.to_dtensor_placements() == (("shard", 0), ("shard", 0))
    assert TensorSharding.from_dtensor_placements((("shard", 0), ("shard", 0)), MESH, 1) == t
    u = TensorSharding.from_dtensor_placements((("replicate",), ("partial", "max")), MESH, 2)
    assert str(u) == '#sdy.sharding<@mesh, [{}, {}], unreduced=max{"y"}>'
    assert u.to_dtensor_placements() == (("replicate",), ("partial", "max"))
    assert TensorSharding.from_dtensor_placements((("shard", -1), ("replicate",)), MESH, 2) == TensorSharding(
        MESH, [None, ["x"]]
    )

    class Shard:  # duck-typed like torch.distributed.tensor.Shard
        def __init__(self, dim: int) -> None:
            self.dim = dim

        def is_shard(self) -> bool:
            return True

    assert TensorSharding.from_dtensor_placements([Shard(1), ("replicate",)], MESH, 2) == TensorSharding(
        MESH, [None, ["x"]]
    )
    with pytest.raises(ConversionError, match="mesh order"):
        TensorSharding(MESH, [["y", "x"]]).to_dtensor_placements()
    with pytest.raises(ConversionError, match="expected 2 placements"):
        TensorSharding.from_dtensor_placements([("replicate",)], MESH, 1)
    with pytest.raises(ConversionError, match="shards dim 3"):
        TensorSharding.from_dtensor_placements([("shard", 3), ("replicate",)], MESH, 2)
    with pytest.raises(ConversionError, match="mix reduce ops"):
        TensorSharding.from_dtensor_placements([("partial", "sum"), ("partial", "max")], MESH, 1)
    with pytest.raises(ConversionError, match="not sum, max or min"):
        TensorSharding.from_dtensor_placements([("partial", "avg"), ("replicate",)], MESH, 1)
