"""MLIR attribute text helpers used by the IR: string literals and symbol names."""

from __future__ import annotations

import re

from shardwise import _native

_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


def quote(s: str) -> str:
    """``foo`` -> ``"foo"``, escaped as MLIR prints strings."""
    return _native.mlir_quote(s)


def unquote(s: str) -> str:
    """The value of an MLIR string literal (``ShardingParseError`` if it is none)."""
    return _native.mlir_unquote(s)


def attr_name(name: str) -> str:
    """An attribute name as written in an attribute dictionary (quoted unless a bare id)."""
    return name if _BARE_ID.fullmatch(name) else quote(name)
