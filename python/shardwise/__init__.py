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
from shardwise._native import __version__
from shardwise.api import propagate
from shardwise.propagation.batch import CandidateBatch, CandidateResults, propagate_many
from shardwise.explanation import Explanation, explain
from shardwise.errors import (
    ConversionError,
    InvalidRuleError,
    InvalidShardingError,
    LaunchError,
    LaunchTimeout,
    MeshError,
    PipelineError,
    ProgramError,
    RankAborted,
    InfeasibleBudget,
    SearchError,
    ShardingError,
    ShardingParseError,
    ShardwiseError,
    UnknownValueError,
)
from shardwise.importers import from_jax, load_mlir
from shardwise.ir import Block, Builder, Func, Module, Op, Region, TensorType, Value
from shardwise.mesh import Mesh, MeshAxis
from shardwise.spmd.load import load_partition
from shardwise.spmd.partition import Partition
from shardwise.spmd.partition.check import check_partition
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
from shardwise.sharding import AxisRef, DimSharding, TensorSharding
from shardwise.search.auto import auto_shard
from shardwise.search.op_strategy import OpStrategy, configure
from shardwise.search.cost_model import DeviceModel
from shardwise.search.report import Report
from shardwise.workflow import partition  # search (optional), partition, per-rank weights

__all__ = [
    "LaunchError",
    "LaunchTimeout",
    "PipelineError",
    "RankAborted",
    "InfeasibleBudget",
    "SearchError",
    "UnknownValueError",
    "auto_shard",
    "configure",
    "OpStrategy",
    "DeviceModel",
    "Report",
    "AxisRef",
    "Block",
    "Explanation",
    "explain",
    "BlockInfo",
    "FactorKind",
    "InvalidRuleError",
    "OpInfo",
    "OpInfoError",
    "OpShardingRule",
    "RuleBuilder",
    "UnknownOpWarning",
    "ValueInfo",
    "populate_rules",
    "propagate",
    "propagate_many",
    "CandidateResults",
    "CandidateBatch",
    "partition",
    "Partition",
    "load_partition",
    "check_partition",
    "register_op_rule",
    "register_rule",
    "rule_for",
    "unregister_op_rule",
    "unregister_rule",
    "Builder",
    "ConversionError",
    "DimSharding",
    "Func",
    "InvalidShardingError",
    "Mesh",
    "MeshAxis",
    "MeshError",
    "Module",
    "Op",
    "ProgramError",
    "Region",
    "ShardingError",
    "ShardingParseError",
    "ShardwiseError",
    "TensorSharding",
    "TensorType",
    "Value",
    "__version__",
    "from_jax",
    "load_mlir",
]
