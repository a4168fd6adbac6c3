"""The ``shardwise`` command: one subcommand per job (``_DESCRIPTION`` is its ``--help``).
Errors in the input end the command with exit status 2 and one line ``shardwise: error: ...``
on stderr; a failed check or an over-budget plan ends it with exit status 1."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.table import Table
from rich.text import Text

from shardwise import __version__
from shardwise.api import PIPELINES as PIPELINE_NAMES
from shardwise.errors import PipelineError, ProgramError, ShardingError, ShardwiseError
from shardwise.mesh import Mesh
from shardwise.rules.exceptions import UnknownOpWarning
from shardwise.sharding import TensorSharding
from shardwise.tour import demo, demo_program, demo_propagation, show

_DESCRIPTION = """\
Decides how every tensor of a StableHLO + sdy program is split across a device mesh, as
OpenXLA Shardy does, searches the choices left open, and runs the split program.

commands:
  shardwise demo                                  tour of the representation, propagation,
                                                  partitioning and checking (bundled example)
  shardwise example [NAME -o FILE]                list or write a bundled example program
  shardwise show SHARDING --mesh x=2,y=4 [--shape 8,16]
                                                  parse, validate and picture one sharding
  shardwise rules IN.mlir -o OUT.mlir             add every op's sharding rule
  shardwise propagate IN.mlir -o OUT.mlir [--pipeline full|user-priority|op-priority|aggressive|basic]
                                                  Shardy's propagation; --explain VALUE says why
  shardwise auto IN.mlir -o OUT.mlir --mesh x=2,y=4 [--memory-budget 16GiB]
                 [--method auto|ilp|local|penalty|limited|bfs] [--configure NAME#I=((2, 1), (1, 4))]
                 [--bound S]                      choose shardings by cost within a budget;
                                                  --bound: a lower bound of the cost
  shardwise partition IN.mlir -o OUTDIR [--mesh x=2,y=4] [--auto [--method M] [--memory-budget B]
                     [--time-limit S]] [--weights W.npz]
                                                  per-rank SPMD programs and meta.json; --auto
                                                  searches first; --weights saves rank shards
  shardwise run OUTDIR [--check] [--device cpu|cuda]
                                                  run every rank in the in-process simulator;
                                                  --check compares with the unpartitioned program;
                                                  cuda: CuPy arrays, all ranks on one GPU
  shardwise launch -n N OUTDIR [--backend mpi|nccl] [--check]
                                                  run the ranks as MPI processes
  shardwise iopddl FILE.json[.gz] --time-limit S [--method auto|ilp|limited|local|penalty] [--bound S]
                                                  solve an IOPDDL contest instance (exit 1 when
                                                  no answer fits the usage limit: cost: inf)
  shardwise torch-plan MOD:FACTORY --example-shapes 8x64 [2x16:int64 ...] --mesh x=2,y=4
                       [--place input=S0,R] [--memory-budget B] [-o PLAN.json]
                                                  plan a PyTorch model (torch.export): DTensor
                                                  placements per parameter, propagated from
                                                  --place or searched within the budget

Meshes are written x=2,y=4 (or Shardy's #sdy.mesh<["x"=2, "y"=4]>). Errors in the input end a
command with exit status 2 and one line on stderr; a failed check or an over-budget plan with 1.
"""


def parse_mesh_arg(text: str) -> Mesh:
    """``x=2,y=4`` or sdy text ``#sdy.mesh<["x"=2, "y"=4]>`` / ``<["x"=2]>`` (``Mesh.from_spec``)."""
    return Mesh.from_spec(text)


def parse_shape_arg(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.replace("x", ",").split(",") if p.strip())
    except ValueError:
        raise ShardingError(f"--shape: expected sizes like 8,16 or 8x16, got {text!r}") from None


def torch_plan(console: Console, args: argparse.Namespace) -> None:
    """``shardwise torch-plan``: the model's plan (``shardwise.torch.plan_model``) as a table,
    and as JSON to ``--output``."""
    import json

    import torch

    from shardwise.files import write_atomic
    from shardwise.torch import load_factory, parse_placements, plan_model, plan_table
    from shardwise.torch.check import forbidden_lines

    mesh = parse_mesh_arg(args.mesh)
    examples = []
    for spec in args.example_shapes:
        shape_text, _, dtype = spec.partition(":")
        dt = getattr(torch, dtype or "float32", None)
        if not isinstance(dt, torch.dtype):
            raise ProgramError(f"--example-shapes {spec!r}: expected a torch dtype after ':', got {dtype!r}")
        shape = parse_shape_arg(shape_text)
        examples.append(torch.zeros(shape, dtype=dt) if not dt.is_floating_point else torch.randn(shape, dtype=dt))
    placed = {}
    for item in args.place:
        name, sep, text = item.partition("=")
        if not sep:
            raise ProgramError(f"--place {item!r}: expected NAME=PLACEMENTS (e.g. input=S0,R)")
        placed[name] = parse_placements(text, len(mesh.axis_names))
    model = load_factory(args.model)
    model.eval()
    with console.status("planning (torch.export, search, DTensor checks on a fake process group)") as status:
        fit = plan_model(
            model,
            examples,
            mesh,
            in_placements=placed,
            memory_budget=args.memory_budget,
            time_limit=args.time_limit,
            check=not args.no_check,
            log=lambda line: status.update(line[:120]),
        )
    console.print(plan_table(fit.plan, mesh))
    for line in forbidden_lines(fit.forbidden, mesh.axis_names):
        console.print(line, highlight=False)
    if fit.error is not None:
        console.print(f"[yellow]DTensor refuses this plan:[/yellow] {fit.error}", highlight=False)
    if fit.report is not None:
        report = fit.report
        console.print(
            f"auto_shard: peak {report.peak_memory:,} B per device, {'feasible' if report.feasible else 'over budget'}"
            f"; {fit.checks} DTensor check(s)"
        )
    if args.output:
        write_atomic(args.output, json.dumps({k: [list(p) for p in v] for k, v in fit.plan.items()}, indent=1) + "\n")


def example(console: Console, name: str | None, output: str | None) -> None:
    """``shardwise example``: lists the bundled programs, or writes ``name`` to ``output``
    (atomically) or standard output."""
    from shardwise import examples
    from shardwise.files import write_atomic

    if name is None:
        table = Table(title="bundled example programs (shardwise example NAME -o FILE)", header_style="bold")
        table.add_column("name")
        table.add_column("program")
        for n, what in examples.EXAMPLES.items():
            table.add_row(n, what)
        console.print(table)
        return
    text = examples.text(name)
    if output is None:
        sys.stdout.write(text)
        return
    write_atomic(output, text)
    console.print(f"wrote {output} ({name})", highlight=False)


def propagate_file(
    console: Console,
    path: str,
    output: str,
    *,
    pipeline: str = "full",
    conservative: bool = False,
    explain: Sequence[str] = (),
    as_json: bool = False,
) -> None:
    """Reads ``path``, runs the propagation ``pipeline``, writes ``output`` atomically; shows the
    steps with a progress bar (on a terminal) and the time each took. For each name in
    ``explain`` (a value name of the written module, see ``shardwise.explain``), prints why
    that value got its sharding: rich tables, or with ``as_json`` one JSON list of
    ``Explanation.to_dict()`` on stdout (the progress line then goes to stderr)."""
    import time

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from shardwise.api import pipeline_text, propagate, propagate_text
    from shardwise.explanation import explain as explain_value
    from shardwise.files import write_atomic
    from shardwise.importers.mlir import load_mlir

    text = pipeline_text(pipeline, conservative=conservative)  # a bad --pipeline fails before the file is read
    err = Console(stderr=True)
    times: dict[str, float] = {}
    if not explain:
        # Text to text in Rust when the whole pipeline runs natively (shardwise.api.propagate_text).
        t = time.perf_counter()
        try:
            source = Path(path).read_text()
        except UnicodeDecodeError:  # MLIR bytecode: load_mlir reads it through jaxlib
            source = None
        out = None if source is None else propagate_text(source, text, source=Path(path))
        if out is not None:
            write_atomic(output, out)
            ms = (time.perf_counter() - t) * 1000
            detail = f"read, propagate and write natively {ms:.0f} ms"
            (err if as_json else console).print(
                f"propagated {path} -> {output} ({detail})", highlight=False, soft_wrap=True
            )
            if as_json:
                print("[]")
            return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        task = progress.add_task("import", total=3)
        t = time.perf_counter()
        module = load_mlir(Path(path))
        times["import"] = time.perf_counter() - t
        explanations = [explain_value(module, v, pipeline=pipeline, conservative=conservative) for v in explain]
        progress.update(task, advance=1, description=f"propagate ({sum(1 for _ in module.walk())} ops)")
        t = time.perf_counter()
        propagate(module, text, in_place=True)
        times["propagate"] = time.perf_counter() - t
        progress.update(task, advance=1, description="export")
        t = time.perf_counter()
        module.save(output)
        times["export"] = time.perf_counter() - t
        progress.update(task, advance=1)
    detail = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in times.items())
    (err if as_json else console).print(f"propagated {path} -> {output} ({detail})", highlight=False, soft_wrap=True)
    if as_json:
        import json

        print(json.dumps([e.to_dict() for e in explanations], indent=2))
        return
    for e in explanations:
        console.print(e)


def rules(console: Console, path: str, output: str, *, conservative: bool = False) -> None:
    """Reads ``path``, adds every op's sharding rule, writes ``output`` (atomically)."""
    from shardwise.importers.mlir import load_mlir
    from shardwise.rules.from_ir import populate_rules

    module = load_mlir(Path(path))
    added = populate_rules(module, conservative=conservative)
    module.save(output)
    console.print(f"sharding rules on {added} ops, written to {output}", highlight=False, soft_wrap=True)


def demo_partition(console: Console) -> None:
    """The bundled training step, propagated, partitioned for its 8 devices, every rank run in
    the in-process SPMD simulator, and the result compared with the unpartitioned program."""
    import tempfile
    from importlib.resources import files

    console.rule("partition and simulate: 8 devices")
    path = files("shardwise.examples").joinpath("transformer_step.mlir")
    with tempfile.TemporaryDirectory(prefix="shardwise-demo-") as tmp:
        outdir = str(Path(tmp) / "partition")
        try:
            partition_file(console, str(path), outdir, None)
        except ImportError as e:
            console.print(Text(f"skipped: {e}", style="yellow"))
            return
        run_check(console, outdir, seed=0)


def partition_file(
    console: Console,
    path: str,
    outdir: str,
    mesh: str | None,
    *,
    force: bool = False,
    auto: bool = False,
    method: str | None = None,
    memory_budget: str | None = None,
    time_limit: float | None = None,
    weights: str | None = None,
    allow_infeasible: bool = False,
) -> None:
    """``shardwise partition``: partitions the module in ``path`` into ``outdir``
    (``shardwise.workflow.partition``) and prints its collectives (bytes per device from the
    planner's cost model). ``outdir`` must be new, empty or a previous partition unless
    ``force``. ``auto`` (or a ``method``): search the shardings first (``auto_shard`` with
    ``method``, ``memory_budget`` such as ``44KB``, ``time_limit`` seconds) and print its
    report's totals; a plan over the budget is an error unless ``allow_infeasible``.
    ``weights``: an ``.npz`` (keys ``arg0``, ``arg1``, ... or argument names) whose arrays are
    saved as each rank's blocks (``weights/rank{r}.npz``)."""
    from shardwise.importers.mlir import load_mlir
    from shardwise.workflow import partition, read_weights_file

    arrays = read_weights_file(weights) if weights is not None else None
    part = partition(
        load_mlir(Path(path)),
        outdir,
        mesh=mesh,
        force=force,
        weights=arrays,
        search=auto,
        method=method,
        memory_budget=memory_budget,
        time_limit=time_limit,
        allow_infeasible=allow_infeasible,
    )
    if part.search_report is not None:
        r = part.search_report
        budget = "no limit" if r.memory_budget is None else f"{r.memory_budget} bytes"
        console.print(
            f"search ({r.method}{', optimal' if r.optimal else ''}): predicted {r.comm_bytes:.0f} bytes sent per device, "
            f"peak memory {r.peak_memory} bytes per device (budget {budget}{'' if r.feasible else ', EXCEEDED'})",
            highlight=False,
        )
    table = Table(title=f"collectives of {path} on mesh {part.mesh} ({part.mesh.size} ranks)", header_style="bold")
    for col in ("collective", "global shape", "bytes / device", "runs", "from"):
        table.add_column(col, overflow="fold")
    for c in part.collectives:
        table.add_row(Text(c.text), f"{list(c.shape)} {c.dtype}", f"{c.bytes:.0f}", str(c.times), Text(c.source))
    console.print(table)
    saved = (
        f", weights/rank0..{part.mesh.size - 1}.npz ({', '.join(f'arg{i}' for i in part.weights)})"
        if part.weights
        else ""
    )
    console.print(
        f"wrote {outdir}: partitioned.mlir, rank0..{part.mesh.size - 1}.mlir, meta.json{saved}; {part.bytes_per_device:.0f} bytes per device",
        highlight=False,
    )


def check_table(title: str, outputs: Sequence[Any]) -> Table:
    """The per-result table of a partition check (``OutputCheck`` rows)."""
    table = Table(title=title, header_style="bold")
    for col in (
        "result",
        "shape",
        "dtype",
        "max abs err",
        "max rel err",
        "tolerance",
        "vs float64: split / unsplit",
        "status",
    ):
        table.add_column(col)
    for o in outputs:
        tolerance = "exact" if o.rtol == 0 else f"{o.rtol:g}"
        exact = ""
        if o.bound is not None:
            tolerance = f"{o.bound:.3g} (vs float64)"
            exact = f"{o.exact_err:.3g} / {o.own_err:.3g}"
        table.add_row(
            str(o.index),
            str(list(o.shape)),
            o.dtype,
            f"{o.max_abs:.3g}",
            f"{o.max_rel:.3g}",
            tolerance,
            exact,
            Text("pass", "green") if o.passed else Text("FAIL", "bold red"),
        )
    if any(o.bound is not None for o in outputs):
        from shardwise.spmd.partition.check import EPS_FLOOR, ERROR_FACTOR

        table.caption = f"over the fast tolerance: passes within {ERROR_FACTOR:g}x the unpartitioned program's own error against float64 (or {EPS_FLOOR:g} eps)"
    return table


def launch_outdir(
    console: Console, outdir: str, n: int, *, backend: str, check: bool, seed: int, timeout: float | None
) -> bool:
    """``shardwise launch -n N OUTDIR``: runs the partition on ``n`` MPI ranks
    (``shardwise.spmd.launch.launch``), prints the check table (with ``check``) and each
    rank's run time; returns whether the check passed (``True`` without one)."""
    from shardwise.spmd.launch import launch

    res = launch(outdir, n, backend=backend, check=check, seed=seed, timeout=timeout)
    if res.checks is not None:
        console.print(
            check_table(f"{outdir}: {n} {backend.upper()} ranks vs the unpartitioned program (seed {seed})", res.checks)
        )
    sent = max((res.bytes_sent(r) for r in range(n)), default=0)
    console.print(
        f"{n} ranks ({backend}): run time max {max(res.seconds, default=0.0) * 1000:.1f} ms (between barriers), job {res.wall_seconds:.2f} s; "
        f"{len(res.collectives[0]) if res.collectives else 0} collectives on rank 0; bytes sent per device: max {sent}",
        highlight=False,
    )
    if res.checks is None:
        return True
    console.print(Text("PASS", "bold green") if res.passed else Text("FAIL", "bold red"))
    return res.passed


def run_only(console: Console, outdir: str, seed: int, device: str = "cpu") -> None:
    """``shardwise run OUTDIR`` (no ``--check``): every rank in the simulator on random inputs
    (arrays on ``device``); prints rank 0's collectives, bytes sent and peak live bytes per
    device."""
    from shardwise.spmd.load import simulate_outdir

    res = simulate_outdir(outdir, seed=seed, device=device)
    console.print(_collectives_table(res.collectives[0] if res.collectives else []))
    n = len(res.peak_bytes)
    sent = max((res.bytes_sent(r) for r in range(n)), default=0)
    console.print(
        f"{n} simulated ranks ran; bytes sent per device: max {sent}; peak live bytes per device: max {max(res.peak_bytes, default=0)}",
        highlight=False,
    )


def _collectives_table(records: Sequence[Any]) -> Table:
    coll = Table(title="collectives on rank 0 (simulated)", header_style="bold")
    for col in ("kind", "group", "local shape", "bytes sent", "bytes received"):
        coll.add_column(col)
    for c in records:
        coll.add_row(c.kind, str(list(c.group)), f"{list(c.shape)} {c.dtype}", str(c.bytes_sent), str(c.bytes_received))
    return coll


def run_check(console: Console, outdir: str, seed: int, device: str = "cpu") -> bool:
    """``shardwise run OUTDIR --check``: simulates every rank on random inputs (arrays on
    ``device``) and prints the comparison with the unpartitioned program; returns whether every
    result passed."""
    from shardwise.spmd.load import check_outdir

    res = check_outdir(outdir, seed=seed, device=device)
    where = "" if device == "cpu" else f" on {device}"
    console.print(
        check_table(f"{outdir}: simulated ranks{where} vs the unpartitioned program (seed {seed})", res.outputs)
    )
    console.print(_collectives_table(res.collectives))
    console.print(
        f"bytes sent per device: max {max(res.bytes_sent, default=0)}; peak live bytes per device: max {max(res.peak_bytes, default=0)}",
        highlight=False,
    )
    console.print(Text("PASS", "bold green") if res.passed else Text("FAIL", "bold red"))
    return bool(res.passed)


def auto_file(
    console: Console,
    path: str,
    output: str,
    mesh: str | None,
    *,
    memory_budget: str | None,
    method: str,
    time_limit: float,
    as_json: bool = False,
    configure: Sequence[str] = (),
    overlap: float = 0.0,
    bound_time: float = 0.0,
) -> int:
    """``shardwise auto IN -o OUT``: ``auto_shard`` with a progress bar (building strategies and
    edges, solving), the written module (atomically) and the report (a table, or with
    ``as_json`` ``Report.to_dict()`` as JSON on stdout). ``mesh`` (``data=2,model=4``) replaces
    the module's only mesh or adds ``@mesh``. ``configure``: ``NAME[#INDEX]=STRATEGY`` specs
    (``shardwise.search.op_strategy.configure_spec``), each op's strategy fixed as MindSpore's
    ``op.shard``. ``overlap``: ``DeviceModel.overlap`` (share of a matmul's compute its
    adjacent collectives hide behind). ``bound_time``: seconds for a lower bound of the
    objective after the search (``auto_shard(bound_time=...)``; 0: none). Returns the exit
    status: 0 when the plan fits the budget, 1 when it does not, 130 when a Ctrl-C stopped the
    search (the plan written is then the best found so far, and a note says so on stderr)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from shardwise.importers.mlir import load_mlir
    from shardwise.search.auto import INTERRUPTED_SUFFIX, auto_shard
    from shardwise.search.cost_model import DeviceModel

    device = DeviceModel(overlap=overlap)
    err = Console(stderr=True)
    module = load_mlir(Path(path))
    if configure:
        from shardwise.search.op_strategy import configure_spec

        for spec in configure:
            configure_spec(module, spec)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        task = progress.add_task("building strategies", total=1)

        def step(stage: str, done: int, total: int) -> None:
            label = {
                "strategies": "building strategies",
                "edges": "pricing reshards",
                "solving": f"solving ({method}, <= {time_limit:g} s)",
            }[stage]
            progress.update(task, description=label, completed=done, total=max(total, 1))

        out, report = auto_shard(
            module,
            parse_mesh_arg(mesh) if mesh else None,
            memory_budget=memory_budget,
            method=method,
            time_limit=time_limit,
            progress=step,
            allow_infeasible=True,
            device=device,
            bound_time=bound_time,
        )
    out.save(output)
    if as_json:
        import json

        print(json.dumps(report.to_dict(), indent=2))
    else:
        console.print(report.table())
        console.print(f"wrote {output}", highlight=False)
    if report.method.endswith(INTERRUPTED_SUFFIX):
        print("shardwise: interrupted; the plan written is the best found so far", file=sys.stderr)
        return 130
    if not report.feasible:
        print(f"shardwise: {report.infeasibility}", file=sys.stderr)
        return 1
    return 0


def run() -> NoReturn:
    """The ``shardwise`` command (and ``python -m shardwise``): :func:`main`, then the process
    ends at once with its exit status. The work is done and its outputs written by then, so
    SIGINT and SIGTERM are ignored from here, and the interpreter's teardown (jaxlib's and XLA's
    destructors, about 0.4 s) is skipped: a signal in that window ended the process by the
    signal after the command had finished and said so (issue 25's signal trials)."""
    import signal

    rc = main()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said
            pass
    os._exit(rc)


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line, as every other error (issue 25): ``shardwise:
    error: MESSAGE (see 'shardwise COMMAND --help')``, exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"shardwise: error: {' '.join(message.split())} (see '{self.prog} --help')\n")
        sys.exit(2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="shardwise", description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"shardwise {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="tour the sharding representation on a bundled example")
    ex = sub.add_parser("example", help="list the bundled example programs, or write one to a file")
    ex.add_argument("name", nargs="?", help="an example's name (without it: list them)")
    ex.add_argument("-o", "--output", help="where to write it (default: standard output)")
    p = sub.add_parser("show", help="parse, validate and picture one sharding")
    p.add_argument("sharding", help="e.g. '#sdy.sharding<@mesh, [{\"x\"}, {}]>'")
    p.add_argument("--mesh", required=True, help='x=2,y=4 or \'#sdy.mesh<["x"=2, "y"=4]>\'')
    p.add_argument("--shape", help="tensor shape, e.g. 8,16")
    p.add_argument("--user", action="store_true", help="also apply the rules for users' own annotations")
    pp = sub.add_parser("propagate", help="propagate shardings through an MLIR module, as Shardy does")
    pp.add_argument("input", help="StableHLO + sdy MLIR file")
    pp.add_argument("-o", "--output", required=True, help="where to write the propagated module")
    pp.add_argument(
        "--pipeline",
        default="full",
        help="a name (full, user-priority, op-priority, aggressive, basic) or a Shardy pass pipeline such as "
        "'builtin.module(sdy-propagation-pipeline)' (default: full)",
    )
    pp.add_argument("--conservative", action="store_true", help="no split axes and no non-divisible axes")
    pp.add_argument(
        "--explain",
        action="append",
        default=[],
        metavar="VALUE",
        help="explain why VALUE got its sharding (a name of the written module: %%12, %%arg0, result0, @f:%%3); repeatable",
    )
    pp.add_argument(
        "--json", action="store_true", help="print the explanations as JSON (Explanation.to_dict) on stdout"
    )
    r = sub.add_parser("rules", help="annotate every op of an MLIR module with its sharding rule")
    r.add_argument("input", help="StableHLO + sdy MLIR file")
    r.add_argument("-o", "--output", required=True, help="where to write the annotated module")
    r.add_argument("--conservative", action="store_true", help="Shardy's conservative-propagation rule variants")
    pa = sub.add_parser("partition", help="partition a sharded MLIR module into per-rank programs (SPMD)")
    pa.add_argument("input", help="StableHLO + sdy MLIR file (propagated first when it has undecided shardings)")
    pa.add_argument(
        "-o",
        "--output",
        required=True,
        help="output directory (written atomically): new, empty, or a previous partition",
    )
    pa.add_argument(
        "--force", action="store_true", help="replace OUTPUT even when it is a file or a directory of other files"
    )
    pa.add_argument(
        "--mesh",
        help="x=2,y=4; must agree with the module's mesh (required when it has none); with --auto it replaces the module's only mesh",
    )
    pa.add_argument(
        "--auto", action="store_true", help="choose the shardings by cost first (as 'shardwise auto'), then partition"
    )
    pa.add_argument(
        "--method",
        choices=["ilp", "local", "penalty", "limited", "bfs", "auto"],
        help="search method (implies --auto; default ilp)",
    )
    pa.add_argument("--memory-budget", help="with --auto: bytes per device, e.g. 16GiB, 44KB (default: no limit)")
    pa.add_argument("--time-limit", type=float, help="with --auto: solver seconds (default 10)")
    pa.add_argument(
        "--allow-infeasible",
        action="store_true",
        help="with --auto: partition the plan even when it exceeds the memory budget",
    )
    pa.add_argument(
        "--weights",
        help="an .npz of global argument values (keys arg0, arg1, ... or argument names): saved as each rank's shards under OUTPUT/weights/",
    )
    ru = sub.add_parser("run", help="run a partition directory in the in-process SPMD simulator")
    ru.add_argument("outdir", help="a directory written by 'shardwise partition'")
    ru.add_argument(
        "--check",
        action="store_true",
        help="compare every result with the unpartitioned program (without it: run and report collectives and memory)",
    )
    ru.add_argument("--seed", type=int, default=0, help="seed of the random global inputs (default 0)")
    ru.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cpu: numpy arrays; cuda: CuPy arrays, every simulated rank on the current GPU (default: cpu)",
    )
    la = sub.add_parser("launch", help="run a partition directory on MPI ranks (mpiexec; pip install 'shardwise[mpi]')")
    la.add_argument("outdir", help="a directory written by 'shardwise partition'")
    la.add_argument("-n", type=int, required=True, help="number of ranks: the partition's device count")
    la.add_argument(
        "--backend",
        choices=("mpi", "nccl"),
        default="mpi",
        help="mpi: numpy on CPU ranks; nccl: CuPy + NCCL, one GPU per rank (default: mpi)",
    )
    la.add_argument("--check", action="store_true", help="rank 0 compares every result with the unpartitioned program")
    la.add_argument("--seed", type=int, default=0, help="seed of the random global inputs (default 0)")
    la.add_argument("--timeout", type=float, default=600.0, help="seconds before the whole job is killed (default 600)")
    io = sub.add_parser(
        "iopddl", help="solve an IOPDDL contest instance (ASPLOS 2025) and print its strategies and cost"
    )
    io.add_argument("input", help="instance .json or .json.gz")
    io.add_argument("--time-limit", type=float, required=True, help="seconds (wall clock, the whole run)")
    io.add_argument(
        "--method",
        choices=["auto", "contracted", "ilp", "limited", "local", "penalty"],
        default="auto",
        help="solver (default auto)",
    )
    io.add_argument("--seed", type=int, default=0, help="local-search seed (default 0)")
    io.add_argument(
        "--threads",
        type=int,
        default=1,
        help="solver threads (default 1): local-search runs with seeds seed..; with --method auto on a large graph with a usage limit, two penalty trajectories on two threads and local search on the rest",
    )
    io.add_argument(
        "--bound",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="after the answer, spend SECONDS more (outside --time-limit) on a lower bound of the optimum and print it last (default 0: none)",
    )
    au = sub.add_parser(
        "auto", help="choose every value's sharding by cost (ILP, local search or BFS) within a memory budget"
    )
    au.add_argument("input", help="StableHLO MLIR file (values already sharded are kept)")
    au.add_argument("-o", "--output", required=True, help="where to write the sharded module (atomically)")
    au.add_argument("--mesh", help="x=2,y=4: replaces the module's only mesh or adds @mesh (required when it has none)")
    au.add_argument("--memory-budget", help="bytes per device, e.g. 16GiB, 512MB (default: no limit)")
    au.add_argument(
        "--method",
        choices=["ilp", "local", "penalty", "limited", "bfs", "auto"],
        default="ilp",
        help="search (default ilp)",
    )
    au.add_argument("--time-limit", type=float, default=10.0, help="solver seconds (default 10)")
    au.add_argument(
        "--overlap",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="share (0 to 1) of a matmul's compute that the collectives next to it hide behind, as a collective matmul does (default 0: none)",
    )
    au.add_argument(
        "--bound",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="after the search, spend SECONDS more on a lower bound of the objective over every plan within the budget (default 0: none)",
    )
    au.add_argument("--json", action="store_true", help="print the report as JSON (Report.to_dict) on stdout")
    au.add_argument(
        "--configure",
        action="append",
        default=[],
        metavar="SPEC",
        help="NAME[#INDEX]=STRATEGY (repeatable): fix the strategy of the INDEX-th op NAME (from 0, program order; #INDEX optional "
        'when the name is unique), MindSpore\'s ((2, 1), (1, 4)) or Shardy\'s [{"data"}, {}], [{}, {"model"}]',
    )
    tp = sub.add_parser(
        "torch-plan",
        help="plan a PyTorch model (torch.export; pip install 'shardwise[torch]') and print DTensor placements",
    )
    tp.add_argument("model", help="module:factory (or path.py:factory): a function returning the torch.nn.Module")
    tp.add_argument(
        "--example-shapes",
        nargs="+",
        required=True,
        metavar="SHAPE[:DTYPE]",
        help="one per forward input, e.g. 8x64 or 2x16:int64 (random example tensors; only shapes and dtypes matter)",
    )
    tp.add_argument("--mesh", required=True, help="x=2,y=4")
    tp.add_argument(
        "--place",
        action="append",
        default=[],
        metavar="NAME=PLACEMENTS",
        help="input=S0,R: DTensor placements of an input or parameter, one per mesh axis (repeatable)",
    )
    tp.add_argument(
        "--memory-budget", help="bytes per device (16GiB, 512MB): auto_shard within it; default: propagate only"
    )
    tp.add_argument("--time-limit", type=float, default=10.0, help="auto_shard's solver seconds (default 10)")
    tp.add_argument(
        "--no-check",
        action="store_true",
        help="skip the DTensor checks (one run of the model per check, on a fake process group)",
    )
    tp.add_argument("-o", "--output", help="also write the plan as JSON {name: [[kind, arg], ...]} (atomically)")
    args = parser.parse_args(argv)
    console = Console()
    restore = _exit_on_sigterm()
    try:
        with warnings.catch_warnings():
            # One plain line per distinct warning (an op without a sharding rule: once per op name).
            warnings.simplefilter("once", UnknownOpWarning)
            warnings.showwarning = _show_warning
            return _run(args, console)
    except KeyboardInterrupt:
        # Ctrl-C: temporary outputs are already cleaned up by the ``finally`` blocks on the way.
        print("shardwise: interrupted", file=sys.stderr)
        return 130
    finally:
        restore()


def _exit_on_sigterm() -> Callable[[], None]:
    """Until the returned function is called, SIGTERM raises ``SystemExit(143)`` in the main
    thread, so the clean-up of temporary outputs runs as it does for Ctrl-C (issue 25). Only
    in the main thread, and only where SIGTERM still has its default action."""
    import signal
    import threading

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        return lambda: None

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return restore


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    print(f"shardwise: warning: {message}", file=sys.stderr)


def _run(args: argparse.Namespace, console: Console) -> int:
    try:
        if args.command == "demo":
            demo(console)
            demo_program(console)
            demo_propagation(console)
            demo_partition(console)
        elif args.command == "example":
            example(console, args.name, args.output)
        elif args.command == "propagate":
            try:
                propagate_file(
                    console,
                    args.input,
                    args.output,
                    pipeline=args.pipeline,
                    conservative=args.conservative,
                    explain=args.explain,
                    as_json=args.json,
                )
            except PipelineError as e:
                if str(e).startswith("unknown pipeline"):
                    raise
                names = ", ".join(PIPELINE_NAMES)
                raise PipelineError(f"--pipeline takes a name ({names}) or a Shardy pass pipeline; {e}") from None
        elif args.command == "partition":
            partition_file(
                console,
                args.input,
                args.output,
                args.mesh,
                force=args.force,
                auto=args.auto,
                method=args.method,
                memory_budget=args.memory_budget,
                time_limit=args.time_limit,
                weights=args.weights,
                allow_infeasible=args.allow_infeasible,
            )
        elif args.command == "run":
            if not args.check:
                run_only(console, args.outdir, args.seed, args.device)
                return 0
            return 0 if run_check(console, args.outdir, args.seed, args.device) else 1
        elif args.command == "launch":
            return (
                0
                if launch_outdir(
                    console,
                    args.outdir,
                    args.n,
                    backend=args.backend,
                    check=args.check,
                    seed=args.seed,
                    timeout=args.timeout,
                )
                else 1
            )
        elif args.command == "iopddl":
            from shardwise.search.iopddl import command_start, solve_instance

            # --time-limit counts from the process's start (interpreter start and imports included).
            lines, sol = solve_instance(
                args.input,
                args.time_limit,
                args.method,
                seed=args.seed,
                threads=args.threads,
                started=command_start(),
                bound_time=args.bound,
            )
            for line in lines:
                print(line, flush=True)
            if sol.interrupted:
                print("shardwise: interrupted; the answer above is the best found so far", file=sys.stderr)
                return 130
            return 1 if "cost: inf" in lines[1:2] else 0  # no answer within the usage limit
        elif args.command == "auto":
            return auto_file(
                console,
                args.input,
                args.output,
                args.mesh,
                memory_budget=args.memory_budget,
                method=args.method,
                time_limit=args.time_limit,
                as_json=args.json,
                configure=args.configure,
                overlap=args.overlap,
                bound_time=args.bound,
            )
        elif args.command == "torch-plan":
            torch_plan(console, args)
        elif args.command == "rules":
            rules(console, args.input, args.output, conservative=args.conservative)
        else:
            mesh = parse_mesh_arg(args.mesh)
            ts = TensorSharding.parse(args.sharding, mesh)
            show(console, ts, parse_shape_arg(args.shape) if args.shape else None, user=args.user)
    except ShardwiseError as e:
        print(f"shardwise: error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"shardwise: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an output or input path the file system refuses
        print(f"shardwise: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
