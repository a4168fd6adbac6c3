"""Cost-based sharding search on strategy graphs: exact scoring, Rust local search, HiGHS ILP,
MindSpore BFS, the IOPDDL contest format, and ``auto_shard`` of whole programs."""

from shardwise.search.auto import AUTO_METHODS, auto_shard
from shardwise.search.bfs import solve_bfs
from shardwise.search.op_strategy import OpStrategy, configure
from shardwise.search.cost_model import DeviceModel
from shardwise.search.graph import Score, StrategyGraph, evaluate
from shardwise.search.ilp import solve_ilp
from shardwise.search.iopddl import read_instance, score
from shardwise.search.local import Solution, solve_local
from shardwise.search.report import NodeReport, Report
from shardwise.search.strategies import Strategy, enumerate_strategies
from shardwise.search.solve import METHODS, solve

__all__ = [
    "AUTO_METHODS",
    "DeviceModel",
    "METHODS",
    "NodeReport",
    "Report",
    "Strategy",
    "auto_shard",
    "configure",
    "OpStrategy",
    "enumerate_strategies",
    "solve_bfs",
    "Score",
    "Solution",
    "StrategyGraph",
    "evaluate",
    "read_instance",
    "score",
    "solve",
    "solve_ilp",
    "solve_local",
]
