"""The search inside ``sdy.manual_computation`` (``jax.shard_map``; issue 26, "through
manual_computation"): a node per operand and result of the manual computation, whose in- and
out-shardings keep the user's manual axes and get their free dimensions from the search, and
the body's ops as nodes on their local types with strategies over the free axes only."""

from __future__ import annotations

import pytest
import shardwise as sw
from shardwise.search.auto import prepare
from shardwise.testing.auto_programs import shard_map_mlp

jax = pytest.importorskip("jax")
jnp = jax.numpy

pytestmark = [pytest.mark.jax]


def test_partial_manual_body_is_searched_on_the_free_axes() -> None:
    module = shard_map_mlp({"data"})
    problem = prepare(module, memory_budget=None)
    manual = [nd for nd in problem.nodes if nd.manual_side is not None]
    assert {nd.manual_side for nd in manual} == {"in", "out"}
    body = [
        nd
        for nd in problem.nodes
        if nd.op is not None and nd.manual_side is None and nd.op.name == "stablehlo.dot_general"
    ]
    assert body, [nd.label for nd in problem.nodes]
    used = {
        a.name
        for nd in body
        for s in nd.strategies
        for sh in (*s.operands, *s.results)
        for d in sh.dims
        for a in d.axes
    }
    # The manual axis never shards a body value: the body works on its local block of it.
    assert used == {"model"}
    for nd in manual:
        for s in nd.strategies:
            glob = s.operands[0] if nd.manual_side == "in" else s.results[0]
            loc = s.results[0] if nd.manual_side == "in" else s.operands[0]
            assert all(a.name != "data" for d in loc.dims for a in d.axes)
            # The global sharding keeps the user's manual axes, major, then the body's free ones.
            outer = nd.op.operand_shardings[nd.carry_index] if nd.manual_side == "in" else nd.values[0].sharding
            for gd, od, ld in zip(glob.dims, outer.dims, loc.dims, strict=True):
                assert gd.axes == tuple(a for a in od.axes if a.name == "data") + ld.axes and gd.closed


def test_a_budget_shards_the_weights_inside_the_shard_map_and_the_partition_agrees() -> None:
    module = shard_map_mlp({"data"})
    weights = (32 * 64 + 64 * 32) * 4  # both weights, replicated
    out, report = sw.auto_shard(module, memory_budget=weights // 2 + 6 * 1024, method="ilp", time_limit=30)
    assert report.feasible
    (mc,) = [op for op in out.walk() if op.name == "sdy.manual_computation"]
    assert mc.operand_shardings is not None
    ins = [str(s) for s in mc.operand_shardings]
    assert '{"data"}' in ins[0]  # the user's manual split of the tokens stays
    assert any('"model"' in t for t in ins[1:]), ins  # a weight split on the free axis
    part = sw.partition(out)
    assert part.bytes_per_device == pytest.approx(report.comm_bytes)
    check = sw.check_partition(out, part.global_module, part.ranks, seed=0)
    assert check.passed, check


def test_fully_manual_body_keeps_its_local_program() -> None:
    module = shard_map_mlp({"data", "model"})
    problem = prepare(module, memory_budget=None)
    body = [
        nd
        for nd in problem.nodes
        if nd.op is not None and nd.manual_side is None and nd.op.name == "stablehlo.dot_general"
    ]
    assert body and all(len(nd.strategies) == 1 and nd.strategies[0].is_replicated for nd in body)
    boundary = [nd for nd in problem.nodes if nd.manual_side is not None]
    assert boundary and all(nd.configured and len(nd.strategies) == 1 for nd in boundary)
    out, report = sw.auto_shard(module, method="ilp", time_limit=10)
    part = sw.partition(out)
    assert part.bytes_per_device == pytest.approx(report.comm_bytes)
    assert sw.check_partition(out, part.global_module, part.ranks, seed=0).passed
