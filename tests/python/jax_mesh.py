"""The 2x4 JAX mesh (axes ``x``, ``y``, Auto) and sharded abstract arguments the partitioner
tests lower programs on; needs ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` before
jax is imported (``conftest.py`` sets it)."""

from __future__ import annotations

from typing import Any

import pytest


def mesh_2x4() -> Any:
    """``jax.make_mesh((2, 4), ("x", "y"))`` with Auto axes; skips with fewer than 8 devices."""
    import jax
    from jax.sharding import AxisType

    if len(jax.devices()) < 8:
        pytest.skip("needs 8 CPU devices (XLA_FLAGS set before jax was imported)")
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)


def sharded_arg(mesh: Any, shape: tuple[int, ...], spec: Any, dtype: Any = None) -> Any:
    """A ``jax.ShapeDtypeStruct`` (float32 by default) sharded by ``spec`` on ``mesh``."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding

    return jax.ShapeDtypeStruct(shape, dtype or jnp.float32, sharding=NamedSharding(mesh, spec))  # type: ignore[no-untyped-call]
