"""Windows that stay sharded (``spmd/partition/halo.py``): convolutions, reduce-windows and
strided slices along a sharded dimension exchange halos with their neighbours (or nothing) as
XLA's SPMD partitioner does, instead of all-gathering the dimension. Before, every one of these
all-gathered (a SAME convolution 12,288 bytes per device against XLA's 512; a strided slice
1,536 against 0). Each program is lowered raw by JAX on a 2x4 mesh and checked on 8 ranks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

jnp = pytest.importorskip("jax.numpy")

import shardwise as sw
from jax_mesh import mesh_2x4, sharded_arg


def _conv(stride: int = 1, padding: str = "SAME", dilation: int = 1) -> Callable[[Any, Any], Any]:
    import jax

    def f(x: Any, w: Any) -> Any:
        return jax.lax.conv_general_dilated(
            x, w, (stride,), padding, rhs_dilation=(dilation,), dimension_numbers=("NWC", "WIO", "NWC")
        )

    return f


def _window(size: int, stride: int, padding: str) -> Callable[[Any], Any]:
    import jax
    import jax.numpy as jnp

    return lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, size), (1, stride), padding)


# name -> (program, [(shape, spec)], collective-permutes expected in each rank's program)
CASES: dict[str, tuple[Callable[..., Any], list[tuple[tuple[int, ...], tuple[Any, ...]]], int]] = {
    "conv_same": (_conv(), [((8, 64, 16), ("x", "y", None)), ((3, 16, 16), ())], 2),
    "conv_dilated": (_conv(dilation=2), [((8, 64, 16), ("x", "y", None)), ((3, 16, 16), ())], 2),
    "conv_strided_valid": (_conv(stride=2, padding="VALID"), [((8, 64, 16), ("x", "y", None)), ((2, 16, 16), ())], 0),
    "conv_wide_kernel": (_conv(), [((8, 64, 16), ("x", "y", None)), ((9, 16, 16), ())], 2),
    "max_window_same": (_window(3, 1, "SAME"), [((16, 64), ("x", "y"))], 2),
    "max_pool_2x2": (_window(2, 2, "VALID"), [((16, 64), ("x", "y"))], 0),
    "strided_slice": (lambda x: x[:, ::2] * 2, [((16, 64), ("x", "y"))], 0),
    "odd_elements": (lambda x: x[:, 1::2] * 2, [((16, 64), ("x", "y"))], 0),
    "strided_rows": (lambda x: x[::4] + 1, [((64, 16), ("y", None))], 0),
    # Uneven result blocks (63 and 30 outputs over 4 shards): each rank reads its own offsets
    # (summed, as a loss would be, so that no uneven result is returned).
    "shift_left": (lambda x: jnp.sum(x[:, 1:] * 2, axis=1), [((16, 64), ("x", "y"))], 1),
    "shift_right": (lambda x: jnp.sum(x[:, :-1] * 2, axis=1), [((16, 64), ("x", "y"))], 0),
    "max_window_stride2_uneven": (lambda x: jnp.sum(_window(3, 2, "SAME")(x), axis=1), [((16, 60), ("x", "y"))], 1),
    # A pad along the split dimension: the ends take the padding value, the middle ranks shift.
    "pad": (lambda x: jnp.pad(x, ((0, 0), (2, 2)), constant_values=7.0), [((16, 64), ("x", "y"))], 2),
}


def _lower(f: Callable[..., Any], args: list[tuple[tuple[int, ...], tuple[Any, ...]]]) -> str:
    import jax
    from jax.sharding import PartitionSpec as P

    mesh = mesh_2x4()
    return str(jax.jit(f).lower(*[sharded_arg(mesh, shape, P(*spec)) for shape, spec in args]).as_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_window_along_a_sharded_dim_exchanges_halos(name: str) -> None:
    f, args, permutes = CASES[name]
    module = sw.load_mlir(_lower(f, args))
    part = sw.partition(module)
    assert sw.check_partition(module, part.global_module, part.ranks, seed=1).passed
    for rank in part.ranks:
        ops = [op.name for op in rank.walk()]
        assert ops.count("stablehlo.collective_permute") == permutes, name
        assert not {"stablehlo.all_gather", "stablehlo.all_to_all"} & set(ops), name
    # The report lists what the ranks run, with the bytes each sends.
    halo = [c for c in part.collectives if c.text.startswith("halo exchange")]
    assert len(halo) == permutes
    assert part.bytes_per_device == sum(c.bytes for c in part.collectives)


def test_halo_bytes_are_the_neighbours_edges() -> None:
    # SAME convolution, kernel 3, f32, local block 4x16x16 (batch on x, width on y): one
    # column of 4x16 values from each side, 256 bytes each.
    f, args, _ = CASES["conv_same"]
    part = sw.partition(sw.load_mlir(_lower(f, args)))
    assert sorted(c.bytes for c in part.collectives) == [256.0, 256.0]


@pytest.mark.parametrize(
    ("what", "f", "args"),
    [
        # 63 inputs do not split 4 ways evenly (padded input blocks): gathered.
        ("uneven input", lambda x, w: _conv()(x[:, 1:], w), [((8, 64, 16), ("x", "y", None)), ((3, 16, 16), ())]),
        # A 17-wide SAME kernel needs 8 elements on each side; a block of the 16-wide
        # dimension split 4 ways has 4: gathered.
        ("halo wider than a block", _conv(), [((8, 16, 16), ("x", "y", None)), ((17, 16, 16), ())]),
    ],
)
def test_windows_that_cannot_keep_their_sharding_still_partition_exactly(
    what: str, f: Callable[..., Any], args: list[tuple[tuple[int, ...], tuple[Any, ...]]]
) -> None:
    module = sw.load_mlir(_lower(f, args))
    part = sw.partition(module)
    assert sw.check_partition(module, part.global_module, part.ranks, seed=2).passed, what
    windowed = ("stablehlo.convolution", "stablehlo.reduce_window")
    assert not [c for c in part.collectives if c.text.startswith("halo exchange") and c.source.startswith(windowed)], (
        what
    )


def test_two_sharded_spatial_dims() -> None:
    import jax

    def f(x: Any, w: Any) -> Any:
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    module = sw.load_mlir(_lower(f, [((2, 16, 32, 4), (None, "x", "y", None)), ((3, 3, 4, 8), ())]))
    part = sw.partition(module)
    assert sw.check_partition(module, part.global_module, part.ranks, seed=3).passed
    assert [op.name for op in part.ranks[5].walk()].count("stablehlo.collective_permute") == 4
