"""Shape-changing ops without data movement across elements: ``reshape`` (compound factors),
``broadcast_in_dim`` and ``transpose`` (Shardy ``op_sharding_rule_registry.cc``)."""

from __future__ import annotations

import math

from shardwise.rules._util import builtin, operand_shape, result_shape
from shardwise.rules.attrs import attr_ints
from shardwise.rules.exceptions import OpInfoError
from shardwise.rules.opinfo import OpInfo
from shardwise.rules.rule import OpShardingRule, RuleBuilder


@builtin("stablehlo.reshape")
def _reshape(op: OpInfo, conservative: bool) -> OpShardingRule | None:
    """Walks the input and output dimensions together, splitting them into the largest common
    factors (GCDs); where no common factor exists the two sides get their own factors until
    their products meet again. Size-1 dimensions get their own size-1 factors. No rule for a
    reshape of zero elements."""
    ins, outs = operand_shape(op, 0), result_shape(op, 0)
    if math.prod(ins) == 0:
        return None
    if any(d < 0 for d in ins + outs):
        raise OpInfoError(f"{op.name}: expected static shapes, got {ins} -> {outs}")
    if math.prod(ins) != math.prod(outs):
        raise OpInfoError(f"{op.name}: expected the same number of elements, got {ins} -> {outs}")
    b = RuleBuilder.for_op(op)
    in_rank, out_rank = len(ins), len(outs)
    i = o = 0
    dims_in = dims_out = 1  # product of the dimension sizes reached so far
    fac_in = fac_out = 1  # product of the factors added so far
    while i < in_rank or o < out_rank:
        if i < in_rank and ins[i] == 1:
            b.add_factor(i, -1, 1)
            i += 1
            continue
        if o < out_rank and outs[o] == 1:
            b.add_factor(-1, o, 1)
            o += 1
            continue
        if i < in_rank and dims_in == fac_in:
            dims_in *= ins[i]
        if o < out_rank and dims_out == fac_out:
            dims_out *= outs[o]
        next_in, next_out = dims_in // fac_in, dims_out // fac_out
        g = math.gcd(next_in, next_out)

        def diverged(nxt: int, smaller: int, larger: int) -> int:
            # A factor that makes both sides meet again, else one that keeps the GCD.
            if larger % smaller == 0 and nxt % (larger // smaller) == 0:
                return larger // smaller
            if nxt > g:
                return nxt // g
            return nxt

        if fac_in == fac_out:
            if g > 1:
                b.add_factor(i, o, g)
                fac_in *= g
                fac_out *= g
            else:
                b.add_factor(i, -1, next_in)
                fac_in *= next_in
                b.add_factor(-1, o, next_out)
                fac_out *= next_out
        elif fac_in < fac_out:
            next_in = diverged(next_in, fac_in, fac_out)
            b.add_factor(i, -1, next_in)
            fac_in *= next_in
        else:
            next_out = diverged(next_out, fac_out, fac_in)
            b.add_factor(-1, o, next_out)
            fac_out *= next_out
        if i < in_rank and dims_in == fac_in:
            i += 1
        if o < out_rank and dims_out == fac_out:
            o += 1
    return b.build()


@builtin("stablehlo.broadcast_in_dim")
def _broadcast_in_dim(op: OpInfo, conservative: bool) -> OpShardingRule:
    """One factor per output dimension, shared with the input dimension mapped to it unless
    that one has size 1 and is expanded (it then gets its own size-1 factor)."""
    ins, outs = operand_shape(op, 0), result_shape(op, 0)
    bdims = attr_ints(op, "broadcast_dimensions")
    if len(bdims) != len(ins) or any(not 0 <= d < len(outs) for d in bdims):
        raise OpInfoError(f"{op.name}: broadcast_dimensions {list(bdims)} do not fit {ins} -> {outs}")
    out_to_in = [-1] * len(outs)
    for in_dim, out_dim in enumerate(bdims):
        out_to_in[out_dim] = in_dim
    b = RuleBuilder.for_op(op)
    for out_dim, out_size in enumerate(outs):
        in_dim = out_to_in[out_dim]
        if in_dim != -1 and ins[in_dim] == 1 and out_size != 1:
            b.add_factor(in_dim, -1, 1)
            in_dim = -1
        b.add_factor(in_dim, out_dim, out_size)
    return b.build()


@builtin("stablehlo.transpose")
def _transpose(op: OpInfo, conservative: bool) -> OpShardingRule:
    ins = operand_shape(op, 0)
    perm = attr_ints(op, "permutation")
    if sorted(perm) != list(range(len(ins))):
        raise OpInfoError(f"{op.name}: expected a permutation of range({len(ins)}), got {list(perm)}")
    b = RuleBuilder.for_op(op)
    for out_dim, in_dim in enumerate(perm):
        b.add_factor(in_dim, out_dim, ins[in_dim])
    return b.build()
