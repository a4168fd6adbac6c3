"""The IR editing helpers of ``shardwise.ir.rewrite``: use lists, insertion, erasure, cloning
and the symbol table."""

from __future__ import annotations

import pytest
from shardwise import Builder, Mesh
from shardwise.ir.core import Func, Module, Op
from shardwise.ir.rewrite import (
    Mapping,
    SymbolTable,
    Uses,
    ancestors,
    clone_func,
    clone_op,
    enclosing_func,
    erase_op,
    insert_after,
    insert_before,
    is_before_in_block,
    owning_op,
    replace_all_uses,
)
from shardwise.ir.types import TensorType


def _module() -> tuple[Module, Func, list[Op]]:
    b = Builder(Mesh({"x": 2}))
    x = b.arg((8, 4))
    y = b.tanh(x)
    z = b.tanh(y)
    module = b.ret(b.tanh(y))
    f = module.func("main")
    del z
    return module, f, list(f.body.ops)


def test_uses_follow_mlir_order_and_edits() -> None:
    module, f, ops = _module()
    t1, t2, t3, _ret = ops
    uses = Uses(module)
    y = t1.results[0]
    # Most recent use first, as MLIR keeps use lists after parsing.
    assert uses.users(y) == [t3, t2]
    assert uses.has_one_use(f.args[0]) and uses.count(y) == 2
    uses.replace_all_uses(y, f.args[0], except_ops=[t2])
    assert t3.operands[0] is f.args[0] and t2.operands[0] is y
    assert uses.users(f.args[0])[0] is t3
    erase_op(t2, uses)
    assert t2.parent is None and not uses.has_uses(y)
    with pytest.raises(ValueError, match="still has uses"):
        erase_op(t3, uses)


def test_insert_clone_and_replace() -> None:
    module, f, ops = _module()
    t1, t2, t3, ret = ops
    mapping = Mapping()
    copy = clone_op(t2, mapping)
    assert (
        copy.parent is None and copy.operands[0] is t1.results[0] and mapping.lookup(t2.results[0]) is copy.results[0]
    )
    insert_after(t1, copy)
    assert f.body.ops[1] is copy and is_before_in_block(copy, t2)
    new = Op("stablehlo.negate", [t1.results[0]], [TensorType((8, 4), "f32")])
    insert_before(ret, new)
    assert f.body.ops[-2] is new
    assert replace_all_uses(t3.results[0], new.results[0], module) == 1
    assert ret.operands[0] is new.results[0]
    assert enclosing_func(new) is f and next(iter(ancestors(new))) is f
    assert owning_op(f.args[0]) is f
    with pytest.raises(ValueError, match="already in a block"):
        insert_before(ret, new)


def test_symbol_table_renames_like_mlir() -> None:
    module, f, _ = _module()
    symbols = SymbolTable(module)
    a = clone_func(f, "main")
    b = clone_func(f, "main")
    assert symbols.insert(a) == "main_0"
    assert symbols.insert(b) == "main_1"
    assert module.funcs[-1] is b and b.sym_name == "main_1"
    assert symbols.lookup_func("main_0") is a
    symbols.erase(a)
    assert "main_0" not in symbols and a.parent is None
    c = clone_func(f, "main")
    assert symbols.insert(c) == "main_2"  # the counter only moves forward
    module.to_mlir()  # still verifies
