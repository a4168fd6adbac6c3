"""Programs for the auto-sharding tests: a 2-layer MLP and a transformer block (Builder), and a
``shard_map`` MLP lowered with jax."""

from __future__ import annotations

from shardwise import Builder, load_mlir
from shardwise.ir.core import Module, Value


def mlp(batch: int = 16, d: int = 64, hidden: int = 256) -> Module:
    """``tanh(x @ w1) @ w2``: args x ``(batch, d)``, w1 ``(d, hidden)``, w2 ``(hidden, d)``."""
    b = Builder()
    x, w1, w2 = b.arg((batch, d)), b.arg((d, hidden)), b.arg((hidden, d))
    h = b.tanh(b.dot_general(x, w1, contracting=((1,), (0,))))
    return b.ret(b.dot_general(h, w2, contracting=((1,), (0,))))


def _matmul(b: Builder, x: Value, w: Value) -> Value:
    return b.dot_general(x, w, contracting=((2,), (0,)))


def transformer_block(batch: int = 8, seq: int = 16, d: int = 64, heads: int = 4, ffn: int = 256) -> Module:
    """Self-attention (q, k, v, o projections; ``heads`` heads, softmax) and an MLP, each with a
    residual: args x ``(batch, seq, d)``, wq, wk, wv, wo ``(d, d)``, w1 ``(d, ffn)``, w2 ``(ffn, d)``."""
    b = Builder()
    x = b.arg((batch, seq, d))
    wq, wk, wv, wo = (b.arg((d, d)) for _ in range(4))
    w1, w2 = b.arg((d, ffn)), b.arg((ffn, d))
    dh = d // heads

    def split(t: Value) -> Value:
        return b.reshape(t, (batch, seq, heads, dh))

    q, k, v = split(_matmul(b, x, wq)), split(_matmul(b, x, wk)), split(_matmul(b, x, wv))
    s = b.dot_general(q, k, batch=((0, 2), (0, 2)), contracting=((3,), (3,)))  # (batch, heads, seq, seq)
    e = b.exp(s)
    z = b.broadcast_in_dim(b.reduce(e, dims=(3,)), (batch, heads, seq, seq), (0, 1, 2))
    p = b.divide(e, z)
    a = b.dot_general(p, v, batch=((0, 1), (0, 2)), contracting=((3,), (1,)))  # (batch, heads, seq, dh)
    a = b.reshape(b.transpose(a, (0, 2, 1, 3)), (batch, seq, d))
    y = b.add(x, _matmul(b, a, wo))
    h = b.tanh(_matmul(b, y, w1))
    return b.ret(b.add(y, _matmul(b, h, w2)))


def shard_map_mlp(manual: set[str]) -> Module:
    """A data-parallel MLP step written with ``shard_map`` over ``manual`` of a data=2,
    model=4 mesh: tokens split on ``data`` by hand, weights as the user passed them."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import AxisType
    from jax.sharding import PartitionSpec as P

    # Auto axes: the free axis is left to the compiler (explicit ones pin every body value).
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))

    def block(x, w1, w2):  # type: ignore[no-untyped-def]
        h = jax.nn.relu(x @ w1)
        return jax.lax.psum(jnp.sum(h @ w2), "data") if "data" in manual else jnp.sum(h @ w2)

    f = jax.shard_map(block, mesh=mesh, in_specs=(P("data"), P(), P()), out_specs=P(), axis_names=manual)
    x = jnp.ones((16, 32), jnp.float32)
    w1 = jnp.ones((32, 64), jnp.float32)
    w2 = jnp.ones((64, 32), jnp.float32)
    return load_mlir(str(jax.jit(f).lower(x, w1, w2).as_text()))
