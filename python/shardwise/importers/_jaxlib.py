"""The old path of ``shardwise._jaxlib``'s ``context`` and ``ir`` (jaxlib's MLIR context and
bindings), kept for the code that imports them from here."""

from __future__ import annotations

from shardwise._jaxlib import context, ir

__all__ = ["context", "ir"]
