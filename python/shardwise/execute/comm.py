"""The communicator protocol the interpreter's collectives go through.

A ``Communicator`` belongs to one rank; every rank of a program calls the same collectives in
the same order (SPMD). ``group`` is the tuple of ranks taking part, in order: that order is the
concatenation order of ``all_gather``, the chunk order of ``reduce_scatter`` / ``all_to_all``
and the reduction order of ``all_reduce`` (results are exact and deterministic for a fixed
order). Reduction ops are named ``"add"``, ``"mul"``, ``"max"``, ``"min"``, ``"and"``, ``"or"``.
Semantics follow the StableHLO specification of ``all_gather``, ``all_reduce``,
``reduce_scatter``, ``all_to_all`` and ``collective_permute``
(github.com/openxla/stablehlo/blob/main/docs/spec.md).

Implementations: ``shardwise.execute.threads.ThreadCommunicator`` (in-process threads, used by
the simulator); MPI and NCCL backends implement the same protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["REDUCTIONS", "Communicator", "reduce_arrays"]

#: Reduction names a communicator accepts.
REDUCTIONS = ("add", "mul", "max", "min", "and", "or")


@runtime_checkable
class Communicator(Protocol):
    """One rank's view of a group of ``size`` ranks (``0 <= rank < size``)."""

    @property
    def rank(self) -> int: ...

    @property
    def size(self) -> int: ...

    def all_gather(self, x: Any, group: Sequence[int], axis: int) -> Any:
        """The group members' ``x`` concatenated along ``axis`` in group order
        (shape: ``x.shape`` with ``axis`` multiplied by ``len(group)``)."""
        ...

    def all_reduce(self, x: Any, group: Sequence[int], op: str) -> Any:
        """The elementwise reduction ``op`` of the group members' ``x``, in group order."""
        ...

    def reduce_scatter(self, x: Any, group: Sequence[int], axis: int, op: str) -> Any:
        """``all_reduce`` then this rank's chunk ``i`` (its position in ``group``) of the
        result split evenly along ``axis`` (``x.shape[axis]`` divisible by ``len(group)``)."""
        ...

    def all_to_all(self, x: Any, group: Sequence[int], split_axis: int, concat_axis: int) -> Any:
        """``x`` split into ``len(group)`` chunks along ``split_axis``; chunk ``j`` goes to
        ``group[j]``; the received chunks are concatenated along ``concat_axis`` in group order."""
        ...

    def collective_permute(self, x: Any, pairs: Sequence[tuple[int, int]]) -> Any:
        """Sends ``x`` to ``t`` for each ``(self.rank, t)`` in ``pairs``; returns what was received
        from the ``s`` with ``(s, self.rank)`` in ``pairs``, or zeros when no rank sends here."""
        ...

    def barrier(self) -> None:
        """Returns once every rank has called it."""
        ...


def reduce_arrays(xp: Any, arrays: Sequence[Any], op: str) -> Any:
    """Folds ``arrays`` left to right with reduction ``op`` (``ValueError`` for another name)."""
    if op not in REDUCTIONS:
        raise ValueError(f"unknown reduction {op!r}; expected one of {REDUCTIONS}")
    acc = arrays[0]
    for x in arrays[1:]:
        if op == "add":
            acc = acc + x
        elif op == "mul":
            acc = acc * x
        elif op == "max":
            acc = xp.maximum(acc, x)
        elif op == "min":
            acc = xp.minimum(acc, x)
        elif op == "and":
            acc = xp.logical_and(acc, x) if acc.dtype == xp.bool else xp.bitwise_and(acc, x)
        else:
            acc = xp.logical_or(acc, x) if acc.dtype == xp.bool else xp.bitwise_or(acc, x)
    return acc
