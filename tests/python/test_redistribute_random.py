"""Random redistributions: on 1-3-axis meshes (sizes 2, 4, 8, with sub-axes), random source and
target shardings of random shapes (divisible and not), the plan simulated device by device
(shardwise.spmd.shards) leaves every device with exactly its target block, and never sends
more bytes than gathering everything and slicing."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from shardwise.errors import InvalidShardingError
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef, TensorSharding
from shardwise.spmd import CostModel, Link, plan_reshard
from shardwise.spmd import shards as sim

# Factorisations of an axis into consecutive pieces (pre-size, size), major to minor.
_SPLITS = {
    2: [[(1, 2)]],
    4: [[(1, 4)], [(1, 2), (2, 2)]],
    8: [[(1, 8)], [(1, 2), (2, 4)], [(1, 4), (4, 2)], [(1, 2), (2, 2), (4, 2)]],
}


def _pieces(draw: st.DrawFn, mesh: Mesh) -> list[AxisRef]:
    out = []
    for a in mesh.axes:
        for pre, size in draw(st.sampled_from(_SPLITS[a.size])):
            out.append(AxisRef(a.name) if size == a.size else AxisRef(a.name, pre, size))
    return out


def _merge(axes: list[AxisRef], mesh: Mesh) -> list[AxisRef]:
    out: list[AxisRef] = []
    for a in axes:
        if out and out[-1].can_merge(a):
            out[-1] = out[-1].merge(a, mesh)
        else:
            out.append(a)
    return out


def _sharding(draw: st.DrawFn, mesh: Mesh, rank: int, unreduced_ok: bool, keep: list[AxisRef]) -> TensorSharding:
    pieces = [p for p in _pieces(draw, mesh) if not any(p.overlaps(k) for k in keep)]
    pieces = draw(st.permutations(pieces))
    dims: list[list[AxisRef]] = [[] for _ in range(rank)]
    unreduced = list(keep)
    for p in pieces:
        slot = draw(st.integers(-2 if unreduced_ok else -1, rank - 1))
        if slot >= 0:
            dims[slot].append(p)
        elif slot == -2:
            unreduced.append(p)
    try:
        return TensorSharding(
            mesh, [_merge(d, mesh) for d in dims], unreduced=_merge(AxisRef.sorted(unreduced, mesh), mesh)
        )
    except InvalidShardingError:
        assume(False)
        raise


@st.composite
def cases(draw: st.DrawFn) -> tuple[Mesh, list[int], TensorSharding, TensorSharding]:
    n_axes = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.sampled_from([2, 4, 8]), min_size=n_axes, max_size=n_axes))
    assume(int(np.prod(sizes)) <= 64)
    mesh = Mesh({name: s for name, s in zip("xyz", sizes)})
    rank = draw(st.integers(1, 3))
    shape = draw(st.lists(st.integers(1, 12), min_size=rank, max_size=rank))
    src = _sharding(draw, mesh, rank, True, [])
    keep = draw(st.lists(st.sampled_from(src.unreduced), unique=True)) if src.unreduced else []
    tgt = _sharding(draw, mesh, rank, False, AxisRef.sorted(keep, mesh) if keep else [])
    return mesh, shape, src, tgt


MODELS = [CostModel(), CostModel(Link(latency=0.0)), CostModel(Link(1e9, 1e-3))]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(cases(), st.sampled_from(MODELS), st.integers(0, 2**31 - 1))
def test_random_plan_reaches_target_exactly(
    case: tuple[Mesh, list[int], TensorSharding, TensorSharding], model: CostModel, seed: int
) -> None:
    mesh, shape, src, tgt = case
    plan = plan_reshard(mesh, shape, "i64", src, tgt, model)
    assert plan.bytes <= plan.naive_bytes * (1 + 1e-12) + 1e-9
    assert abs(plan.bytes - sum(s.bytes for s in plan.steps)) <= 1e-6 * max(plan.bytes, 1)
    data = np.random.default_rng(seed).integers(-1000, 1000, size=shape).astype(np.int64)
    shards = sim.shard(data, src, mesh, seed=seed)
    before = src
    for step in plan.steps:
        event(step.kind)
        shards = sim.apply_step(shards, mesh, shape, before, step)
        # Every intermediate layout is exactly the one the step claims.
        assert np.array_equal(sim.unshard(shards, step.out, mesh, shape), data)
        before = step.out
    final = before
    assert [d.axes for d in final.dims] == [d.axes for d in tgt.dims]
    assert final.unreduced == tgt.unreduced
    if tgt.unreduced:
        assert np.array_equal(sim.unshard(shards, tgt, mesh, shape), data)
    else:
        for dev, buf in shards.items():
            ranges = tgt.device_ranges(shape, dev, meshes=mesh)
            assert buf.shape == tgt.local_shape(shape, meshes=mesh)
            block = buf[tuple(slice(0, b - a) for a, b in ranges)]
            assert np.array_equal(block, data[tuple(slice(a, b) for a, b in ranges)])
