"""Numerical check of a partition: every rank's program run in the in-process SPMD simulator
(``shardwise.execute.simulator``) on the blocks of random global inputs, compared block by
block with the unpartitioned program run by the same interpreter (issue 6, "Executor").

Pass criterion: floating results ``max|a-b| <= rtol * max(max|ref|, 1)`` with ``rtol = 1e-5``
(float32; bf16/f16 use ``1e-2``), integers and booleans exact. Padding of the inputs' shards is
filled with NaN (floats) so that padding leaking into real data fails the check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shardwise.execute.inputs import random_inputs
from shardwise.execute.interpreter import run
from shardwise.execute.simulator import CollectiveRecord, simulate
from shardwise.ir.core import Module
from shardwise.ir.types import TensorType
from shardwise.sharding import TensorSharding

__all__ = ["CheckResult", "OutputCheck", "check_partition", "compare_outputs", "shard_inputs"]


@dataclass(frozen=True)
class OutputCheck:
    """One result: ``max_abs`` and ``max_rel`` error over all ranks' blocks (``max_rel`` is
    ``max_abs / max(max|ref|, 1)``), the tolerance used and whether it passed."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    max_abs: float
    max_rel: float
    rtol: float
    passed: bool


@dataclass
class CheckResult:
    """Per-result checks, the simulator's collective records of rank 0 and every rank's peak
    live bytes; ``passed`` when every result passed."""

    outputs: list[OutputCheck]
    collectives: list[CollectiveRecord] = field(default_factory=list)
    peak_bytes: list[int] = field(default_factory=list)
    bytes_sent: list[int] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)


def _fill(dtype: np.dtype[Any]) -> Any:
    return np.nan if dtype.kind in "fc" else 0


def shard_inputs(global_module: Module, inputs: list[Any], num_ranks: int, func: str = "main", *, ranks: Sequence[int] | None = None) -> list[list[Any]]:
    """Per rank (of ``ranks``, all ``num_ranks`` when ``None``), the padded local block of each
    global input (by the argument shardings of ``global_module``'s ``func``; padding filled with
    NaN for floats, 0 otherwise)."""
    f = global_module.func(func)
    meshes = global_module.meshes
    out: list[list[Any]] = []
    for r in range(num_ranks) if ranks is None else ranks:
        row = []
        for a, x in zip(f.args, inputs):
            s = a.sharding
            x = np.asarray(x)
            if s is None or not isinstance(a.type, TensorType) or x.ndim == 0:
                row.append(x)
                continue
            block = x[s.device_slices(x.shape, r, meshes=meshes)]
            local = s.local_shape(x.shape, meshes=meshes)
            padded = np.full(local, _fill(x.dtype), dtype=x.dtype)
            padded[tuple(slice(0, n) for n in block.shape)] = block
            row.append(padded)
        out.append(row)
    return out


def _rtol(dtype: np.dtype[Any]) -> float:
    if dtype.kind not in "fc":
        return 0.0
    return 1e-2 if dtype.itemsize <= 2 else 1e-5


def _compare(i: int, ref: np.ndarray, blocks: list[tuple[np.ndarray, np.ndarray]]) -> OutputCheck:
    rtol = _rtol(ref.dtype)
    worst = 0.0
    for got, want in blocks:
        if got.shape != want.shape:
            worst = float("inf")
            break
        if got.size == 0:
            continue
        if ref.dtype.kind in "fc":
            a, b = got.astype(np.complex128 if ref.dtype.kind == "c" else np.float64), want.astype(np.complex128 if ref.dtype.kind == "c" else np.float64)
            same = (np.isnan(a) & np.isnan(b)) | (a == b)
            with np.errstate(invalid="ignore"):
                diff = np.where(same, 0.0, np.abs(a - b))
            diff = np.where(np.isnan(diff), np.inf, diff)
            worst = max(worst, float(diff.max()))
        else:
            worst = max(worst, 0.0 if np.array_equal(got, want) else float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()))
    finite = ref[np.isfinite(ref)] if ref.dtype.kind in "fc" else ref
    scale = max(float(np.abs(finite).max()) if finite.size else 0.0, 1.0)
    rel = worst / scale
    return OutputCheck(i, tuple(ref.shape), str(ref.dtype), worst, rel, rtol, rel <= rtol)


def check_partition(original: Module, global_module: Module, ranks: list[Module], *, seed: int = 0, func: str = "main") -> CheckResult:
    """Runs ``ranks`` (rank ``r`` on device ``r``) in the SPMD simulator on the blocks of random
    inputs (``random_inputs(seed)`` of ``original``'s ``func``) and compares each rank's block of
    every result (by ``global_module``'s result shardings) with ``original`` run by the same
    interpreter. Raises ``ProgramError`` when a program fails to run (naming the rank and op)."""
    f = original.func(func)
    inputs = [np.asarray(x) for x in random_inputs(f, seed)]
    ref = [np.asarray(x) for x in run(original, inputs, func=func)]
    sim = simulate(ranks, shard_inputs(global_module, inputs, len(ranks), func), func=func)
    checks = compare_outputs(global_module, ref, sim.outputs, func)
    return CheckResult(checks, list(sim.collectives[0]) if sim.collectives else [], list(sim.peak_bytes), [sim.bytes_sent(r) for r in range(len(ranks))])


def compare_outputs(global_module: Module, ref: Sequence[Any], outputs: Sequence[Sequence[Any]], func: str = "main") -> list[OutputCheck]:
    """Compares ``outputs[r][i]`` (rank ``r``'s local result ``i``, padded) with rank ``r``'s
    block of the global result ``ref[i]`` (by ``global_module``'s result shardings), for every
    rank; one ``OutputCheck`` per result (criterion in the module docstring)."""
    g = global_module.func(func)
    meshes = global_module.meshes
    checks = []
    for i, want in enumerate(np.asarray(x) for x in ref):
        s: TensorSharding | None = g.result_shardings[i] if i < len(g.result_shardings) else None
        blocks = []
        for r in range(len(outputs)):
            got = np.asarray(outputs[r][i])
            if s is None or want.ndim == 0:
                blocks.append((got, want))
                continue
            sl = s.device_slices(want.shape, r, meshes=meshes)
            block = want[sl]
            blocks.append((got[tuple(slice(0, n) for n in block.shape)], block))
        checks.append(_compare(i, want, blocks))
    return checks
