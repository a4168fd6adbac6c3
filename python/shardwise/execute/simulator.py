"""The in-process SPMD simulator: N ranks' programs in N threads, collectives exchanged exactly
through shared buffers (``ThreadCommunicator``, ``shardwise.execute.threads``, where the bytes
each collective counts per device are given), with per-collective bytes and peak live bytes
per device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shardwise.execute.interpreter import Interpreter, _prepare, run_with
from shardwise.execute.threads import CollectiveRecord, ThreadCommunicator, World, run_ranks
from shardwise.ir.core import Func, Module

__all__ = ["CollectiveRecord", "SimulationResult", "ThreadCommunicator", "World", "run_ranks", "simulate"]


@dataclass
class SimulationResult:
    """Per-rank outputs (``outputs[rank]`` is that rank's list of result arrays), collective
    records (``collectives[rank]``, in program order) and peak live bytes of each rank."""

    outputs: list[list[Any]]
    collectives: list[list[CollectiveRecord]] = field(default_factory=list)
    peak_bytes: list[int] = field(default_factory=list)

    def bytes_sent(self, rank: int) -> int:
        """Total bytes ``rank`` sent over all collectives."""
        return sum(r.bytes_sent for r in self.collectives[rank])

    def bytes_received(self, rank: int) -> int:
        return sum(r.bytes_received for r in self.collectives[rank])


def simulate(
    programs: Func | Module | Sequence[Func | Module],
    inputs: Sequence[Sequence[Any]],
    *,
    xp: Any = None,
    func: str = "main",
) -> SimulationResult:
    """Runs one program per rank (or the same program on every rank) in the in-process SPMD
    simulator.

    ``inputs[rank]`` are that rank's arguments (local shapes); the number of ranks is
    ``len(inputs)``. ``stablehlo.partition_id`` is the rank; collectives go through a
    ``ThreadCommunicator``. Returns a ``SimulationResult`` with per-rank outputs, per-collective
    bytes and peak live bytes per rank (sum of the sizes of the arrays the rank's interpreter
    holds, values freed after their last use). Raises ``ProgramError`` naming the first rank that
    failed (no rank hangs), or ``ValueError`` when the number of programs and inputs differ.
    """
    size = len(inputs)
    progs = list(programs) if isinstance(programs, Sequence) else [programs] * size
    if len(progs) != size:
        raise ValueError(f"simulate: {len(progs)} programs for {size} ranks' inputs")
    if xp is None:
        import array_api_compat.numpy as xp_numpy

        xp = xp_numpy
    interps: list[Interpreter | None] = [None] * size

    def body(rank: int, comm: ThreadCommunicator) -> list[Any]:
        interp, f = _prepare(progs[rank], xp, comm, rank, func)
        interps[rank] = interp
        return run_with(interp, f, inputs[rank])

    outputs, world = run_ranks(size, body, xp)
    peaks = [i.peak_bytes if i is not None else 0 for i in interps]
    return SimulationResult(outputs, world.records, peaks)
