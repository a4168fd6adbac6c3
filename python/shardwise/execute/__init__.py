"""Running programs: a StableHLO interpreter written against the array API (``run``), the
communicator protocol its collectives use (``Communicator``), and the in-process SPMD simulator
(``simulate`` with ``ThreadCommunicator``)."""

from shardwise.execute.comm import Communicator
from shardwise.execute.inputs import random_inputs
from shardwise.execute.interpreter import Interpreter, run

__all__ = ["Communicator", "Interpreter", "random_inputs", "run"]
