"""The one place that gets jaxlib's MLIR context (StableHLO, sdy, func, chlo, mhlo registered,
Shardy's passes available)."""

from __future__ import annotations

import functools
from typing import Any

from shardwise._signals import held_signals


@functools.cache
def context() -> Any:
    """jaxlib's MLIR context, created once. ``ImportError`` with the install hint without jax.
    Loads under ``held_signals``: a Ctrl-C during the load raises ``KeyboardInterrupt`` when
    the load is done."""
    with held_signals():
        try:
            from jax._src.interpreters import mlir as jmlir
        except ImportError as e:
            raise ImportError(
                "reading and writing MLIR needs jaxlib's MLIR bindings: pip install 'shardwise[jax]'"
            ) from e
        return jmlir.make_ir_context()


def ir() -> Any:
    context()
    from jaxlib.mlir import ir as _ir

    return _ir
