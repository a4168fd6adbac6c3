"""SPMD execution of sharded programs: tensor redistribution (``redistribute``), an exact
numpy simulation of per-device shards and collectives (``shards``; whole programs are simulated by
``shardwise.execute.simulator``), the partitioner
(``partition``), reading a partition directory (``load``) and running it on MPI ranks
(``launch``)."""

from shardwise.spmd.redistribute import CostModel, Link, ReshardPlan, ReshardStep, dtype_bytes, plan_reshard

__all__ = ["CostModel", "Link", "ReshardPlan", "ReshardStep", "dtype_bytes", "plan_reshard"]
