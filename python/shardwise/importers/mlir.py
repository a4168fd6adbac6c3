"""``load_mlir``: StableHLO + sdy MLIR text (from ``jax.jit(f).lower(...).as_text()``, XLA's
Shardy dumps, Shardy's lit tests) into the program IR, parsed and verified by jaxlib's MLIR
bindings and walked once.
"""

from __future__ import annotations

import os
from pathlib import Path
from sys import intern
from typing import Any

from shardwise.ir.gc import no_cyclic_gc
from shardwise.errors import ProgramError, ShardingError
from shardwise.importers._jaxlib import context, ir
from shardwise.ir.attrs import unquote
from shardwise.ir.core import Block, Func, Module, Op, Region, Value
from shardwise.ir.slots import OPERAND_SLOTS, Slot, result_slot
from shardwise.ir.types import Type, parse_type
from shardwise.mesh import Mesh
from shardwise.sharding import TensorSharding


def load_mlir(source: str | os.PathLike[str]) -> Module:
    """Reads a module from MLIR text or from a file path.

    Raises ``ProgramError`` for text jaxlib cannot parse or verify (the message carries MLIR's
    diagnostics with line and column), ``ShardingError`` (with the op and location) for
    shardings shardwise rejects, ``ImportError`` without jax.
    """
    text = _read(source)
    _ir = ir()
    with context():
        try:
            mlir_module = _ir.Module.parse(text)
        except _ir.MLIRError as e:
            raise ProgramError(f"cannot parse MLIR{_name(source)}: {e}") from None
        with no_cyclic_gc():
            # Two steps: read everything from jaxlib's objects into plain data, let those
            # objects go, then build the IR. Built while jaxlib's objects were alive, the IR's
            # ops and values lay scattered among them, and every pass over them was slower
            # (the 22k-op step's pipeline 15-18% slower; loading takes 2-7% longer now).
            collector = _Collector()
            data = collector.module(mlir_module.operation)
            del mlir_module
            return _Builder(collector.meshes).module(data)


def _read(source: str | os.PathLike[str]) -> str:
    if isinstance(source, os.PathLike) or ("\n" not in source and len(source) < 4096 and Path(source).is_file()):
        try:
            return Path(source).read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise ProgramError(f"cannot read {source}: {e}") from None
    return source


def _name(source: str | os.PathLike[str]) -> str:
    return f" from {source}" if isinstance(source, os.PathLike) or "\n" not in str(source) else ""


def _where(name: str, location: str) -> str:
    """``name at location``, as ``Op.where`` words it, before the op exists."""
    return f"{name} at {location}" if location else name


# Plain data of one op, collected from jaxlib (see ``_Collector``):
#   ("op", name, operand numbers, result types, attributes, location, regions), a region
#   being a list of blocks (argument types, ops); or
#   ("func", sym name, arg types, result types, attributes, location, arg attrs, result
#   attrs, body ops or None for a declaration).
_OpData = tuple[Any, ...]


class _Collector:
    """Step one of ``load_mlir``: jaxlib's module as plain data. Values are numbered in the
    order the builder creates them (an op's results, then its regions' block arguments, block
    by block); jaxlib's values are told apart by ``hash`` (their MLIR value's address)."""

    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}
        self.meshes: dict[str, Mesh] = {}

    def number(self, values: Any) -> None:
        for v in values:
            self.numbers[hash(v)] = len(self.numbers)

    def module(self, mop: Any) -> tuple[dict[str, str], str, list[_OpData]]:
        attrs = {n: str(mop.attributes[n]) for n in mop.attributes}
        body = mop.regions[0].blocks[0]
        for o in body.operations:
            if o.operation.name == "sdy.mesh":
                self.meshes[unquote(str(o.attributes["sym_name"]))] = Mesh.parse(str(o.attributes["mesh"]))
        return attrs, str(mop.location), [self.op(o) for o in body.operations]

    def op(self, o: Any) -> _OpData:
        o = o.operation  # the generic view: OpView subclasses shadow `name` (func.func's is its symbol)
        if o.name == "func.func":
            return self.func(o)
        # Op names and attribute names are interned: passes compare them with literals and look
        # them up in sets and dicts, which an identical object answers without comparing text
        # (a 22k-op step's pipeline ran 6-8% faster).
        name, location = intern(o.name), str(o.location)
        attrs = {intern(n): str(o.attributes[n]) for n in o.attributes}
        operands = []
        for v in o.operands:
            try:
                operands.append(self.numbers[hash(v)])
            except KeyError:
                raise ProgramError(f"{o.name} at {o.location}: operand defined outside the module or after its use") from None
        types = [parse_type(str(r.type)) for r in o.results]
        self.number(o.results)
        regions = [self.region(r) for r in o.regions]
        if getattr(o, "successors", None):
            raise ProgramError(f"{_where(name, location)}: ops with successor blocks are not supported")
        return ("op", name, operands, types, attrs, location, regions)

    def region(self, r: Any) -> list[tuple[list[Type], list[_OpData]]]:
        blocks = []
        for b in r.blocks:
            arg_types = [parse_type(str(a.type)) for a in b.arguments]
            self.number(b.arguments)
            blocks.append((arg_types, [self.op(inner) for inner in b.operations]))
        return blocks

    def func(self, o: Any) -> _OpData:
        ftype = o.attributes["function_type"].value
        attrs = {n: str(o.attributes[n]) for n in o.attributes if n not in ("function_type", "arg_attrs", "res_attrs", "sym_name")}
        blocks = list(o.regions[0].blocks)
        location = str(o.location)
        arg_types = [parse_type(str(t)) for t in ftype.inputs]
        result_types = [parse_type(str(t)) for t in ftype.results]
        arg_attrs, result_attrs = self._dicts(o, "arg_attrs"), self._dicts(o, "res_attrs")
        body = None
        if blocks:
            if len(blocks) > 1:
                raise ProgramError(f"{_where('func.func', location)}: functions with several blocks are not supported")
            self.number(blocks[0].arguments)
            body = [self.op(inner) for inner in blocks[0].operations]
        return ("func", unquote(str(o.attributes["sym_name"])), arg_types, result_types, attrs, location, arg_attrs, result_attrs, body)

    @staticmethod
    def _dicts(o: Any, name: str) -> list[dict[str, str]]:
        if name not in o.attributes:
            return []
        return [{na.name: str(na.attr) for na in (d[i] for i in range(len(d)))} for d in o.attributes[name]]


class _Builder:
    """Step two of ``load_mlir``: the IR from the collected data, shardings taken out of the
    attributes (``ir/slots.py``) and parsed."""

    def __init__(self, meshes: dict[str, Mesh]) -> None:
        self.values: list[Value] = []  # by the collector's numbers
        self.meshes = meshes

    def module(self, data: tuple[dict[str, str], str, list[_OpData]]) -> Module:
        attrs, location, ops = data
        module = Module()
        module.op.attributes = attrs
        module.op.location = location
        for d in ops:
            module.op.regions[0].entry.append(self.op(d))
        return module

    def op(self, d: _OpData) -> Op:
        if d[0] == "func":
            return self.func(d)
        _, name, operands, types, attrs, location, regions = d
        values = self.values
        op = Op(name, [values[i] for i in operands], types, attrs, location=location)
        values.extend(op.results)
        for blocks in regions:
            region = Region()
            for arg_types, ops in blocks:
                block = region.append(Block(arg_types))
                values.extend(block.args)
                for inner in ops:
                    block.append(self.op(inner))
            op.add_region(region)
        self.take_shardings(op)
        return op

    def func(self, d: _OpData) -> Func:
        _, name, arg_types, result_types, attrs, location, arg_attrs, result_attrs, body = d
        f = Func(name, arg_types, result_types, attrs, location, declaration=body is None)
        for i, a in enumerate(arg_attrs):
            f.args[i].sharding = self.sharding(a.pop("sdy.sharding", None), f, f"argument {i}") if body is not None else None
            f.arg_attrs[i] = a
        for i, a in enumerate(result_attrs):
            f.result_shardings[i] = self.sharding(a.pop("sdy.sharding", None), f, f"result {i}")
            f.result_attrs[i] = a
        if body is not None:
            self.values.extend(f.args)
            for inner in body:
                f.body.append(self.op(inner))
        return f

    def sharding(self, text: str | None, op: Op, what: str) -> TensorSharding | None:
        if text is None:
            return None
        try:
            return TensorSharding.parse(text, self._meshes_for(text))
        except ShardingError as e:
            raise _located(e, f"{op.where()}, {what}") from None

    def _meshes_for(self, text: str) -> dict[str, Mesh] | None:
        return self.meshes if self.meshes else None

    def take_shardings(self, op: Op) -> None:
        slot = result_slot(op.name)
        # A result-less op (a side-effecting custom call) may carry a maximal sharding that
        # places it on one device; it stays an attribute of the op.
        shardings = self._take(op, slot, "results") if op.results else None
        if shardings is not None:
            if len(shardings) != len(op.results):
                raise ProgramError(f"{op.where()}: {len(shardings)} shardings in {slot.attribute} for {len(op.results)} results")
            for v, s in zip(op.results, shardings):
                v.sharding = s
        if op.name in OPERAND_SLOTS:
            op.operand_shardings = self._take(op, OPERAND_SLOTS[op.name], "operands")

    def _take(self, op: Op, slot: Slot, what: str) -> tuple[TensorSharding, ...] | None:
        text = op.attributes.pop(slot.attribute, None)
        if text is None:
            return None
        try:
            if slot.form == "single":
                return (TensorSharding.parse(text, self._meshes_for(text)),)
            return TensorSharding.parse_per_value(text, self._meshes_for(text))
        except ShardingError as e:
            raise _located(e, f"{op.where()}, {what}") from None


def _located(e: ShardingError, where: str) -> ShardingError:
    """The same error class and attributes, its message prefixed with the op and location."""
    new = type(e)(f"{where}: {e}")
    for attr in ("rule", "offset"):
        if hasattr(e, attr):
            setattr(new, attr, getattr(e, attr))
    return new
