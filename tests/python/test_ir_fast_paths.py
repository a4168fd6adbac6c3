"""The fast paths of the IR helpers that every pass runs: ``Op.walk`` (pre-order, read live),
``post_order``, ``Module.copy`` under a paused collector, and ``freeze``'s rule table where
rules are not memoised (their objects die after use, so ids are reused)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

from shardwise import Builder, Mesh
from shardwise.ir import Op
from shardwise.ir.core import Block, Region
from shardwise.ir.sdy import post_order
from shardwise.ir.types import TensorType
from shardwise.propagation.freeze import freeze
from shardwise.rules.from_ir import rules_for

T = TensorType((4,), "f32")


def _leaf(name: str) -> Op:
    return Op(name, (), [T])


def _nested() -> Op:
    """An op with two regions, the first with two blocks, holding ops with regions."""
    inner = Op("test.inner", regions=[Region([Block()])])
    inner.regions[0].entry.append(_leaf("test.c"))
    b1, b2, b3 = Block([T]), Block(), Block()
    b1.append(_leaf("test.a"))
    b1.append(inner)
    b2.append(_leaf("test.d"))
    b3.append(_leaf("test.e"))
    return Op("test.outer", regions=[Region([b1, b2]), Region([b3])])


def _reference_pre(op: Op) -> Iterator[Op]:
    yield op
    for r in op.regions:
        for b in r.blocks:
            for o in b.ops:
                yield from _reference_pre(o)


def _reference_post(op: Op) -> Iterator[Op]:
    for r in op.regions:
        for b in r.blocks:
            for o in b.ops:
                yield from _reference_post(o)
    yield op


def test_walk_and_post_order_match_recursive_walks() -> None:
    root = _nested()
    assert [o.name for o in root.walk()] == [o.name for o in _reference_pre(root)]
    assert [o.name for o in root.walk()] == ["test.outer", "test.a", "test.inner", "test.c", "test.d", "test.e"]
    assert [o.name for o in post_order(root)] == [o.name for o in _reference_post(root)]
    assert [o.name for o in _leaf("test.x").walk()] == ["test.x"]


def test_walk_reads_blocks_live() -> None:
    root = _nested()
    seen = []
    for op in root.walk():
        seen.append(op.name)
        if op.name == "test.a":
            # Appended behind the walk's position in the block being walked: seen.
            root.regions[0].blocks[0].append(_leaf("test.late"))
            # Erased from a block not reached yet: not seen.
            root.regions[1].entry.ops.clear()
    assert seen == ["test.outer", "test.a", "test.inner", "test.c", "test.late", "test.d"]


def test_copy_restores_the_collector_state() -> None:
    b = Builder(Mesh({"x": 2}))
    x = b.arg((8, 4))
    m = b.ret(b.add(x, x))
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            c = m.copy()
            assert gc.isenabled() is enabled
            assert c.to_mlir(generic=True) == m.to_mlir(generic=True)
            assert all(a is not b for a, b in zip(c.walk(), m.walk()))
    finally:
        (gc.enable if was else gc.disable)()


def test_freeze_rules_of_unmemoised_ops_are_their_own() -> None:
    """Concatenates are not memoised: each rule object is freed once frozen, and a later rule
    may get its id. Every op must still get its own rule."""
    b = Builder(Mesh({"x": 2}))
    xs = [b.arg((2 + i, 4)) for i in range(12)]
    out = [b.concatenate([xs[i], xs[i + 1]], 0) for i in range(11)]
    m = b.ret(*out)
    fr = freeze(m)
    expected = rules_for(m)
    got = [fr.graph.rule(i) for i in range(fr.graph.num_ops)]
    assert got == [None if expected[id(op)] is None else str(expected[id(op)]) for op in fr.ops]
    concats = [g for g, op in zip(got, fr.ops) if op.name == "stablehlo.concatenate"]
    assert len(set(concats)) == 11  # eleven shapes, eleven rules
