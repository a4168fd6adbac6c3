"""Communication of shardwise's partitioner against XLA's SPMD partitioner (issue 6).

For every program of ``../shared/conformance/dev`` as Shardy propagated it (``*.out.mlir``),
and for every real training step of ``python/shardwise/testing/real_models.py`` (flax + optax, lowered raw
with its calls: XLA compiles that text as ``jax.jit`` would, shardwise partitions it, its
propagation then seeing the program as XLA's does), and for every single-op program of
``python/shardwise/testing/op_programs.py`` (windows, slices, pads, sorts, gathers along sharded
dimensions: the ops XLA has special handlers for):

* shardwise: ``shardwise.partition`` → the collectives of each rank's local StableHLO program
  (the partitioner's and those the program already had, e.g. in shard_map bodies), counted the
  same way, the largest over ranks; once with plans chosen for bytes (latency 0, the criterion
  compared with XLA) and once with the default model (5 µs per step, which prefers fewer
  collectives for small tensors);
* XLA: the same text compiled by jax 0.10.2's XLA (Shardy partitioner, 8 CPU devices); the
  collectives of the optimised HLO counted with the same per-device formulas: all-gather
  (n−1)·S_in, reduce-scatter and all-to-all (n−1)/n·S_in, all-reduce 2(n−1)/n·S,
  collective-permute S (S: the device's operand bytes, n: replica-group size).

Not timed: the session writes ``benches/results/partition_bytes.md`` (one row per program).

    pip install -e '.[bench]' && pytest benches/bench_partition_bytes.py -p no:cacheprovider
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
from bench_report import OUT, SMOKE
from shardwise.files import write_atomic
from shardwise.testing.corpus import conformance_dir

ROWS: list[dict[str, Any]] = []
_DTYPE_BYTES = {
    "f64": 8,
    "s64": 8,
    "u64": 8,
    "c64": 8,
    "c128": 16,
    "f32": 4,
    "s32": 4,
    "u32": 4,
    "f16": 2,
    "bf16": 2,
    "s16": 2,
    "u16": 2,
    "s8": 1,
    "u8": 1,
    "pred": 1,
}
_SHAPE = re.compile(r"\b(pred|[fsuc]\d+|bf16)\[([\d,]*)\]")
_COLLECTIVE = re.compile(r"\b(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)(-start)?\(")


def _programs() -> list[Path]:
    d = conformance_dir()
    paths = sorted((d / "dev").glob("*.out.mlir")) if d is not None else []
    return paths[:3] if SMOKE else paths


def _bytes_of(text: str) -> int:
    total = 0
    for dtype, dims in _SHAPE.findall(text):
        n = 1
        for d in dims.split(","):
            if d:
                n *= int(d)
        total += n * _DTYPE_BYTES.get(dtype, 4)
    return total


def _group_size(rest: str, devices: int) -> int:
    """The replica-group size of a collective's attributes: explicit groups ``{{0,1},{2,3}}``,
    the iota form ``[groups,size]<=[...]``, or the mesh form ``mesh['a'=2,'b'=4] {'b'}``."""
    m = re.search(r"replica_groups=\{\{([\d,]*)\}", rest)
    if m:
        return len([x for x in m.group(1).split(",") if x])
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]", rest)
    if m:
        return int(m.group(2))
    m = re.search(r"replica_groups=mesh\[([^\]]*)\].*?\{([^}]*)\}", rest)
    if m:
        sizes = {k: int(v) for k, v in re.findall(r"'([^']+)'=(\d+)", m.group(1))}
        n = 1
        for name in re.findall(r"'([^']+)'", m.group(2)):
            n *= sizes.get(name, 1)
        return n
    return devices


def xla_bytes(hlo: str, devices: int) -> tuple[float, int]:
    """Bytes per device over the collectives of optimised HLO text, and their count. Operands
    are printed without shapes, so each size comes from the result: all-gather S_in = S_out/n,
    reduce-scatter S_in = n·S_out, the others S_in = S_out."""
    total, count = 0.0, 0
    for line in hlo.splitlines():
        if " = " not in line:
            continue
        lhs_rhs = line.split(" = ", 1)[1]
        m = _COLLECTIVE.search(lhs_rhs)
        if m is None:
            continue
        kind = m.group(1)
        s_out = _bytes_of(lhs_rhs[: m.start()])
        rest = lhs_rhs[m.end() :]
        count += 1
        if kind == "collective-permute":
            total += s_out
            continue
        n = _group_size(rest, devices)
        if n <= 1:
            continue
        if kind == "all-gather":
            total += (n - 1) * s_out / n
        elif kind == "all-reduce":
            total += 2 * (n - 1) / n * s_out
        elif kind == "reduce-scatter":
            total += (n - 1) * s_out
        else:  # all-to-all
            total += (n - 1) / n * s_out
    return total, count


_LOCAL_KINDS = {
    "stablehlo.all_gather": "all-gather",
    "stablehlo.all_reduce": "all-reduce",
    "stablehlo.reduce_scatter": "reduce-scatter",
    "stablehlo.all_to_all": "all-to-all",
    "stablehlo.collective_permute": "collective-permute",
}


def local_bytes(rank_module: Any) -> tuple[float, int]:
    """Bytes one rank's program sends over all its collectives (the partitioner's and those the
    program already had, e.g. in shard_map bodies), counted statically like ``xla_bytes``."""
    from shardwise.spmd.redistribute import dtype_bytes

    total, count = 0.0, 0
    for op in rank_module.walk():
        kind = _LOCAL_KINDS.get(op.name)
        if kind is None:
            continue
        count += 1
        t = op.results[0].type
        n_el = 1
        for d in t.shape:
            n_el *= d
        s_out = n_el * dtype_bytes(t.element_type)
        if kind == "collective-permute":
            total += s_out
            continue
        m = re.search(r"tensor<(\d+)x(\d+)xi64>", op.attributes.get("replica_groups", ""))
        n = int(m.group(2)) if m else 1
        if n <= 1:
            continue
        total += {
            "all-gather": (n - 1) * s_out / n,
            "all-reduce": 2 * (n - 1) / n * s_out,
            "reduce-scatter": (n - 1) * s_out,
        }.get(kind, (n - 1) / n * s_out)
    return total, count


def compile_hlo(text: str) -> tuple[str, int]:
    """XLA's optimised HLO of MLIR ``text`` compiled as ``jax.jit`` would (Shardy, the SPMD
    partitioner, ``mhlo.num_partitions`` CPU devices; ``sdy.reshard`` read as a constraint),
    and that device count (also timed by ``bench_partition_speed.py``)."""
    import jax
    import numpy as np
    from jax._src import xla_bridge
    from jax._src.lib import xla_client as xc

    text = re.sub(r"sdy\.reshard (%[\w#]+) <", r"sdy.sharding_constraint \1 <", text)
    m = re.search(r"mhlo\.num_partitions = (\d+)", text)
    n = int(m.group(1)) if m else 1
    opts = xc.CompileOptions()
    bo = opts.executable_build_options
    bo.num_partitions, bo.num_replicas = n, 1
    bo.use_spmd_partitioning = n > 1
    bo.use_shardy_partitioner = True
    bo.device_assignment = xc.DeviceAssignment.create(np.arange(n).reshape(1, n))
    exe = xla_bridge.get_backend("cpu").compile_and_load(text, xc.DeviceList(tuple(jax.devices("cpu")[:n])), opts)
    return "\n".join(h.to_string() for h in exe.hlo_modules()), n


def _real_models() -> list[str]:
    try:
        import flax  # noqa: F401
        import optax  # noqa: F401
    except ImportError:
        return []
    from shardwise.testing.real_models import model_names

    names = model_names()
    return names[:2] if SMOKE else names


@pytest.mark.parametrize("name", _real_models())
def test_real_model_bytes_against_xla(name: str) -> None:
    from shardwise.testing.real_models import real_model

    _compare(f"real: {name}", real_model(name).text)


def _op_programs() -> list[str]:
    try:
        import jax  # noqa: F401
    except ImportError:
        return []
    from shardwise.testing.op_programs import op_program_names

    names = op_program_names()
    return names[:2] if SMOKE else names


@pytest.mark.parametrize("name", _op_programs())
def test_op_program_bytes_against_xla(name: str) -> None:
    from shardwise.testing.op_programs import op_program

    _compare(f"op: {name}", op_program(name))


@pytest.mark.parametrize("path", _programs(), ids=lambda p: p.name.removesuffix(".out.mlir"))
def test_bytes_against_xla(path: Path) -> None:
    _compare(path.name.removesuffix(".out.mlir"), path.read_text())


def _compare(program: str, text: str) -> None:
    import warnings

    import shardwise
    from shardwise.importers.mlir import load_mlir

    warnings.simplefilter("ignore", shardwise.UnknownOpWarning)
    row: dict[str, Any] = {"program": program}
    ROWS.append(row)
    try:
        hlo, devices = compile_hlo(text)
    except Exception as e:  # noqa: BLE001 - reported in the table
        row["note"] = f"XLA: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
        pytest.skip(row["note"])
    row["xla_bytes"], row["xla_collectives"] = xla_bytes(hlo, devices)
    from shardwise.spmd.redistribute import CostModel, Link

    try:
        part = shardwise.partition(load_mlir(text))
        lean = shardwise.partition(load_mlir(text), cost_model=CostModel(default=Link(100e9, 0.0)))
    except Exception as e:  # noqa: BLE001 - reported in the table
        row["note"] = f"shardwise: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
        pytest.skip(row["note"])
    row["ours_bytes"], row["ours_collectives"] = max(local_bytes(r) for r in lean.ranks)
    row["default_bytes"], row["default_collectives"] = max(local_bytes(r) for r in part.ranks)


def pytest_report_table() -> str:
    lines = [
        "| program | XLA bytes/device (collectives) | shardwise, bytes-optimal plans (collectives) | shardwise ≤ XLA | shardwise, default α=5 µs (collectives) |",
        "|---|---:|---:|:---:|---:|",
    ]
    for r in ROWS:
        if "ours_bytes" in r:
            ok = "yes" if r["ours_bytes"] <= r["xla_bytes"] + 1e-9 else "NO"
            lines.append(
                f"| {r['program']} | {r['xla_bytes']:.0f} ({r['xla_collectives']}) | {r['ours_bytes']:.0f} ({r['ours_collectives']}) | {ok} | "
                f"{r['default_bytes']:.0f} ({r['default_collectives']}) |"
            )
        else:
            lines.append(f"| {r['program']} | – | – | {r.get('note', '')} | – |")
    lines.append("")
    for group, what in (("", "dev and real programs"), ("op: ", "single-op programs")):
        rows = [r for r in ROWS if r["program"].startswith("op: ") == bool(group)]
        done = [r for r in rows if "ours_bytes" in r]
        le = sum(1 for r in done if r["ours_bytes"] <= r["xla_bytes"] + 1e-9)
        if rows:
            lines.append(
                f"{what}: shardwise moves at most XLA's bytes on {le} of {len(done)} compared ({len(rows) - len(done)} not compared)."
            )
    return "\n".join(lines) + "\n"


def teardown_module() -> None:
    if ROWS:
        OUT.mkdir(parents=True, exist_ok=True)
        write_atomic(OUT / "partition_bytes.md", pytest_report_table())
