"""A JAX program on complex numbers, lowered raw (`lax.complex`, `exp(1j * x)`, `conj`, `abs`,
`real`, `imag`, `angle`, complex constants): the native reader reads it (no jaxlib fallback)
and prints it as jaxlib prints it, propagation gives Shardy's module, and the partition runs
on 8 simulated ranks with the unpartitioned result. Complex element types were where the
native reader and the partitioner's byte counts stopped."""

from __future__ import annotations

import pytest
from shardwise import _native, check_partition, load_mlir, partition
from shardwise.passes import run_pipeline

pytestmark = pytest.mark.jax


def _program() -> str:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((2, 4), ("x", "y"))

    def f(a: jax.Array, b: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
        z = jax.lax.complex(a, b)
        z = z * jnp.exp(1j * a) + jnp.conj(z)
        h = jnp.abs(z) @ w + (jnp.real(z) @ w).sum(0) - jnp.imag(z).mean()
        return jax.nn.relu(h), jnp.angle(z)

    a = jax.ShapeDtypeStruct((16, 8), jnp.float32, sharding=NamedSharding(mesh, P("x", None)))
    w = jax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=NamedSharding(mesh, P(None, "y")))
    return str(jax.jit(f).lower(a, a, w).as_text())


def test_a_complex_program_reads_prints_propagates_and_partitions() -> None:
    from shardwise._jaxlib import context, ir

    text = _program()
    assert "complex<f32>" in text and "stablehlo.complex" in text
    _native.read_mlir(text)  # natively: no MlirReadError
    with context():
        expected = str(ir().Module.parse(text))
    assert _native.print_mlir(text, verify=True, strict=True) == expected

    from shardy_oracle import shardy

    module = load_mlir(text)
    run_pipeline(module, "builtin.module(sdy-propagation-pipeline)")
    assert module.to_mlir() == shardy(text)

    part = partition(module)
    assert check_partition(module, part.global_module, part.ranks, seed=0).passed
