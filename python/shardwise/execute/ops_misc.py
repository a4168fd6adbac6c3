"""Constants, identities and ids: constant / sdy.constant, sdy.sharding_constraint, sdy.reshard,
sdy.sharding_group, the custom calls JAX emits around shardings, partition_id / replica_id, and
the deterministic random ops rng and rng_bit_generator."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from shardwise.execute._util import astype, scalar_of
from shardwise.errors import ProgramError
from shardwise.execute.attrs import parse_dense, parse_enum
from shardwise.execute.interpreter import Interpreter, register
from shardwise.ir.attrs import unquote
from shardwise.ir.core import Op


@register("stablehlo.constant", "sdy.constant", elementwise=True)
def _constant(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    value = parse_dense(op.attributes["value"])
    dtype = it.result_dtype(op)
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
                raise ProgramError(f"{op.where()}: custom_call {target!r} changes the shape {tuple(a.shape)} -> {r.shape}; it can only run as an identity on the global view")
        return list(args)
    raise ProgramError(f"{op.where()}: the interpreter has no implementation of custom_call target {target!r}")


@register("stablehlo.partition_id")
def _partition_id(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    return [it.xp.asarray(it.rank, dtype=it.result_dtype(op))]


@register("stablehlo.replica_id")
def _replica_id(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """The simulator runs one replica of ``size`` partitions: the replica id is 0."""
    return [it.xp.asarray(0, dtype=it.result_dtype(op))]


def _seeded(parts: list[int]) -> np.random.Generator:
    return np.random.Generator(np.random.Philox(key=[p & 0xFFFFFFFFFFFFFFFF for p in parts[:2]] + [0] * (2 - len(parts[:2]))))


@register("stablehlo.rng")
def _rng(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """UNIFORM in ``[a, b)`` or NORMAL(mean ``a``, std ``b``), drawn from numpy's Philox
    generator keyed by the op's position-independent operands: deterministic across runs (the
    same program and inputs give the same numbers), not bit-equal to XLA's generator."""
    a, b = args[0], args[1]
    shape = op.results[0].shape
    dist = parse_enum(op.attributes["rng_distribution"])
    gen = _seeded([zlib.crc32(str(op.location).encode()), 0x5EED])
    dtype = it.result_dtype(op)
    lo, hi = float(np.asarray(a).reshape(())), float(np.asarray(b).reshape(()))
    if dist == "UNIFORM":
        if it.xp.isdtype(dtype, "integral"):
            vals: Any = gen.integers(int(lo), int(hi), size=shape)
        else:
            vals = gen.uniform(lo, hi, size=shape)
    elif dist == "NORMAL":
        vals = gen.normal(lo, hi, size=shape)
    else:
        raise ProgramError(f"{op.where()}: unknown rng_distribution {dist!r}")
    return [it.xp.asarray(np.asarray(vals), dtype=dtype)]


@register("stablehlo.rng_bit_generator")
def _rng_bit_generator(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Deterministic random bits from numpy's Philox generator keyed by the initial state: the
    same state gives the same bits and the returned state is a deterministic successor; the
    bits are not XLA's (its DEFAULT algorithm is backend-specific)."""
    xp = it.xp
    state = np.asarray(args[0]).astype(np.uint64).reshape(-1).tolist()
    key = [0, 0]
    for i, s in enumerate(state):
        key[i % 2] = (key[i % 2] * 0x9E3779B97F4A7C15 + int(s) + 1) & 0xFFFFFFFFFFFFFFFF
    gen = np.random.Generator(np.random.Philox(key=key))
    out_t = op.results[1]
    dtype = it.result_dtype(op, 1)
    size = int(np.prod(out_t.shape, dtype=np.int64))
    itemsize = scalar_of(xp, dtype).dtype.itemsize
    raw = gen.integers(0, 1 << 63, size=size * itemsize // 8 + 1, dtype=np.uint64).view(np.uint8)[: size * itemsize]
    bits = np.frombuffer(raw.tobytes(), dtype=np.dtype(f"u{itemsize}")).reshape(out_t.shape)
    new_state = np.asarray(args[0]).copy()
    flat = new_state.reshape(-1)
    flat[-1] = flat[-1] + np.asarray(1, dtype=flat.dtype)
    out = xp.asarray(bits)
    from shardwise.execute._util import bitcast

    out = bitcast(out, dtype) if out.dtype != dtype else out
    return [xp.asarray(new_state), out]
