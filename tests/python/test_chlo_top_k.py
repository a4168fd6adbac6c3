"""``chlo.top_k`` (``jax.lax.top_k``, a mixture-of-experts router) while the partitioner and
the search work (``spmd.partition.chlo_rules``): its leading dimensions are pointwise, the
ranked one is kept whole, so a router's tokens stay sharded through it."""

from __future__ import annotations

import pytest
import shardwise as sw
from shardwise.rules.from_ir import RuleCache
from shardwise.spmd.partition.chlo_rules import chlo_rules
from shardwise.spmd.partition.coverage import replicated_dims

jax = pytest.importorskip("jax")
jnp = jax.numpy

pytestmark = [pytest.mark.jax]


def _router(tokens: int = 16, d: int = 8, experts: int = 4) -> sw.Module:
    def f(x, w):  # type: ignore[no-untyped-def]
        top, idx = jax.lax.top_k(x @ w, 2)
        return jax.nn.softmax(top, axis=-1), idx

    x = jnp.ones((tokens, d), jnp.float32)
    w = jnp.ones((d, experts), jnp.float32)
    return sw.load_mlir(str(jax.jit(f).lower(x, w).as_text()))


def _top_k(module: sw.Module) -> sw.Op:
    (op,) = [op for op in module.walk() if op.name == "chlo.top_k"]
    return op


def test_rule_keeps_the_batch_dimension_and_replicates_the_ranked_one() -> None:
    module = _router()
    op = _top_k(module)
    with chlo_rules():
        rule = RuleCache(module).rule(op)
    assert rule is not None
    assert rule.factor_sizes == (16, 4)
    assert rule.operand_mappings == (((0,), (1,)),)
    assert rule.result_mappings == (((0,), (1,)), ((0,), (1,)))
    assert rule.need_replication_factors == (1,) and rule.reduction_factors == ()
    assert rule.blocked_propagation_factors == (1,)
    assert replicated_dims(op) == ([{1}], [{1}, {1}])
    # Outside the partitioner Shardy's view stays: no rule, as in Shardy's registry.
    with pytest.warns(sw.rules.exceptions.UnknownOpWarning):
        assert RuleCache(module).rule(op) is None


def test_tokens_stay_sharded_through_top_k_in_the_partition() -> None:
    module = _router()
    module.add_mesh("mesh", sw.Mesh.from_spec("data=4"))
    module.funcs[0].args[0].sharding = sw.TensorSharding.parse('<@mesh, [{"data"}, {}]>')
    part = sw.partition(module)
    # Logits, gates and indices stay split by token: nothing is gathered around top_k.
    assert part.collectives == [] and part.bytes_per_device == 0
    rank0 = part.ranks[0]
    (local,) = [op for op in rank0.walk() if op.name == "chlo.top_k"]
    assert str(local.operands[0].type) == "tensor<4x4xf32>"
    check = sw.check_partition(module, part.global_module, part.ranks, seed=0)
    assert check.passed, check


def test_search_keeps_the_router_sharded_under_a_budget() -> None:
    module = _router(tokens=64, d=16, experts=8)
    out, report = sw.auto_shard(module, mesh="data=4", memory_budget="3KiB", method="ilp", time_limit=20)
    assert report.feasible
    (top,) = [r for r in report.nodes if r.label.startswith("chlo.top_k")]
    assert "data" in top.strategy and top.comm_bytes == 0
    part = sw.partition(out)
    assert part.bytes_per_device == pytest.approx(report.comm_bytes)
    assert sw.check_partition(out, part.global_module, part.ranks, seed=0).passed
