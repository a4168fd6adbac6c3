"""CHLO special functions JAX leaves in its StableHLO output: ``chlo.digamma``,
``chlo.polygamma``, ``chlo.zeta`` (Hurwitz zeta), ``chlo.bessel_i1e`` and ``chlo.bessel_i0e`` (CHLO spec:
github.com/openxla/stablehlo/blob/main/stablehlo/dialect/ChloOps.td; their semantics are those of
the decompositions in ChloLegalizeToStablehlo.cpp, which XLA runs).

They have no array-API function: each is evaluated in float64 with numpy on the host (series,
recurrences and asymptotic expansions accurate to a few float64 ulps, far below float32's
rounding) and converted back to the namespace and the operand's type, as ``chlo.erf`` is. The
special values follow the CHLO decompositions:

- ``digamma(x)``: NaN at 0 and the negative integers (the poles), reflection
  ``psi(1 - x) - pi / tan(pi x)`` for ``x < 0.5``;
- ``zeta(s, q)``: ``inf`` at ``s == 1``; NaN for ``s < 1``; for ``q <= 0``: NaN when ``s`` is
  not an integer, and at the poles (integer ``q``) ``inf`` for an even ``s``, NaN for an odd one;
  NaN for ``q = +inf``;
- ``polygamma(n, x)``: ``digamma(x)`` for ``n == 0``, ``(-1)^(n+1) n! zeta(n + 1, x)`` for a
  positive integer ``n``, NaN for any other ``n``;
- ``bessel_i1e(x) = exp(-|x|) I1(x)`` (odd in ``x``), ``bessel_i0e(x) = exp(-|x|) I0(x)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from shardwise.execute._util import astype
from shardwise.execute.devices import to_host
from shardwise.execute.registry import register
from shardwise.ir.core import Op

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter

#: Bernoulli numbers B_2, B_4, ..., B_24.
_BERNOULLI = [
    1 / 6,
    -1 / 30,
    1 / 42,
    -1 / 30,
    5 / 66,
    -691 / 2730,
    7 / 6,
    -3617 / 510,
    43867 / 798,
    -174611 / 330,
    854513 / 138,
    -236364091 / 2730,
]


def _to_host(xp: Any, x: Any) -> np.ndarray:
    return to_host(astype(xp, x, xp.float64))


def _from_host(xp: Any, y: np.ndarray, like: Any) -> Any:
    return astype(xp, xp.asarray(np.asarray(y, dtype=np.float64)), like.dtype)


def digamma(x: np.ndarray) -> np.ndarray:
    """psi(x) in float64: reflection below 0.5, the recurrence up to x >= 10, then the
    asymptotic series ``ln x - 1/(2x) - sum B_2k / (2k x^2k)``."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        pole = (x <= 0) & (x == np.floor(x))
        reflect = x < 0.5
        z = np.where(reflect, 1.0 - x, x)
        acc = np.zeros_like(z)
        for _ in range(10):
            small = z < 10.0
            acc = acc - np.where(small, 1.0 / np.where(small, z, 1.0), 0.0)
            z = np.where(small, z + 1.0, z)
        inv2 = 1.0 / (z * z)
        series = np.zeros_like(z)
        power = np.ones_like(z)
        for k, b in enumerate(_BERNOULLI[:8], start=1):
            power = power * inv2
            series = series + b / (2 * k) * power
        psi = np.log(z) - 0.5 / z - series + acc
        psi = np.where(reflect, psi - math.pi / np.tan(math.pi * x), psi)
        psi = np.where(pole, np.nan, psi)
        return np.where(np.isnan(x), np.nan, np.where(x == np.inf, np.inf, psi))


def zeta(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hurwitz zeta ``sum_k (q + k)^-s`` by Euler-Maclaurin summation: the first ``N`` terms
    (``N`` large enough that ``q + N >= 9``), the integral tail and 12 Bernoulli corrections."""
    s, q = np.broadcast_arrays(np.asarray(s, dtype=np.float64), np.asarray(q, dtype=np.float64))
    out = np.empty(s.shape, dtype=np.float64)
    flat_s, flat_q, flat_out = s.reshape(-1), q.reshape(-1), out.reshape(-1)
    for i in range(flat_s.size):
        flat_out[i] = _zeta1(float(flat_s[i]), float(flat_q[i]))
    return out


def _pow(a: float, b: float) -> float:
    """``a ** b``, ``inf`` where it overflows float64."""
    try:
        return math.pow(a, b)
    except OverflowError:
        return math.inf


def _integral(v: float) -> bool:
    """``v == floor(v)`` as XLA evaluates it (true for the infinities)."""
    return math.isinf(v) or v.is_integer()


def _zeta1(s: float, q: float) -> float:
    if math.isnan(s) or math.isnan(q):
        return math.nan
    if s == 1.0:
        return math.inf
    if s < 1.0:
        return math.nan
    if q <= 0.0:
        if not _integral(s):
            return math.nan
        if _integral(q):  # a pole: +inf only where the two one-sided limits agree
            return math.inf if s % 2.0 == 0.0 else math.nan
    if math.isinf(q):
        return math.nan  # CHLO's Euler-Maclaurin sum evaluates 0 * inf there
    if math.isinf(s):
        return math.inf if q < 1.0 else (1.0 if q == 1.0 else math.nan)
    n = max(9, math.ceil(9.0 - q))
    total: float = 0.0
    for k in range(n):
        total += _pow(q + k, -s)
    a = q + n
    total += _pow(a, 1.0 - s) / (s - 1.0) + 0.5 * _pow(a, -s)
    # sum_j B_2j / (2j)! * s (s+1) ... (s+2j-2) * a^(-s-2j+1)
    fact = 1.0
    rising = s
    apow = _pow(a, -s - 1.0)
    for j, b in enumerate(_BERNOULLI, start=1):
        fact *= (2 * j - 1) * (2 * j) if j > 1 else 2.0
        term = b / fact * rising * apow
        total += term
        if abs(term) <= 1e-17 * abs(total):
            break
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        apow /= a * a
    return total


def polygamma(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    n, x = np.broadcast_arrays(np.asarray(n, dtype=np.float64), np.asarray(x, dtype=np.float64))
    with np.errstate(all="ignore"):
        valid = (n >= 0) & (n == np.floor(n))
        order = np.where(valid, n, 1.0)
        sign = np.where(np.mod(order, 2.0) == 0.0, -1.0, 1.0)
        fact = np.exp(np.vectorize(math.lgamma, otypes=[np.float64])(order + 1.0))
        higher = sign * fact * zeta(order + 1.0, x)
        out = np.where(order == 0, digamma(x), higher)
        return np.where(valid, out, np.nan)


def bessel_ie(nu: int, x: np.ndarray) -> np.ndarray:
    """``exp(-|x|) I_nu(|x|)`` (``nu`` = 0 or 1): the power series up to |x| = 30 (its terms are
    all positive, so it loses nothing to cancellation), Hankel's asymptotic expansion above."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    out = np.empty_like(ax)
    small = ax <= 30.0
    xs = ax[small]
    if xs.size:
        half = xs / 2.0
        term = half**nu / math.factorial(nu)
        total = term.copy()
        for k in range(1, 120):
            term = term * half * half / (k * (k + nu))
            total = total + term
        out[small] = total * np.exp(-xs)
    xl = ax[~small]
    if xl.size:
        mu = 4.0 * nu * nu
        term = np.ones_like(xl)
        total = term.copy()
        for k in range(1, 30):
            term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * xl)
            total = total + term
        out[~small] = total / np.sqrt(2.0 * math.pi * xl)
    out = np.where(np.isnan(x), np.nan, out)
    return np.where(x < 0, -out, out) if nu % 2 == 1 else out


def _unary(name: str, fn: Callable[[np.ndarray], np.ndarray]) -> None:
    def impl(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
        xp, x = it.xp, args[0]
        return [_from_host(xp, fn(_to_host(xp, x)), x)]

    impl.__doc__ = f"``{name}`` in float64 on the host (see the module docstring)."
    register(name, elementwise=True)(impl)


def _binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
    def impl(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
        xp, a, b = it.xp, args[0], args[1]
        return [_from_host(xp, fn(_to_host(xp, a), _to_host(xp, b)), a)]

    impl.__doc__ = f"``{name}`` in float64 on the host (see the module docstring)."
    register(name, elementwise=True)(impl)


_unary("chlo.digamma", digamma)
_unary("chlo.bessel_i1e", lambda x: bessel_ie(1, x))
_unary("chlo.bessel_i0e", lambda x: bessel_ie(0, x))
_binary("chlo.zeta", zeta)
_binary("chlo.polygamma", polygamma)
