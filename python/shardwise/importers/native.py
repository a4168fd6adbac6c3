"""The program IR built from the native MLIR reader's tables (``shardwise._native.read_mlir``,
``rust/src/mlir``): no jaxlib, one pass over flat arrays.

The reader hands every op in its generic shape (the custom forms JAX and Shardy print are
turned into the attributes jaxlib's parser would give), so the module built here equals the one
``shardwise.importers.mlir`` builds from jaxlib's parse of the same text; the tests compare the
two over the conformance corpus and real JAX programs.
"""

from __future__ import annotations

from sys import intern
from typing import NamedTuple

from shardwise._native import FuncTables, NativeProgram, ProgramTables
from shardwise.errors import ProgramError
from shardwise.importers.shardings import ShardingReader, check_rank
from shardwise.ir.attrs import unquote
from shardwise.ir.core import Block, Func, Module, Op, Region, Value
from shardwise.ir.types import Type, parse_type
from shardwise.mesh import Mesh

__all__ = ["Reuse", "build_module", "build_op", "reuse_of"]


class Reuse(NamedTuple):
    """Python objects a build takes again: the op (``ops``, functions included) and value
    (``values``) objects of a module by their index in a native program read from it
    (``reuse_of``). Ops the native passes kept keep their index, and so their Python object:
    ops, functions and values taken from a module before a native pass ran on it stay the
    module's."""

    ops: dict[int, Op]
    values: dict[int, Value]


def reuse_of(module: Module, t: ProgramTables) -> Reuse | None:
    """The ops and values of built ``module`` by their index in the program ``t`` describes,
    read from ``module``'s text: the two trees are walked side by side. ``None`` when they do
    not match (then nothing is taken again)."""
    ops: dict[int, Op] = {}
    values: dict[int, Value] = {}
    strings, op_names = t.strings, t.op_names
    rb, ro, ba = t.region_blocks, t.region_offsets, t.block_args
    bo, block_ops, ro_results = t.block_op_offsets, t.block_ops, t.result_offsets
    # (Each table attribute is read once: reading one copies it out of Rust.)
    stack: list[tuple[Op, int]] = [(module.op, 0)]
    while stack:
        op, i = stack.pop()
        if strings[op_names[i]] != op.name:
            return None
        ops[i] = op
        first = ro_results[2 * i]
        if ro_results[2 * i + 1] - first != len(op.results):
            return None
        for k, v in enumerate(op.results):
            values[first + k] = v
        regions = range(ro[i], ro[i + 1])
        if len(regions) != len(op.regions):
            return None
        for r, region in zip(regions, op.regions):
            blocks = range(rb[2 * r], rb[2 * r + 1])
            if len(blocks) != len(region.blocks):
                return None
            for b, block in zip(blocks, region.blocks):
                a0, a1 = ba[2 * b], ba[2 * b + 1]
                inner = block_ops[bo[2 * b] : bo[2 * b + 1]]
                if a1 - a0 != len(block.args) or len(inner) != len(block.ops):
                    return None
                for k, v in enumerate(block.args):
                    values[a0 + k] = v
                stack.extend(zip(block.ops, inner))
    return Reuse(ops, values)


def build_module(t: ProgramTables, reuse: Reuse | None = None) -> Module:
    """The module the tables describe, taking ``reuse``'s objects where given. Raises
    ``ShardingError`` (with the op and location) for shardings shardwise rejects,
    ``ProgramError`` for a function with several blocks."""
    return _Builder(t, reuse).module()


def build_op(program: NativeProgram, reuse: Reuse | None = None) -> Op:
    """The ``builtin.module`` op of ``program`` with everything in it, as ``build_module``
    builds it from ``program.tables()`` (what a lazy ``Module`` calls on first use)."""
    return build_module(program.tables(), reuse).op


class _Builder(ShardingReader):
    def __init__(self, t: ProgramTables, reuse: Reuse | None = None) -> None:
        super().__init__()
        self.reuse = reuse
        self.strings = t.strings
        self.names: dict[int, str] = {}
        self.types: dict[int, Type] = {}
        self.values: list[Value | None] = [None] * len(t.value_types)
        self.value_types = t.value_types
        self.op_names = t.op_names
        self.op_locs = t.op_locs
        self.operand_offsets = t.operand_offsets
        self.operands = t.operands
        self.result_offsets = t.result_offsets
        self.attr_offsets = t.attr_offsets
        self.attr_names = t.attr_names
        self.attr_values = t.attr_values
        self.region_offsets = t.region_offsets
        self.region_blocks = t.region_blocks
        self.block_args = t.block_args
        self.block_op_offsets = t.block_op_offsets
        self.block_ops = t.block_ops
        self.funcs: dict[int, FuncTables] = {f.op: f for f in t.funcs}

    def name(self, i: int) -> str:
        """Interned string ``i`` (op and attribute names: passes compare them by identity)."""
        n = self.names.get(i)
        if n is None:
            n = self.names[i] = intern(self.strings[i])
        return n

    def type(self, i: int) -> Type:
        ty = self.types.get(i)
        if ty is None:
            ty = self.types[i] = parse_type(self.strings[i])
        return ty

    def attrs(self, op: int) -> dict[str, str]:
        a0, a1 = self.attr_offsets[op], self.attr_offsets[op + 1]
        if a0 == a1:
            return {}
        name, s = self.name, self.strings
        return {name(n): s[v] for n, v in zip(self.attr_names[a0:a1], self.attr_values[a0:a1])}

    def blocks_of(self, op: int) -> list[tuple[int, int]]:
        """Each region of ``op`` as its (first, end) block."""
        rb = self.region_blocks
        return [(rb[2 * r], rb[2 * r + 1]) for r in range(self.region_offsets[op], self.region_offsets[op + 1])]

    def block_ops_of(self, b: int) -> list[int]:
        return self.block_ops[self.block_op_offsets[2 * b] : self.block_op_offsets[2 * b + 1]]

    def module(self) -> Module:
        module = Module()
        module.op.attributes = self.attrs(0)
        module.op.location = self.strings[self.op_locs[0]]
        regions = self.blocks_of(0)
        top = self.block_ops_of(regions[0][0]) if regions and regions[0][1] > regions[0][0] else []
        for i in top:
            if self.strings[self.op_names[i]] == "sdy.mesh":
                attrs = self.attrs(i)
                if "sym_name" not in attrs or "mesh" not in attrs:
                    raise ProgramError(f"sdy.mesh at {self.strings[self.op_locs[i]]}: needs sym_name and mesh")
                self.meshes[unquote(attrs["sym_name"])] = Mesh.parse(attrs["mesh"])
        body = module.op.regions[0].entry
        # Pre-order over an explicit stack of (block, its op ids, next index).
        stack: list[tuple[Block, list[int], int]] = [(body, top, 0)]
        while stack:
            block, ops, k = stack.pop()
            if k == len(ops):
                continue
            stack.append((block, ops, k + 1))
            i = ops[k]
            op = self.func(i) if i in self.funcs else self.op(i)
            block.append(op)
            pending = self.regions(i, op)
            for inner_block, inner_ops in reversed(pending):
                stack.append((inner_block, inner_ops, 0))
        return module

    def op(self, i: int) -> Op:
        first, end = self.result_offsets[2 * i], self.result_offsets[2 * i + 1]
        vt, types, values = self.value_types, self.types, self.values
        oo = self.operand_offsets
        operands = [values[v] for v in self.operands[oo[i] : oo[i + 1]]]
        if None in operands:  # the reader resolves names first: only a reader bug gets here
            raise ProgramError(f"{self.strings[self.op_names[i]]}: operand read before its definition")
        result_types = [types.get(t) or self.type(t) for t in vt[first:end]]
        old = self.reuse.ops.get(i) if self.reuse is not None else None
        if old is not None and type(old) is Op:
            # The object ``reuse`` has for op ``i`` (and its results in theirs) takes the op's
            # fields, as a new ``Op`` would hold them.
            old.name, old.operands, old.attributes = self.name(self.op_names[i]), operands, self.attrs(i)  # type: ignore[assignment]
            old.regions, old.parent, old.operand_shardings = [], None, None
            old._location = self.strings[self.op_locs[i]]
            old.results = [self._result(first + k, t, old, k) for k, t in enumerate(result_types)]
            op = old
        else:
            op = Op(self.name(self.op_names[i]), operands, result_types, self.attrs(i))  # type: ignore[arg-type]
            op._location = self.strings[self.op_locs[i]]
        values[first:end] = op.results
        self.take_shardings(op)
        return op

    def _result(self, index: int, ty: Type, owner: Op, k: int) -> Value:
        """Result ``k`` of ``owner``: the object ``reuse`` has for value ``index`` if it has
        one, else a new value."""
        assert self.reuse is not None
        old = self.reuse.values.get(index)
        if old is None:
            return Value(ty, owner, k)
        old.type, old.owner, old.index, old.sharding = ty, owner, k, None
        return old

    def _value(self, index: int, new: Value, owner: Op | Block) -> Value:
        """``new`` in the object ``reuse`` has for value ``index``, if it has one."""
        assert self.reuse is not None
        old = self.reuse.values.get(index)
        if old is None:
            return new
        old.type, old.owner, old.index, old.sharding = new.type, owner, new.index, new.sharding
        return old

    def regions(self, i: int, op: Op) -> list[tuple[Block, list[int]]]:
        """Adds ``op``'s regions and blocks (their arguments bound); returns each block with the
        ops still to be built into it. A function's one block exists already."""
        if self.region_offsets[i] == self.region_offsets[i + 1]:
            return []
        out: list[tuple[Block, list[int]]] = []
        is_func = isinstance(op, Func)
        vt = self.value_types
        for b0, b1 in self.blocks_of(i):
            if is_func:
                if b1 - b0 > 1:
                    raise ProgramError(f"{op.where()}: functions with several blocks are not supported")
                if b1 == b0:
                    continue
                block = op.regions[0].entry
                a0, a1 = self.block_args[2 * b0], self.block_args[2 * b0 + 1]
                if a1 - a0 != len(block.args) or any(self.type(vt[a0 + k]) != v.type for k, v in enumerate(block.args)):
                    raise ProgramError(f"{op.where()}: the entry block's arguments do not match the function type")
                if self.reuse is not None:
                    block.args = [self._value(a0 + k, v, block) for k, v in enumerate(block.args)]
                for k, v in enumerate(block.args):
                    self.values[a0 + k] = v
                out.append((block, self.block_ops_of(b0)))
                continue
            region = Region()
            for b in range(b0, b1):
                a0, a1 = self.block_args[2 * b], self.block_args[2 * b + 1]
                block = region.append(Block([self.type(vt[v]) for v in range(a0, a1)]))
                if self.reuse is not None:
                    block.args = [self._value(a0 + k, v, block) for k, v in enumerate(block.args)]
                for k, v in enumerate(block.args):
                    self.values[a0 + k] = v
                out.append((block, self.block_ops_of(b)))
            op.add_region(region)
        return out

    def func(self, i: int) -> Func:
        f_t = self.funcs[i]
        attrs = self.attrs(i)
        if "sym_name" not in attrs:
            raise ProgramError(f"func.func at {self.strings[self.op_locs[i]]}: no sym_name")
        name = unquote(attrs.pop("sym_name"))
        has_body = any(b1 > b0 for b0, b1 in self.blocks_of(i))
        f = Func(
            name,
            [self.type(t) for t in f_t.arg_types],
            [self.type(t) for t in f_t.result_types],
            attrs,
            self.strings[self.op_locs[i]],
            declaration=not has_body,
        )
        s = self.strings
        for k, pairs in enumerate(f_t.arg_attrs):
            d = {self.name(n): s[v] for n, v in pairs}
            sharding = self.sharding(d.pop("sdy.sharding", None), f, f"argument {k}")
            if has_body and sharding is not None:
                f.args[k].sharding = check_rank(sharding, f.args[k].type, f, f"argument {k}")
            f.arg_attrs[k] = d
        for k, pairs in enumerate(f_t.result_attrs):
            d = {self.name(n): s[v] for n, v in pairs}
            sharding = self.sharding(d.pop("sdy.sharding", None), f, f"result {k}")
            if sharding is not None:
                check_rank(sharding, f.result_types[k], f, f"result {k}")
            f.result_shardings[k] = sharding
            f.result_attrs[k] = d
        return f if self.reuse is None else self._taken_func(i, f)

    def _taken_func(self, i: int, new: Func) -> Func:
        """``new`` in the object ``reuse`` has for function op ``i``, if it has one (its
        argument values are taken again with its block, by ``regions``)."""
        assert self.reuse is not None
        old = self.reuse.ops.get(i)
        if type(old) is not Func:
            return new
        for slot in (*Op.__slots__, *Func.__slots__):
            setattr(old, slot, getattr(new, slot))
        old.parent = None
        for region in old.regions:
            region.parent = old
        return old
