"""Cost-based sharding search on strategy graphs: exact scoring, Rust local search, HiGHS ILP,
MindSpore BFS, the IOPDDL contest format, and ``auto_shard`` of whole programs."""

from shardwise.search.auto import AUTO_METHODS, auto_shard
from shardwise.search.bfs import solve_bfs
from shardwise.search.cost_model import DeviceModel
from shardwise.search.graph import Score, StrategyGraph, evaluate
from shardwise.search.ilp import solve_ilp
from shardwise.search.iopddl import read_instance, score
from shardwise.search.local import Solution, solve_local
from shardwise.search.op_strategy import OpStrategy, configure
from shardwise.search.report import NodeReport, Report
from shardwise.search.solve import METHODS, solve
from shardwise.search.strategies import Strategy, enumerate_strategies

__all__ = [
    "AUTO_METHODS",
    "METHODS",
    "DeviceModel",
    "NodeReport",
    "OpStrategy",
    "Report",
    "Score",
    "Solution",
    "Strategy",
    "StrategyGraph",
    "auto_shard",
    "configure",
    "enumerate_strategies",
    "evaluate",
    "read_instance",
    "score",
    "solve",
    "solve_bfs",
    "solve_ilp",
    "solve_local",
]
