"""Running programs: a StableHLO interpreter written against the array API (``run``), the
communicator protocol its collectives use (``Communicator``), and the in-process SPMD simulator
(``simulate`` with ``ThreadCommunicator``); the same protocol on MPI ranks (``MpiCommunicator``,
mpi4py) and on GPUs (``NcclCommunicator``, CuPy + NCCL), and ``launch`` of a partition
directory on MPI ranks."""

from shardwise.execute.comm import Communicator
from shardwise.execute.inputs import random_inputs
from shardwise.execute.interpreter import Interpreter, run
from shardwise.execute.launch import LaunchError, LaunchResult, LaunchTimeout, launch
from shardwise.execute.mpi import MpiCommunicator
from shardwise.execute.nccl import NcclCommunicator
from shardwise.execute.simulator import CollectiveRecord, SimulationResult, ThreadCommunicator, simulate

__all__ = [
    "CollectiveRecord",
    "Communicator",
    "Interpreter",
    "LaunchError",
    "LaunchResult",
    "LaunchTimeout",
    "MpiCommunicator",
    "NcclCommunicator",
    "SimulationResult",
    "ThreadCommunicator",
    "launch",
    "random_inputs",
    "run",
    "simulate",
]
