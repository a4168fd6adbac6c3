"""Where the in-process simulator keeps its arrays: ``"cpu"`` (numpy) or ``"cuda"`` (CuPy on
the current GPU, every simulated rank on that one GPU). The interpreter is written against the
array API (``array_api_compat``), so a device is only a namespace plus the copies in and out.

The NCCL backend (``shardwise.execute.nccl``) is the other GPU path: one GPU per MPI rank."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shardwise.errors import ShardwiseError

__all__ = ["DEVICES", "array_namespace", "cuda_available", "to_device", "to_host"]

#: The devices ``simulate``-based checks accept.
DEVICES = ("cpu", "cuda")


def _cupy() -> Any:
    try:
        import cupy  # type: ignore[import-not-found,unused-ignore]
    except ImportError as e:
        raise ShardwiseError(f"device 'cuda' needs CuPy: pip install 'shardwise[cuda]' ({e})") from None
    return cupy


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device (False without CuPy, a driver
    or a GPU)."""
    try:
        return int(_cupy().cuda.runtime.getDeviceCount()) > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device: all mean "no"
        return False


def array_namespace(device: str) -> Any:
    """The array-API namespace of ``device``: ``array_api_compat.numpy`` for ``"cpu"``,
    ``array_api_compat.cupy`` for ``"cuda"``.

    Raises ``ShardwiseError`` for another name, or for ``"cuda"`` without CuPy or a GPU (one
    line, saying which)."""
    if device == "cpu":
        import array_api_compat.numpy as xp_numpy

        return xp_numpy
    if device != "cuda":
        raise ShardwiseError(f"device {device!r}: expected one of {DEVICES}")
    cupy = _cupy()
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:  # noqa: BLE001 - CUDA driver errors have no common base class
        raise ShardwiseError(f"device 'cuda': CuPy found no usable CUDA driver ({type(e).__name__}: {e})") from None
    if count == 0:
        raise ShardwiseError("device 'cuda': CuPy sees no CUDA GPU")
    import array_api_compat.cupy as xp_cupy

    return xp_cupy


def to_device(xp: Any, arrays: Sequence[Any]) -> list[Any]:
    """``arrays`` (numpy or any array ``xp.asarray`` takes) as arrays of namespace ``xp``."""
    return [xp.asarray(a) for a in arrays]


def to_host(x: Any) -> np.ndarray:
    """``x`` as a numpy array: a CuPy array is copied from its GPU (``.get()``), anything else
    goes through ``np.asarray``."""
    if not isinstance(x, np.ndarray) and type(x).__module__.split(".")[0] == "cupy":
        return np.asarray(x.get())
    return np.asarray(x)
