"""CHLO ops JAX leaves in its StableHLO output (``chlo.sinh``, ``chlo.erf``, ...; CHLO spec:
github.com/openxla/stablehlo/blob/main/stablehlo/dialect/ChloOps.td) and the complex-number
ops ``stablehlo.complex`` / ``real`` / ``imag``. Floats narrower than 32 bits compute in float32.
``erf``, ``erfc`` and ``lgamma`` have no array-API function: they are evaluated with Python's
``math`` module in float64 on the host and converted back to the namespace."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from shardwise.execute._util import astype, bitcast, is_complex, itemsize, uint_of, upcast
from shardwise.execute.devices import to_host
from shardwise.execute.ops_control import call_function
from shardwise.execute.registry import register
from shardwise.ir.core import Op

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


def _unary(name: str, fn: Callable[[Any, Any], Any]) -> None:
    def impl(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
        xp, x = it.xp, args[0]
        return [astype(xp, fn(xp, upcast(xp, x)), x.dtype)]

    register(name, elementwise=True)(impl)


def _host(fn: Callable[[float], float]) -> Callable[[Any, Any], Any]:
    vec = np.frompyfunc(fn, 1, 1)

    def apply(xp: Any, x: Any) -> Any:
        host = to_host(astype(xp, x, xp.float64))
        out = np.asarray(vec(host), dtype=np.float64)  # a 0-d input gives a Python float
        return astype(xp, xp.asarray(out), x.dtype)

    return apply


def _lgamma(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # poles: 0, -1, -2, ...
        return math.inf


for _name, _fn in {
    "chlo.sinh": lambda xp, x: xp.sinh(x),
    "chlo.cosh": lambda xp, x: xp.cosh(x),
    "chlo.tan": lambda xp, x: xp.tan(x),
    "chlo.asin": lambda xp, x: xp.asin(x),
    "chlo.acos": lambda xp, x: xp.acos(x),
    "chlo.atan": lambda xp, x: xp.atan(x),
    "chlo.asinh": lambda xp, x: xp.asinh(x),
    "chlo.acosh": lambda xp, x: xp.acosh(x),
    "chlo.atanh": lambda xp, x: xp.atanh(x),
    "chlo.erf": _host(math.erf),
    "chlo.erfc": _host(math.erfc),
    "chlo.lgamma": _host(_lgamma),
}.items():
    _unary(_name, _fn)


@register("chlo.square", elementwise=True)
def _square(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """``x * x`` (CHLO ``square``). A complex ``a + bi`` squares as ``(a - b)(a + b) + 2abi``,
    the formula of CHLO's decomposition (exact real part when ``|a| == |b|``)."""
    xp, x = it.xp, args[0]
    if is_complex(xp, x):
        a, b = xp.real(x), xp.imag(x)
        re, im = (a - b) * (a + b), 2 * a * b
        return [astype(xp, re, x.dtype) + astype(xp, im, x.dtype) * xp.asarray(1j, dtype=x.dtype)]
    y = upcast(xp, x)
    return [astype(xp, y * y, x.dtype)]


@register("chlo.conj", elementwise=True)
def _conj(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Complex conjugate (CHLO ``conj``); the identity on real operands."""
    xp, x = it.xp, args[0]
    return [xp.conj(x) if is_complex(xp, x) else x]


@register("chlo.next_after", elementwise=True)
def _next_after(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """The representable value after ``x`` in the direction of ``y`` (CHLO ``next_after``, C
    ``nextafter``), on the bits of the element type (so also bf16/f16, and under ``wide`` on
    the declared type): NaN if either is NaN; ``y`` if ``x == y``; the smallest subnormal with
    ``y``'s sign if ``x`` is zero; otherwise the magnitude bits of ``x`` step by one, up when
    ``|y| > |x|`` with the same sign, down otherwise."""
    xp = it.xp
    declared = it.declared_dtype(op.operands[0])
    x, y = astype(xp, args[0], declared), astype(xp, args[1], declared)
    size = itemsize(xp, declared)
    u = uint_of(xp, size)
    xb, yb = bitcast(x, u), bitcast(y, u)
    sign_mask = xp.asarray(1 << (8 * size - 1), dtype=u)
    one = xp.asarray(1, dtype=u)
    xf, yf = upcast(xp, x), upcast(xp, y)
    nan = xp.isnan(xf) | xp.isnan(yf)
    x_mag = xb & ~sign_mask
    # Moving away from zero adds one to the magnitude bits; toward zero subtracts one.
    away = (xf < yf) == (xf > 0)
    stepped = xp.where(away, xb + one, xb - one)
    zero_x = x_mag == 0
    tiny = (yb & sign_mask) | one
    out = xp.where(zero_x, tiny, stepped)
    out = xp.where(xf == yf, yb, out)
    res = xp.where(nan, xf + yf, upcast(xp, bitcast(out, declared)))
    return [astype(xp, res, it.result_dtype(op))]


@register("chlo.is_inf", elementwise=True)
def _is_inf(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return [it.xp.isinf(upcast(it.xp, args[0]))]


@register("chlo.is_pos_inf", elementwise=True)
def _is_pos_inf(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    x = upcast(it.xp, args[0])
    return [it.xp.isinf(x) & (x > 0)]


@register("chlo.is_neg_inf", elementwise=True)
def _is_neg_inf(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    x = upcast(it.xp, args[0])
    return [it.xp.isinf(x) & (x < 0)]


@register("stablehlo.complex", elementwise=True)
def _complex(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp = it.xp
    re, im = args
    ctype = xp.complex64 if re.dtype == xp.float32 else xp.complex128
    return [astype(xp, re, ctype) + astype(xp, im, ctype) * xp.asarray(1j, dtype=ctype)]


@register("stablehlo.real", elementwise=True)
def _real(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return [it.xp.real(args[0])]


@register("stablehlo.imag", elementwise=True)
def _imag(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return [it.xp.imag(args[0])]


@register("stablehlo.composite")
def _composite(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Runs the ``decomposition`` function (spec: the composite's semantics)."""
    return call_function(it, op, op.attributes.get("decomposition", ""), args)
