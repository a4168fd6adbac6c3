"""CHLO ops JAX leaves in its StableHLO output (``chlo.sinh``, ``chlo.erf``, ...; CHLO spec:
github.com/openxla/stablehlo/blob/main/stablehlo/dialect/ChloOps.td) and the complex-number
ops ``stablehlo.complex`` / ``real`` / ``imag``. Floats narrower than 32 bits compute in float32.
``erf``, ``erfc`` and ``lgamma`` have no array-API function: they are evaluated with Python's
``math`` module in float64 on the host and converted back to the namespace."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from shardwise.execute._util import astype, upcast
from shardwise.execute.interpreter import Interpreter, register
from shardwise.ir.core import Op


def _unary(name: str, fn: Callable[[Any, Any], Any]) -> None:
    def impl(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
        xp, x = it.xp, args[0]
        return [astype(xp, fn(xp, upcast(xp, x)), x.dtype)]

    register(name, elementwise=True)(impl)


def _host(fn: Callable[[float], float]) -> Callable[[Any, Any], Any]:
    vec = np.frompyfunc(fn, 1, 1)

    def apply(xp: Any, x: Any) -> Any:
        host = np.asarray(astype(xp, x, xp.float64))
        out = vec(host).astype(np.float64)
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
    from shardwise.execute.ops_control import call_function

    return call_function(it, op, op.attributes.get("decomposition", ""), args)
