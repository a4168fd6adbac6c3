"""MLIR element types (``f32``, ``bf16``, ``i1``, ``ui32``, ``complex<f32>``) to array dtypes.

``bf16`` (and the float8 types) need ``ml_dtypes`` (installed with jaxlib) and the numpy
namespace; the other types are array-API standard dtypes, so they work with any namespace.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shardwise.errors import ProgramError

__all__ = ["STANDARD", "numpy_dtype", "xp_dtype"]

#: Element types that are array-API standard dtypes, by the name the namespace uses.
STANDARD = {
    "i1": "bool",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "ui8": "uint8",
    "ui16": "uint16",
    "ui32": "uint32",
    "ui64": "uint64",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
    "complex<f32>": "complex64",
    "complex<f64>": "complex128",
}

_ML_DTYPES = {"bf16": "bfloat16", "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2"}


def numpy_dtype(element_type: str) -> np.dtype[Any]:
    """The numpy dtype of an MLIR element type; ``ProgramError`` for an unknown one."""
    if element_type in STANDARD:
        return np.dtype(STANDARD[element_type])
    if element_type in _ML_DTYPES:
        try:
            import ml_dtypes
        except ImportError:  # pragma: no cover - ml_dtypes comes with jaxlib
            raise ProgramError(f"element type {element_type} needs the ml_dtypes package") from None
        dtype: np.dtype[Any] = np.dtype(getattr(ml_dtypes, _ML_DTYPES[element_type]))
        return dtype
    raise ProgramError(f"unsupported element type {element_type!r}; supported: {sorted(STANDARD) + sorted(_ML_DTYPES)}")


def xp_dtype(xp: Any, element_type: str) -> Any:
    """The dtype object of namespace ``xp`` for ``element_type`` (``xp.float32``, ...)."""
    if element_type in STANDARD:
        return getattr(xp, STANDARD[element_type])
    if _is_numpy(xp):
        return numpy_dtype(element_type)
    raise ProgramError(f"element type {element_type} is not an array-API dtype; it needs the numpy namespace")


def _is_numpy(xp: Any) -> bool:
    return "numpy" in getattr(xp, "__name__", "")
