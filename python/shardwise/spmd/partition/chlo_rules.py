"""Sharding rules for the elementwise CHLO ops while the partitioner works.

JAX 0.10.2 leaves CHLO ops in its StableHLO output: ``chlo.square`` (``jnp.square``, every
variance of LayerNorm/BatchNorm/GroupNorm, the second moments of adam-family optimizers,
``optax.clip_by_global_norm``, MSE losses), ``chlo.erf_inv`` (``jax.random.normal``),
``chlo.erf``, ``chlo.lgamma``, ``chlo.sinh`` ... Shardy's registry gives them no sharding rule
(``op_sharding_rule_registry.cc`` lists StableHLO ops only), so Shardy's propagation stops at
them, and ``shardwise propagate`` keeps that: its output stays identical to Shardy's.

XLA never shows Shardy a CHLO op: it legalizes CHLO to StableHLO first (the
``chlo-legalize-to-stablehlo`` patterns, ``stablehlo/transforms/ChloLegalizeToStablehlo.cpp``),
so in XLA's propagation and SPMD partitioner each of these ops is a chain of elementwise
StableHLO ops, and the sharding flows through it. ``chlo_rules()`` gives the partitioner the
same view without expanding the ops: for as long as it is active, every elementwise CHLO op
without a user rule has Shardy's pointwise rule (factor ``d`` is dimension ``d`` of every
operand and result, ``buildPointwise``). The partitioner's own propagation, its explicit
reshards and its local rewrite (``coverage.LOCAL_OPS``) then treat them like ``stablehlo.sine``.

``chlo.top_k`` (``jax.lax.top_k``: a mixture-of-experts router) is legalized to a
``stablehlo.sort`` along the last dimension and a slice; ``chlo_rules()`` gives it the rule
Shardy gives that sort and the ``mhlo.topk`` custom call (``addPointwiseWithDiffTypeForMismatch``
in ``op_sharding_rule_registry.cc``): the leading (batch) dimensions are pointwise between the
operand and both results, and the last dimension is a need-replication, blocked factor (one
for the operand's ``n`` and the results' ``k``, sized ``n``; always need-replication here, even
when ``k == n``, since a sharded sort dimension would give each rank its own top ``k``). The
search and the partitioner then keep a router's tokens sharded through it
(``coverage.replicated_dims`` keeps its last dimension whole).

Not thread-safe: the rules live in the process-wide registry while the context is active.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from shardwise.rules._util import pointwise, shape_of
from shardwise.rules.opinfo import OpInfo
from shardwise.rules.registry import is_user_op, register_op_rule, unregister_op_rule
from shardwise.rules.rule import FactorKind, OpShardingRule, RuleBuilder

__all__ = ["CHLO_POINTWISE", "CHLO_RULES", "chlo_rules"]

#: The elementwise CHLO ops (``stablehlo/dialect/ChloOps.td``: unary ``Elementwise`` ops and the
#: binary special functions); ``chlo.broadcast_*`` (implicit broadcasting) and ``chlo.top_k``
#: are not among them.
CHLO_POINTWISE = (
    "chlo.acos", "chlo.acosh", "chlo.asin", "chlo.asinh", "chlo.atan", "chlo.atanh", "chlo.bessel_i1e",
    "chlo.conj", "chlo.cosh", "chlo.digamma", "chlo.erf", "chlo.erf_inv", "chlo.erfc", "chlo.is_inf",
    "chlo.is_neg_inf", "chlo.is_pos_inf", "chlo.lgamma", "chlo.next_after", "chlo.polygamma", "chlo.sinh",
    "chlo.square", "chlo.tan", "chlo.zeta",
)  # fmt: skip


def _pointwise(op: OpInfo, conservative: bool) -> OpShardingRule | None:
    return pointwise(op)


def _top_k(op: OpInfo, conservative: bool) -> OpShardingRule | None:
    """``chlo.top_k`` (module docstring): ``None`` (no rule) unless it has one operand of rank
    >= 1 and two results of its rank."""
    if len(op.operands) != 1 or len(op.results) != 2 or not op.operands[0].is_tensor:
        return None
    shape = shape_of(op.operands[0])
    if not shape or any(not r.is_tensor or r.rank != len(shape) for r in op.results):
        return None
    last = len(shape) - 1
    return (
        RuleBuilder.for_op(op)
        .add_pointwise(shape[:-1])
        .add_factor(last, [last, last], shape[-1], FactorKind.NEED_REPLICATION, blocked=True)
        .build()
    )


#: The rules ``chlo_rules()`` adds: every op of :data:`CHLO_POINTWISE`, and ``chlo.top_k``.
CHLO_RULES = {**{name: _pointwise for name in CHLO_POINTWISE}, "chlo.top_k": _top_k}


@contextmanager
def chlo_rules() -> Iterator[None]:
    """Within the context, the ops of :data:`CHLO_RULES` that the user gave no rule have the
    rules of the module docstring; afterwards they have none again."""
    added = [name for name in CHLO_RULES if not is_user_op(name)]
    for name in added:
        register_op_rule(name, CHLO_RULES[name])
    try:
        yield
    finally:
        for name in added:
            unregister_op_rule(name)
