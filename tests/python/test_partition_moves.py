"""A dimension an op needs whole hands its axes to another dimension around the op
(``global_step._axis_move``): a sort or a cumulative sum along a dimension split 4 ways moves
its axes to a batch dimension with one all-to-all and back with another (2·3/4 of a block), as
XLA's sort handler does, instead of all-gathering it (3 blocks). Before: one all-gather, twice
XLA's bytes for the sort."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("jax")

import shardwise as sw
from jax_mesh import mesh_2x4, sharded_arg


def _partition(f: Callable[..., Any], *args: tuple[tuple[int, ...], tuple[Any, ...]]) -> tuple[sw.Module, Any]:
    import jax
    from jax.sharding import PartitionSpec as P

    mesh = mesh_2x4()
    text = jax.jit(f).lower(*[sharded_arg(mesh, shape, P(*spec)) for shape, spec in args]).as_text()
    module = sw.load_mlir(text)
    part = sw.partition(module)
    assert sw.check_partition(module, part.global_module, part.ranks, seed=4).passed
    return module, part


def _kinds(part: Any) -> list[str]:
    return [
        op.name
        for op in part.ranks[0].walk()
        if op.name.startswith("stablehlo.all_") or op.name == "stablehlo.collective_permute"
    ]


@pytest.mark.parametrize("what", ["sort", "cumsum", "concatenate"])
def test_a_dim_needed_whole_moves_its_axes_to_a_batch_dim(what: str) -> None:
    import jax.numpy as jnp

    f: Callable[..., Any] = {
        "sort": lambda x: jnp.sort(x, axis=1),
        "cumsum": lambda x: jnp.cumsum(x, axis=1),
        "concatenate": lambda x: jnp.concatenate([x, x * 2], axis=1),
    }[what]
    _, part = _partition(f, ((16, 64), ("x", "y")))
    moves = 3 if what == "concatenate" else 2  # each operand there, the result back
    assert _kinds(part) == ["stablehlo.all_to_all"] * moves, _kinds(part)


def test_two_shards_are_gathered_as_before() -> None:
    # Along x (2 shards) an all-gather sends one block, two all-to-alls one block too: gathered.
    import jax.numpy as jnp

    _, part = _partition(lambda x: jnp.sort(x, axis=0), ((16, 64), ("x", "y")))
    assert _kinds(part) == ["stablehlo.all_gather"], _kinds(part)


def test_padded_blocks_are_gathered_as_before() -> None:
    # 63 results do not split 4 ways evenly: no all-to-all for them, the dimension is gathered.
    _, part = _partition(lambda x: x[:, 1:] * 2, ((16, 64), ("x", "y")))
    assert "stablehlo.all_to_all" not in _kinds(part)
