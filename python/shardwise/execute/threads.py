"""SPMD ranks as threads: a ``World`` of ``size`` ranks sharing a barrier and exchange slots,
each rank's ``ThreadCommunicator`` (collectives exchanged exactly through the shared buffers, a
``CollectiveRecord`` per collective), and ``run_ranks``, which runs a function per rank in its own
thread. The simulator (``shardwise.execute.simulator``) runs interpreters on it, and so does
``sdy.manual_computation`` (``ops_manual``); this module does not import the interpreter.

Bytes per device for a collective with ``n`` group members and ``S`` bytes of local input
(ring / pairwise algorithms; the alpha-beta cost model of issue 6 and of
``../shared/references/hidet-auto-parallel-rfc.md`` uses the same volumes):
all-gather sends and receives ``(n-1)·S``; all-reduce ``2(n-1)/n·S``; reduce-scatter and
all-to-all ``(n-1)/n·S``; collective-permute sends ``S`` per target other than itself and
receives ``S`` from a source other than itself (integer bytes, rounded down).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from shardwise.errors import ProgramError, RankAborted
from shardwise.execute._util import nbytes
from shardwise.execute.comm import reduce_arrays

__all__ = ["CollectiveRecord", "ThreadCommunicator", "World", "run_ranks"]


@dataclass(frozen=True)
class CollectiveRecord:
    """One collective as seen by one rank: ``kind`` (``all_gather``, ``all_reduce``,
    ``reduce_scatter``, ``all_to_all``, ``collective_permute``), the ranks taking part (the
    group, or the sources and targets of a permute), the local input shape and dtype, and the
    bytes this rank sent and received."""

    kind: str
    group: tuple[int, ...]
    shape: tuple[int, ...]
    dtype: str
    bytes_sent: int
    bytes_received: int


class World:
    """State shared by the ``size`` ranks of one simulation: a barrier, one exchange slot per
    rank and each rank's collective records."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a world needs at least 1 rank, got {size}")
        self.size = size
        self.barrier = threading.Barrier(size)
        self.slots: list[Any] = [None] * size
        self.records: list[list[CollectiveRecord]] = [[] for _ in range(size)]

    def abort(self) -> None:
        """Breaks the barrier: every rank waiting in a collective raises instead of hanging."""
        self.barrier.abort()


class ThreadCommunicator:
    """The ``Communicator`` of rank ``rank`` in a ``World`` (one thread per rank). Reductions
    fold the group's arrays in group order, so results are exact and deterministic."""

    def __init__(self, world: World, rank: int, xp: Any) -> None:
        if not 0 <= rank < world.size:
            raise ValueError(f"rank {rank} is outside a world of {world.size} ranks")
        self.world = world
        self._rank = rank
        self.xp = xp

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self.world.size

    def _wait(self) -> None:
        try:
            self.world.barrier.wait()
        except threading.BrokenBarrierError:
            raise RankAborted(
                f"rank {self._rank}: aborted while waiting in a collective (another rank failed)"
            ) from None

    def _exchange(self, x: Any) -> list[Any]:
        self.world.slots[self._rank] = x
        self._wait()
        snapshot = list(self.world.slots)
        self._wait()
        return snapshot

    def _check(self, group: Sequence[int]) -> tuple[int, ...]:
        g = tuple(int(r) for r in group)
        if self._rank not in g:
            raise ProgramError(f"rank {self._rank} is not in the collective's group {g}")
        if any(not 0 <= r < self.size for r in g) or len(set(g)) != len(g):
            raise ProgramError(f"group {g} is not a set of distinct ranks in [0, {self.size})")
        return g

    def _record(self, kind: str, group: tuple[int, ...], x: Any, sent: int, received: int) -> None:
        self.world.records[self._rank].append(
            CollectiveRecord(kind, group, tuple(x.shape), str(x.dtype), sent, received)
        )

    def all_gather(self, x: Any, group: Sequence[int], axis: int) -> Any:
        g = self._check(group)
        parts = self._exchange(x)
        n, s = len(g), nbytes(self.xp, x)
        self._record("all_gather", g, x, (n - 1) * s, (n - 1) * s)
        return self.xp.concat([parts[r] for r in g], axis=axis)

    def all_reduce(self, x: Any, group: Sequence[int], op: str) -> Any:
        g = self._check(group)
        parts = self._exchange(x)
        n, s = len(g), nbytes(self.xp, x)
        self._record("all_reduce", g, x, 2 * (n - 1) * s // n, 2 * (n - 1) * s // n)
        return reduce_arrays(self.xp, [parts[r] for r in g], op)

    def reduce_scatter(self, x: Any, group: Sequence[int], axis: int, op: str) -> Any:
        g = self._check(group)
        n = len(g)
        if x.shape[axis] % n:
            raise ProgramError(
                f"reduce_scatter: dimension {axis} of size {x.shape[axis]} is not divisible by the group size {n}"
            )
        parts = self._exchange(x)
        s = nbytes(self.xp, x)
        self._record("reduce_scatter", g, x, (n - 1) * s // n, (n - 1) * s // n)
        total = reduce_arrays(self.xp, [parts[r] for r in g], op)
        chunk = x.shape[axis] // n
        i = g.index(self._rank)
        index = [slice(None)] * x.ndim
        index[axis] = slice(i * chunk, (i + 1) * chunk)
        return total[tuple(index)]

    def all_to_all(self, x: Any, group: Sequence[int], split_axis: int, concat_axis: int) -> Any:
        g = self._check(group)
        n = len(g)
        if x.shape[split_axis] % n:
            raise ProgramError(
                f"all_to_all: dimension {split_axis} of size {x.shape[split_axis]} is not divisible by the group size {n}"
            )
        parts = self._exchange(x)
        s = nbytes(self.xp, x)
        self._record("all_to_all", g, x, (n - 1) * s // n, (n - 1) * s // n)
        chunk = x.shape[split_axis] // n
        i = g.index(self._rank)
        index = [slice(None)] * x.ndim
        index[split_axis] = slice(i * chunk, (i + 1) * chunk)
        return self.xp.concat([parts[r][tuple(index)] for r in g], axis=concat_axis)

    def collective_permute(self, x: Any, pairs: Sequence[tuple[int, int]]) -> Any:
        ps = [(int(a), int(b)) for a, b in pairs]
        targets = [b for a, b in ps if a == self._rank]
        sources = [a for a, b in ps if b == self._rank]
        if len(sources) > 1 or len({a for a, _ in ps}) != len(ps) or len({b for _, b in ps}) != len(ps):
            raise ProgramError(f"collective_permute: source_target_pairs {ps} repeat a source or a target")
        parts = self._exchange(x)
        s = nbytes(self.xp, x)
        involved = tuple(sorted({r for p in ps for r in p}))
        self._record(
            "collective_permute",
            involved,
            x,
            s * sum(1 for t in targets if t != self._rank),
            s if sources and sources[0] != self._rank else 0,
        )
        if not sources:
            return self.xp.zeros_like(x)
        return parts[sources[0]]

    def barrier(self) -> None:
        self._wait()


def run_ranks(
    size: int, body: Callable[[int, ThreadCommunicator], list[Any]], xp: Any
) -> tuple[list[list[Any]], World]:
    """Runs ``body(rank, comm)`` for every rank in its own thread and returns the per-rank
    results and the world. If a rank raises, the barrier is aborted so no rank hangs, and the
    first failing rank's error is raised as ``ProgramError`` naming the rank."""
    world = World(size)
    results: list[list[Any]] = [[] for _ in range(size)]
    errors: list[BaseException | None] = [None] * size

    def target(rank: int) -> None:
        try:
            results[rank] = body(rank, ThreadCommunicator(world, rank, xp))
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors[rank] = e
            world.abort()

    threads = [threading.Thread(target=target, args=(r,), name=f"shardwise-rank-{r}", daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [(r, e) for r, e in enumerate(errors) if e is not None]
    if failed:
        primary = [(r, e) for r, e in failed if not isinstance(e, RankAborted)] or failed
        rank, err = primary[0]
        if isinstance(err, RankAborted):
            raise err
        raise ProgramError(f"rank {rank} failed: {type(err).__name__}: {err}") from err
    return results, world
