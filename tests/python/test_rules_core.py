"""``OpShardingRule`` (text form, invariants, accessors), ``RuleBuilder`` semantics, the
``OpInfo`` dataclasses and the attribute parsers. No jax needed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shardwise.errors import InvalidShardingError, ShardingParseError
from shardwise.rules import (
    DYNAMIC_SIZE,
    BlockInfo,
    FactorKind,
    InvalidRuleError,
    OpInfo,
    OpInfoError,
    OpShardingRule,
    RuleBuilder,
    ValueInfo,
    rule_for,
)

MATMUL = "#sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=8, j=8, k=8} reduction={j}>"


# ------------------------------------------------------------------ text form


@pytest.mark.parametrize(
    "text",
    [
        MATMUL,
        "#sdy.op_sharding_rule<([], [])->([])>",
        "#sdy.op_sharding_rule<([i, j], [])->([i, j]) {i=8, j=0}>",
        "#sdy.op_sharding_rule<([ij, k])->([i, j, k]) {i=2, j=4, k=8}>",
        "#sdy.op_sharding_rule<([i, j])->([j, i]) {i=4, j=2}, custom>",
        "#sdy.op_sharding_rule<([])->([]), custom>",
        "#sdy.op_sharding_rule<([i, j, k, l])->([i, k, l]) {i=2, j=3, k=5, l=7} reduction={j} need_replication={i, l} permutation={k}, custom>",
        "#sdy.op_sharding_rule<([i], [i])->([i]) {i=2} need_replication={i} blocked_propagation={i}>",
        "#sdy.op_sharding_rule<([i])->([i]) {i=8589934592}, custom>",
    ],
)
def test_print_parse_round_trip(text: str) -> None:
    r = OpShardingRule.parse(text)
    assert str(r) == text
    assert OpShardingRule.parse(repr(r)[len("OpShardingRule.parse(") + 1 : -2]) == r
    assert eval(repr(r)) == r


def test_symbols_past_z() -> None:
    n = 22
    r = OpShardingRule([2] * n, [[[f] for f in range(n)]], [[[f] for f in range(n)]], permutation_factors=[17, 18, 21])
    text = str(r)
    assert "[i, j, k, l, m, n, o, p, q, r, s, t, u, v, w, x, y, z, z_1, z_2, z_3, z_4]" in text
    assert "permutation={z, z_1, z_4}" in text
    assert r.factor_symbols[17:] == ("z", "z_1", "z_2", "z_3", "z_4")
    assert OpShardingRule.parse(text) == r
    middle = [[f] for f in range(2, 19)]
    compound = OpShardingRule([2] * 21, [[[0, 19], [1], *middle, [20]]], [[[0, 19, 1], *middle, [20]]])
    assert str(compound).startswith("#sdy.op_sharding_rule<([iz_2, j, k, ")
    assert "->([iz_2j, k, " in str(compound)
    assert OpShardingRule.parse(str(compound)) == compound


def test_parse_accepts_bare_form_and_whitespace() -> None:
    r = OpShardingRule.parse("  < ( [i , j] , [j,k] ) -> ( [i, k] ) { i = 8 , j=8, k=8 } reduction = { j } >  ")
    assert str(r) == MATMUL


@pytest.mark.parametrize(
    "text, offset",
    [
        ("#sdy.op_sharding_rule<([i])->([a]) {i=1}>", 31),
        ("#sdy.op_sharding_rule<([i])->([i]) {j=1}>", 36),
        ("#sdy.op_sharding_rule<([i])->([i]) {i=1} reduction={ij}>", 52),
        ("#sdy.op_sharding_rule<([z_01])->([z_01])>", 24),
        ("#sdy.op_sharding_rule<([z_])->([z_])>", 24),
        ("#sdy.op_sharding_rule<([i])->([i]) {i=1}, costum>", 42),
        ("#sdy.op_sharding_rule<([i])->([i]) {i=1}> extra", 42),
        ("#sdy.op_sharding_rule<([i])([i]) {i=1}>", 27),
        ("#sdy.op_sharding_rule<([i])->([i]) {i=99999999999999999999}>", 38),
    ],
)
def test_parse_errors_name_the_offset(text: str, offset: int) -> None:
    with pytest.raises(ShardingParseError) as e:
        OpShardingRule.parse(text)
    assert e.value.offset == offset  # type: ignore[attr-defined]
    assert repr(text) in str(e.value) or text in str(e.value)


@pytest.mark.parametrize(
    "text, rule",
    [
        ("<([i, ])->([i]) {i=2}>", None),
        ("<([i, j])->([i]) {i=2}>", "rule-factor-out-of-range"),
        ("<([i, i])->([i]) {i=2}>", "rule-factor-reused"),
        ("<([ij])->([i, j]) {i=1, j=2}>", "rule-size-one-in-compound"),
        ("<([i])->([i]) {i=2, j=3}>", "rule-unused-factor"),
        ("<([i, j])->([i, j]) {i=2, j=3} reduction={j, i}>", "rule-special-unsorted"),
        ("<([i, j])->([i, j]) {i=2, j=3} need_replication={i, i}>", "rule-special-duplicate"),
        ("<([i, j])->([i, j]) {i=2, j=3} need_replication={i} permutation={i}>", "rule-factor-in-two-kinds"),
        ("<([i, j])->([i]) {i=2, j=3} reduction={i}>", "rule-reduction-in-result"),
        ("<([i, j])->([i, j]) {i=2, j=3} blocked_propagation={k}>", "rule-special-out-of-range"),
    ],
)
def test_invalid_rules(text: str, rule: str | None) -> None:
    if rule is None:
        with pytest.raises(ShardingParseError):
            OpShardingRule.parse(text)
        return
    with pytest.raises(InvalidRuleError) as e:
        OpShardingRule.parse(text)
    assert e.value.rule == rule  # type: ignore[attr-defined]
    assert isinstance(e.value, InvalidShardingError) and isinstance(e.value, ValueError)
    assert "invalid sharding rule" in str(e.value)


def test_constructor_checks_and_types() -> None:
    with pytest.raises(InvalidRuleError, match="rule-empty-dim-mapping|at least one factor"):
        OpShardingRule([2], [[[0], []]], [[[0]]])
    with pytest.raises(TypeError):
        OpShardingRule([2.5], [[[0]]], [[[0]]])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        OpShardingRule([2], ["i"], [[[0]]])  # type: ignore[list-item]


# ------------------------------------------------------------------ validation against types


def test_validate_against_shapes() -> None:
    r = OpShardingRule.parse(MATMUL)
    r.validate([(8, 8), (8, 8)], [(8, 8)])
    r.validate([(8, 8), (8, 8)], [(8, 8)], exact_sizes=True)
    cases = [
        (([(8, 8)], [(8, 8)]), "rule-mapping-count"),
        (([(8, 8), (8, 8, 1)], [(8, 8)]), "rule-rank-mismatch"),
        (([(8, -1), (8, 8)], [(8, 8)]), "rule-not-static-tensor"),
        (([(8, 8), None], [(8, 8)]), "rule-not-static-tensor"),
    ]
    for (ops, res), rule in cases:
        with pytest.raises(InvalidRuleError) as e:
            r.validate(ops, res)
        assert e.value.rule == rule  # type: ignore[attr-defined]
    with pytest.raises(InvalidRuleError) as e:
        r.validate([(8, 8), (8, 9)], [(8, 8)], exact_sizes=True)
    assert e.value.rule == "rule-dim-size"  # type: ignore[attr-defined]
    assert "operand 1 dim 1" in str(e.value) and "9" in str(e.value)
    no_operands = OpShardingRule([], [], [[]])
    with pytest.raises(InvalidRuleError) as e:
        no_operands.validate([], [()])
    assert e.value.rule == "rule-no-mappings"  # type: ignore[attr-defined]
    negative = OpShardingRule([-3], [[[0]]], [[[0]]])
    with pytest.raises(InvalidRuleError) as e:
        negative.validate([(3,)], [(3,)])
    assert e.value.rule == "rule-negative-factor-size"  # type: ignore[attr-defined]


def test_validate_for_op_and_shardy_rules_are_not_size_exact() -> None:
    pad = OpInfo(
        "stablehlo.pad",
        (ValueInfo((4, 6)), ValueInfo(())),
        (ValueInfo((4, 9)),),
        {
            "edge_padding_low": "array<i64: 0, 1>",
            "edge_padding_high": "array<i64: 0, 2>",
            "interior_padding": "array<i64: 0, 0>",
        },
    )
    r = rule_for(pad)
    assert r is not None
    assert str(r) == "#sdy.op_sharding_rule<([i, j], [])->([i, j]) {i=4, j=6} permutation={j}>"
    r.validate_for(pad)
    with pytest.raises(InvalidRuleError, match="rule-dim-size|product of its factor sizes"):
        r.validate_for(pad, exact_sizes=True)


# ------------------------------------------------------------------ accessors


def test_accessors() -> None:
    r = OpShardingRule.parse(
        "#sdy.op_sharding_rule<([i, j, k, l])->([i, k, m]) {i=2, j=3, k=5, l=7, m=1} reduction={j} need_replication={i, l} "
        "permutation={k} blocked_propagation={k, m}, custom>"
    )
    assert r.num_factors == 5 and r.num_operands == 1 and r.num_results == 1
    assert r.factor_sizes == (2, 3, 5, 7, 1)
    assert r.operand_mappings == (((0,), (1,), (2,), (3,)),)
    assert r.result_mappings == (((0,), (2,), (4,)),)
    assert r.factor_kinds == (
        FactorKind.NEED_REPLICATION,
        FactorKind.REDUCTION,
        FactorKind.PERMUTATION,
        FactorKind.NEED_REPLICATION,
        FactorKind.PASS_THROUGH,
    )
    assert r.factors_of_kind(FactorKind.PASS_THROUGH) == (4,)
    assert r.factors_of_kind(FactorKind.NEED_REPLICATION) == (0, 3)
    assert [r.is_blocked(f) for f in range(5)] == [False, False, True, False, True]
    assert r.is_custom and not r.has_compound_dims
    with pytest.raises(IndexError):
        r.factor_kind(5)
    with pytest.raises(AttributeError):
        r.is_custom = False  # type: ignore[misc]
    assert r.replace(is_custom=False) != r
    assert str(r.replace(is_custom=False)).endswith("blocked_propagation={k, m}>")
    assert hash(r) == hash(OpShardingRule.parse(str(r)))
    assert len({r, OpShardingRule.parse(str(r)), r.replace(is_custom=False)}) == 2


# ------------------------------------------------------------------ builder semantics


def test_builder_semantics_follow_shardy() -> None:
    b = RuleBuilder([2, 0], [2])
    b.add_factor([0, -1], [0], 4)
    b.add_factor([0, -1], [-1], 1)  # size 1 onto a mapped dim: skipped, factor unused
    b.add_factor_for_all(1, 3, FactorKind.NEED_REPLICATION, True)
    b.add_factor_for_all_results(1, 1)  # size 1, all-variant: appended anyway
    r = b.build()  # like Shardy's builder, build() does not verify
    assert (
        str(r)
        == "#sdy.op_sharding_rule<([i, k], [])->([i, kl]) {i=4, j=1, k=3, l=1} need_replication={k} blocked_propagation={k}>"
    )
    with pytest.raises(InvalidRuleError) as e:
        r.check()  # `kl` puts a size-1 factor in a compound dimension
    assert e.value.rule == "rule-size-one-in-compound"  # type: ignore[attr-defined]
    with pytest.raises(InvalidRuleError) as e:
        RuleBuilder([1], [1]).add_factor(0, 0, 4).add_factor(0, -1, 1).build().check()
    assert e.value.rule == "rule-unused-factor"  # type: ignore[attr-defined]  # the size-1 factor was skipped
    b2 = RuleBuilder([2, 0], [3]).add_factor([0, -1], 0, 4).add_factor_for_all_operands(1, 5)
    r = b2.build()
    assert str(r) == "#sdy.op_sharding_rule<([i, j], [])->([i, k, l]) {i=4, j=5, k=1, l=1}>"
    with pytest.raises(InvalidRuleError) as e:
        RuleBuilder([2], [2]).add_factor([0, 1], [0], 2).build()
    assert e.value.rule == "builder-dim-count"  # type: ignore[attr-defined]
    with pytest.raises(InvalidRuleError) as e:
        RuleBuilder([2], [2]).add_factor([2], [0], 2).build()
    assert e.value.rule == "builder-dim-out-of-range"  # type: ignore[attr-defined]
    assert "operand 0 has rank 2" in str(e.value)
    with pytest.raises(InvalidRuleError):
        RuleBuilder([2], [1]).add_factor_for_all(1, 2).build()
    assert str(RuleBuilder.pointwise([2, 0], [2], [3, 4])) == "#sdy.op_sharding_rule<([i, j], [])->([i, j]) {i=3, j=4}>"


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_built_rules_print_and_parse_back(data: st.DataObject) -> None:
    operand_ranks = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    result_ranks = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=2))
    b = RuleBuilder(operand_ranks, result_ranks)
    for _ in range(data.draw(st.integers(0, 6))):
        ops = [data.draw(st.integers(-1, r - 1)) for r in operand_ranks]
        res = [data.draw(st.integers(-1, r - 1)) for r in result_ranks]
        kind = data.draw(
            st.sampled_from([FactorKind.PASS_THROUGH, FactorKind.NEED_REPLICATION, FactorKind.PERMUTATION])
        )
        b.add_factor(ops, res, data.draw(st.integers(2, 9)), kind, data.draw(st.booleans()))
    r = b.build()
    try:
        r.check()
    except InvalidRuleError as e:
        assert e.rule == "rule-unused-factor"  # type: ignore[attr-defined]  # a factor mapped nowhere
        return
    assert OpShardingRule.parse(str(r)) == r
    assert all(len(m) == k for m, k in zip(r.operand_mappings, operand_ranks))


# ------------------------------------------------------------------ OpInfo and attributes


def test_opinfo_values() -> None:
    v = ValueInfo([4, -1], "f32", value_id=3)  # type: ignore[arg-type]
    assert v.shape == (4, -1) and v.rank == 2
    assert v.same_value(ValueInfo((4, -1), value_id=3)) and not v.same_value(ValueInfo((4, -1)))
    assert "tensor<4x?xf32>" in repr(v)
    with pytest.raises(TypeError):
        ValueInfo((4, -2))
    with pytest.raises(TypeError):
        ValueInfo((4,), "!stablehlo.token", is_tensor=False)
    op = OpInfo("stablehlo.abs", [v], [v], {"a": "1 : i64"}, [[BlockInfo()]])  # type: ignore[arg-type]
    assert isinstance(op.operands, tuple) and op.dialect == "stablehlo"
    with pytest.raises(TypeError):
        op.attributes["b"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        OpInfo("stablehlo.abs", ((4,),))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        OpInfo("stablehlo.abs", attributes={"a": 1})  # type: ignore[dict-item]


def test_dynamic_dims_give_shardys_dynamic_size() -> None:
    v = ValueInfo((-1, 4))
    r = rule_for(OpInfo("stablehlo.add", (v, v), (v,)))
    assert r is not None and r.factor_sizes == (DYNAMIC_SIZE, 4)
    assert str(r) == "#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=-9223372036854775808, j=4}>"
    with pytest.raises(InvalidRuleError, match="rule-not-static-tensor|statically shaped"):
        r.validate_for(OpInfo("stablehlo.add", (v, v), (v,)))


@pytest.mark.parametrize(
    "attrs, match",
    [
        ({}, "missing attribute 'dot_dimension_numbers'"),
        ({"dot_dimension_numbers": "#stablehlo.dot<lhs_contracting_dimensions = [x]>"}, "expected"),
        ({"dot_dimension_numbers": "array<i64: 1>"}, "#stablehlo.dot"),
    ],
)
def test_bad_attributes_raise_opinfo_errors(attrs: dict[str, str], match: str) -> None:
    v = ValueInfo((4, 4))
    with pytest.raises(OpInfoError, match=match) as e:
        rule_for(OpInfo("stablehlo.dot_general", (v, v), (v,), attrs))
    assert "stablehlo.dot_general" in str(e.value)


def test_bad_shapes_raise_clear_errors() -> None:
    v = ValueInfo((4, 4))
    with pytest.raises(OpInfoError, match="permutation"):
        rule_for(OpInfo("stablehlo.transpose", (v,), (v,), {"permutation": "array<i64: 0, 0>"}))
    with pytest.raises(OpInfoError, match="operands"):
        rule_for(OpInfo("stablehlo.dot", (v,), (v,)))
    with pytest.raises(OpInfoError, match="same number of elements"):
        rule_for(OpInfo("stablehlo.reshape", (v,), (ValueInfo((3, 5)),)))
    with pytest.raises(InvalidRuleError, match="rank"):
        rule_for(OpInfo("stablehlo.add", (ValueInfo((4, 4, 4)), v), (v,)))


def test_builder_steps_cross_as_typed_objects() -> None:
    # RuleBuilder records `_native.FactorStep`s and `rule_build` runs them in order; a step
    # that fails names its index, mode, dimensions and size, and a bad kind is refused when
    # the step is made.
    from shardwise import _native

    step = _native.FactorStep.dims([1, -1], [0], 8, "reduction", True)
    assert (step.mode, step.operand_dims, step.result_dims, step.size, step.kind, step.blocked) == (
        "dims",
        [1, -1],
        [0],
        8,
        "reduction",
        True,
    )
    every = _native.FactorStep.for_all_results(0, 4)
    assert (every.mode, every.operand_dims, every.result_dims, every.kind, every.blocked) == (
        "results",
        [0],
        [],
        "pass_through",
        False,
    )
    with pytest.raises(ValueError, match='unknown factor kind "sideways"'):
        _native.FactorStep.for_all(0, 4, "sideways")
    rule = _native.rule_build([2, 2], [2], [_native.FactorStep.for_all(0, 4), _native.FactorStep.dims([1, 1], [1], 8)])
    assert str(rule) == str(_native.rule_parse(str(rule)))
    with pytest.raises(InvalidShardingError, match=r"builder step 0 \(dims \[5\] \[0\] size 8\)"):
        _native.rule_build([2], [2], [_native.FactorStep.dims([5], [0], 8)])
