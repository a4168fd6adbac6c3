"""shardwise.spmd.plan_reshard: the Python API, Shardy's choices on its lit cases, partial
values, the cost model, and errors."""

from __future__ import annotations

import numpy as np
import pytest
from shardwise.errors import InvalidShardingError, MeshError, ShardwiseError
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef, TensorSharding
from shardwise.spmd import CostModel, Link, dtype_bytes, plan_reshard, shards

MESH = Mesh({"x": 2, "y": 2, "z": 2})
BANDWIDTH_ONLY = CostModel(Link(latency=0.0))


def ts(mesh: Mesh, text: str) -> TensorSharding:
    return TensorSharding.parse(f"#sdy.sharding<@mesh, {text}>", mesh)


def test_steps_carry_kind_axes_dims_bytes_and_text() -> None:
    # Shardy reshard_to_collectives.mlir, two_all_to_alls_tgt_dim_not_empty.
    mesh = Mesh({"x": 4, "y": 2, "z": 4})
    p = plan_reshard(
        mesh,
        [16, 8, 8],
        "f32",
        ts(mesh, '[{"x"}, {"y", "z"}, {}]'),
        ts(mesh, '[{"x", "z"}, {}, {"y"}]'),
        BANDWIDTH_ONLY,
    )
    assert [s.kind for s in p.steps] == ["all_to_all", "all_to_all"]
    first, second = p.steps
    assert (first.src_dim, first.tgt_dim, first.axes) == (1, 0, (AxisRef("z"),))
    assert (second.src_dim, second.tgt_dim, second.axes) == (1, 2, (AxisRef("y"),))
    assert second.out == ts(mesh, '[{"x", "z"}, {}, {"y"}]')
    # Before the first step each device holds [4, 1, 8] f32 = 128 bytes; all-to-all over z
    # (n=4) sends 3/4 of it.
    assert first.bytes == pytest.approx(96.0)
    assert p.bytes == pytest.approx(sum(s.bytes for s in p.steps))
    assert p.text.splitlines()[0] == 'sdy.all_to_all [{"z"}: 1->0] out_sharding=<@mesh, [{"x", "z"}, {"y"}, {}]>'
    assert p.bytes < p.naive_bytes


def test_partial_to_sharded_uses_reduce_scatter_and_simulates_exactly() -> None:
    mesh = Mesh({"x": 4, "y": 2})
    src, tgt = ts(mesh, '[{}, {"y"}], unreduced={"x"}'), ts(mesh, '[{"x"}, {"y"}]')
    p = plan_reshard(mesh, [8, 6], np.dtype(np.int32), src, tgt)
    assert [s.kind for s in p.steps] == ["reduce_scatter"]
    assert p.steps[0].dim_axes == ((AxisRef("x"),), ())
    assert p.steps[0].reduction == "sum"
    data = np.arange(48, dtype=np.int32).reshape(8, 6)
    out = shards.run_plan(shards.shard(data, src, mesh, seed=3), mesh, [8, 6], src, p)
    assert np.array_equal(shards.unshard(out, tgt, mesh, [8, 6]), data)


def test_partial_to_replicated_all_reduces_and_keeps_target_unreduced_axes() -> None:
    mesh = Mesh({"x": 2, "y": 2})
    p = plan_reshard(mesh, [4], 4, ts(mesh, '[{}], unreduced={"x", "y"}'), ts(mesh, '[{}], unreduced={"y"}'))
    assert [(s.kind, s.axes) for s in p.steps] == [("all_reduce", (AxisRef("x"),))]
    assert p.steps[0].out.unreduced == (AxisRef("y"),)
    assert p.steps[0].bytes == pytest.approx(2 * 1 / 2 * 16)


def test_max_reduction_is_named() -> None:
    mesh = Mesh({"x": 2})
    p = plan_reshard(mesh, [4], 4, ts(mesh, '[{}], unreduced=max{"x"}'), ts(mesh, "[{}]"))
    assert p.text == 'sdy.all_reduce max {"x"} out_sharding=<@mesh, [{}]>'


def test_slower_axis_changes_the_choice() -> None:
    # Moving "x" from dim 0 to dim 1: an all-to-all over x, or (with x's links very slow) the
    # same; the seconds follow the axis' own link.
    mesh = Mesh({"x": 2, "y": 2})
    src, tgt = ts(mesh, '[{"x"}, {}]'), ts(mesh, '[{}, {"x"}]')
    fast = plan_reshard(mesh, [1024, 1024], "bf16", src, tgt)
    slow = plan_reshard(mesh, [1024, 1024], "bf16", src, tgt, CostModel(axes={"x": Link(1e9, 1e-3)}))
    assert [s.kind for s in fast.steps] == [s.kind for s in slow.steps] == ["all_to_all"]
    local = 512 * 1024 * 2
    assert fast.bytes == slow.bytes == pytest.approx(local / 2)
    assert slow.seconds == pytest.approx(1e-3 + local / 2 / 1e9)
    assert fast.seconds == pytest.approx(5e-6 + local / 2 / 100e9)


def test_cost_model_cost_matches_the_formulas() -> None:
    model = CostModel(Link(1e9, 1e-6))
    assert model.cost("all_gather", MESH, ["x", "y"], 100) == pytest.approx((300.0, 2e-6 + 300 / 1e9))
    assert model.cost("all_to_all", MESH, ["x"], 100) == pytest.approx((50.0, 1e-6 + 50 / 1e9))
    assert model.cost("all_reduce", MESH, [AxisRef("z")], 100) == pytest.approx((100.0, 2e-6 + 100 / 1e9))
    assert model.cost("all_slice", MESH, ["x"], 100) == (0.0, 0.0)
    with pytest.raises(ShardwiseError, match='unknown collective "gather"'):
        model.cost("gather", MESH, ["x"], 100)
    with pytest.raises(InvalidShardingError, match="unknown axis"):
        model.cost("all_gather", MESH, ["w"], 100)


def test_errors() -> None:
    a, b = ts(MESH, '[{"x"}, {}]'), ts(MESH, "[{}, {}]")
    with pytest.raises(InvalidShardingError, match="rank") as e:
        plan_reshard(MESH, [16], "f32", a, b)
    assert e.value.rule == "rank-mismatch"  # type: ignore[attr-defined]
    with pytest.raises(InvalidShardingError) as e:
        plan_reshard(MESH, [16, 8], "f32", b, ts(MESH, '[{}, {}], unreduced={"x"}'))
    assert e.value.rule == "unreduced-target"  # type: ignore[attr-defined]
    other = TensorSharding(Mesh({"x": 4}), [["x"], []], inline=True)
    with pytest.raises(MeshError, match="expected the planning mesh"):
        plan_reshard(MESH, [16, 8], "f32", other, b)
    with pytest.raises(MeshError, match='axis "w"'):
        plan_reshard(MESH, [16, 8], "f32", a, b, CostModel(axes={"w": Link()}))
    with pytest.raises(ShardwiseError, match="unknown dtype 'f7'"):
        plan_reshard(MESH, [16, 8], "f7", a, b)
    with pytest.raises(ShardwiseError, match="bandwidth"):
        Link(0.0)
    with pytest.raises(TypeError, match="TensorSharding"):
        plan_reshard(MESH, [16, 8], "f32", "x", b)  # type: ignore[arg-type]


def test_dtype_bytes() -> None:
    assert [dtype_bytes(d) for d in ("f32", "bf16", "i1", "float64", 3, np.dtype(np.int16))] == [4, 2, 1, 8, 3, 2]
    for bad in (0, True, None):
        with pytest.raises(ShardwiseError):
            dtype_bytes(bad)


def test_the_planner_gives_typed_plans_and_takes_a_typed_cost_model() -> None:
    # What crosses the FFI (rust/src/py/redistribution.rs): a `_native.CostModel` of `Link`s
    # in, a `ReshardPlan` of `ReshardStep`s with named fields out, the same plan that
    # plan_reshard wraps.
    from shardwise import _native

    model = CostModel(Link(1e9, 1e-6), {"y": Link(2e9, 0.0)})
    native = model._native_model()
    assert (native.default.bandwidth, native.default.latency) == (1e9, 1e-6)
    assert [(n, link.bandwidth, link.latency) for n, link in native.axes] == [("y", 2e9, 0.0)]
    assert native == _native.CostModel(_native.Link(1e9, 1e-6), [("y", _native.Link(2e9, 0.0))])
    # A later override of one axis wins, as in the core's CostModel::with_axis.
    twice = _native.CostModel(_native.Link(1e9, 0.0), [("y", _native.Link(1.0, 0.0)), ("y", _native.Link(3.0, 0.0))])
    assert [(n, link.bandwidth) for n, link in twice.axes] == [("y", 3.0)]
    src, tgt = ts(MESH, '[{"x"}, {"y"}]'), ts(MESH, '[{"y"}, {"x"}]')
    raw = _native.redistribution_plan(MESH._core, [16, 8], 4, src._native_sharding(), tgt._native_sharding(), native)
    plan = plan_reshard(MESH, [16, 8], "f32", src, tgt, model)
    assert len(raw.steps) == len(plan.steps) > 0
    for r, s in zip(raw.steps, plan.steps):
        assert (r.kind, r.src_dim, r.tgt_dim, r.reduction, r.bytes, r.seconds, r.text) == (
            s.kind,
            s.src_dim,
            s.tgt_dim,
            s.reduction,
            s.bytes,
            s.seconds,
            s.text,
        )
        assert TensorSharding._from_core(r.out, MESH) == s.out
    assert (raw.bytes, raw.seconds, raw.naive_bytes, raw.naive_seconds) == (
        plan.bytes,
        plan.seconds,
        plan.naive_bytes,
        plan.naive_seconds,
    )
    with pytest.raises(InvalidShardingError, match="bandwidth must be a finite number of bytes/s > 0, got 0"):
        _native.Link(0.0, 1e-6)
    with pytest.raises(InvalidShardingError, match="latency must be a finite number of seconds >= 0, got -1"):
        _native.Link(1e9, -1.0)
