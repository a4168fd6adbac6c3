"""Running a partition directory on MPI ranks (issue 7): ``shardwise launch -n N OUTDIR``.

The driver (``launch``) starts ``mpiexec -n N python -m mpi4py -m shardwise.spmd.launch
OUTDIR ...`` with the ``mpiexec`` installed beside the Python executable (the ``mpich`` wheel's,
from ``pip install 'shardwise[mpi]'``) in its own session, every process of the job marked by
an environment variable, so that a timeout or an interrupt kills mpiexec, its proxies and every
rank (``run_job``). Each rank (``rank_main``)

1. loads ``load_partition(OUTDIR, rank)`` and ``partitioned.mlir``;
2. builds the random global inputs of ``check_partition`` (``random_inputs(seed)`` of the
   global ``func``) and takes its own padded block (``shard_inputs``), so results are
   comparable with ``shardwise run OUTDIR --check``; arguments the partition has weights for
   get the rank's saved blocks instead (``weights/rank{r}.npz``, ``spmd.load.run_inputs``);
3. runs its program with an ``MpiCommunicator`` (``--backend mpi``) or an ``NcclCommunicator``
   on GPU ``rank % device_count`` with CuPy arrays (``--backend nccl``), timed between two
   barriers;
4. sends its results, collective records and time to rank 0, which with ``--check`` runs the
   unpartitioned program (``unpartitioned(partitioned.mlir)``) on the same global values (the
   weights reassembled from every rank's blocks, ``global_weights``) and compares block by block
   (``compare_outputs``: the table of ``shardwise run --check``), and writes a JSON summary
   for the driver (atomically).

A rank that raises prints ``shardwise launch: rank R failed:`` and its traceback and calls
``MPI_Abort``, which ends every rank; the driver raises ``LaunchError`` with that traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import re
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardwise.errors import LaunchError, LaunchTimeout, ShardwiseError
from shardwise.execute.devices import to_host
from shardwise.execute.simulator import CollectiveRecord
from shardwise.files import write_atomic
from shardwise.spmd.partition.check import OutputCheck

__all__ = [
    "BACKENDS",
    "JobOutput",
    "LaunchError",
    "LaunchResult",
    "LaunchTimeout",
    "find_mpiexec",
    "launch",
    "rank_main",
    "run_job",
]

#: Backends of ``launch``.
BACKENDS = ("mpi", "nccl")

#: Seconds between SIGTERM and SIGKILL of the process group on a timeout or an interrupt.
KILL_GRACE_S = 2.0

_FAILED = re.compile(r"shardwise launch: rank (\d+) failed")

#: Environment variable marking every process of one job (mpiexec, proxies, ranks).
_JOB_ENV = "SHARDWISE_LAUNCH_ID"
#: Seconds a failing rank waits after printing its traceback, before it aborts the job.
_ABORT_PAUSE = 0.5


@dataclass(frozen=True)
class JobOutput:
    """A finished MPI job: exit status 0, combined output, wall-clock seconds of ``mpiexec``."""

    returncode: int
    output: str
    seconds: float


def find_mpiexec() -> str:
    """The ``mpiexec`` of this Python's environment (beside ``sys.executable``, then the
    scripts directory; the ``mpich`` wheel installs it there), else the first on ``PATH``.
    ``ShardwiseError`` saying how to install one when there is none."""
    import shutil

    for d in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = d / "mpiexec"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("mpiexec")
    if found is None:
        raise ShardwiseError(
            f"no mpiexec beside {sys.executable} nor on PATH: pip install 'shardwise[mpi]' (brings mpi4py and the mpich wheel)"
        )
    return found


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _job_pids(job_id: str) -> list[int]:
    """Live (not zombie) processes carrying ``SHARDWISE_LAUNCH_ID=job_id`` in their
    environment: mpiexec, its proxies and the ranks (hydra starts proxies and ranks in sessions
    of their own, so the process group of mpiexec does not hold them)."""
    needle = f"{_JOB_ENV}={job_id}".encode() + b"\0"
    pids: list[int] = []
    if not Path("/proc").is_dir():  # pragma: no cover - not Linux: only mpiexec's group is killed
        return pids
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes() + b"\0":
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except OSError:
            continue
        pids.append(int(entry.name))
    return pids


def _kill_job(pgid: int, job_id: str) -> None:
    """Ends every process of a job: SIGTERM to mpiexec's process group and to each process
    carrying the job's id, then SIGKILL to those still alive after ``KILL_GRACE_S``; returns
    once none is left (or after a second grace period)."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        pids = _job_pids(job_id)
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _job_pids(job_id):
                return
            time.sleep(0.05)


def run_job(
    n: int, args: Sequence[str], *, timeout: float | None = None, env: dict[str, str] | None = None
) -> JobOutput:
    """Runs ``mpiexec -n n -prepend-rank python -m mpi4py *args`` in a new session and waits.

    ``env``: the job's environment (this process's when ``None``); with more ranks than CPUs it
    gets ``MPIR_CVAR_ENABLE_HEAVY_YIELD=1`` unless set (MPICH ranks waiting in a collective then
    yield the CPU instead of busy polling: 200 barriers of 8 ranks on 2 cores take 0.1 s instead
    of 1.4 s). ``timeout``: seconds (``None``: no limit). On a timeout or ``KeyboardInterrupt`` the whole
    process group is killed (SIGTERM, then SIGKILL after ``KILL_GRACE_S``); after any end the
    group is killed too, so no rank outlives the job. Raises ``LaunchTimeout`` after a timeout,
    ``LaunchError`` (with the failing rank's traceback) for a non-zero exit status, and
    ``ShardwiseError`` for ``n < 1`` or a missing mpiexec."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ShardwiseError(f"the number of MPI ranks must be a positive int, got {n!r}")
    cmd = [find_mpiexec(), "-n", str(n), "-prepend-rank", sys.executable, "-m", "mpi4py", *args]
    env = dict(os.environ if env is None else env)
    job_id = f"{os.getpid()}-{time.time_ns()}"
    env[_JOB_ENV] = job_id
    if n > _cpus():
        # oversubscribed: MPICH's busy polling starves the other ranks; yield instead
        env.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
        text=True,
        errors="replace",
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_job(proc.pid, job_id)
        out, _ = proc.communicate()
        raise LaunchTimeout(
            f"MPI job of {n} ranks ran past its timeout of {timeout:g} s and was killed; its output:\n{_tail(out)}",
            returncode=None,
            rank=_failed_rank(out),
            output=out,
        ) from None
    except BaseException:
        _kill_job(proc.pid, job_id)
        proc.communicate()
        raise
    finally:
        _kill_job(proc.pid, job_id)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        rank = _failed_rank(out)
        who = f"rank {rank} failed" if rank is not None else "a rank or mpiexec failed"
        raise LaunchError(
            f"MPI job of {n} ranks ended with exit status {proc.returncode}: {who}; its output:\n{_tail(out)}",
            returncode=proc.returncode,
            rank=rank,
            output=out,
        )
    return JobOutput(proc.returncode, out, seconds)


def _failed_rank(out: str) -> int | None:
    m = _FAILED.search(out)
    return int(m.group(1)) if m else None


def _tail(out: str, limit: int = 6000) -> str:
    """The part of ``out`` from the first rank failure report (or its last ``limit``
    characters)."""
    m = _FAILED.search(out)
    start = out.rfind("\n", 0, m.start()) + 1 if m else max(0, len(out) - limit)
    return out[start : start + limit].rstrip()


@dataclass
class LaunchResult:
    """A finished ``launch``: ``checks`` (one ``OutputCheck`` per result with ``check=True``,
    else ``None``), each rank's collective records and run seconds (between two barriers,
    excluding start-up, loading and input generation), the backend, the job's wall-clock
    seconds (``mpiexec`` start to exit), its output and, with ``keep_outputs``, every rank's
    results (``outputs[rank]``: numpy arrays, local shapes)."""

    num_ranks: int
    backend: str
    checks: list[OutputCheck] | None
    collectives: list[list[CollectiveRecord]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    wall_seconds: float = 0.0
    output: str = ""
    outputs: list[list[Any]] | None = None

    @property
    def passed(self) -> bool:
        """Every result passed the check (``False`` without a check)."""
        return self.checks is not None and all(c.passed for c in self.checks)

    def bytes_sent(self, rank: int) -> int:
        """Total bytes ``rank`` sent over all collectives (model volumes)."""
        return sum(r.bytes_sent for r in self.collectives[rank])


def launch(
    outdir: str | os.PathLike[str],
    n: int,
    *,
    backend: str = "mpi",
    check: bool = False,
    seed: int = 0,
    timeout: float | None = 600.0,
    reductions: str = "ordered",
    repeat: int = 1,
    keep_outputs: bool = False,
) -> LaunchResult:
    """Runs the partition in ``outdir`` on ``n`` MPI ranks (``n`` must be its ``num_ranks``).

    ``backend``: ``"mpi"`` (``MpiCommunicator``, numpy) or ``"nccl"`` (``NcclCommunicator``,
    CuPy on GPUs). ``check``: rank 0 compares every result with the unpartitioned program
    (criterion of ``check_partition``) on the same global values. ``seed``: the random global
    inputs' seed; arguments with saved weights (``partition(weights=...)``) get those instead.
    ``timeout``: seconds before the job is killed. ``reductions``: ``"ordered"`` (the simulator's
    fold in group order: results bit-equal to ``shardwise run``) or ``"native"`` (MPI's or
    NCCL's own reduction operations; see ``MpiCommunicator`` and ``NcclCommunicator``). ``repeat``: runs of the program on each rank (the first pays
    one-time costs such as sub-communicator creation); ``seconds`` keeps each rank's fastest
    and ``collectives`` the last run's. ``keep_outputs``: also return every rank's results.

    Raises ``ShardwiseError`` for a directory that is not a partition, ``n`` different from its
    number of ranks, an unknown backend, or ``nccl`` without CuPy or a GPU (before any rank
    starts); ``LaunchError`` when a rank fails (message: its
    traceback); ``LaunchTimeout`` when the job runs past ``timeout``."""
    from shardwise.spmd.load import check_rank_files, entry, load_global, load_meta

    meta = load_meta(outdir)
    entry(meta, load_global(outdir))  # a bad partition directory fails here, once, not on every rank
    ranks = meta["num_ranks"]
    if isinstance(n, bool) or not isinstance(n, int) or n != ranks:
        mesh = meta.get("mesh")
        raise ShardwiseError(
            f"launch -n {n!r}: the partition in {outdir} has {ranks} ranks (mesh {mesh.get('text', '?') if isinstance(mesh, dict) else mesh}); pass -n {ranks}"
        )
    check_rank_files(outdir, ranks)
    if backend not in BACKENDS:
        raise ShardwiseError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    if reductions not in ("ordered", "native"):
        raise ShardwiseError(f"reductions must be 'ordered' or 'native', got {reductions!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ShardwiseError(f"repeat must be a positive int, got {repeat!r}")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0
    ):
        raise ShardwiseError(f"timeout must be a positive number of seconds (or None for no limit), got {timeout!r}")
    if backend == "nccl":
        # Checked here, once, so a missing CuPy or GPU is one line and not n rank tracebacks.
        from shardwise.execute.nccl import gpu_count, import_cupy

        import_cupy()
        if gpu_count() < 1:
            raise ShardwiseError("the NCCL backend needs a CUDA GPU, and CuPy sees none (use --backend mpi on CPUs)")
    with tempfile.TemporaryDirectory(prefix="shardwise-launch-") as tmp:
        summary = Path(tmp) / "summary.json"
        args = [
            "-m",
            "shardwise.spmd.launch",
            os.fspath(outdir),
            "--backend",
            backend,
            "--seed",
            str(seed),
            "--summary",
            str(summary),
            "--reductions",
            reductions,
        ]
        flags = [*(["--check"] if check else []), *(["--outputs"] if keep_outputs else []), "--repeat", str(repeat)]
        job = run_job(n, [*args, *flags], timeout=timeout)
        try:
            data = json.loads(summary.read_text())
            outputs = pickle.loads(summary.with_suffix(".outputs.pickle").read_bytes()) if keep_outputs else None
        except (OSError, json.JSONDecodeError) as e:
            raise LaunchError(
                f"MPI job of {n} ranks ended without a summary from rank 0 ({e}); its output:\n{_tail(job.output)}",
                returncode=job.returncode,
                rank=None,
                output=job.output,
            ) from None
    checks = (
        None if data["checks"] is None else [OutputCheck(**(c | {"shape": tuple(c["shape"])})) for c in data["checks"]]
    )
    collectives = [
        [
            CollectiveRecord(
                r["kind"], tuple(r["group"]), tuple(r["shape"]), r["dtype"], r["bytes_sent"], r["bytes_received"]
            )
            for r in rank
        ]
        for rank in data["collectives"]
    ]
    return LaunchResult(n, backend, checks, collectives, list(data["seconds"]), job.seconds, job.output, outputs)


# ---------------------------------------------------------------------------------------------
# Rank side: `python -m mpi4py -m shardwise.spmd.launch OUTDIR ...`


def _record_dict(r: CollectiveRecord) -> dict[str, Any]:
    return {
        "kind": r.kind,
        "group": list(r.group),
        "shape": list(r.shape),
        "dtype": r.dtype,
        "bytes_sent": r.bytes_sent,
        "bytes_received": r.bytes_received,
    }


def _rank_run(args: argparse.Namespace, mpi: Any) -> None:
    from shardwise.execute.interpreter import run
    from shardwise.spmd.load import entry, load_global, load_meta, load_partition, run_inputs, unpartitioned
    from shardwise.spmd.partition.check import compare_outputs

    world = mpi.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    expected = load_meta(args.outdir)["num_ranks"]
    if size != expected:
        raise ShardwiseError(f"{args.outdir} has {expected} ranks but the MPI job has {size}; run with -n {expected}")
    module, meta, weights = load_partition(args.outdir, rank)
    g = load_global(args.outdir)
    func = entry(meta, g)
    # Rank 0's check runs the unpartitioned program: it alone reassembles the global weights.
    inputs, rows = run_inputs(
        args.outdir, g, meta, args.seed, [rank], global_values=rank == 0 and args.check, loaded={rank: weights}
    )
    local = rows[0]

    xp: Any = None
    comm: Any
    if args.backend == "nccl":
        from shardwise.execute.nccl import NcclCommunicator, cupy_namespace

        comm = NcclCommunicator(world, reductions="nccl" if args.reductions == "native" else "ordered")
        xp = cupy_namespace()
        local = [xp.asarray(x) for x in local]
    else:
        from shardwise.execute.mpi import MpiCommunicator

        comm = MpiCommunicator(world, reductions="mpi" if args.reductions == "native" else "ordered")
    seconds = float("inf")
    for _ in range(args.repeat):
        comm.records.clear()
        comm.barrier()
        t0 = time.perf_counter()
        outputs = run(module, local, xp=xp, comm=comm, rank=rank, func=func)
        comm.barrier()
        seconds = min(seconds, time.perf_counter() - t0)
    host = [to_host(x) for x in outputs]
    gathered = world.gather((host, [_record_dict(r) for r in comm.records], seconds), root=0)
    if rank != 0:
        return
    checks = None
    if args.check:
        original = unpartitioned(g)
        ref = run(original, inputs, func=func)
        exact = lambda: run(original, inputs, func=func, wide=True)
        checks = [
            o.__dict__ | {"shape": list(o.shape)}
            for o in compare_outputs(g, ref, [row[0] for row in gathered], func, exact=exact)
        ]
    summary = {"checks": checks, "collectives": [row[1] for row in gathered], "seconds": [row[2] for row in gathered]}
    if args.summary:
        write_atomic(args.summary, json.dumps(summary))
        if args.outputs:
            path = Path(args.summary).with_suffix(".outputs.pickle")
            write_atomic(path, pickle.dumps([row[0] for row in gathered]))


def rank_main(argv: Sequence[str] | None = None) -> None:
    """The body of each rank (run under ``python -m mpi4py``). On any error it prints
    ``shardwise launch: rank R failed:`` with the traceback to stderr and aborts the job."""
    parser = argparse.ArgumentParser(prog="python -m mpi4py -m shardwise.spmd.launch")
    parser.add_argument("outdir")
    parser.add_argument("--backend", choices=BACKENDS, default="mpi")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--summary", help="where rank 0 writes the JSON summary")
    parser.add_argument("--reductions", choices=("ordered", "native"), default="ordered")
    parser.add_argument("--repeat", type=int, default=1, help="runs of the program; the fastest is reported")
    parser.add_argument(
        "--outputs", action="store_true", help="rank 0 also pickles every rank's results beside the summary"
    )
    args = parser.parse_args(argv)
    from shardwise.execute.mpi import import_mpi

    mpi = import_mpi()
    try:
        _rank_run(args, mpi)
    except BaseException:  # noqa: BLE001 (any failure of a rank aborts every rank)
        rank = mpi.COMM_WORLD.Get_rank()
        sys.stderr.write(f"shardwise launch: rank {rank} failed:\n{traceback.format_exc()}")
        sys.stderr.flush()
        # mpiexec forwards a rank's output asynchronously, and the abort kills every rank and
        # its forwarding: without a pause the traceback was lost once in a test run.
        time.sleep(_ABORT_PAUSE)
        mpi.COMM_WORLD.Abort(1)


if __name__ == "__main__":
    rank_main()
