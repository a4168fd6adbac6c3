"""Elementwise ops: unary and binary math, logic and shifts, compare, select, clamp, convert,
bitcast_convert, reduce_precision (StableHLO spec, "Elementwise" ops). Floats narrower than
32 bits are computed in float32 and rounded to the result type, as XLA's CPU backend does.
Every implementation is shape-agnostic (broadcasts 0-d operands), so reduction and comparator
bodies made of these ops run on whole arrays."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shardwise.errors import ProgramError
from shardwise.execute._util import (
    astype,
    bitcast,
    int_info,
    int_of,
    is_bool,
    is_complex,
    is_float,
    is_int,
    is_low_float,
    itemsize,
    scalar_of,
    uint_of,
    upcast,
)
from shardwise.execute.attrs import parse_enum, parse_int
from shardwise.execute.registry import register
from shardwise.ir.core import Op

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


def _unary_float(name: str, fn: Callable[[Any, Any], Any]) -> None:
    def impl(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
        xp = it.xp
        x = args[0]
        return [astype(xp, fn(xp, upcast(xp, x)), x.dtype)]

    register(f"stablehlo.{name}", elementwise=True)(impl)


def _cbrt(xp: Any, x: Any) -> Any:
    f = getattr(xp, "cbrt", None)
    return f(x) if f is not None else xp.sign(x) * xp.abs(x) ** (1.0 / 3.0)


def _logistic(xp: Any, x: Any) -> Any:
    return 1.0 / (1.0 + xp.exp(-x))


def _round_afz(xp: Any, x: Any) -> Any:
    t = xp.trunc(x)
    return xp.where(xp.abs(x - t) >= 0.5, t + xp.sign(x), t)


for _name, _fn in {
    "cosine": lambda xp, x: xp.cos(x),
    "sine": lambda xp, x: xp.sin(x),
    "tan": lambda xp, x: xp.tan(x),
    "tanh": lambda xp, x: xp.tanh(x),
    "exponential": lambda xp, x: xp.exp(x),
    "exponential_minus_one": lambda xp, x: xp.expm1(x),
    "log": lambda xp, x: xp.log(x),
    "log_plus_one": lambda xp, x: xp.log1p(x),
    "logistic": _logistic,
    "sqrt": lambda xp, x: xp.sqrt(x),
    "rsqrt": lambda xp, x: 1.0 / xp.sqrt(x),
    "cbrt": _cbrt,
    "floor": lambda xp, x: xp.floor(x),
    "ceil": lambda xp, x: xp.ceil(x),
    "round_nearest_even": lambda xp, x: xp.round(x),
    "round_nearest_afz": _round_afz,
}.items():
    _unary_float(_name, _fn)


@register("stablehlo.negate", elementwise=True)
def _negate(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp, x = it.xp, args[0]
    return [astype(xp, -upcast(xp, x), x.dtype)]


@register("stablehlo.abs", elementwise=True)
def _abs(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp, x = it.xp, args[0]
    if is_complex(xp, x):
        return [xp.abs(x)]  # the modulus, of the real element type
    return [astype(xp, xp.abs(upcast(xp, x)), x.dtype)]


@register("stablehlo.sign", elementwise=True)
def _sign(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp, x = it.xp, args[0]
    if is_float(xp, x):
        y = upcast(xp, x)
        return [astype(xp, xp.where(xp.isnan(y), y, xp.where(y == 0, y, xp.sign(y))), x.dtype)]
    return [xp.sign(x)]


@register("stablehlo.is_finite", elementwise=True)
def _is_finite(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return [it.xp.isfinite(upcast(it.xp, args[0]))]


@register("stablehlo.not", elementwise=True)
def _not(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp, x = it.xp, args[0]
    return [xp.logical_not(x) if is_bool(xp, x) else xp.bitwise_invert(x)]


@register("stablehlo.popcnt", elementwise=True)
def _popcnt(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp, x = it.xp, args[0]
    u = bitcast(x, uint_of(xp, itemsize(xp, x.dtype)))
    count = xp.zeros(u.shape, dtype=u.dtype)
    for b in range(8 * itemsize(xp, x.dtype)):
        count = count + ((u >> b) & 1)
    return [astype(xp, count, x.dtype)]


@register("stablehlo.count_leading_zeros", elementwise=True)
def _clz(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp, x = it.xp, args[0]
    bits = 8 * itemsize(xp, x.dtype)
    u = bitcast(x, uint_of(xp, itemsize(xp, x.dtype)))
    count = xp.full(u.shape, bits, dtype=xp.int64)
    for b in range(bits):  # the highest set bit decides
        count = xp.where(((u >> b) & 1) == 1, bits - 1 - b, count)
    return [astype(xp, count, x.dtype)]


def _binary(name: str, fn: Callable[[Any, Any, Any], Any]) -> None:
    def impl(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
        xp = it.xp
        a, b = args
        return [astype(xp, fn(xp, upcast(xp, a), upcast(xp, b)), a.dtype)]

    register(f"stablehlo.{name}", elementwise=True)(impl)


def _logic(which: str) -> Callable[[Any, Any, Any], Any]:
    def fn(xp: Any, a: Any, b: Any) -> Any:
        if is_bool(xp, a):
            return getattr(xp, f"logical_{which}")(a, b)
        return getattr(xp, f"bitwise_{which}")(a, b)

    return fn


def _divide(xp: Any, a: Any, b: Any) -> Any:
    """Floats: IEEE division. Integers: truncation toward zero; x/0 is -1 (all bits set) and
    INT_MIN/-1 is INT_MIN, as XLA computes them."""
    if not is_int(xp, a):
        return a / b
    zero = b == 0
    safe = xp.where(zero, xp.ones_like(b), b)
    if xp.isdtype(a.dtype, "signed integer"):
        lo, _ = int_info(xp, a.dtype)
        overflow = (a == lo) & (safe == -1)
        safe = xp.where(overflow, xp.ones_like(b), safe)
        q = _trunc_div(xp, a, safe)
        q = xp.where(overflow, a, q)
    else:
        q = a // safe
    return xp.where(
        zero,
        xp.full_like(a, -1) if xp.isdtype(a.dtype, "signed integer") else xp.full_like(a, int_info(xp, a.dtype)[1]),
        q,
    )


def _trunc_div(xp: Any, a: Any, b: Any) -> Any:
    q = a // b
    fix = ((a % b) != 0) & ((a < 0) != (b < 0))
    return xp.where(fix, q + 1, q)


def _remainder(xp: Any, a: Any, b: Any) -> Any:
    """The remainder with the sign of the dividend (C ``fmod``); integer x % 0 is x."""
    if is_int(xp, a):
        zero = b == 0
        safe = xp.where(zero, xp.ones_like(b), b)
        if xp.isdtype(a.dtype, "signed integer"):
            lo, _ = int_info(xp, a.dtype)
            safe = xp.where((a == lo) & (safe == -1), xp.ones_like(b), safe)
            r = a - _trunc_div(xp, a, safe) * safe
        else:
            r = a % safe
        return xp.where(zero, a, r)
    fmod = getattr(xp, "fmod", None)
    if fmod is not None:
        return fmod(a, b)
    return a - b * xp.trunc(a / b)


def _power(xp: Any, a: Any, b: Any) -> Any:
    """Integers: exact repeated squaring; a negative exponent gives 0 unless the base is +-1
    (XLA's integer pow)."""
    if not is_int(xp, a):
        return xp.pow(a, b)
    a, b = xp.broadcast_arrays(a, b)
    result = xp.ones_like(a)
    base = a
    e = xp.where(b < 0, xp.zeros_like(b), b)
    for _ in range(8 * itemsize(xp, a.dtype)):
        result = xp.where((e & 1) == 1, result * base, result)
        base = base * base
        e = e >> 1
    neg = b < 0
    if xp.isdtype(a.dtype, "signed integer"):
        neg_val = xp.where(
            a == 1,
            xp.ones_like(a),
            xp.where(a == -1, xp.where((b & 1) == 1, -xp.ones_like(a), xp.ones_like(a)), xp.zeros_like(a)),
        )
        result = xp.where(neg, neg_val, result)
    return result


def _shift(kind: str) -> Callable[[Any, Any, Any], Any]:
    """Shift amounts outside [0, bits) give 0, or the sign fill for an arithmetic right shift."""

    def fn(xp: Any, a: Any, b: Any) -> Any:
        bits = 8 * itemsize(xp, a.dtype)
        u = uint_of(xp, itemsize(xp, a.dtype))
        ua = bitcast(xp.asarray(a), u) if a.dtype != u else a
        ub = astype(xp, b, u) if b.dtype != u else b
        big = ub >= bits
        amount = xp.where(big, xp.zeros_like(ub), ub)
        if kind == "left":
            r = xp.where(big, xp.zeros_like(ua), ua << amount)
            return bitcast(r, a.dtype) if a.dtype != u else r
        if kind == "right_logical":
            r = xp.where(big, xp.zeros_like(ua), ua >> amount)
            return bitcast(r, a.dtype) if a.dtype != u else r
        s = astype(xp, amount, a.dtype) if a.dtype != u else amount
        fill = xp.where(a < 0, xp.full_like(a, -1), xp.zeros_like(a))
        return xp.where(big, fill, a >> s)

    return fn


def _atan2(xp: Any, a: Any, b: Any) -> Any:
    return xp.atan2(a, b)


for _name, _bfn in {
    "add": lambda xp, a, b: xp.logical_or(a, b) if is_bool(xp, a) else a + b,
    "subtract": lambda xp, a, b: a - b,
    "multiply": lambda xp, a, b: xp.logical_and(a, b) if is_bool(xp, a) else a * b,
    "divide": _divide,
    "remainder": _remainder,
    "power": _power,
    "maximum": lambda xp, a, b: xp.logical_or(a, b) if is_bool(xp, a) else xp.maximum(a, b),
    "minimum": lambda xp, a, b: xp.logical_and(a, b) if is_bool(xp, a) else xp.minimum(a, b),
    "atan2": _atan2,
    "and": _logic("and"),
    "or": _logic("or"),
    "xor": _logic("xor"),
    "shift_left": _shift("left"),
    "shift_right_logical": _shift("right_logical"),
    "shift_right_arithmetic": _shift("right_arithmetic"),
}.items():
    _binary(_name, _bfn)


@register("stablehlo.select", elementwise=True)
def _select(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    pred, a, b = args
    return [it.xp.where(pred, a, b)]


@register("stablehlo.clamp", elementwise=True)
def _clamp(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp = it.xp
    lo, x, hi = args
    return [astype(xp, xp.minimum(xp.maximum(upcast(xp, x), upcast(xp, lo)), upcast(xp, hi)), x.dtype)]


def total_order_key(xp: Any, x: Any) -> Any:
    """Signed integers ordered as IEEE-754 totalOrder orders the floats ``x`` (-NaN < -inf <
    ... < -0 < +0 < ... < +inf < +NaN)."""
    i = bitcast(x, int_of(xp, itemsize(xp, x.dtype)))
    _, hi = int_info(xp, i.dtype)
    return xp.where(i < 0, i ^ xp.full_like(i, hi), i)


def _total_order_compare(xp: Any, direction: str, a: Any, b: Any) -> Any:
    """IEEE-754 totalOrder comparison from values and sign bits (-NaN < -inf < ... < -0 < +0 <
    ... < +inf < +NaN); NaNs of one sign compare equal (payloads are not ordered)."""
    sa, sb = xp.signbit(a), xp.signbit(b)
    zero, one, two = (xp.asarray(v, dtype=xp.int8) for v in (0, 1, 2))
    ca = xp.where(xp.isnan(a), xp.where(sa, zero, two), one)
    cb = xp.where(xp.isnan(b), xp.where(sb, zero, two), one)
    regular = (ca == 1) & (cb == 1)
    lt = (ca < cb) | (regular & ((a < b) | ((a == b) & sa & ~sb)))
    gt = (ca > cb) | (regular & ((a > b) | ((a == b) & ~sa & sb)))
    eq = ~lt & ~gt
    return {"LT": lt, "GT": gt, "LE": lt | eq, "GE": gt | eq, "EQ": eq, "NE": ~eq}[direction]


@register("stablehlo.compare", elementwise=True)
def _compare(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp = it.xp
    a, b = args
    direction = parse_enum(op.attributes["comparison_direction"])
    ctype = parse_enum(op.attributes["compare_type"]) if "compare_type" in op.attributes else None
    if is_float(xp, a):
        if ctype == "TOTALORDER":
            return [_total_order_compare(xp, direction, upcast(xp, a), upcast(xp, b))]
        else:
            a, b = upcast(xp, a), upcast(xp, b)
    fn = {
        "EQ": xp.equal,
        "NE": xp.not_equal,
        "GE": xp.greater_equal,
        "GT": xp.greater,
        "LE": xp.less_equal,
        "LT": xp.less,
    }.get(direction)
    if fn is None:
        raise ProgramError(f"{op.where()}: unknown comparison direction {direction!r}")
    if is_bool(xp, a) and direction not in ("EQ", "NE"):
        a, b = astype(xp, a, xp.int8), astype(xp, b, xp.int8)
    return [fn(a, b)]


def convert(xp: Any, x: Any, dtype: Any) -> Any:
    """StableHLO ``convert``: float -> integer truncates toward zero, saturating at the integer
    range, NaN -> 0 (XLA); anything -> bool is ``!= 0``; complex -> real keeps the real part."""
    if x.dtype == dtype:
        return x
    probe = scalar_of(xp, dtype)
    if is_complex(xp, x) and not is_complex(xp, probe):
        x = xp.real(x)
    if dtype == xp.bool:
        return x != 0
    if is_float(xp, x) and is_int(xp, probe):
        lo, hi = int_info(xp, dtype)
        y = astype(xp, x, xp.float64)
        y = xp.where(xp.isnan(y), xp.zeros_like(y), xp.trunc(y))
        low = y <= lo
        high = y >= hi
        y = xp.where(low | high, xp.zeros_like(y), y)
        out = astype(xp, y, dtype)
        out = xp.where(low, xp.full_like(out, lo), out)
        return xp.where(high, xp.full_like(out, hi), out)
    if is_low_float(xp, x) or is_low_float(xp, probe):
        # bfloat16 / float16 convert through float32 (exact for every narrower source; wide
        # integers go through float64 first).
        wide = xp.float64 if is_int(xp, x) and itemsize(xp, x.dtype) >= 4 else xp.float32
        return astype(xp, astype(xp, x, wide), dtype)
    return astype(xp, x, dtype)


@register("stablehlo.convert", elementwise=True)
def _convert(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return [convert(it.xp, args[0], it.result_dtype(op))]


@register("stablehlo.bitcast_convert")
def _bitcast_convert(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Reinterprets the bits; between element sizes the last dimension splits or merges
    (little-endian element order, as XLA on little-endian hosts)."""
    xp, x = it.xp, args[0]
    want = it.declared_dtype(op.results[0])
    if it.wide:  # the bits are those of the declared types
        x = astype(xp, x, it.declared_dtype(op.operands[0]))
    out = bitcast(xp.reshape(x, (-1,)) if x.ndim else xp.reshape(x, (1,)), want)
    return [xp.reshape(out, op.results[0].shape)]


@register("stablehlo.reduce_precision", elementwise=True)
def _reduce_precision(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Rounds to ``mantissa_bits`` (round to nearest even) and clamps to the exponent range of
    ``exponent_bits`` (overflow -> inf, underflow -> signed zero); NaN stays NaN (XLA's
    elemental emitter algorithm)."""
    xp, x = it.xp, args[0]
    ebits = parse_int(op.attributes["exponent_bits"])
    mbits = parse_int(op.attributes["mantissa_bits"])
    f = upcast(xp, x)
    size = itemsize(xp, f.dtype)
    src_m, src_e = (23, 8) if size == 4 else (52, 11)
    u = uint_of(xp, size)
    bits = bitcast(f, u)

    def c(v: int) -> Any:
        return xp.asarray(v, dtype=u)

    if mbits < src_m:
        last = 1 << (src_m - mbits)
        bias = (last >> 1) - 1
        last_bit = (bits & c(last)) >> c(src_m - mbits)
        mask = ((1 << (8 * size)) - 1) ^ (last - 1)
        bits = (bits + last_bit + c(bias)) & c(mask)
    if ebits < src_e:
        full_bias = (1 << (src_e - 1)) - 1
        red_bias = (1 << (ebits - 1)) - 1
        max_e = full_bias + red_bias
        min_e = full_bias - red_bias
        exp_mask = ((1 << src_e) - 1) << src_m
        sign = c(1 << (8 * size - 1))
        e = bits & c(exp_mask)
        over = e > c(max_e << src_m)
        under = e <= c(min_e << src_m)
        signed_zero = bits & sign
        signed_inf = signed_zero | c(exp_mask)
        bits = xp.where(over, signed_inf, xp.where(under, signed_zero, bits))
    out = bitcast(bits, f.dtype)
    out = xp.where(xp.isnan(f), f, out) if mbits > 0 else out
    return [astype(xp, out, x.dtype)]


@register("chlo.erf_inv", elementwise=True)
def _erf_inv(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Inverse error function, by M. Giles' single-precision polynomial approximation
    ("Approximating the erfinv function", GPU Computing Gems, 2011) in float64, the same
    approximation XLA uses; |x| = 1 gives +-inf."""
    xp, x = it.xp, args[0]
    y = astype(xp, x, xp.float64)
    w = -xp.log((1.0 - y) * (1.0 + y))
    small = w < 5.0
    ws = w - 2.5
    wl = xp.sqrt(xp.where(small, xp.full_like(w, 5.0), w)) - 3.0
    cs = [
        2.81022636e-08,
        3.43273939e-07,
        -3.5233877e-06,
        -4.39150654e-06,
        0.00021858087,
        -0.00125372503,
        -0.00417768164,
        0.246640727,
        1.50140941,
    ]
    cl = [
        -0.000200214257,
        0.000100950558,
        0.00134934322,
        -0.00367342844,
        0.00573950773,
        -0.0076224613,
        0.00943887047,
        1.00167406,
        2.83297682,
    ]
    ps = xp.full_like(w, cs[0])
    pl = xp.full_like(w, cl[0])
    for a, b in zip(cs[1:], cl[1:]):
        ps = ps * ws + a
        pl = pl * wl + b
    r = xp.where(small, ps, pl) * y
    r = xp.where(xp.abs(y) == 1.0, y * math.inf, r)
    return [astype(xp, r, x.dtype)]
