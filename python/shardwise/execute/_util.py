"""Small array helpers shared by the op families (array-API only, plus ``.view`` for bit
reinterpretation, which numpy and cupy arrays both have)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from shardwise.errors import ProgramError

__all__ = [
    "bitcast",
    "int_info",
    "is_bool",
    "is_complex",
    "is_float",
    "is_int",
    "is_low_float",
    "quiet_fp",
    "to_int",
    "uint_of",
    "upcast",
]


def itemsize(xp: Any, dtype: Any) -> int:
    """Bytes per element of ``dtype`` (array-API dtypes have no ``itemsize``: ``finfo`` /
    ``iinfo`` bits are used; numpy-only dtypes such as bfloat16 have one)."""
    size = getattr(dtype, "itemsize", None)
    if isinstance(size, int):
        return size
    if dtype == xp.bool:
        return 1
    if xp.isdtype(dtype, "integral"):
        return int(xp.iinfo(dtype).bits) // 8
    if xp.isdtype(dtype, "complex floating"):
        return 2 * (int(xp.finfo(dtype).bits) // 8)
    return int(xp.finfo(dtype).bits) // 8


def nbytes(xp: Any, x: Any) -> int:
    """Bytes held by array ``x``."""
    n = 1
    for d in x.shape:
        n *= int(d)
    return n * itemsize(xp, x.dtype)


def is_bool(xp: Any, x: Any) -> bool:
    return bool(x.dtype == xp.bool)


def is_complex(xp: Any, x: Any) -> bool:
    return x.dtype in (xp.complex64, xp.complex128)


def is_int(xp: Any, x: Any) -> bool:
    return not is_bool(xp, x) and not is_float(xp, x) and bool(xp.isdtype(x.dtype, "integral"))


def is_float(xp: Any, x: Any) -> bool:
    """Real floating point, including ``bfloat16`` (not an array-API dtype)."""
    if x.dtype in (xp.float32, xp.float64) or x.dtype == getattr(xp, "float16", None):
        return True
    return getattr(x.dtype, "name", "") in ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def is_low_float(xp: Any, x: Any) -> bool:
    """A float narrower than 32 bits: computed in float32 and rounded back, as XLA's CPU backend does."""
    return is_float(xp, x) and itemsize(xp, x.dtype) < 4


def upcast(xp: Any, x: Any) -> Any:
    return astype(xp, x, xp.float32) if is_low_float(xp, x) else x


def uint_of(xp: Any, itemsize: int) -> Any:
    return {1: xp.uint8, 2: xp.uint16, 4: xp.uint32, 8: xp.uint64}[itemsize]


def int_of(xp: Any, itemsize: int) -> Any:
    return {1: xp.int8, 2: xp.int16, 4: xp.int32, 8: xp.int64}[itemsize]


def bitcast(x: Any, dtype: Any) -> Any:
    """Reinterprets the bits of ``x`` as ``dtype`` (same element size)."""
    view = getattr(x, "view", None)
    if view is None:
        raise ProgramError(f"bit reinterpretation needs arrays with .view (numpy, cupy); got {type(x).__name__}")
    return view(dtype)


def to_int(x: Any) -> int:
    """A 0-d (or one-element) integer array as a Python int."""
    import array_api_compat

    return int(array_api_compat.array_namespace(x).reshape(x, ()))


def int_info(xp: Any, dtype: Any) -> tuple[int, int]:
    info = xp.iinfo(dtype)
    return int(info.min), int(info.max)


def astype(xp: Any, x: Any, dtype: Any) -> Any:
    """``xp.astype``, falling back to the array's own ``astype`` for dtypes outside the array
    API (``bfloat16`` with numpy)."""
    if x.dtype == dtype:
        return x
    try:
        return xp.astype(x, dtype)
    except TypeError:
        return x.astype(dtype)


def scalar_of(xp: Any, dtype: Any) -> Any:
    """A 0-d zero of ``dtype`` (to query its kind and size), also for ``bfloat16``."""
    try:
        return xp.zeros((), dtype=dtype)
    except TypeError:
        import numpy as np

        return np.zeros((), dtype=dtype)


def zeros(xp: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """``xp.zeros``, also for ``bfloat16`` (numpy namespace)."""
    try:
        return xp.zeros(shape, dtype=dtype)
    except TypeError:
        import numpy as np

        return np.zeros(shape, dtype=dtype)


def accumulate(xp: Any, x: Any) -> Any:
    """``x`` widened for accumulation: real floats of up to 32 bits to float64 (sums and dot
    products are then rounded once, to the result type: a reference result at least as
    accurate as XLA's float32 accumulation)."""
    if is_float(xp, x) and itemsize(xp, x.dtype) <= 4:
        return astype(xp, x, xp.float64)
    if is_complex(xp, x) and x.dtype == xp.complex64:
        return astype(xp, x, xp.complex128)
    return x


@contextlib.contextmanager
def quiet_fp() -> Iterator[None]:
    """numpy floating-point warnings off: overflow to inf, 0/0 = nan are results, not errors."""
    import numpy as np

    with np.errstate(all="ignore"):
        yield
