"""Constants, identities and ids: constant / sdy.constant, sdy.sharding_constraint, sdy.reshard,
sdy.sharding_group, the custom calls JAX emits around shardings, partition_id / replica_id, and
the deterministic random ops rng and rng_bit_generator."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from shardwise.errors import ProgramError
from shardwise.execute._util import bitcast, itemsize
from shardwise.execute.attrs import parse_dense, parse_enum
from shardwise.execute.devices import to_host
from shardwise.execute.registry import register
from shardwise.ir.attrs import unquote
from shardwise.ir.core import Op

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


@register("stablehlo.constant", "sdy.constant", elementwise=True)
def _constant(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    value = parse_dense(op.attributes["value"])
    dtype = it.result_dtype(op)
    if it.wide and (value.dtype.kind in "fc" or value.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2")):
        value = value.astype(np.complex128 if value.dtype.kind == "c" else np.float64)
    if value.dtype.name == "bfloat16":  # not an array-API dtype: only the numpy namespace has it
        return [it.xp.asarray(value)]
    return [it.xp.asarray(value, dtype=dtype)]


@register("sdy.sharding_constraint", "sdy.reshard")
def _identity(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Sharding annotations do not change values on the global view."""
    return list(args)


@register("sdy.sharding_group")
def _no_result(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return []


#: custom_call targets that are value identities on the global view.
IDENTITY_TARGETS = {
    "Sharding",
    "SPMDFullToShardShape",
    "SPMDShardToFullShape",
    "annotate_device_placement",
    "xla.sdy.FuncResultSharding",
    "xla.sdy.ShardingConstraint",
    "mhlo.sharding",
    "X64Combine",
}


@register("stablehlo.custom_call")
def _custom_call(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    target = unquote(op.attributes.get("call_target_name", '""'))
    if target in IDENTITY_TARGETS and len(args) == len(op.results):
        for a, r in zip(args, op.results):
            if tuple(a.shape) != r.shape:
                raise ProgramError(
                    f"{op.where()}: custom_call {target!r} changes the shape {tuple(a.shape)} -> {r.shape}; it can only run as an identity on the global view"
                )
        return list(args)
    if target.startswith(("lapack_", "cusolver_", "hipsolver_")):
        # The linear-algebra kernels jax.numpy.linalg lowers to (LU, Cholesky, QR, SVD, eigh,
        # triangular solve): library calls whose conventions (pivots, layouts, signs of
        # singular vectors) are the library's own.
        raise ProgramError(
            f"{op.where()}: the interpreter has no implementation of custom_call target {target!r} (a LAPACK-style linear-algebra kernel)"
        )
    raise ProgramError(f"{op.where()}: the interpreter has no implementation of custom_call target {target!r}")


@register("stablehlo.partition_id")
def _partition_id(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return [it.xp.asarray(it.rank, dtype=it.result_dtype(op))]


@register("stablehlo.replica_id")
def _replica_id(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """The simulator runs one replica of ``size`` partitions: the replica id is 0."""
    return [it.xp.asarray(0, dtype=it.result_dtype(op))]


def _generator(*parts: bytes) -> np.random.Generator:
    """numpy's Philox generator keyed by CRC-32s of ``parts``: the same parts, the same stream."""
    key = [zlib.crc32(p) for p in parts[:2]] + [0] * max(0, 2 - len(parts))
    return np.random.Generator(np.random.Philox(key=key))


def _host(x: Any) -> np.ndarray:
    return to_host(x)


@register("stablehlo.rng")
def _rng(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """UNIFORM in ``[a, b)`` or NORMAL(mean ``a``, std ``b``) from numpy's Philox generator keyed
    by the op's source location and the values of ``a`` and ``b``: the same program and inputs
    give the same numbers on every run; they are not bit-equal to XLA's generator."""
    a, b = _host(args[0]), _host(args[1])
    shape = op.results[0].shape
    dist = parse_enum(op.attributes["rng_distribution"])
    gen = _generator(str(op.location).encode(), a.tobytes() + b.tobytes())
    dtype = it.result_dtype(op)
    lo, hi = a.reshape(()).item(), b.reshape(()).item()
    if dist == "UNIFORM":
        if it.xp.isdtype(dtype, "integral"):
            vals: Any = gen.integers(int(lo), int(hi), size=shape)
        else:
            vals = gen.uniform(float(lo), float(hi), size=shape)
    elif dist == "NORMAL":
        vals = gen.normal(float(lo), float(hi), size=shape)
    else:
        raise ProgramError(f"{op.where()}: unknown rng_distribution {dist!r}")
    return [it.xp.asarray(np.asarray(vals), dtype=dtype)]


@register("stablehlo.rng_bit_generator")
def _rng_bit_generator(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Uniform random bits from numpy's Philox generator keyed by the initial state (the same
    state gives the same bits); the new state is the old one with its last word incremented.
    The bits are not XLA's: its DEFAULT algorithm is backend-specific."""
    xp = it.xp
    state = _host(args[0])
    gen = _generator(state.tobytes(), b"rng_bit_generator")
    out_t = op.results[1]
    dtype = it.result_dtype(op, 1)
    count = int(np.prod(out_t.shape, dtype=np.int64))
    size_of = itemsize(xp, dtype)
    words = gen.bit_generator.random_raw((count * size_of + 7) // 8)
    raw = np.asarray(words, dtype=np.uint64).view(np.uint8)[: count * size_of]
    bits = raw.view(np.dtype(f"u{size_of}")).reshape(out_t.shape)
    new_state = state.copy().reshape(-1)
    new_state[-1] = new_state[-1] + np.asarray(1, dtype=new_state.dtype)
    out = xp.asarray(bits)
    if out.dtype != dtype:
        out = bitcast(out, dtype)
    return [xp.asarray(new_state.reshape(state.shape)), out]
