"""The numeric check of a partition (``check_partition``, ``shardwise run --check``): a
partitioned program whose only difference is rounding passes even when that rounding is over
the fixed float32 tolerance; a wrong partition (a dropped all-reduce, a wrong slice) fails."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("array_api_compat")

from shardwise import Builder, Mesh, check_partition, partition
from shardwise.execute import random_inputs, run
from shardwise.ir.core import Module
from shardwise.ir.rewrite import Uses, erase_op


def _ill_conditioned_sum() -> Module:
    """sum(x + 1000, axis 0) - 1000 * n over a sharded dimension, 64 columns: the float32
    rounding of the large partial sums (up to 0.25 per addition near 2e6) dwarfs the small
    results, so the partitioned and unpartitioned runs differ by far more than 1e-5 of them."""
    n, cols = 4096, 64
    b = Builder(Mesh({"x": 8}))
    x = b.arg((n, cols), sharding=b.sharding([["x"], None]))
    shifted = b.add(x, b.broadcast_in_dim(b.constant(1000.0), (n, cols), ()))
    total = b.reduce(shifted, dims=(0,))
    offset = b.broadcast_in_dim(b.constant(1000.0 * n), (cols,), ())
    return b.ret(b.subtract(total, offset), shardings=[b.sharding([None])])


def _megatron(dtype: str = "f32") -> Module:
    b = Builder(Mesh({"x": 2, "y": 4}))
    x = b.arg((32, 64), dtype, sharding=b.sharding([["x"], None]))
    w1 = b.arg((64, 128), dtype, sharding=b.sharding([None, ["y"]]))
    w2 = b.arg((128, 64), dtype, sharding=b.sharding([["y"], None]))
    h = b.tanh(b.dot_general(x, w1, contracting=((1,), (0,))))
    return b.ret(b.dot_general(h, w2, contracting=((1,), (0,))))


def test_rounding_over_the_fixed_tolerance_passes_against_float64() -> None:
    module = _ill_conditioned_sum()
    part = partition(module)
    res = check_partition(module, part.global_module, part.ranks, seed=0)
    (out,) = res.outputs
    assert out.max_rel > out.rtol, "the case must exceed the fast tolerance to test the float64 path"
    assert out.passed, out
    assert out.exact_err is not None and out.own_err is not None and out.bound is not None
    assert out.own_err > 0 and out.exact_err <= out.bound


def test_wide_interpretation_is_float64_and_closer_to_the_exact_sum() -> None:
    module = _ill_conditioned_sum()
    inputs = random_inputs(module.func("main"), seed=0)
    exact = np.sum(np.asarray(inputs[0], dtype=np.float64), axis=0)
    (narrow,) = run(module, inputs)
    (wide,) = run(module, inputs, wide=True)
    assert np.asarray(narrow).dtype == np.float32 and np.asarray(wide).dtype == np.float64
    assert np.abs(np.asarray(wide) - exact).max() < 1e-6 < np.abs(np.asarray(narrow) - exact).max()


def _drop_all_reduces(ranks: list[Module]) -> int:
    dropped = 0
    for m in ranks:
        uses = Uses(m.op)
        for op in list(m.walk()):
            if op.name == "stablehlo.all_reduce":
                uses.replace_all_uses(op.results[0], op.operands[0])
                erase_op(op, uses)
                dropped += 1
    return dropped


def test_a_dropped_all_reduce_fails() -> None:
    module = _megatron()
    part = partition(module)
    assert _drop_all_reduces(part.ranks) == 8
    res = check_partition(module, part.global_module, part.ranks, seed=1)
    (out,) = res.outputs
    assert not out.passed
    assert out.bound is not None and out.exact_err is not None and out.exact_err > 100 * out.bound


def test_a_dropped_all_reduce_fails_in_an_ill_conditioned_program_too() -> None:
    module = _ill_conditioned_sum()
    part = partition(module)
    assert _drop_all_reduces(part.ranks) == 8
    assert not check_partition(module, part.global_module, part.ranks, seed=0).passed


def test_a_wrong_slice_fails() -> None:
    """Rank programs swapped between two ranks: each computes a correct block, in the wrong
    place."""
    module = _megatron()
    part = partition(module)
    ranks = list(part.ranks)
    ranks[0], ranks[4] = ranks[4], ranks[0]
    # The programs are identical but for partition ids; feeding rank 0 the blocks of rank 4
    # is what a wrong slice of the inputs does.
    from shardwise.execute.simulator import simulate
    from shardwise.spmd.partition.check import compare_outputs, shard_inputs

    inputs = [np.asarray(x) for x in random_inputs(module.func("main"), seed=2)]
    ref = run(module, inputs)
    local = shard_inputs(part.global_module, inputs, 8)
    local[0], local[4] = local[4], local[0]
    sim = simulate(part.ranks, local)
    checks = compare_outputs(part.global_module, ref, sim.outputs, exact=lambda: run(module, inputs, wide=True))
    assert not all(c.passed for c in checks)


def test_bf16_program_passes_within_its_own_rounding() -> None:
    module = _megatron("bf16")
    part = partition(module)
    res = check_partition(module, part.global_module, part.ranks, seed=0)
    assert res.passed, res.outputs
