"""The search inside ``stablehlo.while`` loops (issue 26, "through while/scan bodies"): trip
counts read from JAX's counted loops, one node per carried value and per body op priced trip
count times, and the partition's bytes counted the same way, so that on the scanned MLP and
the LSTM under budgets only a sharded loop state fits the plan is feasible and its predicted
bytes are the partition's and the simulator's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import shardwise as sw
from shardwise.ir.core import Op
from shardwise.ir.loops import UNKNOWN_TRIPS, times, trip_count
from shardwise.search.auto import prepare
from shardwise.search.graph import peak_lower_bound
from shardwise.spmd.partition.inline import inline_calls

jax = pytest.importorskip("jax")
jnp = jax.numpy

pytestmark = [pytest.mark.jax, pytest.mark.filterwarnings("ignore::shardwise.rules.exceptions.UnknownOpWarning")]


def _whiles(module: sw.Module) -> list[Op]:
    return [op for op in module.walk() if op.name == "stablehlo.while"]


def _lower(f, *args) -> sw.Module:  # type: ignore[no-untyped-def]
    return sw.load_mlir(str(jax.jit(f).lower(*args).as_text()))


def test_trip_counts_of_jax_loops() -> None:
    x = jnp.ones((4,), jnp.float32)
    fori = _lower(lambda x: jax.lax.fori_loop(2, 9, lambda i, c: c * 2.0, x), x)
    scan = _lower(lambda x: jax.lax.scan(lambda c, _: (c + 1.0, c), x, None, length=7)[0], x)
    data = _lower(lambda x: jax.lax.while_loop(lambda c: c.sum() < 100.0, lambda c: c * 2.0, x), x)
    assert [trip_count(w) for w in _whiles(fori)] == [7]
    assert [trip_count(w) for w in _whiles(scan)] == [7]
    assert [trip_count(w) for w in _whiles(data)] == [None]
    assert UNKNOWN_TRIPS == 1


def test_a_counting_down_loop_and_nested_loops() -> None:
    down = sw.load_mlir(
        """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c10 = stablehlo.constant dense<10> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c10, %a = %x) : tensor<i32>, tensor<4xf32>
  cond {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %p = stablehlo.compare GT, %i, %c0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %m = stablehlo.constant dense<-3> : tensor<i32>
    %j = stablehlo.add %i, %m : tensor<i32>
    %b = stablehlo.add %a, %a : tensor<4xf32>
    stablehlo.return %j, %b : tensor<i32>, tensor<4xf32>
  }
  return %r#1 : tensor<4xf32>
}"""
    )
    (w,) = _whiles(down)
    assert trip_count(w) == 4  # 10, 7, 4, 1
    x = jnp.ones((4,), jnp.float32)

    def inner(c, _):  # type: ignore[no-untyped-def]
        return jax.lax.fori_loop(0, 3, lambda i, d: jnp.sin(d), c), None

    nested = _lower(lambda x: jax.lax.scan(inner, x, None, length=5)[0], x)
    inline_calls(nested, decided=False)  # JAX puts the inner loop in a private function
    sines = [op for op in nested.walk() if op.name == "stablehlo.sine"]
    assert sines and all(times(op) == 15 for op in sines)
    compares = [op for op in nested.walk() if op.name == "stablehlo.compare"]
    assert sorted(times(op) for op in compares) == [6, 5 * 4]  # a condition runs once more


@pytest.mark.parametrize("name", ["scan_mlp", "lstm"])
def test_search_inside_loops_fits_a_tight_budget_and_predicts_the_partition(name: str) -> None:
    from shardwise.testing.real_models import plain_model

    module = sw.load_mlir(plain_model(name).text)
    problem = prepare(module, "data=2,model=4")
    carries = [nd for nd in problem.nodes if nd.carry_index is not None]
    assert carries and any(nd.times > 1 for nd in problem.nodes)
    budget = int(1.3 * peak_lower_bound(problem.graph))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sw.UnknownOpWarning)
        out, report = sw.auto_shard(module, "data=2,model=4", memory_budget=budget, time_limit=8)
    assert report.feasible and report.peak_memory <= budget
    loops = _whiles(out)
    assert loops and all(trip_count(w) for w in loops)
    # The loop state is split: some carried tensor of rank >= 2 (stacked weights, optimizer
    # moments or activations saved for the backward loop) is sharded.
    assert any(
        any(d.axes for d in r.sharding.dims)
        for w in loops
        for r in w.results
        if r.sharding is not None and len(r.type.shape) >= 2
    )
    part = sw.partition(out)
    assert any(c.times > 1 for c in part.collectives)
    check = sw.check_partition(out, part.global_module, part.ranks, seed=1)
    assert check.passed
    # One count of bytes: the search's, the partition's (each collective times its loop trips)
    # and what the simulated devices sent.
    assert report.comm_bytes == pytest.approx(part.bytes_per_device, rel=1e-9, abs=0.5)
    assert max(check.bytes_sent) == pytest.approx(part.bytes_per_device, rel=1e-9, abs=0.5)


def test_partition_counts_a_collective_in_a_loop_per_trip() -> None:
    # A scan whose body contracts the dimension the weight is sharded on: an all-reduce per trip.
    mesh = sw.Mesh({"x": 4})
    w = jnp.ones((16, 16), jnp.float32)
    x = jnp.ones((8, 16), jnp.float32)

    def step(w, x):  # type: ignore[no-untyped-def]
        return jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=6)[0]

    module = _lower(step, w, x)
    module.add_mesh("mesh", mesh)
    f = module.func("main")
    f.args[0].sharding = sw.TensorSharding.parse('#sdy.sharding<@mesh, [{"x"}, {}]>')
    part = sw.partition(module)
    loop = [c for c in part.collectives if c.times == 6]
    assert loop, part.collectives
    check = sw.check_partition(module, part.global_module, part.ranks, seed=0)
    assert check.passed
    assert part.bytes_per_device == sum(c.bytes * c.times for c in part.collectives)
    assert max(check.bytes_sent) == pytest.approx(part.bytes_per_device)
    np.testing.assert_equal(part.meta["collectives"][-1]["times"], part.collectives[-1].times)


def test_search_inside_cond_branches() -> None:
    """``lax.cond`` is a ``stablehlo.case``: its branch ops are searched (each counted as if
    its branch ran) and its result is one node with what each branch returns."""

    def step(p, x, w1, w2):  # type: ignore[no-untyped-def]
        h = jax.lax.cond(p > 0, lambda x: jnp.tanh(x @ w1), lambda x: jax.nn.relu(x @ w2), x)
        return (h * h).sum()

    args = (jnp.float32(1.0), jnp.ones((64, 128)), jnp.ones((128, 256)), jnp.ones((128, 256)))
    module = _lower(step, *args)
    problem = prepare(module, "data=2,model=4")
    results = [nd for nd in problem.nodes if nd.carry_index is not None]
    assert len(results) == 1 and results[0].op is not None and results[0].op.name == "stablehlo.case"
    dots = [nd for nd in problem.nodes if nd.op is not None and nd.op.name == "stablehlo.dot_general"]
    assert len(dots) == 2
    # Replicated weights take 256 KiB per device: under 200 KB they must be split.
    out, report = sw.auto_shard(module, "data=2,model=4", memory_budget=200_000, time_limit=5)
    assert report.feasible
    f = out.func()
    assert all(any(d.axes for d in f.args[i].sharding.dims) for i in (2, 3))
    part = sw.partition(out)
    check = sw.check_partition(out, part.global_module, part.ranks, seed=0)
    assert check.passed
    assert report.comm_bytes == pytest.approx(part.bytes_per_device, rel=1e-9, abs=0.5)
