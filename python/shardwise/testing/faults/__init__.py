"""The fault corpus of issue 25 ("No crash", "Output safety"): generators of broken inputs and
the driver that runs them in a memory-limited worker process, one case at a time, with a
per-case timeout. Used by ``tests/python/test_faults.py`` (about 1,200 cases, in CI) and
``benches/fault_campaign.py`` (thousands).

Categories, each a stream of cases drawn from ``random.Random(f"{seed}/{category}/{i}")`` (so a
case is reproduced from its seed, category and index alone: ``python -m
shardwise.testing.faults --replay CATEGORY SEED I``):

``sharding``   sharding, mesh and shape text as a user types it (``shardwise show``), and the
               conversions to and from other formats (HLO, PartitionSpec, MindSpore, hidet,
               DTensor);
``mlir``       mutated MLIR programs (byte flips, truncation, token deletion and duplication,
               deep nesting, huge numbers, bad axis names, bad sharding and mesh attributes,
               non-UTF-8) through ``load_mlir``/``propagate`` and ``shardwise propagate``,
               ``partition``, ``rules`` and ``auto``;
``iopddl``     mutated IOPDDL instances (wrong types, floats, negative and huge numbers,
               mismatched shapes, missing keys, deep nesting, broken gzip) through
               ``read_instance`` and ``shardwise iopddl``;
``outdir``     tampered partition directories (``meta.json`` edits, missing or extra rank
               files, symbolic links, FIFOs, non-UTF-8) through ``load_partition`` and
               ``shardwise run``, and ``shardwise partition -o`` over them.

Every case checks, in the worker: the Python API raises only shardwise's errors (``OSError``
for I/O); the command line (``shardwise.cli.main``, in process) exits 0, 1 (a failed check,
``cost: inf``) or 2 with exactly one line ``shardwise: error: ...`` of at most
``MAX_ERROR_CHARS`` on stderr (``shardwise: warning: ...`` lines aside); an output that existed
keeps its bytes when the command fails, a written one reads back, a partition directory that
was read is unchanged, and no temporary file is left beside an output. The driver adds crashes
(the worker killed by a signal or exiting) and hangs (a case past its timeout).

The signal trials (``signal_trial``) send SIGINT or SIGTERM to a real ``shardwise`` process at a
chosen time and check that it ends cleanly.

| module        | what it holds                                                                    |
|---------------|----------------------------------------------------------------------------------|
| ``mutate``    | the seed programs, the MLIR mutators, sharding, mesh and shape text generators   |
| ``instances`` | IOPDDL instances: random ones, mutated JSON, broken files                        |
| ``outdir``    | tampered partition directories; ``SENTINEL``, ``snapshot``, ``leftovers``        |
| ``worker``    | the cases of each category and their checks (``api``, ``cli``); the worker loop  |
| ``driver``    | ``run_cases`` (worker processes under ``RLIMIT_AS``), ``Outcome``, the summaries |
| ``signals``   | the signal trials                                                                |
| ``__main__``  | ``--replay`` and the worker's entry point                                        |
"""

from __future__ import annotations

from shardwise.testing.faults.driver import (
    KNOWN_ISSUES,
    MEMORY_LIMIT,
    PROBLEMS,
    Outcome,
    describe,
    known_issue,
    limited,
    problems,
    run_cases,
    summarize,
)
from shardwise.testing.faults.mutate import SEEDS
from shardwise.testing.faults.outdir import SENTINEL, leftovers, snapshot
from shardwise.testing.faults.signals import (
    SIGNAL_COMMANDS,
    SignalTrial,
    cli_env,
    marked_pids,
    prepare_signal_inputs,
    signal_trial,
)
from shardwise.testing.faults.worker import CATEGORIES, MAX_ERROR_CHARS

__all__ = [
    "CATEGORIES",
    "KNOWN_ISSUES",
    "MAX_ERROR_CHARS",
    "MEMORY_LIMIT",
    "PROBLEMS",
    "SEEDS",
    "SENTINEL",
    "SIGNAL_COMMANDS",
    "Outcome",
    "SignalTrial",
    "cli_env",
    "describe",
    "known_issue",
    "leftovers",
    "limited",
    "marked_pids",
    "prepare_signal_inputs",
    "problems",
    "run_cases",
    "signal_trial",
    "snapshot",
    "summarize",
]
