"""The MPI backend of the ``Communicator`` protocol (``shardwise.execute.comm``), on mpi4py.

One ``MpiCommunicator`` per MPI process; MPI rank ``r`` is SPMD rank ``r`` (the value of
``stablehlo.partition_id``). Each collective runs on a sub-communicator of its group, made once
with ``MPI_Comm_create_group`` (collective over the group's members only) and cached per group
tuple; the sub-communicator's rank ``i`` is ``group[i]``, so MPI's block order is the group
order. Buffers are numpy arrays, copied to C order when they are not; data moves as raw bytes
(``MPI.BYTE``), so every dtype (bool, float16, bfloat16, complex) moves exactly.

Reduction order (``all_reduce``, ``reduce_scatter``):

* ``reductions="ordered"`` (default): each member receives its chunk of every member's array
  (``MPI_Alltoall``), folds the chunks left to right in group order (``reduce_arrays``, the
  simulator's fold) and, for ``all_reduce``, the folded chunks are gathered back
  (``MPI_Allgather``). Every element is folded in the same order as by ``ThreadCommunicator``,
  so results equal the simulator's bit for bit for every dtype and op, with the bandwidth of a
  reduce-scatter (+ all-gather).
* ``reductions="mpi"``: ``MPI_Allreduce`` / ``MPI_Reduce_scatter_block`` with MPI's own
  operations (``MPI_SUM``, ``MPI_PROD``, ``MPI_MAX``, ``MPI_MIN``, ``MPI_BAND``/``MPI_LAND``,
  ``MPI_BOR``/``MPI_LOR``) for integer, boolean, float32/64 and complex64/128 arrays. MPI chooses
  the combination order (MPICH: recursive doubling, Rabenseifner, ... by size), so float and
  complex sums and products differ from the simulator's fold by rounding (bit-equal only for 2
  ranks, where ``a+b == b+a``); integers and booleans are exact. Float ``max``/``min``
  (where ``MPI_MAX`` does not propagate NaN as ``maximum`` does) and float16/bfloat16 (no MPI
  datatype) use the ordered path.

Bytes recorded per collective (``records``) are the simulator's model volumes (ring /
pairwise algorithms: see ``shardwise.execute.simulator``), whatever algorithm MPI picks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shardwise.errors import ProgramError, ShardwiseError
from shardwise.execute.comm import REDUCTIONS, reduce_arrays
from shardwise.execute.simulator import CollectiveRecord

__all__ = ["MpiCommunicator", "collective_bytes", "import_mpi"]

#: Tag of the point-to-point messages of ``collective_permute`` on the communicator's own
#: duplicate of the parent communicator (no user message can match it).
_PERMUTE_TAG = 7

_MPI_OPS = {"add": "SUM", "mul": "PROD", "max": "MAX", "min": "MIN"}


def import_mpi() -> Any:
    """``mpi4py.MPI``, or ``ShardwiseError`` saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ShardwiseError(
            f"the MPI backend needs mpi4py and an MPI library: pip install 'shardwise[mpi]' ({e})"
        ) from None
    return MPI


def collective_bytes(kind: str, n: int, s: int, *, sends: int = 0, receives: bool = False) -> tuple[int, int]:
    """Bytes (sent, received) by one member of a ``kind`` collective over ``n`` ranks with ``s``
    bytes of local input: the simulator's ring / pairwise volumes (all-gather ``(n-1)·s``;
    all-reduce ``2(n-1)/n·s``; reduce-scatter and all-to-all ``(n-1)/n·s``; collective-permute
    ``s`` per target other than itself (``sends``) and ``s`` when ``receives`` from another rank).
    ``ValueError`` for another kind."""
    if kind == "all_gather":
        v = (n - 1) * s
    elif kind == "all_reduce":
        v = 2 * (n - 1) * s // n
    elif kind in ("reduce_scatter", "all_to_all"):
        v = (n - 1) * s // n
    elif kind == "collective_permute":
        return s * sends, s if receives else 0
    else:
        raise ValueError(f"unknown collective kind {kind!r}")
    return v, v


def check_group(group: Sequence[int], rank: int, size: int) -> tuple[int, ...]:
    """``group`` as a tuple; ``ProgramError`` unless it is distinct ranks in ``[0, size)``
    containing ``rank``."""
    g = tuple(int(r) for r in group)
    if rank not in g:
        raise ProgramError(f"rank {rank} is not in the collective's group {g}")
    if any(not 0 <= r < size for r in g) or len(set(g)) != len(g):
        raise ProgramError(f"group {g} is not a set of distinct ranks in [0, {size})")
    return g


def permute_peers(pairs: Sequence[tuple[int, int]], rank: int) -> tuple[list[int], int | None]:
    """The targets ``rank`` sends to and the source it receives from (``None``: none) in
    ``source_target_pairs``; ``ProgramError`` when a source or a target repeats."""
    ps = [(int(a), int(b)) for a, b in pairs]
    if len({a for a, _ in ps}) != len(ps) or len({b for _, b in ps}) != len(ps):
        raise ProgramError(f"collective_permute: source_target_pairs {ps} repeat a source or a target")
    sources = [a for a, b in ps if b == rank]
    return [b for a, b in ps if a == rank], (sources[0] if sources else None)


def _contiguous(x: Any) -> np.ndarray:
    a = np.asarray(x)
    return a if a.flags.c_contiguous else a.copy(order="C")


def _raw(a: np.ndarray) -> Any:
    """The bytes of a C-contiguous array (a ``uint8`` view: mpi4py sends it as ``MPI.BYTE`` and
    splits a receive buffer evenly among the communicator's ranks)."""
    return a.reshape(-1).view(np.uint8)


def _chunk_axis_first(a: np.ndarray, axis: int, n: int) -> np.ndarray:
    """``a`` split into ``n`` equal chunks along ``axis``, stacked on a new leading axis
    (C-contiguous, shape ``(n, *chunk_shape)``; each chunk keeps ``a``'s axis order)."""
    shape = a.shape
    c = shape[axis] // n
    blocked = a.reshape(*shape[:axis], n, c, *shape[axis + 1 :])
    return np.ascontiguousarray(np.moveaxis(blocked, axis, 0))


class MpiCommunicator:
    """The ``Communicator`` of this MPI process on ``comm`` (``MPI.COMM_WORLD`` when ``None``),
    duplicated so that its messages never match the caller's. ``reductions``: ``"ordered"``
    (bit-equal with the simulator) or ``"mpi"`` (MPI's reduction operations; see the module
    docstring). ``records``: a ``CollectiveRecord`` per collective, in program order.

    Collective; every process of ``comm`` must construct it. ``ShardwiseError`` when mpi4py is
    missing or ``reductions`` is unknown; collectives raise ``ProgramError`` for a group that
    does not contain this rank or indivisible dimensions, and ``mpi4py.MPI.Exception`` for an
    MPI failure."""

    def __init__(self, comm: Any = None, *, reductions: str = "ordered") -> None:
        if reductions not in ("ordered", "mpi"):
            raise ShardwiseError(f"reductions must be 'ordered' or 'mpi', got {reductions!r}")
        self._mpi = import_mpi()
        self._comm = (self._mpi.COMM_WORLD if comm is None else comm).Dup()
        self._rank = int(self._comm.Get_rank())
        self._size = int(self._comm.Get_size())
        self._subs: dict[tuple[int, ...], Any] = {}
        self.reductions = reductions
        self.records: list[CollectiveRecord] = []

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._size

    @property
    def mpi_comm(self) -> Any:
        """The communicator's own duplicate of the parent MPI communicator."""
        return self._comm

    def sub_communicator(self, group: Sequence[int]) -> Any:
        """The MPI communicator of ``group`` (its rank ``i`` is ``group[i]``), created on first
        use with ``Create_group`` by the group's members and cached."""
        g = check_group(group, self._rank, self._size)
        sub = self._subs.get(g)
        if sub is None:
            if g == tuple(range(self._size)):
                sub = self._comm
            else:
                world_group = self._comm.Get_group()
                mpi_group = world_group.Incl(list(g))
                sub = self._comm.Create_group(mpi_group, tag=1)
                mpi_group.Free()
                world_group.Free()
            self._subs[g] = sub
        return sub

    def close(self) -> None:
        """Frees the cached sub-communicators and the duplicate (collective, like creation)."""
        for sub in self._subs.values():
            if sub is not self._comm:
                sub.Free()
        self._subs.clear()
        self._comm.Free()

    def _record(self, kind: str, group: tuple[int, ...], a: np.ndarray, sent: int, received: int) -> None:
        self.records.append(CollectiveRecord(kind, group, tuple(a.shape), str(a.dtype), sent, received))

    def all_gather(self, x: Any, group: Sequence[int], axis: int) -> Any:
        g = tuple(int(r) for r in group)
        sub = self.sub_communicator(g)
        a = _contiguous(x)
        n = len(g)
        recv = np.empty((n, *a.shape), dtype=a.dtype)
        sub.Allgather(_raw(a), _raw(recv))
        self._record("all_gather", g, a, *collective_bytes("all_gather", n, a.nbytes))
        return np.concatenate(list(recv), axis=axis)

    def all_to_all(self, x: Any, group: Sequence[int], split_axis: int, concat_axis: int) -> Any:
        g = tuple(int(r) for r in group)
        sub = self.sub_communicator(g)
        a = _contiguous(x)
        n = len(g)
        if a.shape[split_axis] % n:
            raise ProgramError(
                f"all_to_all: dimension {split_axis} of size {a.shape[split_axis]} is not divisible by the group size {n}"
            )
        send = _chunk_axis_first(a, split_axis, n)
        recv = np.empty_like(send)
        sub.Alltoall(_raw(send), _raw(recv))
        self._record("all_to_all", g, a, *collective_bytes("all_to_all", n, a.nbytes))
        return np.concatenate(list(recv), axis=concat_axis)

    def _native(self, a: np.ndarray, op: str) -> Any:
        """MPI's reduction operation for ``op`` on ``a``'s dtype, or ``None`` for the ordered path."""
        if op not in REDUCTIONS:
            raise ValueError(f"unknown reduction {op!r}; expected one of {REDUCTIONS}")
        if self.reductions != "mpi":
            return None
        kind, size = a.dtype.kind, a.dtype.itemsize
        MPI = self._mpi
        if kind == "b":
            return {"and": MPI.LAND, "or": MPI.LOR, "max": MPI.LOR, "min": MPI.LAND}.get(op)
        if kind in "iu":
            return {"and": MPI.BAND, "or": MPI.BOR}.get(op) or getattr(MPI, _MPI_OPS[op])
        if (kind == "f" and size >= 4 and op in ("add", "mul")) or (kind == "c" and op in ("add", "mul")):
            return getattr(MPI, _MPI_OPS[op])
        return None

    def _ordered_scatter(self, sub: Any, send: np.ndarray, op: str) -> np.ndarray:
        """``send`` is ``(n, *chunk)``; returns the group-order fold of every member's chunk at
        this member's position."""
        recv = np.empty_like(send)
        sub.Alltoall(_raw(send), _raw(recv))
        return np.asarray(reduce_arrays(np, list(recv), op))

    def all_reduce(self, x: Any, group: Sequence[int], op: str) -> Any:
        g = tuple(int(r) for r in group)
        sub = self.sub_communicator(g)
        a = _contiguous(x)
        n = len(g)
        native = self._native(a, op)
        self._record("all_reduce", g, a, *collective_bytes("all_reduce", n, a.nbytes))
        if native is not None:
            out = np.empty_like(a)
            sub.Allreduce(a, out, op=native)
            return out
        flat = a.reshape(-1)
        c = -(-flat.size // n)
        padded = np.zeros(n * c, dtype=a.dtype)
        padded[: flat.size] = flat
        mine = np.ascontiguousarray(self._ordered_scatter(sub, padded.reshape(n, c), op))
        full = np.empty((n, c), dtype=a.dtype)
        sub.Allgather(_raw(mine), _raw(full))
        return full.reshape(-1)[: flat.size].reshape(a.shape)

    def reduce_scatter(self, x: Any, group: Sequence[int], axis: int, op: str) -> Any:
        g = tuple(int(r) for r in group)
        sub = self.sub_communicator(g)
        a = _contiguous(x)
        n = len(g)
        if a.shape[axis] % n:
            raise ProgramError(
                f"reduce_scatter: dimension {axis} of size {a.shape[axis]} is not divisible by the group size {n}"
            )
        native = self._native(a, op)
        send = _chunk_axis_first(a, axis, n)
        self._record("reduce_scatter", g, a, *collective_bytes("reduce_scatter", n, a.nbytes))
        if native is not None:
            mine = np.empty_like(send[0])
            sub.Reduce_scatter_block(send, mine, op=native)
        else:
            mine = self._ordered_scatter(sub, send, op)
        return mine

    def collective_permute(self, x: Any, pairs: Sequence[tuple[int, int]]) -> Any:
        targets, source = permute_peers(pairs, self._rank)
        a = _contiguous(x)
        requests = []
        for t in targets:
            if t != self._rank:
                requests.append(self._comm.Isend(_raw(a), dest=t, tag=_PERMUTE_TAG))
        out = np.zeros_like(a)
        if source == self._rank:
            out = a.copy()
        elif source is not None:
            requests.append(self._comm.Irecv(_raw(out), source=source, tag=_PERMUTE_TAG))
        self._mpi.Request.Waitall(requests)
        involved = tuple(sorted({r for p in pairs for r in (int(p[0]), int(p[1]))}))
        sends = sum(1 for t in targets if t != self._rank)
        self._record(
            "collective_permute",
            involved,
            a,
            *collective_bytes(
                "collective_permute", 0, a.nbytes, sends=sends, receives=source not in (None, self._rank)
            ),
        )
        return out

    def barrier(self) -> None:
        self._comm.Barrier()
