"""The shardwise exception family. Every class is a ``ValueError``.

``ShardwiseError``
  └─ ``ShardingError``: a mesh or sharding is malformed, invalid or not convertible
       ├─ ``ShardingParseError``: malformed text; ``.offset`` is where parsing stopped
       ├─ ``InvalidShardingError``: an invariant is broken; ``.rule`` names it
       │    (e.g. ``"duplicate-axis"``, ``"unsorted-replicated"``, ``"dim-exhausted"``; the list
       │    is in ``rust/src/sharding.rs``)
       ├─ ``MeshError``: a mesh is malformed, or a named mesh is missing
       └─ ``ConversionError``: another format cannot express the value
"""

from shardwise._native import (
    ConversionError,
    InvalidShardingError,
    MeshError,
    ShardingError,
    ShardingParseError,
    ShardwiseError,
)

__all__ = [
    "ConversionError",
    "InvalidShardingError",
    "MeshError",
    "ShardingError",
    "ShardingParseError",
    "ShardwiseError",
]
