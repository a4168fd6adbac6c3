"""``shardwise.rules`` against Shardy on programs JAX lowers at test time: einsums and dots,
convolutions with feature and batch groups, reshapes, gathers and scatters from indexing,
sorts, cumulative ops (reduce_window), pooling gradients (select_and_scatter), FFTs, pads,
concatenations, dynamic slices, triangular solves, Cholesky, top-k, control flow, random
numbers. Every op of every program must get exactly Shardy's rule (or none where Shardy has
none), in both the default and the conservative mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_rules_mlir import Comparison, compare_module

jax = pytest.importorskip("jax", reason="jax (the test extra) is not installed")
import jax.numpy as jnp
from jax import lax

pytestmark = pytest.mark.jax


def f32(*shape: int) -> Any:
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def i32(*shape: int) -> Any:
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def _conv(lhs: Any, rhs: Any, **kw: Any) -> Any:
    return lax.conv_general_dilated(lhs, rhs, **kw)


def _max_pool(x: Any) -> Any:
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")


def _while(x: Any) -> Any:
    return lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c @ c.T[:, :4] if c.shape[1] == 4 else c) + i, x)


def _scan(x: Any) -> Any:
    def step(c: Any, row: Any) -> Any:
        return c * 0.5 + row, jnp.cumsum(row)

    return lax.scan(step, x[0], x)


def _cond(p: Any, x: Any) -> Any:
    return lax.cond(p > 0, lambda y: jnp.sin(y).sum(0), lambda y: jnp.cos(y).max(0), x)


def _sort_multi(x: Any, y: Any) -> Any:
    return lax.sort((x, y), dimension=1, num_keys=1)


#: name -> (function, example arguments)
PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "matmul": (lambda a, b: a @ b, (f32(8, 16), f32(16, 32))),
    "matvec": (lambda a, b: a @ b, (f32(8, 16), f32(16))),
    "vecvec": (lambda a, b: jnp.dot(a, b), (f32(16), f32(16))),
    "einsum_batched": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (f32(4, 8, 16), f32(4, 16, 2))),
    "einsum_multi_contract": (lambda a, b: jnp.einsum("abcd,cdbe->ae", a, b), (f32(2, 3, 4, 5), f32(4, 5, 3, 6))),
    "einsum_outer_batch": (lambda a, b: jnp.einsum("bi,bj->bij", a, b), (f32(4, 3), f32(4, 5))),
    "conv_nhwc": (
        lambda x, w: _conv(x, w, window_strides=(1, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
        (f32(2, 16, 16, 8), f32(3, 3, 8, 4)),
    ),
    "conv_nchw_strided": (
        lambda x, w: _conv(x, w, window_strides=(2, 2), padding="VALID", rhs_dilation=(2, 1)),
        (f32(2, 4, 15, 15), f32(6, 4, 3, 3)),
    ),
    "conv_feature_groups": (
        lambda x, w: _conv(
            x, w, window_strides=(1,), padding="SAME", feature_group_count=4, dimension_numbers=("NWC", "WIO", "NWC")
        ),
        (f32(2, 32, 8), f32(5, 2, 12)),
    ),
    "conv_depthwise": (
        lambda x, w: _conv(
            x,
            w,
            window_strides=(1, 1),
            padding="SAME",
            feature_group_count=8,
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
        ),
        (f32(1, 8, 8, 8), f32(3, 3, 1, 8)),
    ),
    "conv_batch_groups": (
        lambda x, w: _conv(
            x,
            w,
            window_strides=(1, 1),
            padding="VALID",
            batch_group_count=2,
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
        ),
        (f32(4, 6, 6, 3), f32(3, 3, 3, 4)),
    ),
    "conv_3d_window_bigger": (
        lambda x, w: _conv(x, w, window_strides=(1, 1, 1), padding="VALID"),
        (f32(1, 2, 5, 6, 7), f32(3, 2, 4, 2, 3)),
    ),
    "conv_grad": (
        lambda x, w: jax.grad(lambda x, w: _conv(x, w, window_strides=(2, 2), padding="SAME").sum(), argnums=(0, 1))(
            x, w
        ),
        (f32(2, 3, 8, 8), f32(4, 3, 3, 3)),
    ),
    "reshapes": (
        lambda x: (
            x.reshape(6, 4, 5),
            x.reshape(2, 60),
            x.reshape(5, 24),
            x.reshape(120),
            x.reshape(1, 4, 30, 1),
            x.reshape(3, 2, 20),
        ),
        (f32(2, 3, 4, 5),),
    ),
    "reshape_swap": (lambda x: (x.reshape(3, 2), x.reshape(6, 1, 1)), (f32(2, 3),)),
    "transpose_broadcast": (
        lambda x, y: (x.T, x[:, None, :] + y[None], jnp.broadcast_to(x[0], (3, 5, 4))),
        (f32(4, 4), f32(3, 4)),
    ),
    "gather_take": (lambda x, i: (x[i], x[:, i], jnp.take(x, i, axis=1)), (f32(10, 8), i32(4))),
    "gather_2d_index": (lambda x, i, j: x[i, j], (f32(10, 8, 3), i32(5), i32(5))),
    "gather_take_along": (lambda x, i: jnp.take_along_axis(x, i, axis=1), (f32(4, 8), i32(4, 3))),
    "scatter_set_add": (
        lambda x, i, u: (x.at[i].set(u), x.at[i].add(u), x.at[:, 2].mul(2.0)),
        (f32(10, 8), i32(4), f32(4, 8)),
    ),
    "scatter_min_max": (lambda x, i, u: (x.at[i].max(u), x.at[i].min(u)), (f32(10, 8), i32(4), f32(4, 8))),
    "scatter_bool_or": (lambda x, i: x.at[i].set(True), (jax.ShapeDtypeStruct((10,), jnp.bool_), i32(3))),
    "sort": (lambda x: (jnp.sort(x, axis=0), jnp.argsort(x, axis=1)), (f32(6, 7),)),
    "sort_vector": (lambda x: jnp.sort(x), (f32(9),)),
    "sort_multi": (_sort_multi, (f32(4, 5), i32(4, 5))),
    "cumulative": (lambda x: (jnp.cumsum(x, axis=1), lax.cummax(x, axis=0), jnp.cumprod(x, axis=0)), (f32(8, 16),)),
    "pooling": (_max_pool, (f32(2, 9, 9, 3),)),
    "avg_pool_padded": (lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), ((1, 0), (0, 1))), (f32(6, 6),)),
    "pool_grad": (lambda x: jax.grad(lambda y: _max_pool(y).sum())(x), (f32(2, 8, 8, 3),)),
    "fft": (
        lambda x: (jnp.fft.fft(x), jnp.fft.ifft(x), jnp.fft.fft2(x)),
        (jax.ShapeDtypeStruct((4, 8, 16), jnp.complex64),),
    ),
    "rfft": (lambda x: (jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x)), jnp.fft.rfftn(x)), (f32(4, 8, 16),)),
    "pad": (lambda x: (jnp.pad(x, ((1, 2), (0, 0))), lax.pad(x, 0.0, ((0, 0, 0), (-1, 2, 1)))), (f32(6, 8),)),
    "concat": (
        lambda x, y: (jnp.concatenate([x, y], 1), jnp.concatenate([x[:, :3], x[:, 5:]], 1), jnp.roll(x, 2, 1)),
        (f32(4, 8), f32(4, 2)),
    ),
    "concat_same_tensor": (lambda x: (jnp.concatenate([x[:2], x, x[1:]], 0), jnp.concatenate([x, x], 1)), (f32(4, 8),)),
    "concat_conservative_probe": (lambda x, y: jnp.stack([x, y, x]), (f32(3, 5), f32(3, 5))),
    "dynamic_slice": (
        lambda x, i: (lax.dynamic_slice(x, (i, 0), (2, 8)), lax.dynamic_slice_in_dim(x, 3, 4, 1)),
        (f32(10, 8), i32()),
    ),
    "dynamic_update_slice": (
        lambda x, u, i: (lax.dynamic_update_slice(x, u, (i, 0)), lax.dynamic_update_slice(x, u, (1, 0))),
        (f32(10, 8), f32(2, 8), i32()),
    ),
    "triangular_solve": (
        lambda a, b: (
            jax.scipy.linalg.solve_triangular(a, b, lower=True),
            jax.scipy.linalg.solve_triangular(a, b, lower=False, trans=1),
            lax.linalg.triangular_solve(a, b.T, left_side=False, lower=True, transpose_a=True),
            lax.linalg.triangular_solve(a, b.T, left_side=False, lower=False, conjugate_a=True, transpose_a=True),
        ),
        (f32(6, 6), f32(6, 3)),
    ),
    "triangular_solve_batched": (
        lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True),
        (f32(2, 5, 5), f32(2, 5, 4)),
    ),
    "cholesky": (lambda a: lax.linalg.cholesky(a), (f32(3, 6, 6),)),
    "top_k": (lambda x: lax.top_k(x, 3), (f32(4, 10),)),
    "approx_max_k": (lambda x: lax.approx_max_k(x, 2), (f32(4, 64),)),
    "reductions": (
        lambda x: (x.sum(0), x.max(1), jnp.argmax(x, 1), x.mean((0, 2)), jnp.any(x > 0, 2)),
        (f32(4, 5, 6),),
    ),
    "elementwise": (
        lambda x, y: (
            jnp.exp(x) * jnp.log1p(y) - jnp.tanh(x) / (jnp.abs(y) + 1),
            jnp.clip(x, -1.0, 1.0),
            jnp.where(x > y, x, y),
            lax.rsqrt(jnp.abs(x) + 1),
            jnp.sign(x) ** 2 + jnp.floor(y) + jnp.ceil(x) + jnp.round(y),
            jnp.arctan2(x, y),
            lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10),
            jnp.isfinite(x),
            lax.population_count(x.astype(jnp.int32)) + lax.clz(y.astype(jnp.int32)),
            (x.astype(jnp.int32) << 2) >> 1,
            lax.shift_right_logical(x.astype(jnp.uint32), jnp.uint32(3)),
            lax.complex(x, y).real + lax.complex(x, y).imag,
            ~(x > 0) ^ (y > 0),
            lax.rem(x, y + 2)
            + lax.cbrt(x)
            + lax.expm1(y)
            + lax.logistic(x)
            + jnp.cos(x)
            + lax.tan(y)
            + jnp.sqrt(jnp.abs(x)),
        ),
        (f32(4, 6), f32(4, 6)),
    ),
    "bitcast": (
        lambda x, y: (
            lax.bitcast_convert_type(x, jnp.uint16),
            lax.bitcast_convert_type(y, jnp.float32),
            lax.bitcast_convert_type(x, jnp.int32),
        ),
        (f32(4, 6), jax.ShapeDtypeStruct((4, 6, 2), jnp.uint16)),
    ),
    "control_flow": (lambda p, x: (_cond(p, x), _scan(x)), (f32(), f32(5, 4))),
    "while": (_while, (f32(4, 4),)),
    "random": (
        lambda k: jax.random.normal(k, (4, 8)) + jax.random.uniform(jax.random.split(k)[0], (4, 8)),
        (jax.ShapeDtypeStruct((2,), jnp.uint32),),
    ),
    "rng_bit_generator": (lambda k: lax.rng_bit_generator(k, (4, 16)), (jax.ShapeDtypeStruct((4,), jnp.uint32),)),
    "iota_and_select": (lambda x: jnp.where(jnp.arange(8)[None, :] > jnp.arange(4)[:, None], x, 0.0), (f32(4, 8),)),
    "reverse": (lambda x: (jnp.flip(x, 0), jnp.flip(x)), (f32(3, 4),)),
    "size_zero": (lambda x: (x + 1, x.reshape(0, 4), x.sum(0)), (f32(0, 4),)),
    "scalars": (lambda x, y: x * y + 1, (f32(), f32())),
    "int64_bits": (lambda x: jax.lax.bitcast_convert_type(x, jnp.float32), (jax.ShapeDtypeStruct((3, 4), jnp.int32),)),
}

#: Programs lowered for TPU (without a TPU: lowering only), where linear algebra becomes
#: ``cholesky``, ``triangular_solve`` and the ``Eigh``/``Qr``/Householder custom calls.
TPU_PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "tpu_linalg": (
        lambda a, b: (
            lax.linalg.cholesky(a),
            jax.scipy.linalg.solve_triangular(a, b, lower=True),
            jax.scipy.linalg.solve_triangular(a, b, lower=False, trans=1),
            lax.linalg.triangular_solve(a, b, left_side=False, lower=True, transpose_a=True),
            lax.linalg.triangular_solve(a, b, left_side=True, lower=False, conjugate_a=True, transpose_a=True),
        ),
        (f32(2, 6, 6), f32(2, 6, 6)),
    ),
    "tpu_decompositions": (
        lambda a: (jnp.linalg.eigh(a), jnp.linalg.qr(a), jnp.linalg.qr(a[:, :, :4])),
        (f32(3, 5, 5),),
    ),
    "tpu_top_k_erf": (lambda x: (lax.top_k(x, 2), jax.scipy.special.erf(x), lax.approx_max_k(x, 2)), (f32(4, 64),)),
}

_MESH = jax.sharding.AbstractMesh((2, 4), ("x", "y"))
_P = jax.sharding.PartitionSpec


def _collectives(x: Any) -> Any:
    return (
        lax.all_gather(x, "x", axis=1, tiled=True),
        lax.psum(x, "y"),
        lax.psum_scatter(x, "y", scatter_dimension=1, tiled=True),
        lax.all_to_all(x, "x", 0, 1, tiled=True),
        lax.all_to_all(x, "y", 1, 1, tiled=True),
        lax.ppermute(x, "x", [(0, 1), (1, 0)]),
        lax.pmax(x, ("x", "y")),
    )


def _sharded(x: Any, w: Any) -> Any:
    x = lax.with_sharding_constraint(x, _P("x", None))
    y = jnp.tanh(x @ w)
    return lax.with_sharding_constraint(y, _P(None, "y")).sum(0)


#: Programs lowered under an abstract 2x4 mesh: collectives in a manual computation, sharding
#: constraints.
MESH_PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "collectives": (
        jax.shard_map(_collectives, mesh=_MESH, in_specs=_P("x", "y"), out_specs=_P("x", "y"), check_vma=False),
        (f32(8, 16),),
    ),
    "sharding_constraints": (_sharded, (f32(8, 16), f32(16, 32))),
}

_LOWERED: dict[str, str] = {}


def lowered(name: str) -> str:
    """The StableHLO text of program ``name``."""
    if name not in _LOWERED:
        if name in PROGRAMS:
            fn, args = PROGRAMS[name]
            _LOWERED[name] = jax.jit(fn).lower(*args).as_text()
        elif name in TPU_PROGRAMS:
            fn, args = TPU_PROGRAMS[name]
            _LOWERED[name] = jax.jit(fn).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
        else:
            fn, args = MESH_PROGRAMS[name]
            with jax.sharding.use_abstract_mesh(_MESH):
                _LOWERED[name] = jax.jit(fn).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
    return _LOWERED[name]


ALL_PROGRAMS = [*PROGRAMS, *TPU_PROGRAMS, *MESH_PROGRAMS]


def test_generated_programs_match_shardy() -> None:
    total = Comparison()
    per_program: dict[str, Comparison] = {}
    for name in ALL_PROGRAMS:
        c = compare_module(lowered(name))
        c_cons = compare_module(lowered(name), conservative=True)
        c.add(c_cons)
        per_program[name] = c
        total.add(c)
    bad = {n: c.mismatches[:3] for n, c in per_program.items() if c.mismatches}
    assert not bad, bad
    assert total.matches == total.ops
    assert total.ruled > 300
    for op in (
        "stablehlo.convolution",
        "stablehlo.gather",
        "stablehlo.scatter",
        "stablehlo.fft",
        "stablehlo.sort",
        "stablehlo.reduce_window",
        "stablehlo.select_and_scatter",
        "stablehlo.triangular_solve",
        "stablehlo.cholesky",
        "stablehlo.dynamic_update_slice",
        "stablehlo.concatenate",
        "stablehlo.pad",
        "stablehlo.rng_bit_generator",
        "stablehlo.custom_call",
        "stablehlo.bitcast_convert",
        "stablehlo.while",
        "stablehlo.all_gather",
        "stablehlo.all_to_all",
        "stablehlo.reduce_scatter",
        "sdy.sharding_constraint",
    ):
        assert total.by_op[op] > 0, f"no {op} was generated"
