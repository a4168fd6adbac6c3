"""``python -m shardwise.testing.faults --replay CATEGORY SEED I [--corpus]``: runs one case of
the fault corpus in this process and prints its report (exit status 0 when it keeps every rule,
1 otherwise). ``--worker CATEGORY SEED START STOP WORKDIR [--corpus]``: the worker process of
``driver.run_cases`` (``worker.worker_main``)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from shardwise.testing import faults
from shardwise.testing.faults.worker import Worker, extra_seed_programs, worker_main


def replay(argv: list[str]) -> int:
    """``--replay CATEGORY SEED I [--corpus]``: runs one case in this process and prints it."""
    category, seed, i = argv[0], int(argv[1]), int(argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / f"case{i}"
        d.mkdir()
        info = Worker(
            category,
            seed,
            Path(tmp),
            extra_seed_programs() if "--corpus" in argv else {},
        ).run(i, d)
    print(json.dumps(info, indent=1, default=str))
    return 0 if info["status"] == "ok" else 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    if argv[:1] == ["--replay"]:
        return replay(argv[1:])
    print(faults.__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
