"""shardwise: decides how every tensor of an ML program is split across a device mesh, and runs
the split program.

The sharding representation of the Shardonnay RFC (meshes, axis references and sub-axes,
dimension and tensor shardings with their invariants, Shardy's exact text form, the per-device
view, conversions to XLA HLO shardings, JAX PartitionSpecs, MindSpore layouts, hidet specs and
DTensor placements); the program IR with MLIR import/export and a builder; the operation
sharding rule of every op (Shardy's registry); Shardy-exact sharding propagation
(``propagate``, ``propagate_many``) and why each value got its sharding (``explain``); the
cost-based search (``auto_shard``, ``shardwise.search``); the SPMD partitioner with tensor
redistribution (``partition``, ``load_partition``, ``shardwise.spmd``); and the executors
that check the split program against the original (``check_partition``,
``shardwise.execute``: interpreter, in-process simulator, MPI, NCCL).
"""

import os as _os

# The extension allocates through mimalloc, which by default commits its arenas eagerly: the
# resident memory then stays far above what the program holds (the 87k-op step loaded: 517
# against 282 bytes per op committing on demand, at no measured cost in time;
# docs/speed.md). mimalloc reads the option when the extension is loaded, so it is set here,
# before, unless the environment sets it already.
_os.environ.setdefault("MIMALLOC_ARENA_EAGER_COMMIT", "0")

from shardwise._native import __version__
from shardwise.api import propagate
from shardwise.batch import CandidateBatch, CandidateResults, propagate_many
from shardwise.errors import (
    ConversionError,
    InfeasibleBudget,
    InvalidRuleError,
    InvalidShardingError,
    LaunchError,
    LaunchTimeout,
    MeshError,
    PipelineError,
    ProgramError,
    RankAborted,
    SearchError,
    ShardingError,
    ShardingParseError,
    ShardwiseError,
    UnknownValueError,
)
from shardwise.explanation import Explanation, explain
from shardwise.importers import from_jax, from_torch, from_torch_step, load_mlir
from shardwise.ir import Block, Builder, Func, Module, Op, Region, TensorType, Value
from shardwise.mesh import Mesh, MeshAxis
from shardwise.rules import (
    BlockInfo,
    FactorKind,
    OpInfo,
    OpInfoError,
    OpShardingRule,
    RuleBuilder,
    UnknownOpWarning,
    ValueInfo,
    register_op_rule,
    register_rule,
    rule_for,
    unregister_op_rule,
    unregister_rule,
)
from shardwise.rules.from_ir import populate_rules
from shardwise.search.auto import auto_shard
from shardwise.search.cost_model import DeviceModel
from shardwise.search.op_strategy import OpStrategy, configure
from shardwise.search.report import Report
from shardwise.sharding import AxisRef, DimSharding, TensorSharding
from shardwise.spmd.load import load_partition
from shardwise.spmd.partition import Partition
from shardwise.spmd.partition.check import check_partition
from shardwise.workflow import partition  # search (optional), partition, per-rank weights

__all__ = [
    "AxisRef",
    "Block",
    "BlockInfo",
    "Builder",
    "CandidateBatch",
    "CandidateResults",
    "ConversionError",
    "DeviceModel",
    "DimSharding",
    "Explanation",
    "FactorKind",
    "Func",
    "InfeasibleBudget",
    "InvalidRuleError",
    "InvalidShardingError",
    "LaunchError",
    "LaunchTimeout",
    "Mesh",
    "MeshAxis",
    "MeshError",
    "Module",
    "Op",
    "OpInfo",
    "OpInfoError",
    "OpShardingRule",
    "OpStrategy",
    "Partition",
    "PipelineError",
    "ProgramError",
    "RankAborted",
    "Region",
    "Report",
    "RuleBuilder",
    "SearchError",
    "ShardingError",
    "ShardingParseError",
    "ShardwiseError",
    "TensorSharding",
    "TensorType",
    "UnknownOpWarning",
    "UnknownValueError",
    "Value",
    "ValueInfo",
    "__version__",
    "auto_shard",
    "check_partition",
    "configure",
    "explain",
    "from_jax",
    "from_torch",
    "from_torch_step",
    "load_mlir",
    "load_partition",
    "partition",
    "populate_rules",
    "propagate",
    "propagate_many",
    "register_op_rule",
    "register_rule",
    "rule_for",
    "unregister_op_rule",
    "unregister_rule",
]
