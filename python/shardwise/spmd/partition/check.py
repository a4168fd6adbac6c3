"""Numerical check of a partition: every rank's program run in the in-process SPMD simulator
(``shardwise.execute.simulator``) on the blocks of random global inputs, compared block by
block with the unpartitioned program run by the same interpreter (issue 6, "Executor").

Pass criterion, per result (issue 24, "A sound numeric check"):

* integers and booleans: exactly equal;
* floats: first ``max|a-b| <= rtol * max(max|ref|, 1)`` against the unpartitioned run, with
  ``rtol = 1e-5`` (float32, float64) or ``1e-2`` (bf16, f16, f8). A result over that is measured
  against the *exact* answer: the unpartitioned program interpreted with every float in float64
  (``Interpreter(wide=True)``). It passes when the partitioned error is within
  ``ERROR_FACTOR`` times the unpartitioned program's own error against that answer, or within
  ``EPS_FLOOR`` machine epsilons of the element type (the same rule the interpreter's tests
  apply against XLA: as close to the exact answer as the unpartitioned program is). A long
  float32 gradient chain or a bf16 program whose rounding alone exceeds ``rtol`` passes; a wrong
  partition (a missing all-reduce, a wrong slice) is off by far more than its own rounding and
  fails. NaN and infinity must sit where the unpartitioned run has them. The own error is the
  largest over the result's elements, so it estimates the program's rounding well for tensors;
  a lone ill-conditioned scalar can fail on its luck, and the table shows both errors.

Padding of the inputs' shards is filled with NaN (floats) so that padding leaking into real
data fails the check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shardwise.execute.devices import array_namespace, to_device, to_host
from shardwise.execute.inputs import random_inputs
from shardwise.execute.interpreter import run
from shardwise.execute.simulator import CollectiveRecord, simulate
from shardwise.ir.core import Module
from shardwise.ir.types import TensorType
from shardwise.sharding import TensorSharding

__all__ = ["CheckResult", "OutputCheck", "check_partition", "check_with_inputs", "compare_outputs", "shard_inputs"]


#: A float result over the fast tolerance passes when its error against the exact answer is
#: within this factor of the unpartitioned program's own error (``tests/python/
#: test_execute_corpus.py`` applies 3 to our interpreter against XLA; the partitioned program
#: sums in a different order again, hence one more).
ERROR_FACTOR = 4.0
#: ... or within this many machine epsilons of the element type (own errors can be 0).
EPS_FLOOR = 4.0


@dataclass(frozen=True)
class OutputCheck:
    """One result: ``max_abs`` and ``max_rel`` error over all ranks' blocks against the
    unpartitioned run (``max_rel`` is ``max_abs / max(max|ref|, 1)``), the fast tolerance
    ``rtol`` and whether it passed. When ``max_rel`` is over ``rtol`` for a float result,
    ``exact_err`` is the partitioned program's relative error against the float64 answer and
    ``own_err`` the unpartitioned program's, and ``bound`` the error the result was allowed
    (``max(ERROR_FACTOR * own_err, EPS_FLOOR * eps)``); otherwise the three are ``None``."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    max_abs: float
    max_rel: float
    rtol: float
    passed: bool
    exact_err: float | None = None
    own_err: float | None = None
    bound: float | None = None


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


def shard_inputs(
    global_module: Module, inputs: list[Any], num_ranks: int, func: str = "main", *, ranks: Sequence[int] | None = None
) -> list[list[Any]]:
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
    if dtype.kind not in "fc" and dtype.name not in _LOW_FLOATS:
        return 0.0
    return 1e-2 if dtype.itemsize <= 2 else 1e-5


_LOW_FLOATS = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def _is_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind in "fc" or dtype.name in _LOW_FLOATS


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _eps(dtype: np.dtype[Any]) -> float:
    if dtype.name in _LOW_FLOATS:
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).eps)  # type: ignore[no-untyped-call]
    return float(np.finfo(dtype).eps)


def _scale(ref: np.ndarray) -> float:
    finite = ref[np.isfinite(ref)] if _is_float(ref.dtype) else ref
    return max(float(np.abs(_wide(finite) if _is_float(ref.dtype) else finite).max()) if finite.size else 0.0, 1.0)


def _max_diff(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| over the elements; NaN where ``want`` has none, or an infinity that
    differs, counts as infinite; NaN against NaN and equal infinities count as 0."""
    a, b = _wide(got), _wide(want)
    same = (np.isnan(a) & np.isnan(b)) | (a == b)
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(a - b))
    diff = np.where(np.isnan(diff), np.inf, diff)
    return float(diff.max()) if diff.size else 0.0


def _exact_diff(got: np.ndarray, native: np.ndarray, exact: np.ndarray) -> float:
    """max |got - exact| where the unpartitioned run (``native``) is finite; where it is not,
    ``got`` must equal it (NaN for NaN, the same infinity), else the difference is infinite."""
    g, n, e = _wide(got), _wide(native), _wide(exact)
    finite = np.isfinite(n)
    off = ~finite & ~((np.isnan(g) & np.isnan(n)) | (g == n))
    if off.any():
        return float("inf")
    if not finite.any():
        return 0.0
    with np.errstate(invalid="ignore"):
        d = np.abs(g[finite] - e[finite])
    return float(np.where(np.isnan(d), np.inf, d).max())


#: Per result: (partitioned block, unpartitioned block, exact block or None), one per rank.
_Blocks = list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]


def _compare(i: int, ref: np.ndarray, blocks: _Blocks, exact: np.ndarray | None) -> OutputCheck:
    rtol = _rtol(ref.dtype)
    worst = 0.0
    for got, want, _ in blocks:
        if got.shape != want.shape:
            worst = float("inf")
            break
        if got.size == 0:
            continue
        if _is_float(ref.dtype):
            worst = max(worst, _max_diff(got, want))
        else:
            worst = max(
                worst,
                0.0
                if np.array_equal(got, want)
                else float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()),
            )
    scale = _scale(ref)
    rel = worst / scale
    if rel <= rtol or not _is_float(ref.dtype) or exact is None or worst == float("inf"):
        return OutputCheck(i, tuple(ref.shape), str(ref.dtype), worst, rel, rtol, rel <= rtol)
    exact_scale = _scale(exact)
    part = max((_exact_diff(g, w, e) for g, w, e in blocks if e is not None and g.size), default=0.0) / exact_scale
    own = _exact_diff(ref, ref, exact) / exact_scale
    bound = max(ERROR_FACTOR * own, EPS_FLOOR * _eps(ref.dtype))
    return OutputCheck(i, tuple(ref.shape), str(ref.dtype), worst, rel, rtol, part <= bound, part, own, bound)


def check_partition(
    original: Module,
    global_module: Module,
    ranks: list[Module],
    *,
    seed: int = 0,
    func: str = "main",
    device: str = "cpu",
) -> CheckResult:
    """Runs ``ranks`` (rank ``r`` on device ``r``) in the SPMD simulator on the blocks of random
    inputs (``random_inputs(seed)`` of ``original``'s ``func``) and compares each rank's block of
    every result (by ``global_module``'s result shardings) with ``original`` run by the same
    interpreter (criterion in the module docstring; ``original`` runs again in float64 only when
    a float result is over the fast tolerance). ``device``: where the simulated ranks and the
    unpartitioned reference keep their arrays, ``"cpu"`` (numpy) or ``"cuda"`` (CuPy, every rank
    on the current GPU): both run with the same arithmetic, so the own error the criterion
    allows is the device's (the float64 answer is computed in numpy). Raises ``ProgramError`` when a program fails
    to run (naming the rank and op), ``ShardwiseError`` for an unknown device or ``"cuda"``
    without CuPy or a GPU."""
    f = original.func(func)
    inputs = [np.asarray(x) for x in random_inputs(f, seed)]
    return check_with_inputs(
        original,
        global_module,
        ranks,
        inputs,
        shard_inputs(global_module, inputs, len(ranks), func),
        func=func,
        device=device,
    )


def check_with_inputs(
    original: Module,
    global_module: Module,
    ranks: list[Module],
    inputs: Sequence[Any],
    local: Sequence[Sequence[Any]],
    *,
    func: str = "main",
    device: str = "cpu",
) -> CheckResult:
    """``check_partition``'s run and comparison on given global ``inputs`` (numpy, for
    ``original``) and per-rank blocks ``local[r]`` (numpy); both are copied to ``device``."""
    xp = array_namespace(device)
    ref = [to_host(x) for x in run(original, to_device(xp, inputs), func=func, xp=xp)]
    sim = simulate(ranks, [to_device(xp, blocks) for blocks in local], xp=xp, func=func)
    outputs = [[to_host(x) for x in out] for out in sim.outputs]
    checks = compare_outputs(
        global_module, ref, outputs, func, exact=lambda: run(original, list(inputs), func=func, wide=True)
    )
    return CheckResult(
        checks,
        list(sim.collectives[0]) if sim.collectives else [],
        list(sim.peak_bytes),
        [sim.bytes_sent(r) for r in range(len(ranks))],
    )


def compare_outputs(
    global_module: Module,
    ref: Sequence[Any],
    outputs: Sequence[Sequence[Any]],
    func: str = "main",
    *,
    exact: Callable[[], Sequence[Any]] | None = None,
) -> list[OutputCheck]:
    """Compares ``outputs[r][i]`` (rank ``r``'s local result ``i``, padded) with rank ``r``'s
    block of the global result ``ref[i]`` (by ``global_module``'s result shardings), for every
    rank; one ``OutputCheck`` per result (criterion in the module docstring). ``exact``: returns
    the unpartitioned program's results computed in float64 (``run(..., wide=True)``); called
    at most once, only when a float result is over the fast tolerance; without it such a
    result fails."""
    g = global_module.func(func)
    meshes = global_module.meshes
    wants = [np.asarray(x) for x in ref]

    def blocks_of(i: int, want: np.ndarray, wide: np.ndarray | None) -> _Blocks:
        s: TensorSharding | None = g.result_shardings[i] if i < len(g.result_shardings) else None
        out: _Blocks = []
        for r in range(len(outputs)):
            got = np.asarray(outputs[r][i])
            if s is None or want.ndim == 0:
                out.append((got, want, wide))
                continue
            sl = s.device_slices(want.shape, r, meshes=meshes)
            block = want[sl]
            out.append((got[tuple(slice(0, n) for n in block.shape)], block, None if wide is None else wide[sl]))
        return out

    checks = [_compare(i, want, blocks_of(i, want, None), None) for i, want in enumerate(wants)]
    redo = [c.index for c in checks if not c.passed and c.rtol > 0 and c.max_abs != float("inf")]
    if redo and exact is not None:
        wide = [np.asarray(x) for x in exact()]
        for i in redo:
            checks[i] = _compare(i, wants[i], blocks_of(i, wants[i], wide[i]), wide[i])
    return checks
