"""The worker of the fault corpus (``shardwise.testing.faults``): runs the cases of one category
in its process, one at a time, and reports each (``worker_main``; started by
``driver.run_cases`` as ``python -m shardwise.testing.faults --worker ...``). A case draws its
input from ``random.Random(f"{seed}/{category}/{i}")``, runs it through the Python API
(``api``: only shardwise's errors, bounded) and the command line in process (``cli``,
``check_stderr``: exit status 0, 1 or 2 with one bounded error line), and checks the outputs.
A broken rule is a ``Problem``."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import random
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shardwise.testing.corpus import conformance_dir
from shardwise.testing.faults.instances import mutate_iopddl
from shardwise.testing.faults.mutate import (
    SEEDS,
    gen_mesh_text,
    gen_shape_text,
    gen_sharding_text,
    mut_number,
    mutate_mlir,
    syntax_noise,
)
from shardwise.testing.faults.outdir import SENTINEL, leftovers, snapshot, tamper_outdir

#: The longest ``shardwise: error:`` line accepted (issue 25: error messages are bounded).
MAX_ERROR_CHARS = 1000
#: The categories of cases (``Worker.case_CATEGORY``).
CATEGORIES = ("sharding", "mlir", "iopddl", "outdir")


#: The fault corpus's own directory: its frames are left out of a problem's location.
_HERE = Path(__file__).parent


class Problem(Exception):
    """A case broke a rule; ``kind`` is one of ``driver.PROBLEMS``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def _where(e: BaseException) -> str:
    """``file:line`` of the innermost frame in shardwise outside the fault corpus (or the
    innermost frame)."""
    frames = traceback.extract_tb(e.__traceback__)
    inner = [f for f in frames if "shardwise" in f.filename and Path(f.filename).parent != _HERE] or frames
    if not inner:
        return "?"
    f = inner[-1]
    return f"{Path(f.filename).name}:{f.lineno} ({f.name})"


def api(what: str, fn: Callable[..., Any], *args: Any, io_ok: bool = False, **kwargs: Any) -> tuple[bool, Any]:
    """``(True, value)``, or ``(False, error)`` for a shardwise error (and ``OSError`` when
    ``io_ok``); anything else raised, or an error message over ``MAX_ERROR_CHARS``, is a
    ``Problem``."""
    from shardwise.errors import ShardwiseError

    try:
        return True, fn(*args, **kwargs)
    except (KeyboardInterrupt, Problem):
        raise
    except ShardwiseError as e:
        if len(str(e)) > MAX_ERROR_CHARS:
            raise Problem(
                "long-message",
                f"{what}: {type(e).__name__} of {len(str(e))} characters: {str(e)[:160]!r}",
            ) from None
        return False, e
    except OSError as e:
        if io_ok:
            return False, e
        raise Problem("traceback", f"{what}: {type(e).__name__}: {str(e)[:200]} at {_where(e)}") from None
    except BaseException as e:  # noqa: BLE001 - PanicException, RecursionError, MemoryError, ...
        raise Problem("traceback", f"{what}: {type(e).__name__}: {str(e)[:200]!r} at {_where(e)}") from None


@dataclass
class CliResult:
    rc: int
    out: str
    err: str


def cli(argv: list[str], ok_codes: Sequence[int] = (0, 2)) -> CliResult:
    """``shardwise ARGV`` in this process (``shardwise.cli.main``) with its stdout and stderr
    captured; a ``Problem`` unless it exits with one of ``ok_codes`` and, for 2, exactly one
    bounded ``shardwise: error:`` line."""
    from shardwise.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    except KeyboardInterrupt:
        raise
    except SystemExit as e:  # argparse
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException as e:  # noqa: BLE001
        raise Problem(
            "traceback",
            f"shardwise {argv[0]}: {type(e).__name__}: {str(e)[:200]!r} at {_where(e)}",
        ) from None
    res = CliResult(rc, out.getvalue(), err.getvalue())
    check_stderr(res, ok_codes, f"shardwise {argv[0]}")
    return res


def check_stderr(res: CliResult, ok_codes: Sequence[int], what: str) -> None:
    """The rules for a command's exit code and standard error (module docstring)."""
    if "Traceback (most recent call last)" in res.err:
        raise Problem("traceback", f"{what}: a traceback on stderr: {res.err[-300:]!r}")
    if res.rc not in ok_codes:
        raise Problem(
            "exit-code",
            f"{what}: exit code {res.rc}, expected one of {list(ok_codes)}; stderr {res.err[-300:]!r}",
        )
    if res.rc == 2:
        # Blank lines aside: rich's transient progress display of ``propagate`` and ``auto``
        # leaves one before the error (a known issue of cli.py, tested on its own in
        # tests/python/test_faults.py), which would hide every other finding of these commands.
        lines = [ln for ln in res.err.splitlines() if ln.strip() and not ln.startswith("shardwise: warning: ")]
        if len(lines) != 1 or not lines[0].startswith("shardwise: error: "):
            raise Problem(
                "stderr",
                f"{what}: exit 2 with {len(lines)} stderr lines, expected one 'shardwise: error:' line: {res.err[:300]!r}",
            )
        if len(lines[0]) > MAX_ERROR_CHARS:
            raise Problem(
                "long-message",
                f"{what}: an error line of {len(lines[0])} characters: {lines[0][:160]!r}",
            )


def _mlir_loads(path: Path, what: str) -> None:
    from shardwise.importers.mlir import load_mlir

    ok, e = api(f"re-reading {what}", load_mlir, path)
    if not ok:
        raise Problem("data-loss", f"{what} was written but does not read back: {str(e)[:200]}")


class _Info(dict):  # type: ignore[type-arg]
    """A case's report; setting ``input`` also hands it to ``announce``."""

    def __init__(self, announce: Callable[[Any], object] | None) -> None:
        super().__init__()
        self.announce = announce

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if key == "input" and self.announce is not None:
            self.announce(value)


class Worker:
    """Runs the cases of one category; state (seed partitions) is built on first use."""

    def __init__(
        self,
        category: str,
        seed: int,
        workdir: Path,
        extra_seeds: dict[str, str],
    ) -> None:
        self.category = category
        self.seed = seed
        self.workdir = workdir
        self.seeds = {**SEEDS, **extra_seeds}
        self._base: dict[str, Path] = {}

    def base_partition(self, name: str) -> Path:
        """A valid partition directory of seed ``name`` (made once)."""
        if name not in self._base:
            import shardwise as sw

            d = self.workdir / f"base-{name}"
            src = d.with_suffix(".mlir")
            src.write_text(self.seeds[name])
            if not (d / "p" / "meta.json").is_file():  # made by an earlier worker
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir()
                sw.partition(sw.load_mlir(src), d / "p")
            self._base[name] = d / "p"
        return self._base[name]

    def run(self, i: int, d: Path, announce: Callable[[Any], object] | None = None) -> dict[str, Any]:
        """Case ``i`` in directory ``d``; ``announce`` gets its input as soon as it is made
        (so that a crash or a hang can be reported with it)."""
        rng = random.Random(f"{self.seed}/{self.category}/{i}")
        info: dict[str, Any] = _Info(announce)
        try:
            getattr(self, "case_" + self.category)(rng, d, info)
            info["status"] = "ok"
        except Problem as p:
            info["status"] = p.kind
            info["detail"] = p.detail
        return info

    # -- selftest: the driver's own check (a crash, a hang, each problem kind, a pass) -----------

    def case_selftest(self, rng: random.Random, d: Path, info: dict[str, Any]) -> None:
        i = int(d.name.removeprefix("case"))
        info["input"] = [["segfault", "hang", "stderr", "traceback", "ok", "data-loss"][i % 6]]
        if i % 6 == 0:
            os.kill(os.getpid(), signal.SIGSEGV)
        elif i % 6 == 1:
            time.sleep(3600)
        elif i % 6 == 2:
            check_stderr(
                CliResult(2, "", "shardwise: error: one\nshardwise: error: two\n"),
                (0, 2),
                "selftest",
            )
        elif i % 6 == 3:
            api("selftest", {}.__getitem__, "key")
        elif i % 6 == 5:
            out = d / "out.mlir"
            out.write_bytes(SENTINEL)
            (d / ".out.mlir.x1y2.tmp").write_text("")
            left = leftovers(d)
            if left:
                raise Problem("data-loss", f"temporary files left beside the output: {left}")

    # -- sharding ----------------------------------------------------------------------------

    def case_sharding(self, rng: random.Random, d: Path, info: dict[str, Any]) -> None:
        from shardwise.cli import parse_shape_arg
        from shardwise.mesh import Mesh
        from shardwise.sharding import TensorSharding

        wild = rng.random() < 0.5
        mesh_text = gen_mesh_text(rng, wild=wild)
        ok, mesh = api("Mesh.from_spec", Mesh.from_spec, mesh_text)
        axes = list(mesh.axis_names) if ok else ["x", "y"]
        text = gen_sharding_text(rng, axes, wild)
        shape_text = gen_shape_text(rng, wild)
        info["input"] = [text[:200], mesh_text[:200], shape_text]
        accepted = False
        if ok:
            ok_ts, ts = api("TensorSharding.parse", TensorSharding.parse, text, mesh)
            api("TensorSharding.parse (no mesh)", TensorSharding.parse, text)
            api(
                "TensorSharding.parse_per_value",
                TensorSharding.parse_per_value,
                "#sdy.sharding_per_value<[" + text.removeprefix("#sdy.sharding") + "]>",
                mesh,
            )
            if ok_ts:
                again = api("re-parsing a printed sharding", TensorSharding.parse, str(ts), mesh)
                if not again[0] or again[1] != ts:
                    raise Problem(
                        "wrong",
                        f"{text!r} prints as {str(ts)!r}, which parses to {again[1]!s}",
                    )
                shape: tuple[int, ...] | None = None
                if shape_text is not None:
                    ok_shape, parsed = api("parse_shape_arg", parse_shape_arg, shape_text)
                    shape = parsed if ok_shape else None
                accepted = api("validate", ts.validate, shape, meshes=mesh)[0]
                if shape is not None:
                    api("local_shape", ts.local_shape, shape, meshes=mesh)
                    api(
                        "device_ranges",
                        ts.device_ranges,
                        shape,
                        rng.choice((0, 1, mesh.size - 1, mesh.size, -1, 2**70)),
                        meshes=mesh,
                    )
                for conv in (
                    "to_hlo_sharding",
                    "to_mindspore_layout",
                    "to_hidet",
                    "to_dtensor_placements",
                    "to_mindspore_strategy",
                ):
                    ok_conv, value = api(conv, getattr(ts, conv), mesh)
                    if ok_conv and conv == "to_hlo_sharding" and ts.rank < 8 and mesh.size <= 64:
                        back = api(
                            "from_hlo_sharding",
                            TensorSharding.from_hlo_sharding,
                            value,
                            ts.rank,
                            ts.resolve_mesh(mesh),
                        )
                        if not back[0]:
                            raise Problem(
                                "wrong",
                                f"{ts} converts to HLO {value!r}, which does not convert back: {back[1]}",
                            )
                api("to_partition_spec", ts.to_partition_spec)
        self.conversions_from(rng, mesh if ok else None)
        argv = (
            ["show", f"--mesh={mesh_text}"]
            + ([f"--shape={shape_text}"] if shape_text is not None else [])
            + (["--user"] if rng.random() < 0.2 else [])
            + ["--", text]
        )
        res = cli(argv)
        info["accepted"] = accepted and res.rc == 0

    def conversions_from(self, rng: random.Random, mesh: Any) -> None:
        from shardwise.mesh import Mesh
        from shardwise.sharding import TensorSharding

        mesh = mesh if mesh is not None and 0 < mesh.size <= 64 else Mesh({"x": 2, "y": 2})
        rank = rng.choice((0, 1, 2, 3, -1, 7))
        hlo = rng.choice(
            (
                "{replicated}",
                "{maximal device=0}",
                "{devices=[2,1]0,1}",
                "{devices=[2,2]<=[4]}",
                "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                "{devices=[2,2]<=[2,2]T(1,0)}",
                "{manual}",
                "{devices=[4,1]<=[4]}",
            )
        )
        hlo = syntax_noise(rng, mut_number(rng, hlo) if rng.random() < 0.4 else hlo, 0.3)
        api(
            "from_hlo_sharding",
            TensorSharding.from_hlo_sharding,
            hlo,
            rank,
            mesh if rng.random() < 0.8 else None,
        )
        names = [*mesh.axis_names, "q", ""]
        spec = tuple(
            rng.choice((None, rng.choice(names), tuple(rng.sample(names, min(2, len(names))))))
            for _ in range(rng.choice((0, 1, 2, 3)))
        )
        api(
            "from_partition_spec",
            TensorSharding.from_partition_spec,
            spec,
            mesh,
            rng.choice((None, 0, 1, 2, 5)),
        )
        api(
            "from_hidet",
            TensorSharding.from_hidet,
            [set(rng.sample(range(-1, 4), rng.randrange(3))) for _ in range(rng.choice((0, 1, 2)))],
            mesh,
        )
        kinds = (
            ("shard", rng.choice((0, 1, -1, 5))),
            ("replicate",),
            ("partial", rng.choice(("sum", "max", "avg"))),
            ("bogus",),
            (),
        )
        api(
            "from_dtensor_placements",
            TensorSharding.from_dtensor_placements,
            [rng.choice(kinds) for _ in range(rng.choice((len(mesh), len(mesh), 1, 3)))],
            mesh,
            abs(rank),
        )
        dm = tuple(rng.choice((1, 2, 4, 0, -2)) for _ in range(rng.choice((1, 2, 3))))
        tm = tuple(rng.choice((-1, 0, 1, 2, 5, (0, 1), ())) for _ in range(rng.choice((1, 2))))
        api(
            "from_mindspore_layout",
            TensorSharding.from_mindspore_layout,
            dm,
            tm,
            mesh if rng.random() < 0.5 else None,
        )
        api(
            "from_mindspore_strategy",
            TensorSharding.from_mindspore_strategy,
            [rng.choice((1, 2, 3, 0, -1)) for _ in range(rng.choice((1, 2)))],
            rng.choice((1, 2, 4, 0, -4, 2**70)),
        )

    # -- mlir ---------------------------------------------------------------------------------

    def case_mlir(self, rng: random.Random, d: Path, info: dict[str, Any]) -> None:
        import shardwise as sw

        name = rng.choice(sorted(self.seeds))
        muts, data = mutate_mlir(rng, self.seeds[name])
        info["input"] = [name, *muts]
        src = d / "in.mlir"
        src.write_bytes(data)
        ok, module = api("load_mlir", sw.load_mlir, src)
        if ok:
            ok, out = api("propagate", sw.propagate, module)
            if ok:
                ok_text, text = api("Module.to_mlir", out.to_mlir)
                if ok_text and not api("load_mlir (re-reading to_mlir)", sw.load_mlir, text)[0]:
                    raise Problem("wrong", "the propagated module's text does not read back")
        info["accepted"] = ok
        command = rng.choice(("propagate", "propagate", "partition", "partition", "rules", "auto"))
        before = set(os.listdir(d))
        if command == "partition":
            target = d / "p"
            shutil.copytree(
                self.base_partition(name if name in SEEDS else "reduce"),
                target,
                symlinks=True,
            )
            snap = snapshot(target)
            mesh = ["--mesh", gen_mesh_text(rng)] if rng.random() < 0.25 else []
            res = cli(["partition", str(src), "-o", str(target), *mesh])
            if res.rc == 0:
                from shardwise.spmd.load import load_meta

                ok_meta, meta = api("load_meta of a written partition", load_meta, target)
                if not ok_meta:
                    raise Problem(
                        "data-loss",
                        f"partition exited 0 but wrote an unreadable directory: {meta}",
                    )
                for r in range(min(meta["num_ranks"], 4)):
                    _mlir_loads(target / f"rank{r}.mlir", f"rank{r}.mlir")
            elif snapshot(target) != snap:
                raise Problem(
                    "data-loss",
                    f"partition exited {res.rc} but changed the previous partition in -o",
                )
        else:
            out = d / "out.mlir"
            out.write_bytes(SENTINEL)
            extra: list[str] = []
            if command == "auto":
                extra = [
                    "--mesh",
                    rng.choice(("x=2", "x=2,y=2", gen_mesh_text(rng))),
                    "--time-limit",
                    "0.2",
                    "--method",
                    rng.choice(("local", "ilp", "bfs")),
                ]
            elif command == "propagate" and rng.random() < 0.2:
                extra = [
                    "--pipeline",
                    rng.choice(
                        (
                            "basic",
                            "aggressive",
                            "op-priority",
                            "builtin.module(sdy-propagation-pipeline)",
                            "bogus",
                        )
                    ),
                ]
            res = cli(
                [command, str(src), "-o", str(out), *extra],
                ok_codes=(0, 1, 2) if command == "auto" else (0, 2),
            )
            if res.rc == 2 and out.read_bytes() != SENTINEL:
                raise Problem(
                    "data-loss",
                    f"{command} exited 2 but changed the existing output file",
                )
            if res.rc in (0, 1) and command != "auto" or (command == "auto" and res.rc == 0):
                if out.read_bytes() == SENTINEL:
                    raise Problem(
                        "data-loss",
                        f"{command} exited {res.rc} but did not write its output",
                    )
                _mlir_loads(out, f"the output of {command}")
        left = leftovers(d, before)
        if left:
            raise Problem("data-loss", f"temporary files left beside the output: {left}")

    # -- iopddl -------------------------------------------------------------------------------

    def case_iopddl(self, rng: random.Random, d: Path, info: dict[str, Any]) -> None:
        from shardwise.search.iopddl import read_instance, score

        muts, raw, suffix = mutate_iopddl(rng)
        info["input"] = muts
        path = d / ("instance" + suffix)
        path.write_bytes(raw)
        ok, graph = api("read_instance", read_instance, path, io_ok=True)
        if ok:
            offsets = [int(x) for x in graph.offsets]
            ks = [b - a for a, b in itertools.pairwise(offsets)]
            assignment = [rng.randrange(k) if rng.random() < 0.95 else rng.choice((-1, k, 2**70)) for k in ks]
            api("score", score, graph, assignment)
        info["accepted"] = ok
        method = rng.choice(("auto", "auto", "ilp", "local", "local", "limited", "penalty"))
        limit = rng.choice(("0.2", "0.5", "0", "-1", "nan", "inf", "1e400"))
        res = cli(
            ["iopddl", str(path), "--time-limit", limit, "--method", method],
            ok_codes=(0, 1, 2),
        )
        lines = res.out.strip().splitlines()
        if res.rc in (0, 1):
            if not ok:
                raise Problem(
                    "wrong",
                    f"read_instance refused the instance but shardwise iopddl exited {res.rc}",
                )
            if len(lines) < 2 or not lines[-1].startswith("cost: "):
                raise Problem(
                    "wrong",
                    f"exit {res.rc} without an answer and a cost line: {res.out[-200:]!r}",
                )
            answer = json.loads(lines[-2])
            cost = lines[-1].removeprefix("cost: ")
            if len(answer) != len(ks):
                raise Problem(
                    "wrong",
                    f"an answer of {len(answer)} strategies for {len(ks)} nodes",
                )
            true = score(graph, answer)
            if (
                (res.rc == 1) != (cost == "inf")
                or (true is None) != (cost == "inf")
                or (true is not None and str(true) != cost)
            ):
                raise Problem(
                    "wrong",
                    f"exit {res.rc} with 'cost: {cost}', but the answer scores {true}",
                )
        elif ok and limit in ("0.2", "0.5") and method in ("auto", "local"):
            raise Problem(
                "wrong",
                f"read_instance accepted the instance but shardwise iopddl exited 2: {res.err.strip()[:200]}",
            )

    # -- outdir -------------------------------------------------------------------------------

    def case_outdir(self, rng: random.Random, d: Path, info: dict[str, Any]) -> None:
        from shardwise.spmd.load import (
            check_outdir,
            load_global,
            load_meta,
            load_partition,
        )

        name = rng.choice(sorted(SEEDS))
        target = d / "p"
        shutil.copytree(self.base_partition(name), target, symlinks=True)
        muts = tamper_outdir(rng, target, d.parent / f"base-{name}.mlir")
        if rng.random() < 0.2:
            try:
                muts += tamper_outdir(rng, target, d.parent / f"base-{name}.mlir")
            except (
                OSError,
                ValueError,
                RecursionError,
            ):  # the first broke what it edits
                pass
        info["input"] = [name, *muts]
        snap = snapshot(target)
        ok, meta = api("load_meta", load_meta, target, io_ok=True)
        if ok:
            for r in range(min(meta["num_ranks"], 3)):
                api(f"load_partition(rank {r})", load_partition, target, r, io_ok=True)
            api("load_global", load_global, target, io_ok=True)
            ok = api("check_outdir", check_outdir, target, io_ok=True)[0]
        info["accepted"] = ok
        res = cli(
            ["run", str(target), *(["--check"] if rng.random() < 0.5 else [])],
            ok_codes=(0, 1, 2),
        )
        if snapshot(target) != snap:
            raise Problem("data-loss", "shardwise run changed the partition directory it read")
        if rng.random() < 0.3:
            src = d.parent / f"base-{name}.mlir"
            before = set(os.listdir(d))
            res = cli(["partition", str(src), "-o", str(target)])
            if res.rc == 2 and snapshot(target) != snap:
                raise Problem(
                    "data-loss",
                    "partition refused to replace a directory but changed it",
                )
            if res.rc == 0:
                ok_meta, meta = api("load_meta after partition -o", load_meta, target)
                extra = (
                    {p.name for p in target.iterdir()}
                    - {"meta.json", "partitioned.mlir"}
                    - {f"rank{r}.mlir" for r in range(meta["num_ranks"] if ok_meta else 0)}
                )
                if not ok_meta or extra:
                    raise Problem(
                        "wrong",
                        f"partition -o over a tampered directory left it unreadable or with stale files {sorted(extra)}",
                    )
            left = leftovers(d, before)
            if left:
                raise Problem("data-loss", f"temporary files left beside the output: {left}")


def extra_seed_programs(limit_bytes: int = 4000) -> dict[str, str]:
    """The conformance corpus's small input programs (``*/*.in.mlir`` under ``limit_bytes`` in
    ``shardwise.testing.corpus.conformance_dir()``), when it is there."""
    root = conformance_dir()
    if root is None:
        return {}
    return {
        f"corpus:{p.name.removesuffix('.in.mlir')}": p.read_text()
        for p in sorted(root.glob("*/*.in.mlir"))
        if p.stat().st_size <= limit_bytes
    }


def worker_main(argv: list[str]) -> int:
    """``python -m shardwise.testing.faults --worker CATEGORY SEED START STOP WORKDIR
    [--corpus]``: runs cases START..STOP-1 and writes ``start I`` and ``done JSON`` lines to the
    original stdout; the process's own stdout (fd 1) goes to stderr so that native code cannot
    corrupt the protocol."""
    category, seed, start, stop, workdir = (
        argv[0],
        int(argv[1]),
        int(argv[2]),
        int(argv[3]),
        Path(argv[4]),
    )
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    # sys.__stdout__ too (Final in typeshed): code that restores sys.stdout from it keeps fd 1.
    sys.stdout = sys.__stdout__ = open(1, "w", buffering=1, closefd=False)  # type: ignore[misc]  # noqa: SIM115
    import warnings

    warnings.simplefilter("ignore")
    worker = Worker(
        category,
        seed,
        workdir,
        extra_seed_programs() if "--corpus" in argv else {},
    )
    for i in range(start, stop):
        proto.write(f"start {i}\n")
        d = workdir / f"case{i}"
        d.mkdir(exist_ok=True)
        t = time.perf_counter()
        info = worker.run(
            i,
            d,
            lambda inp: proto.write("input " + json.dumps(inp, default=str) + "\n"),
        )
        info["i"] = i
        info["seconds"] = round(time.perf_counter() - t, 3)
        proto.write("done " + json.dumps(info, default=str) + "\n")
        if info["status"] == "ok":
            shutil.rmtree(d, ignore_errors=True)
    return 0
