"""Deterministic random arguments for a function."""

from __future__ import annotations

from typing import Any

import numpy as np

from shardwise.errors import ProgramError
from shardwise.execute.dtypes import numpy_dtype
from shardwise.ir.core import Func
from shardwise.ir.types import TensorType

__all__ = ["random_inputs"]


def random_inputs(func: Func, seed: int = 0, *, xp: Any = None) -> list[Any]:
    """One array per argument of ``func``, of its shape and element type, from numpy's PCG64
    seeded with ``seed`` (the same seed gives the same arrays): floats standard normal,
    signed integers uniform in ``[-4, 4]``, unsigned in ``[0, 8]``, booleans fair coins,
    complex with normal real and imaginary parts. ``xp``: the namespace of the returned arrays
    (numpy when ``None``). ``ProgramError`` for an argument that is not a static tensor."""
    rng = np.random.default_rng(seed)
    out: list[Any] = []
    for i, v in enumerate(func.args):
        t = v.type
        if not isinstance(t, TensorType) or any(d < 0 for d in t.shape):
            raise ProgramError(f"@{func.sym_name} argument {i} has type {t}; random inputs need static tensor types")
        dtype = numpy_dtype(t.element_type)
        shape = t.shape
        if dtype == np.bool_:
            a: np.ndarray = rng.integers(0, 2, size=shape).astype(bool)
        elif dtype.kind == "i":
            a = rng.integers(-4, 5, size=shape).astype(dtype)
        elif dtype.kind == "u":
            a = rng.integers(0, 9, size=shape).astype(dtype)
        elif dtype.kind == "c":
            a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
        else:
            a = rng.standard_normal(shape).astype(np.float32).astype(dtype)
        out.append(a if xp is None else xp.asarray(a))
    return out
