"""The driver of the fault corpus (``shardwise.testing.faults``), in the test or benchmark
process: runs cases in memory-limited worker processes (``run_cases``; ``limited`` sets the
limit) with a per-case timeout, adds crashes (a worker killed by a signal or exiting) and hangs
(a case past its timeout) to what the workers report, and summarizes the ``Outcome``s
(``summarize``, ``problems``, ``describe``, ``known_issue``)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Address-space limit of every process the suite starts (``RLIMIT_AS``).
MEMORY_LIMIT = 4 << 30
#: What a case may end in besides "ok": the problems, in the order the report lists them.
PROBLEMS = (
    "crash",
    "hang",
    "data-loss",
    "stderr",
    "long-message",
    "traceback",
    "exit-code",
    "wrong",
)
#: Problems the corpus finds whose fix belongs to files outside the suite's reach, while they
#: are not fixed: a name -> (a pattern matched against ``"STATUS: DETAIL [input: INPUT]"`` of a
#: case, where the fix belongs). The CI run leaves them out (give each an xfail test of its own
#: in tests/python/test_faults.py); the campaign counts them with the rest and marks them "known".
KNOWN_ISSUES: dict[str, tuple[str, str]] = {
    # None at present. The first campaign's finds (is_partition_dir reading a FIFO, /dev/zero or
    # deep JSON; a maximal-mesh value in the projection; an empty module's export) are fixed
    # and have regression tests in tests/python/test_faults.py.
}


def known_issue(o: Outcome) -> str | None:
    """The name of the known issue ``o`` is an instance of, or ``None``."""
    for name, (pattern, _) in KNOWN_ISSUES.items():
        if re.search(pattern, f"{o.status}: {o.detail} [input: {' '.join(map(str, o.input))}]"):
            return name
    return None


_EXEC_LIMITED = (
    "import os, resource, sys; n = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_AS, (n, n)); os.execv(sys.argv[2], sys.argv[2:])"
)


def limited(cmd: Sequence[str | bytes], limit: int = MEMORY_LIMIT) -> list[str | bytes]:
    """``cmd`` (its first item an executable path) run with ``RLIMIT_AS`` = ``limit`` bytes:
    a small Python process sets the limit and execs it (same pid). Not a ``preexec_fn``: that
    makes ``subprocess`` fork with Python's at-fork hooks, and JAX's (registered once a test
    has used a JAX backend) warns that forking a multithreaded process may deadlock."""
    return [sys.executable, "-c", _EXEC_LIMITED, str(limit), *cmd]


@dataclass
class Outcome:
    """One case: its category and index, what was done to the input, its status (``ok`` or a
    ``PROBLEMS`` entry), a detail for a problem, whether the input was accepted, seconds."""

    category: str
    i: int
    status: str
    input: list[Any] = field(default_factory=list)
    detail: str = ""
    accepted: bool = False
    seconds: float = 0.0

    @property
    def replay(self) -> str:
        return f"python -m shardwise.testing.faults --replay {self.category} SEED {self.i}"


def run_cases(
    category: str,
    seed: int,
    count: int,
    workdir: Path,
    *,
    start: int = 0,
    case_timeout: float = 60.0,
    memory: int = MEMORY_LIMIT,
    corpus: bool = False,
    startup_grace: float = 30.0,
    progress: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Runs cases ``start..start+count-1`` of ``category`` in worker processes under
    ``RLIMIT_AS = memory``; a worker that dies or exceeds ``case_timeout`` seconds on one case
    makes that case a ``crash`` or a ``hang`` and a new worker goes on with the next."""
    workdir.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    i, stop = start, start + count
    while i < stop:
        errlog = workdir / f"worker{i}.stderr"
        with open(errlog, "wb") as err:
            cmd = [
                sys.executable,
                "-m",
                "shardwise.testing.faults",
                "--worker",
                category,
                str(seed),
                str(i),
                str(stop),
                str(workdir),
                *(["--corpus"] if corpus else []),
            ]
            env = dict(
                os.environ,
                PYTHONFAULTHANDLER="1",
                XLA_FLAGS="--xla_force_host_platform_device_count=8",
            )
            proc = subprocess.Popen(
                limited(cmd, memory),
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
        try:
            status, current, current_input = _read_worker(
                proc, i, case_timeout, startup_grace, category, outcomes, progress
            )
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # a worker never outlives the driver
            proc.wait()
            raise
        if status == "hang":
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
        if current is None and status == "crash" and proc.returncode == 0:
            errlog.unlink(missing_ok=True)
            break  # finished
        tail = errlog.read_text(errors="replace")[-600:]
        failed = current if current is not None else i
        how = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        if status == "hang":
            detail = f"no answer within {case_timeout:g} s"
        else:
            detail = f"worker {how}; stderr: {tail!r}"
        o = Outcome(
            category,
            failed,
            status or "crash",
            current_input if current is not None else [],
            detail,
        )
        outcomes.append(o)
        if progress is not None:
            progress(o)
        shutil.rmtree(workdir / f"case{failed}", ignore_errors=True)
        i = failed + 1
        errlog.unlink(missing_ok=True)
    return outcomes


def _read_worker(
    proc: subprocess.Popen[bytes],
    i: int,
    case_timeout: float,
    startup_grace: float,
    category: str,
    outcomes: list[Outcome],
    progress: Callable[[Outcome], None] | None,
) -> tuple[str, int | None, list[Any]]:
    """Reads a worker's reports until it ends (``crash``, also for a normal end) or a case
    runs past its time (``hang``); returns that, the case under way and its input."""
    assert proc.stdout is not None
    buf = b""
    current: int | None = None
    current_input: list[Any] = []
    deadline = time.monotonic() + case_timeout + startup_grace  # the first case also imports jax
    fd = proc.stdout.fileno()
    status: str | None = None
    while True:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(remaining, 0))
        if not ready:
            status = "hang"
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            status = "crash"
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            kind, _, rest = line.decode().partition(" ")
            if kind == "input":
                current_input = json.loads(rest)
            elif kind == "start":
                current = int(rest)
                current_input = []
                deadline = time.monotonic() + case_timeout + (startup_grace if current == i else 0)
            elif kind == "done":
                info = json.loads(rest)
                o = Outcome(
                    category,
                    info["i"],
                    info["status"],
                    info.get("input", []),
                    info.get("detail", ""),
                    bool(info.get("accepted")),
                    info["seconds"],
                )
                outcomes.append(o)
                if progress is not None:
                    progress(o)
                current = None
    return status or "crash", current, current_input


def summarize(outcomes: Sequence[Outcome]) -> dict[str, dict[str, int]]:
    """Per category: ``tried``, ``accepted`` and the count of each problem kind."""
    table: dict[str, dict[str, int]] = {}
    for o in outcomes:
        row = table.setdefault(o.category, {"tried": 0, "accepted": 0, **dict.fromkeys(PROBLEMS, 0)})
        row["tried"] += 1
        row["accepted"] += o.accepted
        if o.status != "ok":
            row[o.status] = row.get(o.status, 0) + 1
    return table


def problems(outcomes: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.status != "ok"]


def describe(o: Outcome, seed: int) -> str:
    return f"[{o.category} #{o.i} {o.status}] input {o.input}: {o.detail} (replay: python -m shardwise.testing.faults --replay {o.category} {seed} {o.i})"
