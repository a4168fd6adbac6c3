"""Running programs: a StableHLO interpreter written against the array API (``run``), the
communicator protocol its collectives use (``Communicator``), and the in-process SPMD simulator
(``simulate`` with ``ThreadCommunicator``); the same protocol on MPI ranks (``MpiCommunicator``,
mpi4py) and on GPUs (``NcclCommunicator``, CuPy + NCCL). ``launch`` of a partition directory on
MPI ranks sits above this package, in ``shardwise.spmd.launch`` (its errors, ``LaunchError`` and
``LaunchTimeout``, are re-exported here)."""

from shardwise.errors import LaunchError, LaunchTimeout
from shardwise.execute.comm import Communicator
from shardwise.execute.inputs import random_inputs
from shardwise.execute.interpreter import Interpreter, run
from shardwise.execute.mpi import MpiCommunicator
from shardwise.execute.nccl import NcclCommunicator
from shardwise.execute.simulator import CollectiveRecord, SimulationResult, ThreadCommunicator, simulate

__all__ = [
    "CollectiveRecord",
    "Communicator",
    "Interpreter",
    "LaunchError",
    "LaunchTimeout",
    "MpiCommunicator",
    "NcclCommunicator",
    "SimulationResult",
    "ThreadCommunicator",
    "random_inputs",
    "run",
    "simulate",
]
