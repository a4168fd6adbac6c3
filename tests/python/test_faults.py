"""Issue 25's fault suite: a generated corpus of broken inputs (mutated MLIR, shardings, meshes,
IOPDDL instances, tampered partition directories) run in memory-limited worker processes with a
per-case timeout, real ``shardwise`` processes that must refuse bad input with exit status 2 and
one line while keeping the user's outputs, and SIGINT / SIGTERM at seeded random times during
``propagate``, ``partition``, ``iopddl`` and ``launch``.

The generators, the worker and the checks are in ``shardwise.testing.faults``;
``benches/fault_campaign.py`` runs the same corpus larger. A failure names the case and how to
replay it (``python -m shardwise.testing.faults --replay CATEGORY SEED I``).

The last section holds one test per problem the suite found and that was fixed elsewhere
(each failed before its fix).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from shardwise.testing.faults import (
    CATEGORIES,
    MAX_ERROR_CHARS,
    SEEDS,
    SENTINEL,
    SIGNAL_COMMANDS,
    cli_env,
    describe,
    known_issue,
    leftovers,
    limited,
    marked_pids,
    prepare_signal_inputs,
    problems,
    run_cases,
    signal_trial,
    snapshot,
)

pytest.importorskip("jax")  # reading MLIR needs jaxlib's bindings

#: The corpus seed and size of the CI run (about a minute on two cores).
SEED = 25
CASES = {"sharding": 800, "mlir": 160, "iopddl": 120, "outdir": 100}
#: Inputs each category must get past the first check: a corpus of inputs that are all
#: refused at once would test nothing beyond the parsers.
MIN_ACCEPTED = {"sharding": 0.05, "mlir": 0.25, "iopddl": 0.08, "outdir": 0.2}


# ---------------------------------------------------------------------------------------------
# The generated corpus


@pytest.mark.parametrize("category", CATEGORIES)
def test_fuzz_corpus(category: str, tmp_path: Path) -> None:
    """Every case of the category's corpus (``shardwise.testing.faults``) keeps every rule: no
    crash, no hang, only shardwise errors, one error line, outputs untouched or complete, nothing
    left."""
    work = tmp_path / "work"
    outcomes = run_cases(category, SEED, CASES[category], work, case_timeout=30)
    assert sorted(o.i for o in outcomes) == list(range(CASES[category])), "every case reports once"
    bad = [o for o in problems(outcomes) if known_issue(o) is None]
    assert not bad, f"{len(bad)} of {len(outcomes)} {category} cases broke a rule:\n" + "\n".join(
        describe(o, SEED)[:900] for o in bad[:10]
    )
    accepted = sum(o.accepted for o in outcomes)
    assert accepted >= MIN_ACCEPTED[category] * len(outcomes), (
        f"only {accepted} of {len(outcomes)} inputs got past the first check"
    )
    # Cases that passed are cleaned up by the worker; nothing else is left in its directory.
    assert sorted(p.name for p in work.iterdir() if not p.name.startswith("base-")) == []


def test_the_driver_reports_crashes_hangs_and_each_problem(tmp_path: Path) -> None:
    """The suite can fail: a worker killed by SIGSEGV, a case that never answers, two error
    lines, a KeyError from inside, a temporary file left beside an output."""
    outcomes = run_cases(
        # A worker's start (imports) is outside the case timeout; the timeout leaves a loaded
        # machine room for the other cases (2 s and a 1 s grace failed under CI load).
        "selftest",
        0,
        12,
        tmp_path / "work",
        case_timeout=6,
        startup_grace=60,
    )
    got = [(o.i, o.status) for o in sorted(outcomes, key=lambda o: o.i)]
    kinds = ["crash", "hang", "stderr", "traceback", "ok", "data-loss"]
    assert got == [(i, kinds[i % 6]) for i in range(12)], got
    crash = next(o for o in outcomes if o.status == "crash")
    assert "signal 11" in crash.detail
    trace = next(o for o in outcomes if o.status == "traceback")
    assert "KeyError" in trace.detail


def test_api_refusals_are_shardwise_errors(tmp_path: Path) -> None:
    """Inputs the corpus found escaping as other exceptions: each raises a shardwise error with
    a bounded message now (the comment says what escaped before)."""
    import gzip as gz

    import shardwise as sw
    from shardwise.search.iopddl import read_instance, score

    mesh = sw.Mesh({"x": 2})
    ts = sw.TensorSharding.parse('#sdy.sharding<@mesh, [{"x"}, {}]>', mesh)
    bad_gzip = tmp_path / "i.json.gz"
    bad_gzip.write_bytes(gz.compress(b'{"problem": {}}')[:12] + bytes(range(40)))
    few_costs = tmp_path / "few.json"
    few_costs.write_text(json.dumps(_instance(edges={"nodes": [[0, 1]], "costs": []})))
    graph = read_instance(_write(tmp_path / "ok.json", json.dumps(_instance())))
    cases = {
        "surrogate sharding": lambda: sw.TensorSharding.parse(
            '#sdy.sharding<@mesh, [{"\udcff"}]>', mesh
        ),  # UnicodeEncodeError
        "surrogate mesh": lambda: sw.Mesh.parse('#sdy.mesh<["\udcff"=2]>'),  # UnicodeEncodeError
        "surrogate axis name": lambda: sw.Mesh.from_spec("\udcff=2"),  # TypeError
        "surrogate MLIR": lambda: sw.load_mlir(_MAIN + "\udcff"),  # TypeError from nanobind
        "surrogate HLO": lambda: sw.TensorSharding.from_hlo_sharding(
            "{devices=[2,1]\udcff}", 2, mesh
        ),  # UnicodeEncodeError
        "huge shape": lambda: ts.validate((10**23, 8)),  # OverflowError
        "huge local shape": lambda: ts.local_shape((10**23, 8)),  # OverflowError
        "huge device": lambda: ts.device_ranges((8, 8), 10**30),  # OverflowError
        "huge device_num": lambda: sw.TensorSharding.from_mindspore_strategy([2], 2**70),  # OverflowError
        "huge device matrix": lambda: sw.TensorSharding.from_mindspore_layout((2**70,), (0,)),  # OverflowError
        "broken gzip": lambda: read_instance(bad_gzip),  # zlib.error
        "fewer edge costs than edges": lambda: read_instance(few_costs),  # IndexError
        "huge strategy index": lambda: score(graph, [2**70, 0]),  # OverflowError
        "deep brackets": lambda: sw.load_mlir(
            _MAIN.replace("{mhlo", "{a = " + "[" * 2_000 + "]" * 2_000 + ", mhlo")
        ),  # SIGSEGV from about 10,000 deep (here: under it, so that the test process survives)
    }
    for name, call in cases.items():
        with pytest.raises(sw.ShardwiseError) as info:
            call()
        assert len(str(info.value)) <= MAX_ERROR_CHARS, name
    # One line (MLIR's diagnostics used to print the failing function whole)
    with pytest.raises(sw.ShardwiseError) as info:
        sw.load_mlir(_MAIN.replace('[{"x"}, {}]', '[{"q"}, {}]', 1))
    assert "\n" not in str(info.value) and 'unknown axis "q"' in str(info.value), str(info.value)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------
# Real processes: exit status, one line on stderr, untouched outputs


def _shardwise(
    args: list[str | bytes], tmp: Path, *, timeout: float = 120, mark: str = ""
) -> subprocess.CompletedProcess[str]:
    """``python -m shardwise ARGS`` under ``RLIMIT_AS`` with ``TMPDIR`` in ``tmp``."""
    tmpdir = tmp / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    return subprocess.run(
        limited([sys.executable, "-m", "shardwise", *args]),
        check=False,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        env=cli_env(tmpdir, mark),
        cwd=tmp,
    )


def _assert_refused(res: subprocess.CompletedProcess[str], tmp: Path) -> str:
    """Exit 2, no traceback, one bounded ``shardwise: error:`` line (blank lines aside: see
    ``test_propagate_error_is_exactly_one_line``), nothing left in ``TMPDIR``; the line."""
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("shardwise: error: "), res.stderr[-2000:]
    assert len(lines[0]) <= MAX_ERROR_CHARS, lines[0][:300]
    assert os.listdir(tmp / "tmpdir") == []
    return lines[0]


_MAIN = SEEDS["dot"]

PROPAGATE_REFUSALS = {
    "flipped": _MAIN.replace("dot_general %arg0,", "dot_general %arg0 %", 1).encode(),
    # jaxlib's parser recursed until SIGSEGV on about 10,000 nested '['
    "deep-brackets": _MAIN.replace(
        'sdy.mesh @mesh = <["x"=2, "y"=2]>',
        'sdy.mesh @mesh = <["x"=2, "y"=2]> {a = ' + "[" * 100_000 + "]" * 100_000 + "}",
    ).encode(),
    "deep-locations": _MAIN.replace(
        "return %2 : tensor<8x8xf32>",
        "return %2 : tensor<8x8xf32> loc(" + "fused[" * 100_000 + '"a"' + "]" * 100_000 + ")",
    ).encode(),
    "non-utf8": _MAIN.encode().replace(b"@main", b"@m\xffin"),
    "unknown-axis": _MAIN.replace('[{"x"}, {}]', '[{"q"}, {}]', 1).encode(),
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(PROPAGATE_REFUSALS))
def test_propagate_refusals_keep_the_existing_output(name: str, tmp_path: Path) -> None:
    src, out = tmp_path / "in.mlir", tmp_path / "out.mlir"
    src.write_bytes(PROPAGATE_REFUSALS[name])
    out.write_bytes(SENTINEL)
    line = _assert_refused(_shardwise(["propagate", str(src), "-o", str(out)], tmp_path), tmp_path)
    assert out.read_bytes() == SENTINEL
    assert leftovers(tmp_path) == []
    if name == "unknown-axis":
        # MLIR's diagnostics used to come as several lines, the failing function printed whole;
        # the line names the file, line and column, and the axis
        assert 'func.func at loc("' in line and 'in.mlir":3:3): argument 0: invalid sharding' in line, line
        assert 'unknown axis "q"' in line, line


def test_propagate_error_is_exactly_one_line(tmp_path: Path) -> None:
    src = tmp_path / "in.mlir"
    src.write_bytes(PROPAGATE_REFUSALS["flipped"])
    res = _shardwise(["propagate", str(src), "-o", str(tmp_path / "out.mlir")], tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and res.stderr.startswith("shardwise: error: "), repr(
        res.stderr
    )


def test_partition_refusal_keeps_the_previous_partition(tmp_path: Path) -> None:
    import shardwise as sw

    out = tmp_path / "p"
    sw.partition(sw.load_mlir(_MAIN), out)
    before = snapshot(out)
    src = tmp_path / "in.mlir"
    src.write_text(_MAIN.replace('"y"=2', '"y"=0'))
    _assert_refused(_shardwise(["partition", str(src), "-o", str(out)], tmp_path), tmp_path)
    src.write_text(_MAIN)
    _assert_refused(
        _shardwise(
            [
                "partition",
                str(src),
                "-o",
                str(out),
                "--mesh",
                "x=2,y=99999999999999999999",
            ],
            tmp_path,
        ),
        tmp_path,
    )
    assert snapshot(out) == before
    assert leftovers(tmp_path) == []


def _instance(**changes: object) -> dict[str, object]:
    inst = {
        "problem": {
            "name": "t",
            "nodes": {
                "intervals": [[0, 2], [1, 3]],
                "costs": [[1, 2], [3]],
                "usages": [[5, 1], [2]],
            },
            "edges": {"nodes": [[0, 1]], "costs": [[4, 5]]},
            "usage_limit": 10,
        }
    }
    inst["problem"].update(changes)  # type: ignore[attr-defined]
    return inst


IOPDDL_REFUSALS = {
    "broken-gzip": gzip.compress(json.dumps(_instance()).encode())[:12] + bytes(range(40)),  # zlib.error escaped
    "deep-nesting": b'{"problem": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "float-cost": json.dumps(
        _instance(
            nodes={
                "intervals": [[0, 2], [1, 3]],
                "costs": [[1.5, 2], [3]],
                "usages": [[5, 1], [2]],
            }
        )
    ).encode(),
    "nan": json.dumps(_instance()).replace('"usage_limit": 10', '"usage_limit": NaN').encode(),
    "edge-out-of-range": json.dumps(_instance(edges={"nodes": [[0, 7]], "costs": [[4, 5]]})).encode(),
    "huge-number": json.dumps(_instance(usage_limit=2**64)).encode(),
    "not-utf8": b'{"problem": "\xff"}',
}


@pytest.mark.parametrize("name", sorted(IOPDDL_REFUSALS))
def test_iopddl_refusals(name: str, tmp_path: Path) -> None:
    path = tmp_path / ("i.json.gz" if name == "broken-gzip" else "i.json")
    path.write_bytes(IOPDDL_REFUSALS[name])
    _assert_refused(_shardwise(["iopddl", str(path), "--time-limit", "1"], tmp_path), tmp_path)


def test_iopddl_without_a_feasible_answer_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "i.json"
    path.write_text(json.dumps(_instance(usage_limit=0)))
    res = _shardwise(["iopddl", str(path), "--time-limit", "1"], tmp_path)
    assert res.returncode == 1 and res.stdout.splitlines()[-1] == "cost: inf", (
        res.returncode,
        res.stdout,
        res.stderr,
    )
    assert "Traceback" not in res.stderr


def _tampered_partition(tmp_path: Path, num_ranks: object) -> Path:
    import shardwise as sw

    p = tmp_path / "p"
    sw.partition(sw.load_mlir(SEEDS["reduce"]), p)
    meta = json.loads((p / "meta.json").read_text())
    meta["num_ranks"] = num_ranks
    (p / "meta.json").write_text(json.dumps(meta))
    return p


@pytest.mark.parametrize("command", ["run", "launch"])
def test_run_and_launch_refuse_a_tampered_meta_json_and_leave_it_alone(command: str, tmp_path: Path) -> None:
    import uuid

    p = _tampered_partition(tmp_path, 10**30)
    before = snapshot(p)
    mark = uuid.uuid4().hex
    args = ["run", str(p), "--check"] if command == "run" else ["launch", "-n", "2", str(p), "--backend", "mpi"]
    line = _assert_refused(_shardwise(args, tmp_path, mark=mark), tmp_path)
    assert "num_ranks" in line, line
    assert snapshot(p) == before
    assert marked_pids(mark) == []


def test_launch_refuses_a_rank_file_linked_out_of_the_directory_in_one_line(
    tmp_path: Path,
) -> None:
    import uuid

    p = _tampered_partition(tmp_path, 2)
    (tmp_path / "outside.mlir").write_text(SEEDS["reduce"])
    (p / "rank1.mlir").unlink()
    (p / "rank1.mlir").symlink_to(tmp_path / "outside.mlir")
    mark = uuid.uuid4().hex
    try:
        line = _assert_refused(
            _shardwise(["launch", "-n", "2", str(p), "--backend", "mpi"], tmp_path, mark=mark),
            tmp_path,
        )
    finally:
        assert marked_pids(mark) == []
    assert "symbolic link" in line, line


@pytest.mark.parametrize(
    "args",
    [
        [
            b"show",
            b"--mesh",
            b"x=2",
            b"--",
            b'#sdy.sharding<@mesh, [{"\xff"}]>',
        ],  # a surrogate: UnicodeEncodeError escaped
        [
            b"show",
            b"--mesh",
            b"\xff=2",
            b"--",
            b"#sdy.sharding<@mesh, [{}]>",
        ],  # TypeError escaped
        [
            "show",
            "--mesh",
            "x=2",
            "--shape",
            "99999999999999999999999,8",
            "--",
            '#sdy.sharding<@mesh, [{"x"}, {}]>',
        ],  # OverflowError
        [
            "show",
            "--mesh",
            "x=2",
            "--shape=-3,8",
            "--",
            '#sdy.sharding<@mesh, [{"x"}, {}]>',
        ],
        [
            "auto",
            "in.mlir",
            "-o",
            "out.mlir",
            "--mesh",
            "x=2",
            "--memory-budget",
            "lots",
        ],
    ],
    ids=[
        "non-utf8-sharding",
        "non-utf8-mesh",
        "huge-shape",
        "negative-shape",
        "bad-budget",
    ],
)
def test_bad_arguments_are_refused_in_one_line(args: list[str | bytes], tmp_path: Path) -> None:
    (tmp_path / "in.mlir").write_text(_MAIN)
    (tmp_path / "out.mlir").write_bytes(SENTINEL)
    _assert_refused(_shardwise(args, tmp_path), tmp_path)
    assert (tmp_path / "out.mlir").read_bytes() == SENTINEL


def test_partition_over_a_deeply_nested_meta_json(tmp_path: Path) -> None:
    """``partition -o DIR`` read DIR/meta.json to tell a previous partition: RecursionError."""
    (tmp_path / "in.mlir").write_text(_MAIN)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "meta.json").write_bytes(b"[" * 100_000)
    _assert_refused(_shardwise(["partition", "in.mlir", "-o", "p"], tmp_path), tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_partition_over_a_meta_json_that_is_not_a_file(kind: str, tmp_path: Path) -> None:
    """It read it whatever it was: a FIFO blocked forever, a link to /dev/zero read until the
    memory ran out (MemoryError, a traceback)."""
    (tmp_path / "in.mlir").write_text(_MAIN)
    (tmp_path / "p").mkdir()
    if kind == "fifo":
        os.mkfifo(tmp_path / "p" / "meta.json")
    else:
        (tmp_path / "p" / "meta.json").symlink_to("/dev/zero")
    try:
        res = _shardwise(["partition", "in.mlir", "-o", "p"], tmp_path, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"partition hung on a {kind} meta.json")
    _assert_refused(res, tmp_path)


_MAXIMAL = """sdy.mesh @mesh = <["x"=2]>
sdy.mesh @maximal = <[], device_ids=[0]>
func.func @main(%arg0: tensor<8x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<8x2xf32> {sdy.sharding = #sdy.sharding<@maximal, []>}) -> tensor<8x2xf32> {
  %0 = stablehlo.multiply %arg0, %arg1 : tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}
"""


def test_partition_with_a_maximal_mesh_sharding(tmp_path: Path) -> None:
    """A value sharded ``<@maximal, []>`` raised IndexError in ``passes/_projection.py`` (found
    on ../shared/conformance/lit/import_func_calls_add_data_flow_edges_on_named_computations_false__009.in.mlir)."""
    (tmp_path / "in.mlir").write_text(_MAXIMAL)
    res = _shardwise(["partition", "in.mlir", "-o", "p"], tmp_path)
    assert "Traceback" not in res.stderr, res.stderr[-1500:]
    assert res.returncode in (0, 2), res.stderr[-1500:]


def test_rules_of_an_empty_module(tmp_path: Path) -> None:
    """A module without ops was written without its block, which does not verify (and the
    error was several lines)."""
    (tmp_path / "in.mlir").write_text("module {}\n")
    res = _shardwise(["rules", "in.mlir", "-o", "out.mlir"], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]


# -- problems found by the suite, fixed outside its files --


def test_a_malformed_pipeline_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "in.mlir").write_text(_MAIN)
    _assert_refused(
        _shardwise(
            [
                "propagate",
                "in.mlir",
                "-o",
                "out.mlir",
                "--pipeline",
                "builtin.module(" * 50,
            ],
            tmp_path,
        ),
        tmp_path,
    )


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    _assert_refused(_shardwise(["show", "--mesh"], tmp_path), tmp_path)


# ---------------------------------------------------------------------------------------------
# Signals


#: The signal trials start their clock when ``main`` has installed its SIGTERM handler, read
#: from ``/proc/PID/status``.
needs_proc = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")


@pytest.fixture(scope="module")
def signal_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return prepare_signal_inputs(tmp_path_factory.mktemp("signal-inputs"))


_SIGNAL_CASES = [
    pytest.param(cmd, sig, id=f"{cmd}-{sig.name}") for cmd in SIGNAL_COMMANDS for sig in (signal.SIGINT, signal.SIGTERM)
]


@pytest.mark.parametrize(("command", "sig"), _SIGNAL_CASES)
@needs_proc
def test_signal_at_a_random_time(
    command: str, sig: signal.Signals, signal_inputs: dict[str, Path], tmp_path: Path
) -> None:
    """SIGINT or SIGTERM at a seeded random time of the command's work: exit 0, 130, 143 or 2
    with one line; no traceback; the output untouched or complete; nothing left behind."""
    rng = random.Random(f"{SEED}/{command}/{sig.name}")
    delay = rng.uniform(0, SIGNAL_COMMANDS[command])
    trial = signal_trial(command, sig, delay, signal_inputs, tmp_path / "t")
    assert not trial.problems, str(trial)


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.3])
@needs_proc
def test_ctrl_c_while_propagate_loads_jaxlib(delay: float, signal_inputs: dict[str, Path], tmp_path: Path) -> None:
    """Early in ``propagate``, while jaxlib's extension modules load (a SIGINT there crashed or
    was swallowed before issue 25)."""
    trial = signal_trial("propagate", signal.SIGINT, delay, signal_inputs, tmp_path / "t")
    assert not trial.problems, str(trial)
    assert trial.returncode in (130, 0, -signal.SIGINT), str(trial)


@needs_proc
def test_ctrl_c_during_the_iopddl_search(signal_inputs: dict[str, Path], tmp_path: Path) -> None:
    """In the middle of the search: the best answer so far, ``shardwise: interrupted``, exit
    130 (an IndexError from an empty result list, with a traceback, until issue 25's fix)."""
    trial = signal_trial("iopddl", signal.SIGINT, 1.5, signal_inputs, tmp_path / "t")
    assert not trial.problems, str(trial)
    assert trial.returncode == 130 and trial.stdout.splitlines()[-1].startswith("cost: "), str(trial)


_SWALLOWS_SIGTERM = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, lambda *a: None)  # swallowed: neither handled nor passed on
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # left behind
time.sleep(1.5)
"""


@needs_proc
def test_signal_trials_can_fail(signal_inputs: dict[str, Path], tmp_path: Path) -> None:
    """A program that swallows SIGTERM, exits 0 without its work and leaves a child is
    reported on all three counts."""
    trial = signal_trial(
        "propagate",
        signal.SIGTERM,
        0.2,
        signal_inputs,
        tmp_path / "t",
        program=[sys.executable, "-c", _SWALLOWS_SIGTERM],
        grace=1,
    )
    assert trial.sent and trial.returncode == 0, str(trial)
    assert any("work is not complete" in p for p in trial.problems), trial.problems
    assert any("processes left" in p for p in trial.problems), trial.problems
