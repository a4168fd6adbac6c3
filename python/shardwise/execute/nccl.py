"""The NCCL backend of the ``Communicator`` protocol (``shardwise.execute.comm``): CuPy arrays
on one GPU per MPI process, collectives through ``cupy.cuda.nccl.NcclCommunicator``.

MPI bootstraps it: one ``NcclCommunicator`` per group tuple, created on first use by the
group's members, with the NCCL unique id made by the group's first member and broadcast over
the group's MPI sub-communicator (``MpiCommunicator.sub_communicator``); NCCL rank ``i`` is
``group[i]``. Data moves as raw bytes (``ncclUint8``), so every dtype moves exactly:
all-gather is ``ncclAllGather``; all-to-all and collective-permute are grouped
``ncclSend``/``ncclRecv`` (``groupStart``/``groupEnd``; permutes on the communicator of all
ranks). Every call is enqueued on CuPy's current stream, so the interpreter's CuPy operations
that follow see the result.

Reductions: ``reductions="ordered"`` (default) gives every element the simulator's fold in
group order (all-to-all of chunks, ``reduce_arrays`` on the GPU, all-gather back), so results
equal ``ThreadCommunicator``'s on the same CuPy arrays bit for bit; ``reductions="nccl"`` uses
``ncclAllReduce`` / ``ncclReduceScatter`` (``ncclSum``, ``ncclProd``; ``ncclMax``/``ncclMin``
for integers) for float16/32/64 and integer arrays, in NCCL's order (ring or tree: float
sums differ from the fold by rounding); other dtypes and ops use the ordered path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardwise.errors import ProgramError, ShardwiseError
from shardwise.execute.comm import REDUCTIONS, reduce_arrays
from shardwise.execute.mpi import MpiCommunicator, check_group, collective_bytes, permute_peers
from shardwise.execute.simulator import CollectiveRecord

__all__ = ["NcclCommunicator", "cupy_namespace", "gpu_count", "import_cupy"]

_NCCL_OPS = {"add": "NCCL_SUM", "mul": "NCCL_PROD", "max": "NCCL_MAX", "min": "NCCL_MIN"}
_NCCL_TYPES = {
    "int8": "NCCL_INT8",
    "uint8": "NCCL_UINT8",
    "int32": "NCCL_INT32",
    "uint32": "NCCL_UINT32",
    "int64": "NCCL_INT64",
    "uint64": "NCCL_UINT64",
    "float16": "NCCL_FLOAT16",
    "float32": "NCCL_FLOAT32",
    "float64": "NCCL_FLOAT64",
}


def import_cupy() -> Any:
    """``cupy``, or ``ShardwiseError`` saying how to install it."""
    try:
        import cupy  # type: ignore[import-not-found,unused-ignore]
        import cupy.cuda.nccl  # type: ignore[import-not-found,unused-ignore]
    except ImportError as e:
        raise ShardwiseError(f"the NCCL backend needs CuPy with NCCL: pip install 'shardwise[cuda]' ({e})") from None
    return cupy


def gpu_count() -> int:
    """Number of CUDA devices CuPy sees (0 without CuPy, a driver or a GPU)."""
    try:
        cupy = import_cupy()
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device: all mean "none"
        return 0


def cupy_namespace() -> Any:
    """The array-API namespace of CuPy arrays (``array_api_compat.cupy``) for the interpreter."""
    import_cupy()
    import array_api_compat.cupy as xp

    return xp


class NcclCommunicator:
    """The ``Communicator`` of this MPI process on GPU ``device`` (``rank % gpu_count()`` when
    ``None``), bootstrapped over ``comm`` (``MPI.COMM_WORLD`` when ``None``). Arguments and
    results are CuPy arrays. ``records``: a ``CollectiveRecord`` per collective (the simulator's
    model volumes).

    Collective over ``comm``. ``ShardwiseError`` without CuPy/NCCL or a GPU, or for an unknown
    ``reductions``; collectives raise ``ProgramError`` for a bad group or indivisible
    dimensions and ``cupy.cuda.nccl.NcclError`` for an NCCL failure."""

    def __init__(self, comm: Any = None, *, device: int | None = None, reductions: str = "ordered") -> None:
        if reductions not in ("ordered", "nccl"):
            raise ShardwiseError(f"reductions must be 'ordered' or 'nccl', got {reductions!r}")
        self._cp = import_cupy()
        from cupy.cuda import nccl  # type: ignore[import-not-found,unused-ignore]

        self._nccl = nccl
        n_gpus = gpu_count()
        if n_gpus == 0:
            raise ShardwiseError("the NCCL backend needs a CUDA GPU; CuPy sees none")
        self._boot = MpiCommunicator(comm)
        self.device = self._boot.rank % n_gpus if device is None else device
        self._cp.cuda.Device(self.device).use()
        self._subs: dict[tuple[int, ...], Any] = {}
        self.reductions = reductions
        self.records: list[CollectiveRecord] = []

    @property
    def rank(self) -> int:
        return self._boot.rank

    @property
    def size(self) -> int:
        return self._boot.size

    def _stream(self) -> int:
        return int(self._cp.cuda.get_current_stream().ptr)

    def sub_communicator(self, group: Sequence[int]) -> Any:
        """The NCCL communicator of ``group`` (its rank ``i`` is ``group[i]``), made on first
        use by the group's members (unique id broadcast over MPI) and cached."""
        g = check_group(group, self.rank, self.size)
        sub = self._subs.get(g)
        if sub is None:
            mpi_sub = self._boot.sub_communicator(g)
            uid = self._nccl.get_unique_id() if g[0] == self.rank else None
            uid = mpi_sub.bcast(uid, root=0)
            sub = self._nccl.NcclCommunicator(len(g), uid, g.index(self.rank))
            self._subs[g] = sub
        return sub

    def _contiguous(self, x: Any) -> Any:
        a = self._cp.asarray(x)
        return a if a.flags.c_contiguous else a.copy(order="C")

    def _record(self, kind: str, group: tuple[int, ...], a: Any, sent: int, received: int) -> None:
        self.records.append(CollectiveRecord(kind, group, tuple(a.shape), str(a.dtype), sent, received))

    def _chunks(self, a: Any, axis: int, n: int, what: str) -> Any:
        if a.shape[axis] % n:
            raise ProgramError(
                f"{what}: dimension {axis} of size {a.shape[axis]} is not divisible by the group size {n}"
            )
        c = a.shape[axis] // n
        blocked = a.reshape(*a.shape[:axis], n, c, *a.shape[axis + 1 :])
        return self._cp.ascontiguousarray(self._cp.moveaxis(blocked, axis, 0))

    def _exchange(self, sub: Any, send: Any) -> Any:
        """Grouped send/recv: ``send[j]`` goes to member ``j``; ``recv[j]`` comes from it."""
        recv = self._cp.empty_like(send)
        nbytes = send[0].nbytes if send.shape[0] else 0
        stream = self._stream()
        self._nccl.groupStart()
        for j in range(send.shape[0]):
            sub.send(send[j].data.ptr, nbytes, self._nccl.NCCL_UINT8, j, stream)
            sub.recv(recv[j].data.ptr, nbytes, self._nccl.NCCL_UINT8, j, stream)
        self._nccl.groupEnd()
        return recv

    def all_gather(self, x: Any, group: Sequence[int], axis: int) -> Any:
        g = tuple(int(r) for r in group)
        sub = self.sub_communicator(g)
        a = self._contiguous(x)
        n = len(g)
        recv = self._cp.empty((n, *a.shape), dtype=a.dtype)
        sub.allGather(a.data.ptr, recv.data.ptr, a.nbytes, self._nccl.NCCL_UINT8, self._stream())
        self._record("all_gather", g, a, *collective_bytes("all_gather", n, a.nbytes))
        return self._cp.concatenate([recv[i] for i in range(n)], axis=axis)

    def all_to_all(self, x: Any, group: Sequence[int], split_axis: int, concat_axis: int) -> Any:
        g = tuple(int(r) for r in group)
        sub = self.sub_communicator(g)
        a = self._contiguous(x)
        n = len(g)
        recv = self._exchange(sub, self._chunks(a, split_axis, n, "all_to_all"))
        self._record("all_to_all", g, a, *collective_bytes("all_to_all", n, a.nbytes))
        return self._cp.concatenate([recv[j] for j in range(n)], axis=concat_axis)

    def _native(self, a: Any, op: str) -> tuple[int, int] | None:
        """(NCCL datatype, NCCL op) for ``op`` on ``a``'s dtype, or ``None`` (ordered path)."""
        if op not in REDUCTIONS:
            raise ValueError(f"unknown reduction {op!r}; expected one of {REDUCTIONS}")
        name = str(a.dtype)
        if self.reductions != "nccl" or name not in _NCCL_TYPES or op not in _NCCL_OPS:
            return None
        if op in ("max", "min") and a.dtype.kind == "f":
            return None
        return getattr(self._nccl, _NCCL_TYPES[name]), getattr(self._nccl, _NCCL_OPS[op])

    def _fold(self, sub: Any, send: Any, op: str) -> Any:
        recv = self._exchange(sub, send)
        return reduce_arrays(cupy_namespace(), [recv[j] for j in range(send.shape[0])], op)

    def all_reduce(self, x: Any, group: Sequence[int], op: str) -> Any:
        g = tuple(int(r) for r in group)
        sub = self.sub_communicator(g)
        a = self._contiguous(x)
        n = len(g)
        native = self._native(a, op)
        self._record("all_reduce", g, a, *collective_bytes("all_reduce", n, a.nbytes))
        if native is not None:
            out = self._cp.empty_like(a)
            sub.allReduce(a.data.ptr, out.data.ptr, a.size, native[0], native[1], self._stream())
            return out
        flat = a.reshape(-1)
        c = -(-flat.size // n)
        padded = self._cp.zeros(n * c, dtype=a.dtype)
        padded[: flat.size] = flat
        mine = self._cp.ascontiguousarray(self._fold(sub, padded.reshape(n, c), op))
        full = self._cp.empty((n, c), dtype=a.dtype)
        sub.allGather(mine.data.ptr, full.data.ptr, mine.nbytes, self._nccl.NCCL_UINT8, self._stream())
        return full.reshape(-1)[: flat.size].reshape(a.shape)

    def reduce_scatter(self, x: Any, group: Sequence[int], axis: int, op: str) -> Any:
        g = tuple(int(r) for r in group)
        sub = self.sub_communicator(g)
        a = self._contiguous(x)
        n = len(g)
        send = self._chunks(a, axis, n, "reduce_scatter")
        native = self._native(a, op)
        self._record("reduce_scatter", g, a, *collective_bytes("reduce_scatter", n, a.nbytes))
        if native is None:
            return self._fold(sub, send, op)
        out = self._cp.empty_like(send[0])
        sub.reduceScatter(send.data.ptr, out.data.ptr, out.size, native[0], native[1], self._stream())
        return out

    def collective_permute(self, x: Any, pairs: Sequence[tuple[int, int]]) -> Any:
        targets, source = permute_peers(pairs, self.rank)
        world = self.sub_communicator(tuple(range(self.size)))
        a = self._contiguous(x)
        out = a.copy() if source == self.rank else self._cp.zeros_like(a)
        stream = self._stream()
        self._nccl.groupStart()
        for t in targets:
            if t != self.rank:
                world.send(a.data.ptr, a.nbytes, self._nccl.NCCL_UINT8, t, stream)
        if source is not None and source != self.rank:
            world.recv(out.data.ptr, a.nbytes, self._nccl.NCCL_UINT8, source, stream)
        self._nccl.groupEnd()
        involved = tuple(sorted({r for p in pairs for r in (int(p[0]), int(p[1]))}))
        sends = sum(1 for t in targets if t != self.rank)
        self._record(
            "collective_permute",
            involved,
            a,
            *collective_bytes("collective_permute", 0, a.nbytes, sends=sends, receives=source not in (None, self.rank)),
        )
        return out

    def barrier(self) -> None:
        self._cp.cuda.get_current_stream().synchronize()
        self._boot.barrier()
