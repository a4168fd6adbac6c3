"""The one place that gets jaxlib's MLIR context (StableHLO, sdy, func, chlo, mhlo registered,
Shardy's passes available), and ``diagnostics_line`` for the errors of jaxlib's parser and
verifier. A leaf: both the MLIR reader (``shardwise.importers.mlir``) and the writer
(``shardwise.ir.printer``) use it."""

from __future__ import annotations

import functools
import importlib.util
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


def jax_available() -> bool:
    """Whether jaxlib can be imported (looked up without importing it)."""
    try:
        return importlib.util.find_spec("jaxlib") is not None
    except (ImportError, ValueError):
        return False


def ir() -> Any:
    context()
    from jaxlib.mlir import ir as _ir

    return _ir


#: Diagnostics shown, and characters of each message, by ``diagnostics_line``.
MAX_DIAGNOSTICS = 3
MAX_DIAGNOSTIC_CHARS = 300


def diagnostics_line(e: Any, path: str | None = None) -> str:
    """One line for jaxlib's ``MLIRError`` ``e``: its first ``MAX_DIAGNOSTICS`` error
    diagnostics as ``LOCATION: MESSAGE`` (``"-":2:1`` for text, ``PATH:2:1`` for a file),
    each message on one line and cut at ``MAX_DIAGNOSTIC_CHARS``, and how many more there are.
    ``str(e)`` spans many lines with a note that prints the whole failing operation (a
    function, with its body), which made the CLI's one-line error hundreds of lines long."""
    diags = list(getattr(e, "error_diagnostics", None) or [])
    if not diags:
        return _one_line(str(e))
    parts = []
    for d in diags[:MAX_DIAGNOSTICS]:
        loc = str(d.location)
        if loc.startswith("loc(") and loc.endswith(")"):
            loc = loc[4:-1]
        if path is not None and loc.startswith('"-":'):
            loc = path + loc[3:]
        loc = loc if len(loc) <= 120 else loc[:117] + "..."
        parts.append(f"{loc}: {_one_line(str(d.message))}")
    more = len(diags) - MAX_DIAGNOSTICS
    return "; ".join(parts) + (f" (and {more} more error{'s' if more > 1 else ''})" if more > 0 else "")


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DIAGNOSTIC_CHARS else text[: MAX_DIAGNOSTIC_CHARS - 3] + "..."
