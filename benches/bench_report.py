"""The results the propagation benchmarks collect in one session, and the report written
when the session ends (``benches/conftest.py``): a Markdown table, JSON, and a plot of µs/op
against ops for shardwise and Shardy."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from shardwise.files import write_atomic

#: layers -> {"ops", "load_s", "load_jaxlib_s", "shardwise_s", "write_s", "write_jaxlib_s",
#: "shardy_s", "shardy_parse_s", "shardy_print_s", "passes", "frozen_bytes_per_op", ...}
RESULTS: dict[int, dict[str, Any]] = {}
#: The timings of reading, propagating and writing MLIR text, shardwise's and Shardy's.
_END_TO_END = ("load_s", "shardwise_s", "write_s", "shardy_parse_s", "shardy_s", "shardy_print_s")
#: (call, threads) -> {"ops", "candidates", "annotations", "seconds", "per_second",
#: "annotations_per_second"}; call: "propagate_many" (one call: preparation included) or
#: "CandidateBatch" (a prepared batch's later calls)
CANDIDATES: dict[tuple[str, int], dict[str, Any]] = {}

OUT = Path(os.environ.get("SHARDWISE_BENCH_OUT", Path(__file__).resolve().parent / "results"))
#: ``SHARDWISE_BENCH_SMOKE=1``: every benchmark on its smallest input, so that the test suite
#: runs them all (``tests/python/test_benches.py``) and none can rot unnoticed.
SMOKE = os.environ.get("SHARDWISE_BENCH_SMOKE", "") not in ("", "0")


def _us_per_op(e: dict[str, Any], key: str) -> float | None:
    return e[key] / e["ops"] * 1e6 if key in e and e.get("ops") else None


def table() -> str:
    """The Markdown table of every measured program size."""
    lines = [
        (
            "| layers | ops | shardwise µs/op | Shardy µs/op | Shardy / shardwise | load_mlir µs/op (jaxlib's) "
            "| to_mlir µs/op (jaxlib's) | frozen bytes/op | identical |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for layers in sorted(RESULTS):
        e = RESULTS[layers]
        ours, theirs, load = _us_per_op(e, "shardwise_s"), _us_per_op(e, "shardy_s"), _us_per_op(e, "load_s")
        ratio = f"{theirs / ours:.2f}×" if ours and theirs else "–"
        fmt = lambda x: "–" if x is None else f"{x:.1f}"
        frozen = e.get("frozen_bytes_per_op")
        ident = {True: "yes", False: "NO"}.get(e.get("identical"), "–")  # type: ignore[call-overload]
        load_j, write, write_j = (_us_per_op(e, k) for k in ("load_jaxlib_s", "write_s", "write_jaxlib_s"))
        lines.append(
            f"| {layers} | {e.get('ops', '–')} | {fmt(ours)} | {fmt(theirs)} | {ratio} | {fmt(load)} ({fmt(load_j)}) | "
            f"{fmt(write)} ({fmt(write_j)}) | {'–' if frozen is None else f'{frozen:.0f}'} | {ident} |"
        )
    ends = [e for _, e in sorted(RESULTS.items()) if all(k in e for k in _END_TO_END)]
    if ends:
        lines.append("")
        lines.append(
            "| ops | shardwise read / propagate / write µs/op | shardwise total | Shardy parse / propagate / print µs/op "
            "| Shardy total | Shardy / shardwise |"
        )
        lines.append("|---:|---:|---:|---:|---:|---:|")
        for e in ends:
            ours = [_us_per_op(e, k) or 0.0 for k in ("load_s", "shardwise_s", "write_s")]
            theirs = [_us_per_op(e, k) or 0.0 for k in ("shardy_parse_s", "shardy_s", "shardy_print_s")]
            lines.append(
                f"| {e['ops']} | {' / '.join(f'{x:.1f}' for x in ours)} | {sum(ours):.1f} | "
                f"{' / '.join(f'{x:.1f}' for x in theirs)} | {sum(theirs):.1f} | {sum(theirs) / sum(ours):.2f}× |"
            )
    for layers in sorted(RESULTS):
        passes = RESULTS[layers].get("passes")
        if passes:
            lines.append("")
            lines.append(
                f"Slowest passes at {RESULTS[layers].get('ops')} ops (s): "
                + ", ".join(f"{k} {v:.3f}" for k, v in passes.items())
            )
    if CANDIDATES:
        lines.append("")
        lines.append("| call | threads | ops | candidates | annotations | candidates/s | annotations/s |")
        lines.append("|:---|---:|---:|---:|---:|---:|---:|")
        for call, t in sorted(CANDIDATES, key=lambda k: (k[0] != "propagate_many", k[1])):
            c = CANDIDATES[(call, t)]
            lines.append(
                f"| {call} | {t} | {c['ops']} | {c['candidates']} | {c['annotations']} | {c['per_second']:.0f} | "
                f"{c['annotations_per_second']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def plot(path: Path) -> None:
    """µs/op against ops (log x), shardwise and Shardy: propagation, reading and writing, and
    the end-to-end sums."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [RESULTS[k] for k in sorted(RESULTS) if RESULTS[k].get("ops")]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label in (
        ("shardwise_s", "shardwise.propagate"),
        ("shardy_s", "Shardy (jaxlib)"),
        ("load_s", "shardwise.load_mlir (native reader)"),
        ("load_jaxlib_s", "load_mlir through jaxlib"),
        ("write_s", "shardwise Module.to_mlir (native verifier and printer)"),
        ("write_jaxlib_s", "Module.to_mlir through jaxlib"),
    ):
        pts = [(e["ops"], _us_per_op(e, key)) for e in rows if key in e]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ends = [e for e in rows if all(k in e for k in _END_TO_END)]
    for keys, label in (
        (_END_TO_END[:3], "shardwise end to end (read, propagate, write)"),
        (_END_TO_END[3:], "Shardy end to end (parse, propagate, print)"),
    ):
        if ends:
            ax.plot(
                [e["ops"] for e in ends],
                [sum(_us_per_op(e, k) or 0.0 for k in keys) for e in ends],
                marker="s",
                linestyle="--",
                label=label,
            )
    ax.set_xscale("log")
    ax.set_xlabel("ops in the program")
    ax.set_ylabel("µs per op")
    ax.set_title("sdy-propagation-pipeline on transformer training steps")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, fontsize=8)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".png")
    os.close(fd)
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)


def write() -> Path | None:
    """Writes the report if anything was measured; returns its directory."""
    if not RESULTS and not CANDIDATES:
        return None
    OUT.mkdir(parents=True, exist_ok=True)
    write_atomic(OUT / "propagation.md", table())
    write_atomic(
        OUT / "propagation.json",
        json.dumps(
            {"programs": RESULTS, "candidates": {f"{c} {t}": e for (c, t), e in CANDIDATES.items()}},
            indent=1,
            default=str,
        ),
    )
    if any(e.get("ops") for e in RESULTS.values()):
        plot(OUT / "propagation.png")
    return OUT
