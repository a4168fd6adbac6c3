"""The program IR: modules, functions, ops, regions, blocks and values, as in MLIR.

``Module`` is defined here, over the op graph of ``ir/ops.py`` (``Func``, ``Op``, ``Region``,
``Block``, ``Value``, re-exported here: this is the path they are imported by). A module copies
itself with ``ir/clone.py`` and prints itself with ``ir/printer.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardwise.ir.attrs import quote, unquote
from shardwise.ir.clone import clone_op
from shardwise.ir.gc import no_cyclic_gc
from shardwise.ir.ops import Block, Func, Op, Region, Value, tensor_type
from shardwise.ir.printer import save, to_mlir
from shardwise.mesh import Mesh

__all__ = ["Block", "Func", "Module", "Op", "Region", "Value", "tensor_type"]


class Module:
    """A module: its top-level ops (``sdy.mesh`` definitions, functions, others) in order."""

    __slots__ = ("op",)

    def __init__(self, name: str | None = None, attributes: dict[str, str] | None = None) -> None:
        attrs = dict(attributes or {})
        if name is not None:
            attrs["sym_name"] = quote(name)
        self.op = Op("builtin.module", (), (), attrs, [Region([Block()])])

    @property
    def name(self) -> str | None:
        s = self.op.attributes.get("sym_name")
        return None if s is None else unquote(s)

    @property
    def attributes(self) -> dict[str, str]:
        return self.op.attributes

    @property
    def ops(self) -> list[Op]:
        return self.op.regions[0].entry.ops

    @property
    def meshes(self) -> dict[str, Mesh]:
        """Named meshes (``sdy.mesh @name``), in definition order."""
        out = {}
        for op in self.ops:
            if op.name == "sdy.mesh":
                out[unquote(op.attributes["sym_name"])] = Mesh.parse(op.attributes["mesh"])
        return out

    def add_mesh(self, name: str, mesh: Mesh) -> None:
        """Defines (or redefines) ``sdy.mesh @name``, placed before the functions."""
        for op in self.ops:
            if op.name == "sdy.mesh" and unquote(op.attributes["sym_name"]) == name:
                op.attributes["mesh"] = str(mesh)
                return
        at = sum(1 for op in self.ops if op.name == "sdy.mesh")
        op = Op("sdy.mesh", attributes={"mesh": str(mesh), "sym_name": quote(name)})
        op.parent = self.op.regions[0].entry
        self.ops.insert(at, op)

    @property
    def funcs(self) -> list[Func]:
        return [op for op in self.ops if isinstance(op, Func)]

    def func(self, name: str = "main") -> Func:
        """The function ``@name``; ``KeyError`` listing the functions if there is none."""
        for f in self.funcs:
            if f.sym_name == name:
                return f
        raise KeyError(f"module has no function @{name}; functions: {[f.sym_name for f in self.funcs]}")

    def walk(self) -> Iterator[Op]:
        """Every op, in pre-order (top-level ops and everything nested)."""
        return self.op.walk_nested()

    def values(self) -> Iterator[Value]:
        """Every value: function arguments, block arguments and op results, in program order."""
        for op in self.walk():
            for r in op.regions:
                for b in r.blocks:
                    yield from b.args
            yield from op.results

    def copy(self) -> Module:
        """A deep copy (ops, values, shardings; the immutable shardings and meshes shared).
        Python's cyclic collector is paused while it is built (``shardwise.ir.gc``): a copy
        allocates a few objects per op, and on a 22k-op program the collector otherwise runs
        over two hundred times and triples the time of the copy."""
        new = Module.__new__(Module)
        with no_cyclic_gc():
            new.op = clone_op(self.op)
        return new

    def to_mlir(self, *, generic: bool = False, printer: str = "auto") -> str:
        """The module as MLIR text with shardings in Shardy's printed form, verified and printed
        natively (jaxlib's printer for an op the native one has no custom form for;
        ``generic=True`` gives the generic op form). See ``shardwise.ir.printer.to_mlir``."""
        return to_mlir(self, generic=generic, printer=printer)

    def save(self, path: str) -> None:
        """Writes ``to_mlir()`` to ``path`` atomically (temporary file, then rename)."""
        save(self, path)

    def __repr__(self) -> str:
        return f"<Module @{self.name}: {len(self.funcs)} funcs, meshes {list(self.meshes)}>"
