"""Single-op JAX programs along sharded dimensions, the kinds XLA's SPMD partitioner has
special handlers for (windows, slices, pads, reverses, sorts, gathers, scatters): the "op:"
rows of ``benches/bench_partition_bytes.py``. Each is lowered raw on a 2x4 mesh of Auto axes
``x``, ``y``; needs 8 CPU devices (``RuntimeError`` with fewer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["op_program", "op_program_names"]

# name -> (function, [(shape, PartitionSpec entries, dtype or None)])
_Args = list[tuple[tuple[int, ...], tuple[Any, ...], str | None]]


def _programs() -> dict[str, tuple[Callable[..., Any], _Args]]:
    import jax
    import jax.numpy as jnp

    nwc = ("NWC", "WIO", "NWC")

    def conv(stride: int = 1, padding: str = "SAME", dilation: int = 1, groups: int = 1) -> Callable[[Any, Any], Any]:
        return lambda x, w: jax.lax.conv_general_dilated(
            x, w, (stride,), padding, rhs_dilation=(dilation,), dimension_numbers=nwc, feature_group_count=groups
        )

    act: _Args = [((16, 64), ("x", "y"), None)]
    seq: _Args = [((8, 64, 16), ("x", "y", None), None), ((3, 16, 16), (), None)]
    return {
        "strided_slice": (lambda x: x[:, ::2] * 2, act),
        "slice_shift": (lambda x: jnp.sum(x[:, 1:] * x[:, :-1], axis=1), act),
        "pad": (lambda x: jnp.pad(x, ((0, 0), (2, 2))), act),
        "roll": (lambda x: jnp.roll(x, 3, axis=1), act),
        "flip": (lambda x: jnp.flip(x, axis=1) * 2, act),
        "conv_same": (conv(), seq),
        "conv_dilated": (conv(dilation=2), seq),
        "conv_strided": (
            conv(stride=2, padding="VALID"),
            [((8, 64, 16), ("x", "y", None), None), ((2, 16, 16), (), None)],
        ),
        "conv_depthwise": (
            conv(groups=16),
            [((8, 64, 16), ("x", None, "y"), None), ((3, 1, 16), (None, None, "y"), None)],
        ),
        "max_window_same": (lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3), (1, 1), "SAME"), act),
        "max_pool_2": (lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2), (1, 2), "VALID"), act),
        "cumsum": (lambda x: jnp.cumsum(x, axis=1), act),
        "sort": (lambda x: jnp.sort(x, axis=1), act),
        "concatenate": (lambda x, y: jnp.concatenate([x, y], axis=1), act + act),
        "dynamic_slice": (lambda x, i: jax.lax.dynamic_slice_in_dim(x, i, 8, axis=1), act + [((), (), "int32")]),
        "embedding_rows": (lambda t, e: e[t], [((8, 32), ("x", None), "int32"), ((1024, 64), ("y", None), None)]),
        "embedding_features": (lambda t, e: e[t], [((8, 32), ("x", None), "int32"), ((1024, 64), (None, "y"), None)]),
        "tied_lm_head": (lambda h, e: h @ e.T, [((8, 64), ("x", None), None), ((1024, 64), ("y", None), None)]),
        "scatter_add": (
            lambda x, i, u: x.at[i].add(u),
            [((64, 16), ("y", None), None), ((8,), (), "int32"), ((8, 16), (), None)],
        ),
    }


def op_program_names() -> list[str]:
    return sorted(_programs())


def op_program(name: str) -> str:
    """The raw ``jax.jit(...).lower(...).as_text()`` of op program ``name``."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    f, args = _programs()[name]
    if len(jax.devices()) < 8:
        raise RuntimeError("op programs need 8 devices: XLA_FLAGS=--xla_force_host_platform_device_count=8 before jax")
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    abstract = [
        jax.ShapeDtypeStruct(shape, getattr(jnp, dt) if dt else jnp.float32, sharding=NamedSharding(mesh, P(*spec)))
        for shape, spec, dt in args
    ]
    return str(jax.jit(f).lower(*abstract).as_text())
