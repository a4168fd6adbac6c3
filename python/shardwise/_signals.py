"""Holding Ctrl-C (SIGINT) and SIGTERM back over a step that must not be cut in the middle
(issue 25): jaxlib's extension modules while they load, and the creation of a temporary output
together with the record that lets it be removed (``shardwise.files``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["held_signals"]

#: The signals held back: a Ctrl-C that raised ``KeyboardInterrupt`` inside jaxlib's module
#: initialisation crashed the process or was swallowed by it (issue 25).
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
