"""Cloning program IR with a value mapping, as MLIR's ``Operation::clone`` and ``IRMapping``:
deep copies of ops, regions and functions whose operands are remapped through a ``Mapping``
(old value -> new value). ``Module.copy`` and the rewriting helpers (``ir/rewrite.py``, which
re-exports these) use it."""

from __future__ import annotations

from collections.abc import Iterable

from shardwise.ir.ops import Block, Func, Op, Region, Value

__all__ = ["Mapping", "clone_func", "clone_op", "clone_region"]


class Mapping:
    """A value mapping for cloning (MLIR's ``IRMapping``): old value -> new value."""

    __slots__ = ("_map",)

    def __init__(self, pairs: Iterable[tuple[Value, Value]] = ()) -> None:
        self._map: dict[int, tuple[Value, Value]] = {}
        for a, b in pairs:
            self.map(a, b)

    def map(self, old: Value, new: Value) -> None:
        """Maps ``old`` to ``new``."""
        self._map[id(old)] = (old, new)

    def lookup_or_none(self, old: Value) -> Value | None:
        """The mapped value, or ``None``."""
        e = self._map.get(id(old))
        return None if e is None else e[1]

    def lookup_or_default(self, old: Value) -> Value:
        """The mapped value, or ``old`` itself when unmapped."""
        e = self._map.get(id(old))
        return old if e is None else e[1]

    def lookup(self, old: Value) -> Value:
        """The mapped value; ``KeyError`` when unmapped."""
        e = self._map.get(id(old))
        if e is None:
            raise KeyError(f"{old} is not mapped")
        return e[1]

    def __contains__(self, old: Value) -> bool:
        return id(old) in self._map


#: ``Op`` and ``Value`` objects made without their ``__init__`` (``clone_op`` sets the fields).
_new_op = object.__new__
_new_value = object.__new__


def _copy_value_fields(src: Value, dst: Value) -> None:
    dst.sharding = src.sharding


def clone_op(op: Op, mapping: Mapping | None = None) -> Op:
    """A detached deep copy of ``op``: operands remapped through ``mapping`` (unmapped ones
    kept), results and nested block arguments added to ``mapping``; shardings, attributes,
    location and ``operand_shardings`` copied. A ``Func`` is cloned as a ``Func``.

    The fields are set directly (what ``Op.__init__`` and ``Value.__init__`` set), and the
    mapping's dict is read in place: ``Module.copy`` clones every op this way, and the
    partitioner copies the program once per rank."""
    mapping = mapping if mapping is not None else Mapping()
    if isinstance(op, Func):
        return clone_func(op, op.sym_name, mapping)
    table = mapping._map
    new = _new_op(Op)
    new.name = op.name
    new.operands = [v if (e := table.get(id(v))) is None else e[1] for v in op.operands]
    results = []
    for i, r in enumerate(op.results):
        nr = _new_value(Value)
        nr.type, nr.owner, nr.index, nr.sharding = r.type, new, i, r.sharding
        table[id(r)] = (r, nr)
        results.append(nr)
    new.results = results
    new.attributes = dict(op.attributes)
    new.regions = []
    new.parent = None
    new.operand_shardings = op.operand_shardings
    new._location = op._location
    for region in op.regions:
        new.add_region(clone_region(region, mapping))
    return new


def clone_region(region: Region, mapping: Mapping | None = None) -> Region:
    """A detached deep copy of ``region`` (block arguments and results added to ``mapping``)."""
    mapping = mapping if mapping is not None else Mapping()
    new = Region()
    blocks = []
    for b in region.blocks:
        nb = new.append(Block([a.type for a in b.args]))
        for a, na in zip(b.args, nb.args):
            _copy_value_fields(a, na)
            mapping.map(a, na)
        blocks.append((b, nb))
    for b, nb in blocks:
        for o in b.ops:
            nb.append(clone_op(o, mapping))
    return new


def clone_func(func: Func, name: str, mapping: Mapping | None = None) -> Func:
    """A detached copy of ``func`` named ``name`` (arguments, attributes, result shardings and
    body copied)."""
    mapping = mapping if mapping is not None else Mapping()
    attrs = {k: v for k, v in func.attributes.items() if k != "sym_name"}
    declaration = not func.regions[0].blocks
    new = Func(name, func.arg_types if not declaration else (), func.result_types, attrs, declaration=declaration)
    new.copy_location(func)
    new.arg_attrs = [dict(d) for d in func.arg_attrs]
    new.result_attrs = [dict(d) for d in func.result_attrs]
    new.result_shardings = list(func.result_shardings)
    if not declaration:
        for a, na in zip(func.args, new.args):
            _copy_value_fields(a, na)
            mapping.map(a, na)
        for o in func.body.ops:
            new.body.append(clone_op(o, mapping))
    return new
