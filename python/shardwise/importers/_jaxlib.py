"""The one place that gets jaxlib's MLIR context (StableHLO, sdy, func, chlo, mhlo registered,
Shardy's passes available)."""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Signals whose Python handlers are held back while jaxlib's extension modules load (issue 25:
#: a Ctrl-C that raised ``KeyboardInterrupt`` inside their initialisation crashed the process
#: or was swallowed by it).
_HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def held_signals() -> Iterator[None]:
    """In the main thread, SIGINT and SIGTERM (where they have Python handlers) are recorded
    instead of handled inside the block and re-raised, in order, when it ends: the interrupt
    arrives after the step, not inside it. Elsewhere a no-op. Signals with the default action
    (SIGTERM outside the CLI) still end the process at once, as the kernel delivers them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    saved: dict[signal.Signals, Callable[[int, Any], Any]] = {}

    def record(signum: int, frame: Any) -> None:
        pending.append(signum)

    for sig in _HELD:
        h = signal.getsignal(sig)
        if callable(h):
            saved[sig] = h
            signal.signal(sig, record)
    try:
        yield
    finally:
        for sig, h in saved.items():
            signal.signal(sig, h)
        for n in dict.fromkeys(pending):
            signal.raise_signal(n)


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
