"""Freezing modules into the Rust flat arrays."""

from __future__ import annotations

import pytest
from corpus import conformance_dir
from shardwise import Builder, Mesh, ProgramError
from shardwise.ir import Op
from shardwise.ir.types import TensorType
from shardwise.propagation.freeze import freeze


def test_freeze_builder_program() -> None:
    b = Builder(Mesh({"x": 2}))
    x = b.arg((8, 4))
    y = b.add(x, x)
    z = b.reduce(y, dims=(1,))
    m = b.ret(z)
    fr = freeze(m)
    g = fr.graph
    names = [g.op_name(i) for i in range(g.num_ops)]
    assert names[:3] == ["sdy.mesh", "func.func", "stablehlo.add"]
    add = fr.op_index(y.defining_op)  # type: ignore[arg-type]
    assert g.operands(add) == [fr.value_index(x)] * 2
    assert g.users(fr.value_index(x)) == [add, add]
    assert g.shape(fr.value_index(z)) == [8]
    assert g.defining_op(fr.value_index(x)) is None and g.defining_op(fr.value_index(y)) == add
    reduce_op = fr.op_index(z.defining_op)  # type: ignore[arg-type]
    body = [i for i in range(g.num_ops) if g.parent(i) == reduce_op]
    assert [g.op_name(i) for i in body] == ["stablehlo.add", "stablehlo.return"]
    with pytest.raises(IndexError, match="out of range"):
        g.operands(10**6)
    assert g.rule(add) == "#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=8, j=4}>"
    assert g.rule(reduce_op) == "#sdy.op_sharding_rule<([i, j], [])->([i]) {i=8, j=4} reduction={j}>"
    assert g.rule(0) is None  # sdy.mesh
    assert freeze(m, rules=False).graph.rule(add) is None


def test_freeze_rejects_use_before_definition() -> None:
    b = Builder()
    x = b.arg((2,))
    orphan = Op("stablehlo.negate", [x], [x.type])  # never added to the module
    b.op("stablehlo.abs", [orphan.result], [x.type])
    with pytest.raises(ProgramError, match="before it is defined"):
        freeze(b.ret(x))


def test_freeze_corpus_is_compact() -> None:
    root = conformance_dir()
    if root is None:
        pytest.skip("../shared/conformance is absent")
    pytest.importorskip("jax")
    from shardwise import load_mlir
    from shardwise.rules.from_ir import rules_for

    ops = nbytes = 0
    for p in sorted((root / "dev").glob("*.in.mlir")):
        module = load_mlir(p)
        fr = freeze(module)
        g = fr.graph
        expected = rules_for(module)
        assert [g.rule(i) for i in range(g.num_ops)] == [
            None if expected[id(op)] is None else str(expected[id(op)]) for op in fr.ops
        ]
        assert g.num_rules < g.num_ops
        assert g.num_ops == len(fr.ops) and g.num_values == len(fr.values)
        for i, op in enumerate(fr.ops):
            assert [fr.values[v] for v in g.operands(i)] == op.operands
            assert [fr.values[v] for v in g.results(i)] == op.results
        # What the walk collected for propagation, against the IR.
        walk = fr.walk
        assert walk.block_args == [i for i, v in enumerate(fr.values) if v.is_block_arg]
        assert walk.sharded_results == [
            i for i, v in enumerate(fr.values) if not v.is_block_arg and v.sharding is not None
        ]
        assert walk.non_tensor_values == [i for i, v in enumerate(fr.values) if not isinstance(v.type, TensorType)]
        symbolic = [
            i
            for i, op in enumerate(fr.ops)
            if op.name not in ("func.func", "func.call") and any("@" in t for t in op.attributes.values())
        ]
        assert walk.symbol_ops == symbolic
        assert g.ops_named(["func.func", "stablehlo.add"]) == [
            i for i, op in enumerate(fr.ops) if op.name in ("func.func", "stablehlo.add")
        ]
        ops += g.num_ops
        nbytes += g.nbytes
    assert nbytes / ops < 200  # bytes per op, rules included, shardings excluded


def test_freeze_index_lookups_and_bad_input() -> None:
    """``op_index`` / ``value_index`` give the same answers before and after ``Frozen`` builds
    its maps (after a few searches), ``KeyError`` for a foreign object either way; the Rust
    walk raises Python errors, no panic, on objects that are not IR ops."""
    from shardwise import _native

    b = Builder(Mesh({"x": 2}))
    x = b.arg((8, 4))
    y = x
    for _ in range(12):
        y = b.add(y, x)
    module = b.ret(y)
    fr = freeze(module)
    foreign = Op("stablehlo.negate", [x], [x.type])
    ops = [fr.op_index(op) for op in fr.ops]  # searched first, then from the map
    assert ops == list(range(len(fr.ops)))
    assert [fr.value_index(v) for v in fr.values] == list(range(len(fr.values)))
    with pytest.raises(KeyError):
        fr.op_index(foreign)
    assert freeze(module).op_index(fr.ops[-1]) == len(fr.ops) - 1  # a fresh one searches
    with pytest.raises(KeyError):
        freeze(module).value_index(foreign.result)
    with pytest.raises(AttributeError):
        _native.walk_program([object()], set(), object)
    with pytest.raises(TypeError):
        _native.walk_program("not a list", set(), object)  # type: ignore[arg-type]


def test_freeze_classes_share_rules_and_unknown_ops_each_warn() -> None:
    """Ops alike in name, attributes and types share one rule (one class of the Rust walk);
    an op whose attributes differ gets its own; each op unknown to the registry warns."""
    import warnings

    from shardwise.rules.exceptions import UnknownOpWarning

    b = Builder(Mesh({"x": 2}))
    x = b.arg((8, 4))
    sq = b.arg((4, 4))
    a1 = b.add(x, x)
    a2 = b.add(a1, x)
    t1 = b.transpose(sq, (1, 0))
    t2 = b.transpose(sq, (0, 1))  # same name and types, other attributes
    u1 = b.op("my.unknown", [a2], [x.type])
    u2 = b.op("my.unknown", [u1.result], [x.type])
    module = b.ret(t1, t2, u2.result)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fr = freeze(module)
    assert sum(issubclass(w.category, UnknownOpWarning) for w in caught) == 2
    g = fr.graph
    index = [fr.op_index(v.defining_op) for v in (a1, a2, t1, t2)]  # type: ignore[arg-type]
    rules = [g.op_rules[i] for i in index]
    assert rules[0] == rules[1] != 2**32 - 1
    assert g.rule(index[2]) == "#sdy.op_sharding_rule<([j, i])->([i, j]) {i=4, j=4}>"
    assert g.rule(index[3]) == "#sdy.op_sharding_rule<([i, j])->([i, j]) {i=4, j=4}>"
    assert g.op_rules[fr.op_index(u1)] == g.op_rules[fr.op_index(u2)] == 2**32 - 1
    assert fr.op_rule == g.op_rules
    # Equal types built apart (not one shared object) still make one class.
    c = Builder(Mesh({"x": 2}))
    y = c.arg((8, 4))
    n1 = c.op("stablehlo.negate", [y], [TensorType((8, 4), "f32")])
    n2 = c.op("stablehlo.negate", [n1.result], [TensorType((8, 4), "f32")])
    assert n1.result.type is not n2.result.type
    fr = freeze(c.ret(n2.result))
    classes = fr.walk.op_classes
    assert classes[fr.op_index(n1)] == classes[fr.op_index(n2)]


def test_freeze_deep_nesting_raises_instead_of_crashing() -> None:
    """The Rust walk recurses once per region level: past its limit a ``RecursionError``, not
    an overflowed stack (20,000 levels crashed the interpreter before the limit)."""
    from shardwise.ir.core import Block, Module, Region

    def nested(depth: int) -> Module:
        m = Module()
        block = m.op.regions[0].entry
        for _ in range(depth):
            op = Op("test.wrap", regions=[Region([Block()])])
            block.append(op)
            block = op.regions[0].entry
        return m

    assert len(freeze(nested(2048), rules=False).ops) == 2048
    with pytest.raises(RecursionError, match="nested deeper than 2048"):
        freeze(nested(20000), rules=False)


def test_freeze_asks_every_op_of_large_unknown_classes() -> None:
    """Each op unknown to the registry is asked for its rule (and warns), class after class,
    with many classes (their members listed once)."""
    import warnings

    from shardwise.rules.exceptions import UnknownOpWarning

    b = Builder(Mesh({"x": 2}))
    x = b.arg((8, 4))
    v = x
    for i in range(300):
        v = b.op("my.unknown", [v], [x.type], {"k": str(i % 100)}).result
    module = b.ret(v)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fr = freeze(module)
    assert sum(issubclass(w.category, UnknownOpWarning) for w in caught) == 300
    assert len(set(fr.walk.op_classes)) >= 100
