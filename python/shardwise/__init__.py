"""shardwise: decides how every tensor of an ML program is split across a device mesh.

This release holds the sharding representation of the Shardonnay RFC: meshes, axis references
and sub-axes, dimension and tensor shardings with their invariants, Shardy's exact text form,
the per-device view, and conversions to XLA HLO shardings, JAX PartitionSpecs, MindSpore
layouts, hidet specs and DTensor placements.
"""

from shardwise._native import __version__
from shardwise.errors import (
    ConversionError,
    InvalidShardingError,
    MeshError,
    ShardingError,
    ShardingParseError,
    ShardwiseError,
)
from shardwise.mesh import Mesh, MeshAxis
from shardwise.sharding import AxisRef, DimSharding, TensorSharding

__all__ = [
    "AxisRef",
    "ConversionError",
    "DimSharding",
    "InvalidShardingError",
    "Mesh",
    "MeshAxis",
    "MeshError",
    "ShardingError",
    "ShardingParseError",
    "ShardwiseError",
    "TensorSharding",
    "__version__",
]
