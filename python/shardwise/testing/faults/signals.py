"""The signal trials of the fault corpus (``shardwise.testing.faults``): a real ``shardwise``
process (``propagate``, ``partition``, ``iopddl``, ``launch``) gets SIGINT or SIGTERM a chosen
time after its ``main`` started (``signal_trial``), and must end cleanly: an expected exit
status, no traceback, its output untouched or complete, no temporary file and no process left."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from shardwise.testing.faults.driver import MEMORY_LIMIT, limited
from shardwise.testing.faults.mutate import SEEDS
from shardwise.testing.faults.outdir import SENTINEL, leftovers, snapshot

#: The commands of the signal trials, each with about how many seconds of work follow the start
#: of ``main`` (the window the signal's time is drawn from).
SIGNAL_COMMANDS = {"propagate": 1.5, "partition": 2.0, "iopddl": 2.5, "launch": 4.0}
_MARK = "SHARDWISE_FAULTS_MARK"


def cli_env(tmpdir: Path, mark: str = "") -> dict[str, str]:
    """The environment of a ``shardwise`` subprocess: ``TMPDIR`` (checked for leftovers), a
    wide terminal, and ``mark`` in ``SHARDWISE_FAULTS_MARK`` (inherited by every descendant,
    so that leftover processes can be found)."""
    env = dict(
        os.environ,
        TMPDIR=str(tmpdir),
        COLUMNS="200",
        XLA_FLAGS="--xla_force_host_platform_device_count=8",
        PYTHONFAULTHANDLER="1",
    )
    env.pop("PYTEST_CURRENT_TEST", None)
    if mark:
        env[_MARK] = mark
    return env


def marked_pids(mark: str) -> list[int]:
    """Live (not zombie) processes whose environment holds ``SHARDWISE_FAULTS_MARK=mark``."""
    needle = f"{_MARK}={mark}".encode() + b"\0"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (
                needle in (entry / "environ").read_bytes() + b"\0"
                and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def sigterm_caught(pid: int) -> bool:
    """Whether process ``pid`` has a handler for SIGTERM (``shardwise.cli.main`` installs one
    first thing): the signal trials start their clock there, not during Python's start-up,
    where SIGINT and SIGTERM end any Python program by their default action."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


@dataclass
class SignalTrial:
    """One command signalled once: what came back and what was wrong (``problems``)."""

    command: str
    signal: str
    delay: float
    sent: bool = False
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.command} + {self.signal} at {self.delay:.2f} s (sent: {self.sent}): exit {self.returncode}; problems {self.problems}; stderr {self.stderr[-400:]!r}"


def prepare_signal_inputs(d: Path) -> dict[str, Path]:
    """The inputs of the signal trials in ``d``: a program, a partition of it, an instance."""
    import shardwise as sw

    d.mkdir(parents=True, exist_ok=True)
    src = d / "in.mlir"
    src.write_text(SEEDS["dot"])
    part = d / "part"  # two ranks, for launch -n 2
    if not (part / "meta.json").is_file():
        sw.partition(sw.load_mlir(SEEDS["reduce"]), part)
    inst = d / "chain.json"
    n = 3000
    inst.write_text(
        json.dumps(
            {
                "problem": {
                    "name": "chain",
                    "nodes": {
                        "intervals": [[i, i + 3] for i in range(n)],
                        "costs": [[(i * 7 + k * 3) % 11 for k in range(4)] for i in range(n)],
                        "usages": [[1 + k for k in range(4)] for _ in range(n)],
                    },
                    "edges": {
                        "nodes": [[i, i + 1] for i in range(n - 1)],
                        "costs": [[(i + a * 5 + b) % 13 for a in range(4) for b in range(4)] for i in range(n - 1)],
                    },
                    "usage_limit": 3 * n,
                }
            }
        )
    )
    return {"in": src, "part": part, "instance": inst}


def signal_trial(
    command: str,
    sig: signal.Signals,
    delay: float,
    inputs: dict[str, Path],
    work: Path,
    *,
    timeout: float = 120.0,
    memory: int = MEMORY_LIMIT,
    program: Sequence[str] | None = None,
    grace: float = 10.0,
) -> SignalTrial:
    """Runs ``shardwise COMMAND`` (under ``RLIMIT_AS``), sends ``sig`` ``delay`` seconds after
    its ``main`` started, and checks: an exit status of 0 (done before the signal), 1 (an
    iopddl answer over the usage limit), 130 (SIGINT: with ``shardwise: interrupted``), 143
    (SIGTERM) or 2 with one error line; killed by the signal itself only after its work was
    done (the interpreter's teardown, its output complete); no traceback; the output either
    untouched or complete; no temporary file beside it or in ``TMPDIR``; no process of the
    command's left. ``program``: run this instead of ``python -m shardwise ...`` (the
    suite's check of its own checks); ``grace``: seconds its processes get to end after it
    exits."""
    import uuid

    work.mkdir(parents=True, exist_ok=True)
    tmpdir = work / "tmp"
    tmpdir.mkdir()
    outdir = work / "out"
    outdir.mkdir()
    mark = uuid.uuid4().hex
    trial = SignalTrial(command, sig.name, delay)
    out_file = outdir / "out.mlir"
    out_part = outdir / "p"
    if command == "propagate":
        out_file.write_bytes(SENTINEL)
        argv = ["propagate", str(inputs["in"]), "-o", str(out_file)]
    elif command == "partition":
        import shardwise as sw

        sw.partition(sw.load_mlir(inputs["in"]), out_part)  # a previous partition, to be replaced
        argv = ["partition", str(inputs["in"]), "-o", str(out_part)]
    elif command == "iopddl":
        argv = [
            "iopddl",
            str(inputs["instance"]),
            "--time-limit",
            "5",
            "--method",
            "local",
        ]
    else:
        argv = ["launch", "-n", "2", str(inputs["part"]), "--backend", "mpi"]
    before = snapshot(out_part) if command == "partition" else None
    t0 = time.monotonic()
    proc = subprocess.Popen(
        limited(list(program) if program is not None else [sys.executable, "-m", "shardwise", *argv], memory),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=cli_env(tmpdir, mark),
        cwd=work,
    )
    try:
        while proc.poll() is None and not sigterm_caught(proc.pid) and time.monotonic() - t0 < timeout:
            time.sleep(0.005)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(sig)
            trial.sent = True
        trial.stdout, trial.stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        trial.stdout, trial.stderr = proc.communicate()
        trial.problems.append(f"hang: no exit within {timeout:g} s")
    trial.seconds = time.monotonic() - t0
    rc = trial.returncode = proc.returncode
    p = trial.problems
    done = _work_done(command, trial.stdout, out_file, out_part)
    if "Traceback (most recent call last)" in trial.stderr or "Fatal Python error" in trial.stderr:
        p.append("traceback on stderr")
    if rc == 2:
        lines = [ln for ln in trial.stderr.splitlines() if ln.strip() and not ln.startswith("shardwise: warning: ")]
        if len(lines) != 1 or not lines[0].startswith("shardwise: error: "):
            p.append("exit 2 without exactly one error line")
    elif rc == 130:
        if sig != signal.SIGINT:
            p.append("exit 130 for SIGTERM")
        elif not trial.stderr.strip().splitlines()[-1:] or not trial.stderr.strip().splitlines()[-1].startswith(
            "shardwise: interrupted"
        ):
            p.append("exit 130 without 'shardwise: interrupted'")
    elif rc == 143:
        if sig != signal.SIGTERM:
            p.append("exit 143 for SIGINT")
    elif rc in (0, 1):
        if rc == 1 and command != "iopddl":
            p.append("exit 1")
        if not done:
            p.append(f"exit {rc} but the work is not complete")
    elif rc == -sig:
        if not done:
            p.append(f"killed by {sig.name} before its work was done (the signal was not handled)")
    else:
        p.append(f"exit status {rc}")
    if command == "propagate" and out_file.read_bytes() != SENTINEL and not done:
        p.append("the output file was changed but is not complete")
    if command == "partition" and snapshot(out_part) != before and not done:
        p.append("the previous partition was changed but the new one is not complete")
    left = leftovers(outdir) + [f"TMPDIR/{n}" for n in os.listdir(tmpdir)]
    if left:
        p.append(f"leftovers {left}")
    deadline = time.monotonic() + grace  # processes of the command may still be ending
    while marked_pids(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = marked_pids(mark)
    if alive:
        p.append(f"processes left: {alive}")
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    return trial


def _work_done(command: str, stdout: str, out_file: Path, out_part: Path) -> bool:
    """Whether the command finished its work: its closing line on stdout and a complete
    output."""
    if command == "propagate":
        return "propagated" in stdout and out_file.read_bytes().startswith(b"module")
    if command == "partition":
        ranks = sorted(out_part.glob("rank*.mlir")) if out_part.is_dir() else []
        return "wrote" in stdout and (out_part / "meta.json").is_file() and len(ranks) == 4
    if command == "iopddl":
        return stdout.rstrip().splitlines()[-1:] != [] and stdout.rstrip().splitlines()[-1].startswith("cost: ")
    return "ranks (mpi)" in stdout
