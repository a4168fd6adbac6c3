"""The program IR: modules, functions, ops, regions, blocks and values, as in MLIR.

``Module`` is defined here, over the op graph of ``ir/ops.py`` (``Func``, ``Op``, ``Region``,
``Block``, ``Value``, re-exported here: this is the path they are imported by). A module copies
itself with ``ir/clone.py`` and prints itself with ``ir/printer.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from shardwise._native import NativeProgram
from shardwise.ir.attrs import quote, unquote
from shardwise.ir.clone import clone_op
from shardwise.ir.gc import no_cyclic_gc
from shardwise.ir.ops import Block, Func, Op, Region, Value, tensor_type
from shardwise.ir.printer import save, to_mlir
from shardwise.mesh import Mesh

__all__ = ["Block", "Func", "Module", "Op", "Region", "Value", "tensor_type"]

#: Held while a module builds its Python ops from its native program.
_BUILDING = threading.RLock()


class Module:
    """A module: its top-level ops (``sdy.mesh`` definitions, functions, others) in order.

    A module read from text (``load_mlir``) and the modules the native passes give
    (``propagate``) start as a Rust program (``native``: ``shardwise._native.NativeProgram``,
    about 0.2 KB of heap per op, 0.6 KB resident; ``docs/speed.md``) and build their Python ops, regions and values the first time
    anything asks for them (``op``, and every property and method that reads ops); until
    then ``propagate``, ``copy``, ``to_mlir`` and ``save`` run in Rust without building them.
    Once built, the Python ops are the module (edit them as usual) and ``native`` is ``None``."""

    __slots__ = ("_build", "_native", "_op", "_reuse")
    _op: Op | None
    _native: NativeProgram | None
    _build: Callable[..., Op] | None
    #: What the next build takes again (``importers.native.Reuse``), set by ``assign_native``.
    _reuse: object

    def __init__(self, name: str | None = None, attributes: dict[str, str] | None = None) -> None:
        attrs = dict(attributes or {})
        if name is not None:
            attrs["sym_name"] = quote(name)
        self.op = Op("builtin.module", (), (), attrs, [Region([Block()])])

    @classmethod
    def from_native(cls, program: NativeProgram, build: Callable[[NativeProgram], Op]) -> Module:
        """A module whose ops stay in ``program`` until asked for; ``build`` then makes its
        ``builtin.module`` op (``shardwise.importers.native.build_op``)."""
        m = cls.__new__(cls)
        m._op, m._native, m._build, m._reuse = None, program, build, None
        return m

    @property
    def op(self) -> Op:
        """The ``builtin.module`` op, built from ``native`` on first use. Raises what building
        raises (``ShardingError`` for a sharding shardwise rejects)."""
        op = self._op
        if op is None:
            with _BUILDING:  # threads reading one module build it once
                op = self._op
                if op is None:
                    assert self._native is not None and self._build is not None
                    with no_cyclic_gc():
                        if self._reuse is None:
                            op = self._build(self._native)
                        else:
                            op = self._build(self._native, self._reuse)
                    self.op = op
        return op

    @op.setter
    def op(self, op: Op) -> None:
        self._op, self._native, self._build, self._reuse = op, None, None, None

    @property
    def native(self) -> NativeProgram | None:
        """The Rust program while the Python ops are not built, else ``None``."""
        return self._native

    def with_native(self, program: NativeProgram) -> Module:
        """A module of ``program`` built (when asked) as this one would be. Raises
        ``ValueError`` when this module's Python ops are built."""
        if self._build is None:
            raise ValueError("the module's Python ops are built: it has no native program to replace")
        return Module.from_native(program, self._build)

    def assign_native(self, program: NativeProgram, build: Callable[..., Op], reuse: object = None) -> None:
        """Makes ``program`` this module's content, built (by ``build``) when next asked for, as
        ``from_native``. ``reuse`` (``importers.native.Reuse``): the Python ops and values the
        build takes again, those of the ops the native passes kept (``run_pipeline`` and
        ``propagate(..., in_place=True)`` on a built module), so that they stay this module's;
        without it, Python objects taken from the module before no longer belong to it."""
        self._op, self._native, self._build, self._reuse = None, program, build, reuse

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
        """Named meshes (``sdy.mesh @name``), in definition order (read from the Rust program,
        without building the ops, while the module is ``native``)."""
        program = self._native
        if program is not None:
            return {name: Mesh.parse(text) for name, text in program.meshes()}
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
        if self._native is not None:
            return self.with_native(self._native)  # immutable: shared
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
        if self._native is not None:
            return f"<Module: {len(self._native)} ops, not built>"
        return f"<Module @{self.name}: {len(self.funcs)} funcs, meshes {list(self.meshes)}>"
