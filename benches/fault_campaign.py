"""Fault campaign (issue 25): the fault suite of ``tests/python/test_faults.py``, larger. Runs
``--cases`` generated broken inputs (mutated MLIR, shardings and meshes, IOPDDL instances,
tampered partition directories; ``shardwise.testing.faults``) in memory-limited worker processes
with a per-case timeout, and ``--signals`` SIGINT and SIGTERM trials per command at random times
during ``propagate``, ``partition``, ``iopddl`` and ``launch``. Prints a table per category
(inputs tried, crashes, hangs, data loss, errors that are not one line, other problems) and
writes it, with every problem found and how to replay it, to ``benches/faults.md``
(atomically).

    python benches/fault_campaign.py [--cases 4000] [--seed 1] [--signals 5] [-o benches/faults.md]

Unlike the CI run, the campaign counts the known issues
(``shardwise.testing.faults.KNOWN_ISSUES``, marked "known" in the report) with the rest, and
takes seed programs from ``../shared/conformance`` too. ``SHARDWISE_BENCH_SMOKE=1``: a few cases
of each kind, the report in ``$SHARDWISE_BENCH_OUT``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from shardwise import __version__
from shardwise.files import write_atomic
from shardwise.testing import faults

SMOKE = os.environ.get("SHARDWISE_BENCH_SMOKE", "") not in ("", "0")
#: The share of ``--cases`` each category gets.
SHARES = {"sharding": 0.4, "mlir": 0.25, "iopddl": 0.2, "outdir": 0.15}
COLUMNS = (
    "inputs tried",
    "accepted",
    "crashes",
    "hangs",
    "data loss",
    "not one line",
    "other problems",
    "seconds",
)


def _row(cat: str, outs: list[faults.Outcome], seconds: float) -> list[str]:
    s = faults.summarize(outs).get(cat, {})
    other = s.get("traceback", 0) + s.get("exit-code", 0) + s.get("wrong", 0)
    return [
        str(s.get("tried", 0)),
        str(s.get("accepted", 0)),
        str(s.get("crash", 0)),
        str(s.get("hang", 0)),
        str(s.get("data-loss", 0)),
        str(s.get("stderr", 0) + s.get("long-message", 0)),
        str(other),
        f"{seconds:.0f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--cases",
        type=int,
        default=4000,
        help="generated inputs in all (shared by category)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--signals",
        type=int,
        default=5,
        help="signal trials per command and signal (random times)",
    )
    ap.add_argument(
        "--case-timeout",
        type=float,
        default=30.0,
        help="seconds before a case is a hang",
    )
    ap.add_argument(
        "--no-corpus",
        action="store_true",
        help="seed programs: the suite's only (not ../shared/conformance's)",
    )
    ap.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path(__file__).with_name("faults.md"),
    )
    args = ap.parse_args()
    # SIGTERM ends the campaign as Ctrl-C does: the workers are killed, the temporary files go.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if SMOKE:
        args.cases, args.signals = 40, 0
        args.output = Path(os.environ.get("SHARDWISE_BENCH_OUT", tempfile.gettempdir())) / "faults.md"
    console = Console(width=None if sys.stdout.isatty() else 140)
    started = time.strftime("%Y-%m-%d %H:%M")
    results: dict[str, tuple[list[faults.Outcome], float]] = {}
    with tempfile.TemporaryDirectory(prefix="shardwise-faults-") as tmp:
        for cat, share in SHARES.items():
            n = max(1, round(args.cases * share))
            t = time.perf_counter()
            done = [0]

            def tick(o: faults.Outcome, cat: str = cat, n: int = n, done: list[int] = done) -> None:
                done[0] += 1
                if o.status != "ok" or done[0] % 200 == 0:
                    console.print(
                        f"  {cat} {done[0]}/{n}"
                        + (f": {faults.describe(o, args.seed)[:300]}" if o.status != "ok" else ""),
                        highlight=False,
                        markup=False,
                    )

            outs = faults.run_cases(
                cat,
                args.seed,
                n,
                Path(tmp) / cat,
                case_timeout=args.case_timeout,
                corpus=not args.no_corpus,
                progress=tick,
            )
            results[cat] = (outs, time.perf_counter() - t)
        trials: list[faults.SignalTrial] = []
        if args.signals:
            inputs = faults.prepare_signal_inputs(Path(tmp) / "signal-inputs")
            rng = random.Random(f"{args.seed}/signals")
            k = 0
            for cmd, window in faults.SIGNAL_COMMANDS.items():
                for sig in (signal.SIGINT, signal.SIGTERM):
                    for _ in range(args.signals):
                        k += 1
                        trial = faults.signal_trial(
                            cmd,
                            sig,
                            rng.uniform(0, window),
                            inputs,
                            Path(tmp) / f"signal{k}",
                        )
                        trials.append(trial)
                        if trial.problems:
                            console.print(f"  {trial}", highlight=False, markup=False)

    table = Table(title=f"fault campaign: {args.cases} inputs, seed {args.seed}")
    table.add_column("category")
    for col in COLUMNS:
        table.add_column(col, justify="right")
    md = [
        "| category | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---:|" * len(COLUMNS),
    ]
    everything: list[faults.Outcome] = []
    for cat, (outs, secs) in results.items():
        row = _row(cat, outs, secs)
        table.add_row(cat, *row)
        md.append(f"| {cat} | " + " | ".join(row) + " |")
        everything += outs
    total = _row(
        "all",
        [faults.Outcome("all", o.i, o.status, accepted=o.accepted) for o in everything],
        sum(s for _, s in results.values()),
    )
    table.add_row("all", *total, style="bold")
    md.append("| **all** | " + " | ".join(f"**{c}**" for c in total) + " |")
    sig_rows = []
    if trials:
        sig_table = Table(title="signals at random times")
        for col in ("command", "signal", "trials", "sent", "exit codes", "problems"):
            sig_table.add_column(col)
        sig_rows = [
            "| command | signal | trials | sent before the end | exit codes | problems |",
            "|---|---|---:|---:|---|---:|",
        ]
        for cmd in faults.SIGNAL_COMMANDS:
            for sig in ("SIGINT", "SIGTERM"):
                ts = [t for t in trials if t.command == cmd and t.signal == sig]
                codes = ", ".join(
                    f"{c}: {sum(t.returncode == c for t in ts)}" for c in sorted({t.returncode for t in ts}, key=str)
                )
                row = [
                    cmd,
                    sig,
                    str(len(ts)),
                    str(sum(t.sent for t in ts)),
                    codes,
                    str(sum(bool(t.problems) for t in ts)),
                ]
                sig_table.add_row(*row)
                sig_rows.append("| " + " | ".join(row) + " |")
        console.print(sig_table)
    console.print(table)

    found = faults.problems(everything)
    run_line = (
        f"Run: `python benches/fault_campaign.py --cases {args.cases} --seed {args.seed} --signals {args.signals}`"
        f" ({started}; shardwise {__version__}; Python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs; RLIMIT_AS {faults.MEMORY_LIMIT >> 30} GiB per process; {args.case_timeout:g} s per case;"
        f" seed programs: {'the suite' if args.no_corpus else 'the suite and ../shared/conformance'})."
    )
    columns = (
        "What the columns count (`shardwise.testing.faults` has the rules): *accepted*: inputs the API"
        " took without an error (the rest were refused, as they should be, with a shardwise error);"
        " *crashes*: a worker killed by a signal or dying; *hangs*: a case past its timeout;"
        " *data loss*: an existing output changed by a failed command, a written output that does not"
        " read back, a temporary file left, or a partition directory changed by reading it;"
        " *not one line*: exit status 2 without exactly one bounded `shardwise: error:` line;"
        " *other problems*: an exception other than shardwise's from the API, a traceback, an unexpected"
        " exit status, or a wrong answer."
    )
    lines = [
        "# Fault campaign (issue 25)",
        "",
        run_line,
        "",
        columns,
        "",
        *md,
        "",
    ]
    if sig_rows:
        lines += [
            (
                "Signal trials (SIGINT, SIGTERM at a random time after `main` starts; exit 0 when the"
                " command finished first, 130 / 143 when interrupted; a signal during the interpreter's"
                " teardown, after the work is done and written, ends the process by that signal):"
            ),
            "",
            *sig_rows,
            "",
        ]
    if found:
        lines += [
            "Problems found (`python -m shardwise.testing.faults --replay CATEGORY SEED I` reruns one):",
            "",
        ]
        for o in found:
            issue = faults.known_issue(o)
            tag = f" (known: {issue})" if issue else ""
            lines.append(f"- {faults.describe(o, args.seed)[:600]}{tag}".replace("|", "\\|"))
        lines.append("")
    bad_trials = [t for t in trials if t.problems]
    if bad_trials:
        lines += ["Signal trials with problems:", ""] + [f"- {t}"[:600] for t in bad_trials] + [""]
    if not found and not bad_trials:
        lines += ["No problem found.", ""]
    write_atomic(args.output, "\n".join(lines))
    console.print(f"wrote {args.output}", highlight=False)


if __name__ == "__main__":
    main()
