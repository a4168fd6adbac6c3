"""Gather and scatter keep dimensions sharded where XLA's SPMD partitioner does: batching
dimensions, offset dimensions taken whole (Shardy's pass-through factors: an embedding's
feature dimension, the batch of ``take_along_axis``), and the same for scatter (the gradient
of both). Each program is lowered raw from JAX, partitioned, checked on simulated ranks, and
must need no collective at all."""

from __future__ import annotations

from typing import Any

import pytest
import shardwise as sw

jax = pytest.importorskip("jax")
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax_mesh import mesh_2x4, sharded_arg

pytestmark = pytest.mark.jax


def _mesh() -> Any:
    return mesh_2x4()


def _arg(mesh: Any, shape: tuple[int, ...], spec: Any, dtype: Any = jnp.float32) -> Any:
    return sharded_arg(mesh, shape, spec, dtype)


def _partition_and_check(fn: Any, *args: Any, out_shardings: Any = None) -> sw.Partition:
    jitted = jax.jit(fn, out_shardings=out_shardings) if out_shardings is not None else jax.jit(fn)
    module = sw.load_mlir(jitted.lower(*args).as_text())
    part = sw.partition(module)
    res = sw.check_partition(module, part.global_module, part.ranks, seed=4)
    assert res.passed, res.outputs
    return part


def test_take_along_axis_keeps_the_batch_sharded() -> None:
    mesh = _mesh()
    x, idx = _arg(mesh, (16, 10), P("x", None)), _arg(mesh, (16, 1), P("x", None), jnp.int32)
    part = _partition_and_check(
        lambda a, i: jnp.take_along_axis(a, i, axis=1), x, idx, out_shardings=NamedSharding(mesh, P("x", None))
    )
    assert part.collectives == []


def test_embedding_lookup_keeps_the_feature_dim_sharded() -> None:
    mesh = _mesh()
    table, ids = _arg(mesh, (64, 32), P(None, "y")), _arg(mesh, (16,), P("x"), jnp.int32)
    part = _partition_and_check(
        lambda t, i: jnp.take(t, i, axis=0), table, ids, out_shardings=NamedSharding(mesh, P("x", "y"))
    )
    assert part.collectives == []
    gathers = [op for r in part.ranks for op in r.walk() if op.name == "stablehlo.gather"]
    assert gathers and all(
        "slice_sizes = array<i64: 1, 8>" in str(op.attributes.get("slice_sizes", ""))
        or op.results[0].type.shape[-1] == 8
        for op in gathers
    )


def test_scatter_add_keeps_pass_through_dims_sharded() -> None:
    mesh = _mesh()
    x, idx, upd = (
        _arg(mesh, (10, 16), P(None, "y")),
        _arg(mesh, (4,), P(), jnp.int32),
        _arg(mesh, (4, 16), P(None, "y")),
    )
    part = _partition_and_check(
        lambda a, i, u: a.at[i].add(u), x, idx, upd, out_shardings=NamedSharding(mesh, P(None, "y"))
    )
    assert part.collectives == []


def test_cross_entropy_gradient_scatter_stays_on_the_batch() -> None:
    mesh = _mesh()
    logits, labels = _arg(mesh, (16, 10), P("x", None)), _arg(mesh, (16,), P("x"), jnp.int32)

    def loss(z: Any, y: Any) -> Any:
        return -jnp.take_along_axis(jax.nn.log_softmax(z), y[:, None], axis=1).sum()

    part = _partition_and_check(jax.grad(loss), logits, labels, out_shardings=NamedSharding(mesh, P("x", None)))
    assert all(c.kind == "sdy.all_reduce" for c in part.collectives), [c.text for c in part.collectives]


def test_row_sharded_embedding_table_gathers_locally_and_all_reduces() -> None:
    """Megatron's vocab-parallel embedding: the table's rows on ``y``; each rank gathers the
    ids in its rows, zeros the rest, and one all-reduce of the activations sums them (XLA's
    index-parallel gather), instead of all-gathering the table."""
    mesh = _mesh()
    table, ids = _arg(mesh, (64, 32), P("y", None)), _arg(mesh, (2, 8), P("x", None), jnp.int32)
    part = _partition_and_check(
        lambda t, i: jnp.take(t, i, axis=0), table, ids, out_shardings=NamedSharding(mesh, P("x", None, None))
    )
    assert [c.kind for c in part.collectives] == ["sdy.all_reduce"], [c.text for c in part.collectives]


def test_row_sharded_embedding_gradient_scatters_locally() -> None:
    """The embedding's gradient: scatter-add of the token gradients into the row-sharded
    table; each rank applies the updates of its rows and skips the rest."""
    mesh = _mesh()
    table, ids = _arg(mesh, (64, 32), P("y", None)), _arg(mesh, (16,), P(), jnp.int32)

    def loss(t: Any, i: Any) -> Any:
        return (jnp.take(t, i, axis=0) ** 2).sum()

    part = _partition_and_check(jax.grad(loss), table, ids, out_shardings=NamedSharding(mesh, P("y", None)))
    assert not any(c.kind == "sdy.all_gather" and c.shape == (64, 32) for c in part.collectives), [
        c.text for c in part.collectives
    ]


def test_depthwise_convolution_and_its_gradient_keep_channels_sharded() -> None:
    """A depthwise convolution (feature_group_count = channels) with channels on ``y`` runs a
    quarter of the groups on each rank; its kernel gradient (batch_group_count = channels)
    likewise, with the batch as the contracted dimension (one all-reduce of the small kernel
    gradient, not an all-gather of the activations)."""
    mesh = _mesh()
    x, k = _arg(mesh, (8, 10, 16), P("x", None, "y")), _arg(mesh, (3, 1, 16), P(None, None, "y"))

    def conv(a: Any, w: Any) -> Any:
        return jax.lax.conv_general_dilated(
            a, w, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC"), feature_group_count=16
        )

    part = _partition_and_check(conv, x, k, out_shardings=NamedSharding(mesh, P("x", None, "y")))
    assert part.collectives == []
    assert all("feature_group_count = 4" in r.to_mlir() for r in part.ranks)
    grad = jax.grad(lambda a, w: (conv(a, w) ** 2).sum(), argnums=1)
    part = _partition_and_check(grad, x, k, out_shardings=NamedSharding(mesh, P(None, None, "y")))
    assert all(c.kind == "sdy.all_reduce" and c.shape == (3, 1, 16) for c in part.collectives), [
        c.text for c in part.collectives
    ]


def test_reverse_along_sharded_dims_swaps_blocks_with_the_mirror_rank() -> None:
    """``jnp.flip`` of a tensor sharded on both dims (2 x 4 shards): each rank reverses its
    block and sends it to the rank at the mirrored index (one collective-permute, as XLA),
    instead of all-gathering the tensor."""
    mesh = _mesh()
    x = _arg(mesh, (8, 16), P("x", "y"))
    part = _partition_and_check(
        lambda a: jnp.flip(a, axis=(0, 1)) * 2.0, x, out_shardings=NamedSharding(mesh, P("x", "y"))
    )
    # The report lists the swap the ranks run: each sends its 4x4 f32 block.
    assert [(c.kind, c.bytes) for c in part.collectives] == [("sdy.collective_permute", 64.0)]
    permutes = [op for op in part.ranks[0].walk() if op.name == "stablehlo.collective_permute"]
    assert len(permutes) == 1 and not any(op.name == "stablehlo.all_gather" for op in part.ranks[0].walk())
