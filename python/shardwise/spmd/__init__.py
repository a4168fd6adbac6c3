"""SPMD execution of sharded programs: tensor redistribution (``redistribute``) and an exact
numpy simulation of per-device shards and collectives (``simulate``)."""

from shardwise.spmd.redistribute import CostModel, Link, ReshardPlan, ReshardStep, dtype_bytes, plan_reshard

__all__ = ["CostModel", "Link", "ReshardPlan", "ReshardStep", "dtype_bytes", "plan_reshard"]
