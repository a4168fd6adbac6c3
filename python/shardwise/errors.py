"""The shardwise exception family. Every class is a ``ValueError``.

``ShardwiseError``
  ├─ ``ShardingError``: a mesh or sharding is malformed, invalid or not convertible
  │    ├─ ``ShardingParseError``: malformed text; ``.offset`` is where parsing stopped
  │    ├─ ``InvalidShardingError``: an invariant is broken; ``.rule`` names it
  │    │    (e.g. ``"duplicate-axis"``, ``"unsorted-replicated"``, ``"dim-exhausted"``; the list
  │    │    is in ``rust/src/sharding.rs``)
  │    ├─ ``MeshError``: a mesh is malformed, or a named mesh is missing
  │    └─ ``ConversionError``: another format cannot express the value
  └─ ``ProgramError``: a program (MLIR text or IR) is malformed or unsupported; the message
       names the op and its source location
"""

from shardwise._native import (
    ConversionError,
    InvalidShardingError,
    MeshError,
    ShardingError,
    ShardingParseError,
    ShardwiseError,
)


class ProgramError(ShardwiseError):
    """A program is malformed or uses something shardwise does not support; the message names
    the op and its location (``loc("file":line:col)``) when known."""


__all__ = [
    "ConversionError",
    "InvalidShardingError",
    "MeshError",
    "ProgramError",
    "ShardingError",
    "ShardingParseError",
    "ShardwiseError",
]
