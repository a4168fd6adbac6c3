"""The toulbar2 worker process of :mod:`shardwise.search.wcsp` (``python -m
shardwise.search.wcsp_worker``); kept apart so that the package never imports the module it runs."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

from shardwise.search.wcsp import Network, recv, send


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the thread that started it ends (its parent
    process exiting, e.g. after a Ctrl-C that abandoned a solve), so no toulbar2 solve outlives
    the search; elsewhere nothing (the worker then ends at its next read, on end of file)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def serve() -> None:
    """Worker main loop: first message the graph (reply: the exchange rate), then
    ``(w, seconds, seed, hint)`` per penalised solve or ``("limited", seconds, seed)`` per solve with
    the usage limit (reply: the assignment or ``None``); ``None`` ends it."""
    if sys.platform.startswith("linux"):
        _die_with_parent()
    out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # toulbar2 writes to standard output
    inp = sys.stdin.buffer
    net: Network | None = None
    while True:
        try:
            msg = recv(inp)
        except EOFError:
            return
        if msg is None:
            return
        try:
            if net is None:
                began = time.perf_counter()
                net = Network(msg)
                send(out, ("ok", (net.exchange_rate(), time.perf_counter() - began)))
            elif isinstance(msg[0], str) and msg[0] == "limited":
                _, seconds, seed = msg
                send(out, ("ok", net.solve_limited(seconds, seed)))
            else:
                w, seconds, seed, hint = msg
                send(out, ("ok", net.solve(w, seconds, seed, hint)))
        except Exception as e:  # noqa: BLE001 (reported to the parent, which raises SearchError)
            send(out, ("error", f"{type(e).__name__}: {e}"))


if __name__ == "__main__":
    serve()
