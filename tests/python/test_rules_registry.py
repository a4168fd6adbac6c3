"""Users' rules: the einsum-like notation against JAX's own ``str_to_sdy_sharding_rule`` +
``sdy_sharding_rule_to_mlir`` (printed by Shardy), and the registration API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from shardwise.errors import ShardingParseError
from shardwise.rules import (
    InvalidRuleError,
    OpInfo,
    OpInfoError,
    OpShardingRule,
    RuleBuilder,
    ValueInfo,
    builtin_op_names,
    register_op_rule,
    register_rule,
    rule_for,
    unregister_op_rule,
    unregister_rule,
)

EINSUM_CASES: list[tuple[str, dict[str, Any], list[tuple[int, ...]], list[tuple[int, ...]]]] = [
    ("i j, j k -> i k", {"reduction_factors": ("j",)}, [(8, 16), (16, 4)], [(8, 4)]),
    ("... i j, ... j k -> ... i k", {"reduction_factors": ("j",)}, [(2, 3, 4), (2, 4, 5)], [(2, 3, 5)]),
    ("... i j, ... j k -> ... i k", {}, [(3, 4), (4, 5)], [(3, 5)]),
    ("(i j) k -> i j k", {"need_replication_factors": ("k",)}, [(6, 4)], [(2, 3, 4)]),
    ("(a b) c -> c (a b)", {"a": 2, "b": 3, "permutation_factors": ("c",)}, [(6, 4)], [(4, 6)]),
    ("i, j -> (i j)", {}, [(2,), (3,)], [(6,)]),
    ("...1 i, ...2 j -> ...1 i j", {}, [(2, 3, 4), (5, 6)], [(2, 3, 4, 6)]),
    (" -> ", {}, [()], [()]),
    ("i -> i", {}, [(8,)], [(4,)]),
    ("i j -> j i", {"need_replication_factors": ("i",), "permutation_factors": ("j",)}, [(4, 2)], [(2, 4)]),
    ("batch seq_len, batch -> batch", {"reduction_factors": ("seq_len",)}, [(4, 7), (4,)], [(4,)]),
    ("... (x y) z, ... -> ... (y x) z", {"x": 2, "y": 3}, [(5, 6, 7), (5,)], [(5, 6, 7)]),
    ("... (x y) z -> ... x (y z)", {"y": 3}, [(5, 6, 7)], [(5, 2, 21)]),
]


def _jax_rule(spec: str, kwargs: dict[str, Any], ins: list[tuple[int, ...]], outs: list[tuple[int, ...]]) -> str:
    from jax._src import custom_partitioning_sharding_rule as cp
    from jaxlib.mlir import ir
    from test_rules_mlir import context

    with context(), ir.Location.unknown():

        def t(s: tuple[int, ...]) -> Any:
            return ir.RankedTensorType.get(list(s), ir.F32Type.get())

        rule = cp.str_to_sdy_sharding_rule(spec, **kwargs)
        return str(cp.sdy_sharding_rule_to_mlir(rule, [t(s) for s in ins], [t(s) for s in outs]))


def _split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    kinds = {k: v for k, v in kwargs.items() if k.endswith("_factors")}
    sizes = {k: v for k, v in kwargs.items() if not k.endswith("_factors")}
    return kinds, sizes


@pytest.mark.jax
@pytest.mark.parametrize("spec, kwargs, ins, outs", EINSUM_CASES)
def test_einsum_rules_match_jax(
    spec: str, kwargs: dict[str, Any], ins: list[tuple[int, ...]], outs: list[tuple[int, ...]]
) -> None:
    pytest.importorskip("jax")
    kinds, sizes = _split(kwargs)
    ours = OpShardingRule.from_einsum(spec, ins, outs, factor_sizes=sizes, **kinds)
    assert str(ours) == _jax_rule(spec, kwargs, ins, outs)
    assert ours.is_custom


BAD_EINSUM: list[tuple[str, dict[str, Any], list[tuple[int, ...]], list[tuple[int, ...]], type[Exception]]] = [
    ("i j", {}, [(2, 3)], [(2, 3)], ShardingParseError),
    ("i -> i -> i", {}, [(2,)], [(2,)], ShardingParseError),
    ("(i) -> i", {}, [(2,)], [(2,)], ShardingParseError),
    ("((i j)) -> i j", {}, [(6,)], [(2, 3)], ShardingParseError),
    ("i) -> i", {}, [(2,)], [(2,)], ShardingParseError),
    ("(i j -> i j", {}, [(6,)], [(2, 3)], ShardingParseError),
    ("i ... -> i", {}, [(2,)], [(2,)], ShardingParseError),
    ("1i -> i", {}, [(2,)], [(2,)], ShardingParseError),
    ("_i -> _i", {}, [(2,)], [(2,)], ShardingParseError),
    ("i$ -> i", {}, [(2,)], [(2,)], ShardingParseError),
    ("i.j -> i", {}, [(2,)], [(2,)], ShardingParseError),
    ("i -> i", {"j": 2}, [(2,)], [(2,)], InvalidRuleError),
    ("i -> i", {"i": 2}, [(2,)], [(2,)], InvalidRuleError),
    ("(i j) -> (i j)", {"i": 2}, [(6,)], [(6,)], InvalidRuleError),
    ("i -> i", {"reduction_factors": ("i", "i")}, [(2,)], [(2,)], InvalidRuleError),
    ("i -> i", {"reduction_factors": ("k",)}, [(2,)], [(2,)], InvalidRuleError),
    ("i j -> i", {"reduction_factors": ("j",), "permutation_factors": ("j",)}, [(2, 3)], [(2,)], InvalidRuleError),
    ("i j -> i", {}, [(2,)], [(2,)], InvalidRuleError),
    ("i -> i", {}, [(2,), (2,)], [(2,)], InvalidRuleError),
    ("(i j) -> i j", {}, [(7,)], [(2, 3)], InvalidRuleError),
    ("... i, ... i -> i", {}, [(2, 3), (3,)], [(3,)], InvalidRuleError),
    ("... i, ... i -> i", {}, [(2, 3), (4, 3)], [(3,)], InvalidRuleError),
]


@pytest.mark.parametrize("spec, kwargs, ins, outs, error", BAD_EINSUM)
def test_bad_einsum_rules_raise_like_jax(
    spec: str, kwargs: dict[str, Any], ins: list[tuple[int, ...]], outs: list[tuple[int, ...]], error: type[Exception]
) -> None:
    kinds, sizes = _split(kwargs)
    with pytest.raises(error) as e:
        OpShardingRule.from_einsum(spec, ins, outs, factor_sizes=sizes, **kinds)
    assert isinstance(e.value, ValueError)
    if pytest.importorskip("jax"):
        with pytest.raises(ValueError):
            _jax_rule(spec, kwargs, ins, outs)


def test_einsum_sorts_special_factors_and_validates() -> None:
    r = OpShardingRule.from_einsum("i j k -> ", [(2, 3, 4)], [()], reduction_factors=("k", "i"))
    assert str(r) == "#sdy.op_sharding_rule<([i, j, k])->([]) {i=2, j=3, k=4} reduction={i, k}, custom>"
    with pytest.raises(InvalidRuleError, match="reduction"):
        OpShardingRule.from_einsum("i -> i", [(2,)], [(2,)], reduction_factors=("i",))
    blocked = OpShardingRule.from_einsum("i j -> i j", [(2, 3)], [(2, 3)], blocked_propagation_factors=("j",))
    assert str(blocked).endswith("blocked_propagation={j}, custom>")


def _call(target: str, ins: list[tuple[int, ...]], outs: list[tuple[int, ...]], **attrs: str) -> OpInfo:
    return OpInfo(
        "stablehlo.custom_call",
        tuple(ValueInfo(s) for s in ins),
        tuple(ValueInfo(s) for s in outs),
        {"call_target_name": f'"{target}"', **attrs},
    )


@pytest.fixture
def clean_registry() -> Iterator[None]:
    yield
    for t in ("my_matmul", "my_split", "my_fn", "Qr"):
        unregister_rule(t)
    for n in ("mydialect.op", "stablehlo.add"):
        unregister_op_rule(n)


@pytest.mark.usefixtures("clean_registry")
def test_register_einsum_rule_for_a_target() -> None:
    register_rule("my_matmul", "i j, j k -> i k", reduction_factors=("j",))
    r = rule_for(_call("my_matmul", [(8, 16), (16, 4)], [(8, 4)]))
    assert str(r) == "#sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=8, j=16, k=4} reduction={j}, custom>"
    register_rule("my_split", "(i j) k -> i j k")
    assert str(rule_for(_call("my_split", [(6, 4)], [(2, 3, 4)]))) == (
        "#sdy.op_sharding_rule<([ij, k])->([i, j, k]) {i=2, j=3, k=4}, custom>"
    )
    register_rule("my_split", "(i j) k -> k (j i)", i=2, factor_sizes={"j": 3})
    assert str(rule_for(_call("my_split", [(6, 4)], [(4, 6)]))) == (
        "#sdy.op_sharding_rule<([ij, k])->([k, ji]) {i=2, j=3, k=4}, custom>"
    )
    with pytest.raises(InvalidRuleError, match="rank"):
        rule_for(_call("my_matmul", [(8, 16, 1), (16, 4)], [(8, 4)]))
    # An existing rule on the op wins, as in Shardy.
    existing = "#sdy.op_sharding_rule<([i, j], [k, l])->([m, n]) {i=8, j=16, k=16, l=4, m=8, n=4}, custom>"
    assert (
        str(rule_for(_call("my_matmul", [(8, 16), (16, 4)], [(8, 4)], **{"sdy.sharding_rule": existing}))) == existing
    )
    assert unregister_rule("my_matmul") and not unregister_rule("my_matmul")


@pytest.mark.usefixtures("clean_registry")
def test_register_function_rules() -> None:
    def fn(op: OpInfo, conservative: bool) -> OpShardingRule:
        return RuleBuilder.for_op(op).add_pointwise(op.results[0].shape).build().replace(is_custom=True)

    register_rule("my_fn", fn)
    assert (
        str(rule_for(_call("my_fn", [(4, 2)], [(4, 2)])))
        == "#sdy.op_sharding_rule<([i, j])->([i, j]) {i=4, j=2}, custom>"
    )
    # A user rule overrides the builtin one for a target Shardy knows...
    register_rule("Qr", fn)
    assert rule_for(_call("Qr", [(4, 4)], [(4, 4), (4, 4)])) is not None
    # ...and for an op.
    v = ValueInfo((3,))
    register_op_rule("stablehlo.add", lambda op, c: None)
    assert rule_for(OpInfo("stablehlo.add", (v, v), (v,))) is None
    assert unregister_op_rule("stablehlo.add")
    assert str(rule_for(OpInfo("stablehlo.add", (v, v), (v,)))) == "#sdy.op_sharding_rule<([i], [i])->([i]) {i=3}>"
    register_op_rule("mydialect.op", lambda op, c: RuleBuilder.for_op(op).add_factor(0, 0, 3, blocked=c).build())
    assert str(rule_for(OpInfo("mydialect.op", (v,), (v,)), conservative=True)).endswith("blocked_propagation={i}>")
    register_op_rule("mydialect.op", lambda op, c: "nope")  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="OpShardingRule or None"):
        rule_for(OpInfo("mydialect.op", (v,), (v,)))


def test_registration_errors() -> None:
    with pytest.raises(ShardingParseError):
        register_rule("bad", "i j")
    with pytest.raises(InvalidRuleError, match="einsum-special-unknown|not use"):
        register_rule("bad", "i -> i", reduction_factors=("x",))
    with pytest.raises(TypeError):
        register_rule("bad", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        register_rule("bad", lambda op, c: None, reduction_factors=("i",))
    with pytest.raises(TypeError):
        register_op_rule("noddialect", lambda op, c: None)
    with pytest.raises(TypeError):
        register_rule("bad", "i -> i", i=1.5)  # type: ignore[arg-type]
    assert not unregister_rule("bad")
    with pytest.raises(TypeError):
        rule_for("stablehlo.add")  # type: ignore[arg-type]
    with pytest.raises(OpInfoError, match="call_target_name"):
        rule_for(OpInfo("stablehlo.custom_call"))
    assert {"stablehlo.dot_general", "stablehlo.custom_call", "sdy.sharding_constraint"} <= builtin_op_names()
