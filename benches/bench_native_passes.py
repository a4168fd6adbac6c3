"""The native pipeline (``rust/src/transforms/``) against Shardy's (jaxlib), and on modules
built as Python ops, side by side in one run, on the transformer training steps of
``bench_propagate.py`` (layer counts from ``SHARDWISE_BENCH_LAYERS``, default ``20,160``:
about 2.7k and 22k ops).

The pass list is ``sdy-propagation-pipeline`` with its default options, every pass of which
runs natively (``shardwise.testing.native_passes.PIPELINE``); Shardy runs
``builtin.module(sdy-propagation-pipeline)``. Two measures:

- in memory: each system runs the pipeline on a program it read beforehand (reading
  excluded): ``pm.run`` on jaxlib's parsed module (the pass manager verifies after each pass)
  against ``NativeProgram.run(PIPELINE)`` (a copy of the program, the passes and the
  verifier, with the GIL released). Until the twenty-first session the native figure was
  text to text minus a read, verify and print of the input (``run_native_passes(text, [])``),
  which charges the passes with printing what they add; it is still reported beside it;
- text to text: Shardy's parse + pipeline + print against ``run_native_passes(text, PIPELINE)``
  (what ``shardwise propagate IN -o OUT`` runs, less the file).

The native text is checked equal to ``run_pipeline``'s on the module built as Python ops
(written with its locations, read back natively, run, and built again on first use with the
objects the passes kept), which is timed too. A third measure is the Python API from text to
text (``propagate(load_mlir(text)).to_mlir()``) with the module kept native against the same
with its Python IR built after reading, and so is ``CandidateBatch`` from text to the
candidates' printed modules.

Writes ``benches/native_passes.md`` (``$SHARDWISE_BENCH_OUT/native_passes.md`` when set).

    pip install -e '.[bench]' && pytest benches/bench_native_passes.py -p no:cacheprovider
"""

from __future__ import annotations

import os
import pathlib
import time
import warnings
from typing import Any

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import shardwise
from shardwise import _native
from shardwise.importers.mlir import load_mlir
from shardwise.passes.pipeline import run_pipeline
from shardwise.testing.native_passes import PIPELINE
from shardwise.testing.programs import random_candidates, transformer_step

LAYERS = [int(x) for x in os.environ.get("SHARDWISE_BENCH_LAYERS", "20,160").split(",") if x.strip()]
PASSES = PIPELINE
_ROWS: dict[int, dict[str, float]] = {}
#: ``propagate_many`` of texts: threads -> seconds, and the op count of one copy.
_MANY: dict[str, float] = {}
#: Resident memory: (system, what) -> (peak, resident after) bytes per op.
_MEMORY: dict[tuple[str, str], tuple[float, float]] = {}
#: ``CandidateBatch`` on the ``MANY_LAYERS`` step: seconds per route and part.
_CANDIDATES: dict[str, float] = {}
#: Candidate sets of that measure.
CANDIDATE_SETS = 8
#: Copies of the step in the batch, and its layers (about 22k ops).
COPIES, MANY_LAYERS = 8, int(os.environ.get("SHARDWISE_BENCH_MANY_LAYERS", "160"))


def _best(f: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


@pytest.mark.parametrize("layers", LAYERS)
def test_native_passes_beside_shardy_and_on_built_modules(benchmark: Any, layers: int) -> None:
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir, passmanager

    text = transformer_step(layers)
    rounds = 5 if layers <= 40 else 3
    ops = sum(1 for _ in load_mlir(text).walk())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        native_text = benchmark.pedantic(_native.run_native_passes, args=(text, PASSES), rounds=rounds, iterations=1)
        native = benchmark.stats.stats.min
        io = _best(lambda: _native.run_native_passes(text, []), rounds)
        # Reading (with the verifier) and printing alone, beside jaxlib's parse (which
        # verifies) and print.
        read = _best(lambda: _native.NativeProgram.read(text, "-"), rounds)
        program = _native.NativeProgram.read(text, "-")
        write = _best(program.print, rounds)
        in_memory = _best(lambda: program.run(PASSES), rounds)
        assert program.run(PASSES).print() == native_text
        ctx = jax_mlir.make_ir_context()
        with ctx:
            shardy_parse = _best(lambda: ir.Module.parse(text), rounds)
            parsed = ir.Module.parse(text)
            shardy_print = _best(lambda: str(parsed), rounds)
        shardy, shardy_text = [], []
        for _ in range(rounds):
            with ctx:
                t0 = time.perf_counter()
                module = ir.Module.parse(text)
                pm = passmanager.PassManager.parse("builtin.module(sdy-propagation-pipeline)")
                t = time.perf_counter()
                pm.run(module.operation)
                shardy.append(time.perf_counter() - t)
                str(module)
                shardy_text.append(time.perf_counter() - t0)
        built = []
        for _ in range(2):
            m = load_mlir(text)
            m.op  # noqa: B018 (the Python IR built before timing)
            t = time.perf_counter()
            run_pipeline(m, "builtin.module(" + ",".join(PASSES) + ")")
            m.op  # noqa: B018 (built again, with the objects the passes kept)
            built.append(time.perf_counter() - t)
        # The Python API from text to text: the module kept native, or its IR built first
        # (what every call did before modules stayed native).
        api_native = _best(lambda: shardwise.propagate(load_mlir(text)).to_mlir(), 2)
        api_built = _best(lambda: shardwise.propagate(_built(load_mlir(text))).to_mlir(), 2)
    assert native_text == m.to_mlir() == shardwise.propagate(load_mlir(text)).to_mlir()
    _ROWS[layers] = {
        "ops": ops,
        "native": in_memory * 1e6 / ops,
        "native_less_io": (native - io) * 1e6 / ops,
        "io": io * 1e6 / ops,
        "read": read * 1e6 / ops,
        "write": write * 1e6 / ops,
        "shardy_parse": shardy_parse * 1e6 / ops,
        "shardy_print": shardy_print * 1e6 / ops,
        "shardy": min(shardy) * 1e6 / ops,
        "built": min(built) * 1e6 / ops,
        "shardy_text": min(shardy_text) * 1e6 / ops,
        "native_text": native * 1e6 / ops,
        "api_native": api_native * 1e6 / ops,
        "api_built": api_built * 1e6 / ops,
    }


def _built(m: shardwise.Module) -> shardwise.Module:
    m.op  # noqa: B018 (builds the module's Python IR)
    return m


def test_candidate_batch_native_against_built() -> None:
    """``CandidateBatch`` from text to candidate modules on the ``MANY_LAYERS`` step: read,
    prepare and solve ``CANDIDATE_SETS`` candidate sets, then each candidate's module printed;
    the module kept native against its Python IR built after reading."""
    text = transformer_step(MANY_LAYERS)
    sets = random_candidates(_built(load_mlir(text)), CANDIDATE_SETS, seed=5)

    def run(build: bool) -> tuple[float, float, list[str]]:
        t = time.perf_counter()
        m = load_mlir(text)
        results = shardwise.CandidateBatch(_built(m) if build else m).propagate(sets, threads=1)
        solved = time.perf_counter() - t
        t = time.perf_counter()
        texts = [r.module().to_mlir() for r in results]
        return solved, time.perf_counter() - t, texts

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        native = [run(False) for _ in range(2)]
        built = [run(True) for _ in range(2)]
    assert native[0][2] == built[0][2]
    _CANDIDATES.update(
        ops=sum(1 for _ in load_mlir(text).walk()),
        native_solve=min(r[0] for r in native),
        native_modules=min(r[1] for r in native),
        built_solve=min(r[0] for r in built),
        built_modules=min(r[1] for r in built),
    )


@pytest.mark.parametrize("threads", [1, 2])
def test_many_texts_on_threads(benchmark: Any, threads: int) -> None:
    """``propagate_many`` of ``COPIES`` copies of one step's text, on 1 and 2 threads (the
    issue's batch target: 2 threads at least 1.8x faster than 1)."""
    text = transformer_step(MANY_LAYERS)
    texts = [text] * COPIES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = benchmark.pedantic(shardwise.propagate_many, args=(texts,), kwargs={"threads": threads}, rounds=3)
    assert len(set(out)) == 1
    _MANY[f"t{threads}"] = benchmark.stats.stats.min
    _MANY["ops"] = sum(1 for _ in load_mlir(text).walk())


_MEMORY_CHILD = """
import sys, warnings
warnings.simplefilter("ignore")
system, what, path = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(path).read()
if system == "shardy":
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir, passmanager
    ctx = jax_mlir.make_ir_context()
else:
    from shardwise import _native
    from shardwise.testing.native_passes import PIPELINE
def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) starts again from here
before = kib("VmRSS")
if system == "shardy":
    with ctx:
        module = ir.Module.parse(text)
        if what == "pipeline":
            passmanager.PassManager.parse("builtin.module(sdy-propagation-pipeline)").run(module.operation)
        if what != "load":
            out = str(module)
        print(kib("VmHWM") - before, kib("VmRSS") - before)
elif what == "load":
    program = _native.NativeProgram.read(text)
    print(kib("VmHWM") - before, kib("VmRSS") - before)
else:
    out = _native.run_native_passes(text, PIPELINE if what == "pipeline" else [])
    print(kib("VmHWM") - before, kib("VmRSS") - before)
"""

#: mimalloc (the extension's allocator) keeps freed pages for a while; with these it returns
#: them at once (slower: measured in docs/speed.md). Its arenas are committed on demand, as
#: ``import shardwise`` sets by default (``MIMALLOC_ARENA_EAGER_COMMIT=0``).
_RETURN_PAGES = {"MIMALLOC_PURGE_DELAY": "0", "MIMALLOC_ARENA_EAGER_COMMIT": "0"}


def test_peak_memory_per_op(tmp_path: pathlib.Path) -> None:
    """Resident memory added by reading (the program loaded: peak, and what stays), reading
    and printing, and text to text (read, the pipeline, print), per op, for Shardy and the
    native pipeline (also with mimalloc returning freed pages at once), each in a fresh
    process (the text read and the libraries imported before the peak is taken)."""
    import subprocess
    import sys

    layers = max(LAYERS)
    text = transformer_step(layers)
    path = tmp_path / "step.mlir"
    path.write_text(text)
    ops = sum(1 for _ in load_mlir(text).walk())
    for system, env in (("shardy", {}), ("native", {}), ("native-returned", _RETURN_PAGES)):
        for what in ("load", "print", "pipeline"):
            out = subprocess.run(
                [sys.executable, "-c", _MEMORY_CHILD, system.split("-")[0], what, str(path)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, **env},
            )
            peak, now = (int(x) * 1024 / ops for x in out.stdout.split()[-2:])
            _MEMORY[(system, what)] = (peak, now)
    _MANY["rss_ops"] = ops


def teardown_module() -> None:
    if not _ROWS:
        return
    lines = [
        "# The native pipeline beside Shardy, and on built modules",
        "",
        (
            "`sdy-propagation-pipeline` with its default options, every pass of it native; µs per op, "
            "minimum over rounds (`pytest benches/bench_native_passes.py`). In memory: on programs read "
            "beforehand (`pm.run` on jaxlib's module; `NativeProgram.run`, which copies the program, runs "
            "the passes and verifies the result). Text to text: Shardy's parse + pipeline + print against "
            "the native read + pipeline + print; less the native read, verify and print of the input "
            "(the in-memory measure of earlier sessions, which also counts printing what the passes add). "
            "Built module: `run_pipeline` in place on a module whose Python IR is built (written with its "
            "locations, read natively, run, and built again with the objects the passes kept)."
        ),
        "",
        (
            "| ops | Shardy (jaxlib) | built module | native passes | Shardy / native "
            "| Shardy text to text | native text to text | Shardy / native "
            "| native read + verify + print | text to text less it | Shardy / it |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in _ROWS.values():
        lines.append(
            f"| {r['ops']:,.0f} | {r['shardy']:.2f} | {r['built']:.2f} | {r['native']:.2f} | "
            f"{r['shardy'] / r['native']:.1f}x | {r['shardy_text']:.2f} | {r['native_text']:.2f} | "
            f"{r['shardy_text'] / r['native_text']:.1f}x | {r['io']:.2f} | {r['native_less_io']:.2f} | "
            f"{r['shardy'] / r['native_less_io']:.1f}x |"
        )
    lines += [
        "",
        (
            "Reading (the native reader with its verifier, `NativeProgram.read`; jaxlib's "
            "`ir.Module.parse`, which verifies) and printing (`NativeProgram.print`; `str(module)`) "
            "alone, µs per op, minimum over rounds (targets: 1 µs/op each):"
        ),
        "",
        "| ops | native read | jaxlib parse | jaxlib / native | native print | jaxlib print | jaxlib / native |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in _ROWS.values():
        lines.append(
            f"| {r['ops']:,.0f} | {r['read']:.2f} | {r['shardy_parse']:.2f} | {r['shardy_parse'] / r['read']:.1f}x | "
            f"{r['write']:.2f} | {r['shardy_print']:.2f} | {r['shardy_print'] / r['write']:.1f}x |"
        )
    lines += [
        "",
        (
            "The Python API from text to text, `shardwise.propagate(shardwise.load_mlir(text)).to_mlir()`, "
            "µs per op, minimum of 2: the module kept as a Rust program (the default since the seventeenth "
            "session), and with its Python IR built after reading (written back and read natively, then "
            "the Python IR's printer):"
        ),
        "",
        "| ops | native module | Python IR built | speed-up |",
        "|---:|---:|---:|---:|",
    ]
    for r in _ROWS.values():
        lines.append(
            f"| {r['ops']:,.0f} | {r['api_native']:.2f} | {r['api_built']:.2f} | {r['api_built'] / r['api_native']:.1f}x |"
        )
    if "t1" in _MANY and "t2" in _MANY:
        lines += [
            "",
            (
                f"`propagate_many` of {COPIES} copies of the {_MANY['ops']:,.0f}-op step as MLIR text "
                "(read, pipeline and print in Rust, the GIL released), seconds, minimum of 3:"
            ),
            "",
            "| 1 thread | 2 threads | speed-up |",
            "|---:|---:|---:|",
            f"| {_MANY['t1']:.2f} | {_MANY['t2']:.2f} | {_MANY['t1'] / _MANY['t2']:.2f}x |",
        ]
    if _CANDIDATES:
        c = _CANDIDATES
        lines += [
            "",
            (
                f"`CandidateBatch` on the {c['ops']:,.0f}-op step, seconds, minimum of 2: `load_mlir`, "
                f"preparing the batch and solving {CANDIDATE_SETS} candidate sets on one thread, then "
                "each candidate's module printed (`result.module().to_mlir()`), with the module kept "
                "native and with its Python IR built after reading:"
            ),
            "",
            "| | native module | Python IR built | speed-up |",
            "|:---|---:|---:|---:|",
            (
                f"| read, prepare, solve | {c['native_solve']:.2f} | {c['built_solve']:.2f} | "
                f"{c['built_solve'] / c['native_solve']:.1f}x |"
            ),
            (
                f"| the {CANDIDATE_SETS} modules printed | {c['native_modules']:.2f} | {c['built_modules']:.2f} | "
                f"{c['built_modules'] / c['native_modules']:.1f}x |"
            ),
        ]
    if _MEMORY:
        m = _MEMORY
        systems = ("shardy", "native", "native-returned")
        lines += [
            "",
            (
                f"Resident memory added on the {_MANY['rss_ops']:,.0f}-op step, bytes per op, each in a fresh "
                "process (the peak `VmHWM` after, and `VmRSS` after, less `VmRSS` before). Native: mimalloc "
                "commits its arenas on demand (`MIMALLOC_ARENA_EAGER_COMMIT=0`, set by `import shardwise` "
                "unless the environment sets it); the last column also has it return freed pages at once "
                "(`MIMALLOC_PURGE_DELAY=0`):"
            ),
            "",
            "| | Shardy (jaxlib) | native | native, freed pages returned |",
            "|:---|---:|---:|---:|",
            "| the program loaded (resident after reading) | "
            + " | ".join(f"{m[s, 'load'][1]:,.0f}" for s in systems)
            + " |",
            "| reading (peak) | " + " | ".join(f"{m[s, 'load'][0]:,.0f}" for s in systems) + " |",
            "| reading and printing (peak) | " + " | ".join(f"{m[s, 'print'][0]:,.0f}" for s in systems) + " |",
            "| read, pipeline, print (peak) | " + " | ".join(f"{m[s, 'pipeline'][0]:,.0f}" for s in systems) + " |",
        ]
    # The smoke run of tests/python/test_benches.py writes to its temporary directory.
    out = pathlib.Path(os.environ.get("SHARDWISE_BENCH_OUT", pathlib.Path(__file__).parent)) / "native_passes.md"
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out)
