"""JAX programs generated at test/benchmark time (not stored): an N-layer transformer training
step, ``jax.value_and_grad`` of an unrolled stack of attention + MLP layers, lowered on a 2x4
(``x`` x ``y``) mesh of Auto axes with Megatron-style weight shardings and a batch-sharded input.
About 137 ops per layer: 20 layers ~ 2.7k ops, 160 ~ 22k, 635 ~ 87k. Needs 8 devices (set
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` before importing jax). Also
``nested_cases``: a program whose regions nest to a given depth (the nesting bound's tests)."""

from __future__ import annotations

import random
from typing import Any

from shardwise.ir.core import Module
from shardwise.sharding import TensorSharding


def nested_cases(levels: int) -> str:
    """A ``@main`` whose ``stablehlo.case`` ops nest ``levels`` deep (``levels + 1`` levels of
    braces with the function's), one op per line: the text ``check_nesting`` bounds."""
    s = "stablehlo.return %arg0 : tensor<f32>"
    for i in range(levels):
        s = f'%c{i} = "stablehlo.case"(%idx) ({{\n{s}\n}}) : (tensor<i32>) -> tensor<f32>\nstablehlo.return %c{i} : tensor<f32>'
    head, last = s.rsplit("stablehlo.return", 1)
    return (
        "func.func @main(%arg0: tensor<f32>, %idx: tensor<i32>) -> tensor<f32> {\n"
        + head
        + "return "
        + last.strip().split(" : ")[0]
        + " : tensor<f32>\n}"
    )


#: Model sizes: width, heads, sequence length, batch.
D, H, S, B = 64, 4, 32, 8


def transformer_step(layers: int) -> str:
    """The StableHLO + sdy text of one training step of a ``layers``-layer transformer."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)

    def layer(x: Any, p: dict[str, Any]) -> Any:
        q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
        q, k, v = (t.reshape(B, S, H, D // H) for t in (q, k, v))
        a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 8.0, axis=-1)
        o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, S, D) @ p["wo"]
        x = x + o
        return x + jax.nn.gelu(x @ p["w1"]) @ p["w2"]

    def loss(params: list[dict[str, Any]], x: Any) -> Any:
        for p in params:
            x = layer(x, p)
        return jnp.mean(x**2)

    def weights() -> dict[str, Any]:
        specs = [
            ("wq", (D, D), P(None, "y")),
            ("wk", (D, D), P(None, "y")),
            ("wv", (D, D), P(None, "y")),
            ("wo", (D, D), P("y", None)),
            ("w1", (D, 4 * D), P(None, "y")),
            ("w2", (4 * D, D), P("y", None)),
        ]
        return {k: jax.ShapeDtypeStruct(s, jnp.float32, sharding=NamedSharding(mesh, sp)) for k, s, sp in specs}

    params = [weights() for _ in range(layers)]
    x = jax.ShapeDtypeStruct((B, S, D), jnp.float32, sharding=NamedSharding(mesh, P("x", None, None)))
    return str(jax.jit(jax.value_and_grad(loss)).lower(params, x).as_text())


def random_candidates(m: Module, n: int, seed: int) -> list[dict[str, TensorSharding | None]]:
    """``n`` seeded random candidates for ``propagate_many`` on a step of ``transformer_step``:
    each sets 3 of main's arguments (``"arg<i>"``) to a random sharding on the ``x``/``y`` axes
    of mesh ``mesh`` whose dims divide (or, in one case in ten, to None: unset)."""
    rng = random.Random(seed)
    mesh = m.meshes["mesh"]
    main = m.funcs[0]
    out: list[dict[str, TensorSharding | None]] = []
    for _ in range(n):
        c: dict[str, TensorSharding | None] = {}
        for i in rng.sample(range(len(main.args)), 3):
            shape = main.args[i].type.shape
            dims: list[list[str]] = [[] for _ in shape]
            for axis in rng.sample(["x", "y"], rng.randint(0, 2)):
                d = rng.randrange(len(shape))
                if shape[d] % (mesh.axis_size(axis) * (4 if dims[d] else 1)) == 0:
                    dims[d].append(axis)
            c[f"arg{i}"] = TensorSharding(mesh, dims) if rng.random() < 0.9 else None
        out.append(c)
    return out
