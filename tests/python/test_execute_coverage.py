"""Op coverage of the interpreter, taken from lowering: a table of small JAX / Flax / Optax
calls is lowered with ``jax.jit(fn).lower(*args).as_text()`` (calls included), loaded with
``shardwise.load_mlir`` and run by ``shardwise.execute.run``; the results are compared with JAX
executing the same function. A second test walks every function of every lowered module and
asserts the interpreter implements every op seen (custom calls as ``custom_call:<target>``),
except the LAPACK custom calls of ``LAPACK_TARGETS``, which must fail with a one-line
``ProgramError`` naming the target.

Comparison rule (as tests/python/test_execute_corpus.py): integers and booleans exactly; floats
within 1e-5 relative to max(|ref|); otherwise (long float32 chains, bf16/f16) ours must be as
close to the exact answer (XLA running the program in float64, or our own float64 run where XLA
cannot widen it) as JAX is: within 3x JAX's error, or one unit in the last place of the
result type."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from xla_exec import rel_error, xla_run_f64

pytestmark = pytest.mark.jax

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax

_rng = np.random.default_rng(20240611)


def f32(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape).astype(np.float32)


def pos(*shape: int) -> np.ndarray:
    return (np.abs(_rng.standard_normal(shape)) + 0.25).astype(np.float32)


def unit(*shape: int) -> np.ndarray:
    return _rng.uniform(-0.9, 0.9, size=shape).astype(np.float32)


def i32(lo: int, hi: int, *shape: int) -> np.ndarray:
    return _rng.integers(lo, hi, size=shape).astype(np.int32)


def c64(*shape: int) -> np.ndarray:
    return (_rng.standard_normal(shape) + 1j * _rng.standard_normal(shape)).astype(np.complex64)


def bf16(*shape: int) -> np.ndarray:
    import ml_dtypes

    return _rng.standard_normal(shape).astype(ml_dtypes.bfloat16)


def f16(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape).astype(np.float16)


def spd(n: int) -> np.ndarray:
    a = _rng.standard_normal((n, n))
    return (a @ a.T + n * np.eye(n)).astype(np.float32)


def key(seed: int) -> np.ndarray:
    """``jax.random.PRNGKey(seed)`` (a threefry key, uint32[2]) without running JAX."""
    return np.array([0, seed], dtype=np.uint32)


def fill(tree: Any) -> Any:
    """Arrays of the shapes and dtypes of ``tree`` (e.g. ``jax.eval_shape`` of a Flax ``init``
    or an optimizer state, which is much cheaper than running it): floats positive (valid
    second moments and variances), integers 3 (a step count)."""

    def leaf(s: Any) -> np.ndarray:
        if np.issubdtype(s.dtype, np.floating):
            return (np.abs(_rng.standard_normal(s.shape)) * 0.5 + 0.1).astype(s.dtype)
        return np.full(s.shape, 3, dtype=s.dtype)

    return jax.tree_util.tree_map(leaf, tree)


@dataclass
class Case:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    #: "values": compare values; "shape": only shapes and dtypes (ops whose values are
    #: implementation-defined, e.g. rng_bit_generator's DEFAULT algorithm).
    compare: str = "values"


CASES: dict[str, Case] = {}


def case(name: str, fn: Callable[..., Any], *args: Any, compare: str = "values") -> None:
    assert name not in CASES, name
    CASES[name] = Case(fn, args, compare)


X = f32(3, 4)
Y = f32(3, 4)
P = pos(3, 4)
U = unit(3, 4)
I = i32(-20, 20, 3, 4)
J = i32(1, 6, 3, 4)
B = X > 0
Z = c64(3, 4)
Z2 = c64(3, 4)
M = f32(4, 4)
S = spd(4)

# -- jax.numpy elementwise ---------------------------------------------------------------------
for _n, _f in {
    "square": jnp.square,
    "cbrt": jnp.cbrt,
    "exp2": jnp.exp2,
    "log2": lambda x: jnp.log2(jnp.abs(x) + 0.1),
    "log10": lambda x: jnp.log10(jnp.abs(x) + 0.1),
    "sinc": jnp.sinc,
    "sinh": jnp.sinh,
    "cosh": jnp.cosh,
    "arcsin": lambda x: jnp.arcsin(jnp.tanh(x)),
    "arccos": lambda x: jnp.arccos(jnp.tanh(x)),
    "arctan": jnp.arctan,
    "arcsinh": jnp.arcsinh,
    "arccosh": lambda x: jnp.arccosh(jnp.abs(x) + 1.0),
    "arctanh": lambda x: jnp.arctanh(jnp.tanh(x)),
    "reciprocal": lambda x: jnp.reciprocal(x + 5.0),
    "deg2rad": jnp.deg2rad,
    "trunc": lambda x: jnp.trunc(3 * x),
    "rint": lambda x: jnp.rint(3 * x),
    "signbit": jnp.signbit,
    "isnan": jnp.isnan,
    "isinf": lambda x: jnp.isinf(x / (x > 0)),
    "isposinf": lambda x: jnp.isposinf(1 / x),
    "nan_to_num": lambda x: jnp.nan_to_num(jnp.log(x)),
    "heaviside": lambda x: jnp.heaviside(x, 0.5),
    "frexp": jnp.frexp,
    "modf": jnp.modf,
    "erf": jax.scipy.special.erf,
    "erfc": jax.scipy.special.erfc,
    "expit": jax.scipy.special.expit,
    "logit": lambda x: jax.scipy.special.logit(jax.nn.sigmoid(x)),
    "gammaln": lambda x: jax.scipy.special.gammaln(jnp.abs(x) + 0.1),
    "ndtri": lambda x: jax.scipy.special.ndtri(jax.nn.sigmoid(x)),
    "ndtr": jax.scipy.special.ndtr,
    "xlogy": lambda x: jax.scipy.special.xlogy(x, jnp.abs(x) + 0.5),
}.items():
    case(f"jnp.{_n}", _f, X)

for _n, _f in {
    "logaddexp": jnp.logaddexp,
    "logaddexp2": jnp.logaddexp2,
    "hypot": jnp.hypot,
    "fmod": jnp.fmod,
    "mod": jnp.mod,
    "remainder": jnp.remainder,
    "copysign": jnp.copysign,
    "nextafter": jnp.nextafter,
    "float_power": lambda a, b: jnp.float_power(jnp.abs(a) + 0.5, b),
    "arctan2": jnp.arctan2,
    "ldexp": lambda a, b: jnp.ldexp(a, (3 * b).astype(jnp.int32)),
    "fmax": jnp.fmax,
    "divmod": lambda a, b: jnp.divmod(a, b + 3.0),
    "true_divide": jnp.true_divide,
    "isclose": lambda a, b: jnp.isclose(a, a + 1e-7 * b),
}.items():
    case(f"jnp.{_n}", _f, X, Y)

for _n, _f in {
    "floor_divide": jnp.floor_divide,
    "mod": jnp.mod,
    "gcd": jnp.gcd,
    "lcm": jnp.lcm,
    "power": lambda a, b: jnp.power(a, b % 4),
    "left_shift": jnp.left_shift,
    "right_shift": jnp.right_shift,
    "bitwise_count": lambda a, b: jnp.bitwise_count(a) + b,
    "abs_sign": lambda a, b: (jnp.abs(a), jnp.sign(a)),
    "invert": lambda a, b: jnp.invert(a) ^ b,
}.items():
    case(f"jnp.int.{_n}", _f, I, J)

case(
    "jnp.logical",
    lambda a, b: (
        jnp.logical_and(a, b),
        jnp.logical_or(a, b),
        jnp.logical_xor(a, b),
        jnp.logical_not(a),
    ),
    B,
    Y > 0,
)
case("jnp.where", jnp.where, B, X, Y)
case("jnp.select", lambda x: jnp.select([x < -0.5, x > 0.5], [x * 2, x * 3], x), X)
case("jnp.clip", lambda x: jnp.clip(x, -0.5, 0.5), X)
case(
    "jnp.piecewise",
    lambda x: jnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * v]),
    X,
)
case("jnp.polyval", lambda x: jnp.polyval(jnp.array([1.0, -2.0, 3.0]), x), X)
case("jnp.interp", lambda x: jnp.interp(x, jnp.linspace(-2, 2, 5), jnp.arange(5.0)), X)
case(
    "jnp.astype",
    lambda x: (
        x.astype(jnp.int8),
        x.astype(jnp.uint32),
        x.astype(jnp.float16),
        x.astype(jnp.bool_),
    ),
    X * 10,
)

# -- reductions and scans ------------------------------------------------------------------------
for _n, _f in {
    "sum": lambda x: jnp.sum(x, axis=0),
    "mean": jnp.mean,
    "var": jnp.var,
    "std": lambda x: jnp.std(x, axis=1, ddof=1),
    "prod": lambda x: jnp.prod(x, axis=1),
    "max": lambda x: jnp.max(x, axis=1),
    "min": jnp.min,
    "argmax": lambda x: jnp.argmax(x, axis=1),
    "argmin": jnp.argmin,
    "any_all": lambda x: (jnp.any(x > 1), jnp.all(x > -3, axis=0)),
    "norm": jnp.linalg.norm,
    "norm_inf": lambda x: jnp.linalg.norm(x, ord=jnp.inf),
    "median": jnp.median,
    "quantile": lambda x: jnp.quantile(x, 0.3, axis=1),
    "nanmean": lambda x: jnp.nanmean(jnp.where(x > 1, jnp.nan, x)),
    "average": lambda x: jnp.average(x, axis=1, weights=jnp.arange(1.0, 5.0)),
    "cumsum": lambda x: jnp.cumsum(x, axis=1),
    "cumprod": lambda x: jnp.cumprod(x, axis=0),
    "diff": jnp.diff,
    "lax.cumsum_rev": lambda x: lax.cumsum(x, axis=1, reverse=True),
    "lax.cummax": lambda x: lax.cummax(x, axis=1),
    "lax.cummin": lambda x: lax.cummin(x, axis=0),
    "lax.cumlogsumexp": lambda x: lax.cumlogsumexp(x, axis=1),
    "count_nonzero": lambda x: jnp.count_nonzero(x > 0, axis=0),
    "ptp": jnp.ptp,
    "trace": lambda x: jnp.trace(x[:, :3]),
}.items():
    case(f"reduce.{_n}", _f, X)
case(
    "reduce.int_sum_max",
    lambda i: (jnp.sum(i, axis=1), jnp.max(i), jnp.cumsum(i, axis=0), jnp.argmax(i)),
    I,
)
case("reduce.bool", lambda b: (jnp.sum(b), jnp.cumsum(b, axis=1)), B)

# -- sorting, indexing, shapes --------------------------------------------------------------------
case("sort", lambda x: jnp.sort(x, axis=1), X)
case("argsort", lambda x: jnp.argsort(x, axis=0), X)
case("argsort_desc", lambda x: jnp.argsort(-x, axis=1, stable=True), X)
case("lax.top_k", lambda x: lax.top_k(x, 2), X)
case("lax.sort_multi", lambda x, i: lax.sort((x, i), dimension=1, num_keys=1), X, I)
case(
    "lax.sort_two_keys",
    lambda i, x: lax.sort((i % 3, x), dimension=1, num_keys=2),
    I,
    X,
)
case("searchsorted", lambda x: jnp.searchsorted(jnp.linspace(-2, 2, 7), x), X)
case("unique_size", lambda i: jnp.unique(i % 5, size=5, fill_value=-1), I)
case("take", lambda x, i: jnp.take(x, i % 4, axis=1), X, I[:2, :3])
case(
    "take_along_axis",
    lambda x: jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1),
    X,
)
case("fancy_index", lambda x, i: x[i % 3, ::-1][:, 1:3], X, I[:, 0])
case("at_add", lambda x, i: x.at[i % 3].add(1.0), X, I[:5, 0])
case(
    "at_set_max_mul",
    lambda x, i: (x.at[:, i % 4].set(0.0), x.at[i % 3].max(0.5), x.at[i % 3].mul(2.0)),
    X,
    I[:2, 0],
)
case("at_get_oob", lambda x, i: x.at[i].get(mode="fill", fill_value=-1.0), X, I[:4, 0])
case(
    "segment_sum",
    lambda x, i: jax.ops.segment_sum(x, i % 3, num_segments=3),
    X,
    I[:, 0],
)
case(
    "lax.dynamic_slice",
    lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)),
    X,
    np.int32(2),
)
case(
    "lax.dynamic_update_slice",
    lambda x, y, i: lax.dynamic_update_slice(x, y[:2, :2], (i, i)),
    X,
    Y,
    np.int32(1),
)
case("lax.gather", lambda x, i: x[i % 3, i % 4], X, I[0])
case(
    "pad",
    lambda x: (
        jnp.pad(x, ((1, 0), (2, 1))),
        jnp.pad(x, 1, mode="reflect"),
        jnp.pad(x, 1, mode="edge"),
    ),
    X,
)
case("lax.pad_interior", lambda x: lax.pad(x, 0.0, ((1, -1, 1), (0, 2, 2))), X)
case("roll_flip", lambda x: (jnp.roll(x, 1, axis=1), jnp.flip(x), jnp.rot90(x)), X)
case(
    "tile_repeat",
    lambda x: (
        jnp.tile(x, (2, 1)),
        jnp.repeat(x, 2, axis=0),
        jnp.repeat(x, jnp.array([1, 0, 2]), axis=0, total_repeat_length=3),
    ),
    X,
)
case(
    "concat_stack",
    lambda x, y: (
        jnp.concatenate([x, y], axis=1),
        jnp.stack([x, y]),
        jnp.split(x, 2, axis=1),
    ),
    X,
    Y,
)
case(
    "reshape_transpose",
    lambda x: (
        x.reshape(2, 6).T,
        jnp.moveaxis(x[None], 0, 2),
        jnp.expand_dims(x, 1).squeeze(),
    ),
    X,
)
case(
    "triu_tril_eye",
    lambda x: (
        jnp.triu(x),
        jnp.tril(x, -1),
        jnp.eye(3, 4) * x,
        jnp.diag(x[:, :3]),
        jnp.diagonal(x),
    ),
    X,
)
case(
    "outer_kron",
    lambda x, y: (jnp.outer(x[0], y[0]), jnp.kron(x[:2, :2], y[:2, :2])),
    X,
    Y,
)
case(
    "meshgrid_arange",
    lambda x: jnp.meshgrid(jnp.arange(3.0), x[0])[0] + jnp.linspace(0, 1, 3),
    X,
)
case("einsum", lambda x, y: jnp.einsum("ij,kj->ik", x, y), X, Y)
case(
    "einsum_batch",
    lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
    f32(2, 3, 4),
    f32(2, 4, 2),
)
case("matmul_int", lambda a, b: a @ b.T, I, J)
case("tensordot", lambda x, y: jnp.tensordot(x, y, axes=([0, 1], [0, 1])), X, Y)
case("histogram", lambda x: jnp.histogram(x, bins=4, range=(-2, 2))[0], X)
case("convolve", lambda x, y: jnp.convolve(x[0], y[1]), X, Y)

# -- FFT and complex numbers --------------------------------------------------------------------
case("fft.fft", jnp.fft.fft, X)
case("fft.ifft", jnp.fft.ifft, Z)
case("fft.rfft", jnp.fft.rfft, X)
case("fft.irfft", lambda z: jnp.fft.irfft(z, n=6), Z)
case("fft.fft2", jnp.fft.fft2, Z)
case("fft.rfftn", lambda x: jnp.fft.rfftn(x), f32(2, 3, 4))
case("fft.irfft2", lambda z: jnp.fft.irfft2(z, s=(3, 6)), Z)
case("fft.fftshift", lambda z: jnp.fft.fftshift(jnp.fft.fftn(z)), Z)
case("complex.arith", lambda a, b: (a + b, a * b, a / b, a - b, -a), Z, Z2)
case(
    "complex.parts",
    lambda z: (jnp.real(z), jnp.imag(z), jnp.abs(z), jnp.angle(z), jnp.conj(z)),
    Z,
)
case(
    "complex.math",
    lambda z: (
        jnp.exp(z),
        jnp.log(z),
        jnp.sqrt(z),
        z**2,
        jnp.sin(z),
        jnp.cos(z),
        jnp.tanh(z),
    ),
    Z,
)
case(
    "complex.more",
    lambda z: (
        jnp.expm1(z * 0.1),
        jnp.log1p(z * 0.1),
        jnp.sign(z),
        z**3,
        1.0 / z,
        lax.rsqrt(z),
    ),
    Z,
)
case(
    "complex.reduce",
    lambda z: (
        jnp.sum(z, axis=0),
        jnp.prod(z, axis=1),
        jnp.mean(z),
        jnp.cumsum(z, axis=1),
    ),
    Z,
)
case(
    "complex.matmul",
    lambda a, b: (a @ b.T, jnp.vdot(a, b), jnp.einsum("ij,ij->i", a, b)),
    Z,
    Z2,
)
case(
    "complex.build",
    lambda x, y: (lax.complex(x, y), x + 1j * y, (x + 0j).astype(jnp.complex64)),
    X,
    Y,
)
case(
    "complex.compare",
    lambda a, b: (a == b, a != b, jnp.where(jnp.abs(a) > 1, a, b), jnp.isfinite(a)),
    Z,
    Z2,
)
case(
    "complex.convert",
    lambda z: (
        z.real.astype(jnp.int32),
        jnp.real(3 * z).astype(jnp.int8),
        jnp.abs(z) ** 2,
        (z.real > 0).astype(jnp.complex64),
    ),
    Z,
)
case("complex.pow_exp", lambda z, x: (jnp.power(z, x), jnp.exp(1j * x)), Z, X)

# -- linear algebra -----------------------------------------------------------------------------
case("linalg.det", jnp.linalg.det, M)
case("linalg.slogdet", lambda a: jnp.linalg.slogdet(a), M)
case("linalg.inv", jnp.linalg.inv, M)
case("linalg.solve", jnp.linalg.solve, M, f32(4, 2))
case("linalg.cholesky", jnp.linalg.cholesky, S)
case("linalg.qr", jnp.linalg.qr, M)
case("linalg.svd", lambda a: jnp.linalg.svd(a, compute_uv=False), M)
case("linalg.eigh", lambda a: jnp.linalg.eigvalsh(a), S)
case(
    "linalg.solve_triangular",
    lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True),
    S,
    f32(4, 2),
)
case("linalg.matrix_power", lambda a: jnp.linalg.matrix_power(a, 3), M)
case("linalg.cross", lambda a, b: jnp.cross(a[:, :3], b[:, :3]), X, Y)

# -- jax.nn and jax.scipy.special ----------------------------------------------------------------
for _n, _f in {
    "relu": jax.nn.relu,
    "relu6": jax.nn.relu6,
    "gelu_exact": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_tanh": jax.nn.gelu,
    "silu": jax.nn.silu,
    "elu": jax.nn.elu,
    "selu": jax.nn.selu,
    "celu": jax.nn.celu,
    "leaky_relu": jax.nn.leaky_relu,
    "softplus": jax.nn.softplus,
    "soft_sign": jax.nn.soft_sign,
    "hard_tanh": jax.nn.hard_tanh,
    "hard_swish": jax.nn.hard_swish,
    "log_sigmoid": jax.nn.log_sigmoid,
    "glu": jax.nn.glu,
    "mish": jax.nn.mish,
    "squareplus": jax.nn.squareplus,
    "softmax": lambda x: jax.nn.softmax(x, axis=-1),
    "log_softmax": jax.nn.log_softmax,
    "logsumexp": lambda x: jax.nn.logsumexp(x, axis=0),
    "standardize": lambda x: jax.nn.standardize(x, axis=-1),
    "sparsemax_like": lambda x: jax.nn.sparse_plus(x),
}.items():
    case(f"nn.{_n}", _f, X)
case("nn.one_hot", lambda i: jax.nn.one_hot(i % 5, 5), I[0])
case(
    "nn.dot_product_attention",
    lambda q, k, v: jax.nn.dot_product_attention(q, k, v),
    f32(1, 3, 2, 4),
    f32(1, 3, 2, 4),
    f32(1, 3, 2, 4),
)
case("special.digamma", lambda x: jax.scipy.special.digamma(x), P)
case("special.polygamma", lambda x: jax.scipy.special.polygamma(1, x), P)
case("special.zeta", lambda x: jax.scipy.special.zeta(x + 1.5, x), P)
_EDGES = np.array([0.0, -0.0, -1.0, -2.5, 1e-8, 0.5, 3.0, np.inf, -np.inf, np.nan], dtype=np.float32)
case("special.digamma_edges", lax.digamma, _EDGES)
case(
    "special.zeta_edges",
    lax.zeta,
    np.array([2, 2, 3, 2.5, 1, 0.5, 2, 40, 4, 3], np.float32),
    np.array([0, -1, -1, -1.5, 2, 1, -3, 3, 1e-3, 0.5], np.float32),
)
case(
    "special.polygamma_edges",
    lax.polygamma,
    np.array([0, 1, 2, 1.5, -1, 3, 1, 0, 2, 4], np.float32),
    _EDGES,
)
case(
    "special.i1e_edges",
    lax.bessel_i1e,
    np.array([0, -0.0, 1e-30, 5, -5, 29.5, 31, -100, np.inf, np.nan], np.float32),
)
case(
    "lax.nextafter_edges",
    lax.nextafter,
    np.array([0, -0.0, 1, 1, np.inf, -np.inf, np.nan, 1, 3.4e38, 1e-45], np.float32),
    np.array([1, -1, 1, 2, 0, 0, 1, np.nan, np.inf, 0], np.float32),
)
case("lax.nextafter_bf16", lax.nextafter, bf16(3, 4), bf16(3, 4))
case("special.i0e_i1e", lambda x: (lax.bessel_i0e(x), lax.bessel_i1e(x)), X * 3)
case("special.i0_i1", lambda x: (jax.scipy.special.i0(x), jax.scipy.special.i1(x)), X * 3)
case(
    "special.gammainc",
    lambda x: (
        jax.scipy.special.gammainc(x, x + 0.5),
        jax.scipy.special.gammaincc(x, 2 * x),
    ),
    P,
)
case(
    "special.betainc",
    lambda x: jax.scipy.special.betainc(x, x + 1.0, jax.nn.sigmoid(x)),
    P,
)
case(
    "special.lgamma_gamma",
    lambda x: (lax.lgamma(x), jnp.exp(lax.lgamma(x)), jax.scipy.special.gamma(x)),
    P,
)
case("special.erf_inv", lambda x: lax.erf_inv(x), U)
case("special.log_ndtr", jax.scipy.special.log_ndtr, X * 4)
case(
    "special.entr_kl",
    lambda x: (jax.scipy.special.entr(x), jax.scipy.special.kl_div(x, x + 0.5)),
    P,
)
case(
    "special.logsumexp_b",
    lambda x: jax.scipy.special.logsumexp(x, b=jnp.abs(x), axis=1, return_sign=True),
    X,
)

# -- jax.lax -----------------------------------------------------------------------------------
case(
    "lax.population_count_clz",
    lambda i: (
        lax.population_count(i),
        lax.clz(i),
        lax.population_count(i.astype(jnp.uint8)),
    ),
    I,
)
case(
    "lax.shifts",
    lambda a, b: (
        lax.shift_left(a, b),
        lax.shift_right_logical(a, b),
        lax.shift_right_arithmetic(a, b),
    ),
    I,
    J,
)
case(
    "lax.bitcast",
    lambda x: (
        lax.bitcast_convert_type(x, jnp.int32),
        lax.bitcast_convert_type(x, jnp.uint8),
        lax.bitcast_convert_type(x.astype(jnp.float16), jnp.int16),
    ),
    X,
)
case(
    "lax.reduce_precision",
    lambda x: (
        lax.reduce_precision(x * 100, exponent_bits=5, mantissa_bits=10),
        lax.reduce_precision(x, exponent_bits=8, mantissa_bits=7),
    ),
    X,
)
case(
    "lax.reduce_window_max",
    lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (1, 2), "SAME"),
    X,
)
case(
    "lax.reduce_window_sum",
    lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 1), ((1, 0), (0, 1)), window_dilation=(1, 2)),
    X,
)
case(
    "lax.conv",
    lambda x, w: lax.conv(x, w, (1, 1), "SAME"),
    f32(1, 2, 5, 5),
    f32(3, 2, 3, 3),
)
case(
    "lax.conv_groups",
    lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID", feature_group_count=2),
    f32(2, 4, 5, 5),
    f32(4, 2, 2, 2),
)
case(
    "lax.conv_dilated",
    lambda x, w: lax.conv_general_dilated(x, w, (2, 1), ((1, 1), (0, 2)), lhs_dilation=(2, 1), rhs_dilation=(1, 2)),
    f32(1, 2, 5, 5),
    f32(3, 2, 2, 2),
)
case(
    "lax.conv_nhwc",
    lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
    f32(1, 4, 4, 2),
    f32(3, 3, 2, 3),
)
case(
    "lax.conv_transpose",
    lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")),
    f32(1, 2, 3, 3),
    f32(2, 2, 3, 3),
)
case(
    "lax.while",
    lambda x: lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 1.1), (0, x))[1],
    X,
)
case(
    "lax.fori_loop",
    lambda x: lax.fori_loop(0, 4, lambda i, v: v + i * jnp.sin(v), x),
    X,
)
case("lax.scan", lambda x: lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(4), x), X)
case(
    "lax.scan_reverse_unroll",
    lambda x: lax.scan(lambda c, r: (c * 0.5 + r, jnp.tanh(c)), x[0], x, reverse=True, unroll=2),
    X,
)
case(
    "lax.cond",
    lambda x, p: lax.cond(p, lambda v: v * 2, lambda v: -v, x),
    X,
    np.bool_(True),
)
case(
    "lax.switch",
    lambda x, i: lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], x),
    X,
    np.int32(2),
)
case("lax.map", lambda x: lax.map(lambda r: jnp.sum(r * r), x), X)
case("lax.associative_scan", lambda x: lax.associative_scan(jnp.add, x, axis=1), X)
case(
    "lax.rng_bit_generator",
    lambda k: lax.rng_bit_generator(k, (3, 4), dtype=jnp.uint32),
    np.arange(4, dtype=np.uint32),
    compare="shape",
)
case(
    "random.rbg_uniform",
    lambda k: jax.random.uniform(jax.random.wrap_key_data(k, impl="rbg"), (3,)),
    np.arange(4, dtype=np.uint32),
    compare="shape",
)
case("lax.integer_pow", lambda x: (lax.integer_pow(x, 3), lax.integer_pow(x, -2)), X + 3)
case("lax.nextafter", lambda x, y: lax.nextafter(x, y), X, Y)
case("lax.rem_div", lambda a, b: (lax.rem(a, b), lax.div(a, b)), I, J)
case(
    "lax.expand_dims_broadcast",
    lambda x: lax.broadcast_in_dim(x[:, :1], (3, 2, 4), (0, 2)),
    X,
)
case(
    "lax.reduce_multi",
    lambda x, i: lax.reduce((x, i), (-jnp.inf, 0), lambda a, b: (jnp.maximum(a[0], b[0]), a[1] + b[1]), (1,)),
    X,
    I,
)
case("lax.optimization_barrier", lambda x: lax.optimization_barrier((x, x * 2)), X)
case("lax.clamp_int", lambda i: lax.clamp(-3, i, 7), I)
case("lax.select_n", lambda i, x, y: lax.select_n(i % 3, x, y, x * y), I, X, Y)
case("lax.batch_matmul", lambda a, b: lax.batch_matmul(a, b), f32(2, 3, 4), f32(2, 4, 5))
case(
    "lax.dot_preferred",
    lambda a, b: lax.dot(a, b.T, preferred_element_type=jnp.float32),
    bf16(3, 4),
    bf16(3, 4),
)
case(
    "lax.checkpoint_grad",
    lambda x: jax.grad(jax.checkpoint(lambda v: jnp.sum(jnp.sin(v) ** 2)))(x),
    X,
)
case(
    "grad.mlp",
    lambda w, x: jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w),
    f32(4, 3),
    X,
)
case("vmap.custom_jvp", lambda x: jax.vmap(jax.grad(jax.nn.softplus))(x[0]), X)

# -- narrow floats and bools ---------------------------------------------------------------------
XB = bf16(3, 4)
XH = f16(3, 4)
case(
    "bf16.math",
    lambda x: (
        jnp.exp(x),
        jnp.tanh(x),
        x * x + 1,
        jnp.sqrt(jnp.abs(x)),
        jax.nn.gelu(x),
    ),
    XB,
)
case(
    "bf16.reduce",
    lambda x: (
        jnp.sum(x, axis=1),
        jnp.max(x),
        jnp.cumsum(x, axis=0),
        jax.nn.softmax(x),
    ),
    XB,
)
case("bf16.matmul", lambda x: x @ x.T, XB)
case(
    "bf16.convert",
    lambda x: (x.astype(jnp.float32), x.astype(jnp.int32), x.astype(jnp.float16)),
    XB * 10,
)
case("bf16.square_var", lambda x: (jnp.square(x), jnp.var(x, axis=1)), XB)
case(
    "f16.math",
    lambda x: (jnp.exp(x), jnp.log1p(jnp.abs(x)), jnp.sin(x), x / 3, jnp.square(x)),
    XH,
)
case(
    "f16.reduce",
    lambda x: (
        jnp.mean(x, axis=0),
        jnp.std(x),
        jnp.sort(x, axis=1),
        lax.top_k(x, 2)[0],
    ),
    XH,
)
case(
    "f16.special",
    lambda x: (
        lax.erf(x),
        lax.lgamma(jnp.abs(x) + 0.5),
        lax.digamma(jnp.abs(x) + 0.5),
        lax.bessel_i1e(x),
    ),
    XH,
)
case(
    "bool.ops",
    lambda a, b: (a & b, a | b, a ^ b, ~a, a.astype(jnp.int32), jnp.where(a, 1.0, 2.0)),
    B,
    Y > 0,
)

# -- jax.random (threefry keys as uint32[2] arguments) -------------------------------------------
case("random.normal", lambda k: jax.random.normal(k, (3, 4)), key(0))
case(
    "random.uniform",
    lambda k: jax.random.uniform(k, (5,), minval=-1.0, maxval=2.0),
    key(1),
)
case("random.categorical", lambda k, x: jax.random.categorical(k, x, axis=-1), key(2), X)
case(
    "random.bernoulli_randint",
    lambda k: (jax.random.bernoulli(k, 0.3, (4,)), jax.random.randint(k, (4,), 0, 10)),
    key(3),
)
case(
    "random.split_permutation",
    lambda k: (jax.random.split(k, 3), jax.random.permutation(k, 6)),
    key(4),
)
case(
    "random.truncated_normal",
    lambda k: jax.random.truncated_normal(k, -1.0, 1.0, (4,)),
    key(5),
)
case(
    "random.gumbel_bf16",
    lambda k: jax.random.gumbel(k, (4,), dtype=jnp.bfloat16),
    key(6),
)


# -- flax layers --------------------------------------------------------------------------------
def _flax_cases() -> None:
    try:
        import flax.linen as nn
    except ImportError:
        return
    k = key(0)
    x = f32(2, 4, 4, 3)
    v = f32(2, 5, 8)

    def layer(name: str, mod: Any, inp: Any, **kw: Any) -> None:
        params = fill(jax.eval_shape(lambda r, a: mod.init(r, a, **kw), k, inp))
        case(f"flax.{name}", lambda p, a: mod.apply(p, a, **kw), params, inp)

    layer("Dense", nn.Dense(5), f32(3, 4))
    layer("Conv", nn.Conv(4, (3, 3)), x)
    layer(
        "Conv_strided_grouped",
        nn.Conv(6, (2, 2), strides=2, feature_group_count=3, padding="VALID"),
        x,
    )
    layer("LayerNorm", nn.LayerNorm(), v)
    layer("RMSNorm", nn.RMSNorm(), v)
    layer("GroupNorm", nn.GroupNorm(num_groups=2), v)
    layer("Embed", nn.Embed(10, 4), i32(0, 10, 2, 3))
    layer(
        "MultiHeadDotProductAttention",
        nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8),
        v,
    )
    layer(
        "avg_max_pool",
        nn.Sequential(
            [
                lambda a: nn.avg_pool(a, (2, 2)),
                lambda a: nn.max_pool(a, (2, 2), padding="SAME"),
            ]
        ),
        x,
    )
    bn = nn.BatchNorm(use_running_average=False)
    bn_params = fill(jax.eval_shape(bn.init, k, v))
    case(
        "flax.BatchNorm",
        lambda p, a: bn.apply(p, a, mutable=["batch_stats"]),
        bn_params,
        v,
    )
    cell = nn.LSTMCell(features=6)
    carry = (f32(2, 6), f32(2, 6))
    cell_params = fill(jax.eval_shape(cell.init, k, carry, f32(2, 5)))
    case(
        "flax.LSTMCell",
        lambda p, c, a: cell.apply(p, c, a),
        cell_params,
        carry,
        f32(2, 5),
    )
    drop = nn.Dropout(rate=0.5, deterministic=False)
    case("flax.Dropout", lambda r, a: drop.apply({}, a, rngs={"dropout": r}), key(7), v)


_flax_cases()


# -- optax optimizer updates --------------------------------------------------------------------
def _optax_cases() -> None:
    try:
        import optax
    except ImportError:
        return
    params = {"w": f32(4, 3), "b": f32(3)}
    grads = {"w": f32(4, 3), "b": f32(3)}
    for name, opt in {
        "adam": optax.adam(1e-2),
        "adamw": optax.adamw(1e-2, weight_decay=1e-2),
        "sgd_momentum": optax.sgd(1e-1, momentum=0.9, nesterov=True),
        "lion": optax.lion(1e-3),
        "adafactor": optax.adafactor(1e-2),
        "rmsprop": optax.rmsprop(1e-2, centered=True),
        "clip_adam": optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3)),
        "adagrad": optax.adagrad(1e-2),
        "lamb": optax.lamb(1e-3),
    }.items():
        # A state of the optimizer's structure with non-zero moments (as after a few steps).
        state = fill(jax.eval_shape(opt.init, params))
        case(
            f"optax.{name}",
            lambda g, s, p, opt=opt: opt.update(g, s, p),
            grads,
            state,
            params,
        )
    case(
        "optax.softmax_cross_entropy",
        lambda x, i: optax.softmax_cross_entropy_with_integer_labels(x, i % 4),
        X,
        I[:, 0],
    )


_optax_cases()


# -- the checks ---------------------------------------------------------------------------------

#: custom_call targets the interpreter leaves unimplemented: the LAPACK kernels jax.numpy.linalg
#: lowers to on CPU (LU, triangular solve, Cholesky, QR, SVD, symmetric eigensolver). They are
#: library calls whose results (pivots, signs of singular vectors) are LAPACK's own; running one
#: raises a one-line ProgramError naming the target.
LAPACK_TARGETS = {
    "lapack_sgetrf_ffi",
    "lapack_strsm_ffi",
    "lapack_spotrf_ffi",
    "lapack_sgeqrf_ffi",
    "lapack_sorgqr_ffi",
    "lapack_sgesdd_ffi",
    "lapack_ssyevd_ffi",
}


def _leaves(tree: Any) -> list[Any]:
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(tree)]


#: shardwise.load_mlir cannot yet read complex-valued dense constants: jaxlib's MLIR bindings
#: raise "Can't cast unknown element type DenseTypedElementsAttr" when the importer
#: (python/shardwise/importers/mlir.py) reads such an attribute. Cases whose lowering holds one
#: are expected failures (their ops still count in the coverage test, read from the text).
def lowered(name: str) -> tuple[str, Any, Any]:
    """The StableHLO text of case ``name``, its module and JAX's lowering (to compile and run
    it)."""
    from shardwise import load_mlir

    c = CASES[name]
    low = jax.jit(c.fn, keep_unused=True).lower(*c.args)
    text = low.as_text()
    return text, load_mlir(text), low


def op_names(module: Any) -> set[str]:
    """Every op of every function (nested regions included); custom calls by target."""
    from shardwise.ir.attrs import unquote

    names = set()
    for f in module.funcs:
        for op in f.walk_nested():
            if op.name == "stablehlo.custom_call":
                names.add("custom_call:" + unquote(op.attributes.get("call_target_name", '""')))
            else:
                names.add(op.name)
    return names


_OP_IN_TEXT = re.compile(r"^\s*(?:%[^=]+=\s*)?\"?([a-z_]+\.[a-z_0-9.]+)\b", re.MULTILINE)


def op_names_of_text(text: str) -> set[str]:
    """``op_names`` read from the printed module (for modules the importer cannot load)."""
    names = {n for n in _OP_IN_TEXT.findall(text) if n not in ("func.func", "sdy.mesh")}
    targets = set(re.findall(r"custom_call @([\w.]+)", text)) | set(re.findall(r'call_target_name = "([^"]+)"', text))
    names.discard("stablehlo.custom_call")
    if re.search(r"^\s*return\b", text, re.MULTILINE):
        names.add("func.return")
    if re.search(r"=\s*call @", text):
        names.add("func.call")
    return names | {"custom_call:" + t for t in targets}


def custom_targets(module: Any) -> set[str]:
    return {n.split(":", 1)[1] for n in op_names(module) if n.startswith("custom_call:")}


def supported(name: str) -> bool:
    import shardwise.execute.ops  # noqa: F401
    from shardwise.execute.interpreter import _TERMINATORS, OPS
    from shardwise.execute.ops_misc import IDENTITY_TARGETS

    if name.startswith("custom_call:"):
        return name.split(":", 1)[1] in IDENTITY_TARGETS
    return name in OPS or name in _TERMINATORS


def _ulp(dtype: np.dtype[Any]) -> float:
    if dtype.kind == "c":
        dtype = np.dtype(np.float32) if dtype.itemsize == 8 else np.dtype(np.float64)
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).eps)


def test_case_count() -> None:
    assert len(CASES) >= 150, len(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_jax(name: str) -> None:
    from shardwise.errors import ProgramError
    from shardwise.execute import run

    c = CASES[name]
    text, module, low = lowered(name)
    inputs = _leaves(c.args)
    lapack = custom_targets(module) & LAPACK_TARGETS
    if lapack:
        with pytest.raises(ProgramError) as info:
            run(module, inputs)
        msg = str(info.value)
        assert "\n" not in msg and any(t in msg for t in lapack), msg
        return
    want = _leaves(low.compile()(*c.args))
    got = [np.asarray(g) for g in run(module, inputs)]
    assert len(got) == len(want)
    exact: list[np.ndarray] | None = None
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"result {i}: {g.dtype}{g.shape} vs JAX {w.dtype}{w.shape}"
        if c.compare == "shape":
            continue
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"result {i}")
            continue
        err = rel_error(g, w)
        if err <= 1e-5:
            continue
        if exact is None:
            exact = _exact(text, module, inputs, [r.shape for r in want])
        e = exact[i]
        jax_err, our_err = rel_error(w, e), rel_error(g, e)
        bound = max(1e-5, 3 * jax_err, _ulp(w.dtype))
        assert our_err <= bound, f"result {i}: error vs JAX {err:.2e}; vs exact: ours {our_err:.2e}, JAX {jax_err:.2e}"


def _exact(text: str, module: Any, inputs: list[np.ndarray], shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """The float64 answer: XLA running the widened program, or our own float64 run where XLA
    cannot compile the widened text."""
    from shardwise.execute import run

    try:
        return [np.asarray(r) for r in xla_run_f64(text, inputs, shapes)]
    except Exception:  # noqa: BLE001 - e.g. a widened program XLA rejects
        return [np.asarray(r) for r in run(module, inputs, wide=True)]


def test_every_lowered_op_is_supported() -> None:
    seen: dict[str, str] = {}
    for name in sorted(CASES):
        text, module, _ = lowered(name)
        for op in op_names(module) if module is not None else op_names_of_text(text):
            seen.setdefault(op, name)
    missing = {
        op: where for op, where in seen.items() if not supported(op) and op.split(":", 1)[-1] not in LAPACK_TARGETS
    }
    assert not missing, f"ops the interpreter lacks (op: first case): {missing}"
    # The allow-list is minimal: each of its targets is emitted by some case.
    assert LAPACK_TARGETS <= {op.split(":", 1)[1] for op in seen if op.startswith("custom_call:")}


def _xla_vs_ours(text: str, args: list[np.ndarray], rtol: float = 1e-5) -> None:
    from shardwise import load_mlir
    from shardwise.execute import run
    from xla_exec import xla_run

    module = load_mlir(text)
    shapes = [t.shape for t in module.func("main").result_types]
    want = xla_run(text, args, shapes)
    for wide in (False, True):
        got = run(module, args, wide=wide)
        for g, w in zip(got, want):
            err = rel_error(np.asarray(g), np.asarray(w))
            assert err <= rtol, f"wide={wide}: relative error {err:.2e}"


@pytest.mark.parametrize("lower", ["true", "false"])
@pytest.mark.parametrize("ty", ["f32", "complex<f32>"])
def test_stablehlo_cholesky_matches_xla(lower: str, ty: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """stablehlo.cholesky: JAX lowers Cholesky to LAPACK on CPU, so the op is written by hand."""
    import shardwise.execute.ops  # noqa: F401
    from shardwise.execute.interpreter import OPS
    from shardwise.execute.ops_linalg import cholesky

    assert OPS["stablehlo.cholesky"] is cholesky
    a = _rng.standard_normal((2, 4, 4)) + (1j * _rng.standard_normal((2, 4, 4)) if ty != "f32" else 0)
    a = a @ np.conj(np.swapaxes(a, -1, -2)) + 4 * np.eye(4)
    a = a.astype(np.float32 if ty == "f32" else np.complex64)
    t = f"tensor<2x4x4x{ty}>"
    text = f"""func.func @main(%a: {t}) -> {t} {{
  %0 = "stablehlo.cholesky"(%a) {{lower = {lower}}} : ({t}) -> {t}
  return %0 : {t}
}}"""
    _xla_vs_ours(text, [a])
    _xla_vs_ours(text, [-a.real.astype(np.float32) if ty == "f32" else -a])  # not positive definite: NaN


@pytest.mark.parametrize("left", ["true", "false"])
@pytest.mark.parametrize("lower", ["true", "false"])
@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
def test_stablehlo_triangular_solve_matches_xla(left: str, lower: str, transpose: str) -> None:
    a = (_rng.standard_normal((2, 4, 4)) + 3 * np.eye(4)).astype(np.float32)
    shape = (2, 4, 3) if left == "true" else (2, 3, 4)
    b = _rng.standard_normal(shape).astype(np.float32)
    for unit in ("true", "false"):
        bt = "tensor<" + "x".join(map(str, shape)) + "xf32>"
        text = f"""func.func @main(%a: tensor<2x4x4xf32>, %b: {bt}) -> {bt} {{
  %0 = "stablehlo.triangular_solve"(%a, %b) {{left_side = {left}, lower = {lower}, unit_diagonal = {unit}, transpose_a = #stablehlo<transpose {transpose}>}} : (tensor<2x4x4xf32>, {bt}) -> {bt}
  return %0 : {bt}
}}"""
        _xla_vs_ours(text, [a, b], rtol=1e-4)


WIDE_FAMILIES = (
    "fft.",
    "special.",
    "jnp.square",
    "jnp.nextafter",
    "lax.nextafter",
    "reduce.var",
    "reduce.std",
    "bf16.",
    "f16.",
)


@pytest.mark.parametrize("name", sorted(n for n in CASES if n.startswith(WIDE_FAMILIES)))
def test_case_runs_wide(name: str) -> None:
    """``run(..., wide=True)`` (every float in float64) runs the ops added for coverage: its
    results are within float32 (narrow floats: their own) rounding of JAX's."""
    from shardwise.execute import run

    c = CASES[name]
    _, module, low = lowered(name)
    want = _leaves(low.compile()(*c.args))
    got = run(module, _leaves(c.args), wide=True)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"result {i}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g.astype(w.dtype), w, err_msg=f"result {i}")
        else:
            assert rel_error(g, w) <= max(1e-4, 4 * _ulp(w.dtype)), f"result {i}: {rel_error(g, w):.2e}"
