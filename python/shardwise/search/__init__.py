"""Cost-based sharding search on strategy graphs: exact scoring, Rust local search, HiGHS ILP,
and the IOPDDL contest format."""

from shardwise.search.graph import Score, StrategyGraph, evaluate
from shardwise.search.ilp import solve_ilp
from shardwise.search.iopddl import read_instance, score
from shardwise.search.local import Solution, solve_local
from shardwise.search.solve import METHODS, solve

__all__ = [
    "METHODS",
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
