"""The op graph of the program IR: functions, ops, regions, blocks and values, as in MLIR.
``Module``, the top-level container, is in ``ir/core.py`` (which also re-exports these).

Every op keeps its name, operands, results, attributes (attribute name -> the attribute's MLIR
text, as jaxlib prints it) and regions, so a module read from MLIR is written back unchanged.
Shardings are not attributes: each value carries its ``TensorSharding`` (``Value.sharding``),
and ops with operand-side shardings (``sdy.manual_computation``) carry ``operand_shardings``;
which attribute holds them for which op is decided in ``ir/slots.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain

from shardwise.ir.types import TensorType, Type
from shardwise.sharding import TensorSharding

__all__ = ["Block", "Func", "Op", "Region", "Value", "tensor_type"]


class Value:
    """An SSA value: an op result or a block argument, with its type and (optional) sharding."""

    __slots__ = ("type", "owner", "index", "sharding")

    def __init__(self, type: Type, owner: Op | Block, index: int, sharding: TensorSharding | None = None) -> None:
        self.type = type
        self.owner = owner
        self.index = index
        self.sharding = sharding

    @property
    def is_block_arg(self) -> bool:
        return isinstance(self.owner, Block)

    @property
    def defining_op(self) -> Op | None:
        return self.owner if isinstance(self.owner, Op) else None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    def __repr__(self) -> str:
        kind = "arg" if self.is_block_arg else getattr(self.owner, "name", "?")
        return f"<Value {kind}#{self.index}: {self.type}>"


class Block:
    """A block: arguments and a list of ops (the last one its terminator)."""

    __slots__ = ("args", "ops", "parent")

    def __init__(self, arg_types: Sequence[Type] = ()) -> None:
        self.args: list[Value] = [Value(t, self, i) for i, t in enumerate(arg_types)]
        self.ops: list[Op] = []
        self.parent: Region | None = None

    def add_arg(self, type: Type, sharding: TensorSharding | None = None) -> Value:
        v = Value(type, self, len(self.args), sharding)
        self.args.append(v)
        return v

    def append(self, op: Op) -> Op:
        op.parent = self
        self.ops.append(op)
        return op


class Region:
    """A region of an op: a list of blocks (StableHLO regions have one)."""

    __slots__ = ("blocks", "parent")

    def __init__(self, blocks: Sequence[Block] = ()) -> None:
        self.blocks: list[Block] = []
        self.parent: Op | None = None
        for b in blocks:
            self.append(b)

    def append(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def entry(self) -> Block:
        return self.blocks[0]


class Op:
    """An operation. ``attributes`` maps names to MLIR attribute text (sharding attributes are
    held by the values instead); ``location`` is the source location text, if known."""

    __slots__ = ("name", "operands", "results", "attributes", "regions", "parent", "operand_shardings", "_location")

    def __init__(
        self,
        name: str,
        operands: Sequence[Value] = (),
        result_types: Sequence[Type] = (),
        attributes: dict[str, str] | None = None,
        regions: Sequence[Region] = (),
        location: str | None = None,
    ) -> None:
        self.name = name
        self.operands: list[Value] = list(operands)
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attributes: dict[str, str] = dict(attributes or {})
        self.regions: list[Region] = []
        for r in regions:
            self.add_region(r)
        self.parent: Block | None = None
        self.operand_shardings: tuple[TensorSharding, ...] | None = None
        self._location: object = location

    @property
    def location(self) -> str | None:
        """The source location as MLIR prints it (``loc("model.py":12:3)``), or ``None``.

        The importer keeps jaxlib's location object and prints it the first time this is read
        (``shardwise.importers.mlir``): printing every op's location took 37-50 ms of loading
        a 22k-op program (330 ms), and only error messages and explanations read it. Copies share the
        unprinted object (``copy_location``)."""
        loc = self._location
        if loc is None or type(loc) is str:
            return loc
        text = str(loc)
        self._location = text
        return text

    @location.setter
    def location(self, value: str | None) -> None:
        self._location = value

    def copy_location(self, other: Op) -> None:
        """Gives this op ``other``'s location without printing it."""
        self._location = other._location

    def add_region(self, region: Region) -> Region:
        region.parent = self
        self.regions.append(region)
        return region

    @property
    def result(self) -> Value:
        """The single result; ``ValueError`` if the op has not exactly one."""
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results, not 1")
        return self.results[0]

    def walk(self) -> Iterator[Op]:
        """This op and every op nested in its regions, in pre-order. Blocks are read as the
        walk reaches them, so ops erased or added behind the walk are seen as by a recursive
        walk; the walk itself keeps an explicit stack (no generator per nesting level)."""
        yield self
        if not self.regions:
            return
        stack = [_nested(self)]
        while stack:
            for op in stack[-1]:
                yield op
                if op.regions:
                    stack.append(_nested(op))
                    break
            else:
                stack.pop()

    def walk_nested(self) -> Iterator[Op]:
        """Every op nested in this op's regions (not the op itself), in pre-order."""
        walk = self.walk()
        next(walk)
        return walk

    def where(self) -> str:
        """``op_name at loc`` for error messages."""
        return f"{self.name}" + (f" at {self.location}" if self.location else "")

    def __repr__(self) -> str:
        return f"<Op {self.name}: {len(self.operands)} operands, {len(self.results)} results>"


class Func(Op):
    """A ``func.func``: its entry block arguments are the function arguments (with their
    shardings), ``result_types`` / ``result_shardings`` describe the results, ``arg_attrs`` /
    ``result_attrs`` hold the other per-argument/result attributes (MLIR text)."""

    __slots__ = ("result_types", "result_shardings", "arg_attrs", "result_attrs")

    def __init__(
        self,
        sym_name: str,
        arg_types: Sequence[Type] = (),
        result_types: Sequence[Type] = (),
        attributes: dict[str, str] | None = None,
        location: str | None = None,
        declaration: bool = False,
    ) -> None:
        attrs = {"sym_name": _quote(sym_name), **(attributes or {})}
        region = Region() if declaration else Region([Block(arg_types)])
        super().__init__("func.func", (), (), attrs, [region], location)
        self.result_types: list[Type] = list(result_types)
        self.result_shardings: list[TensorSharding | None] = [None] * len(result_types)
        self.arg_attrs: list[dict[str, str]] = [{} for _ in arg_types]
        self.result_attrs: list[dict[str, str]] = [{} for _ in result_types]

    @property
    def sym_name(self) -> str:
        return _unquote(self.attributes["sym_name"])

    @property
    def body(self) -> Block:
        return self.regions[0].entry

    @property
    def args(self) -> list[Value]:
        return self.regions[0].entry.args if self.regions[0].blocks else []

    @property
    def arg_types(self) -> list[Type]:
        return [a.type for a in self.args]

    @property
    def return_op(self) -> Op:
        return self.body.ops[-1]

    def function_type(self) -> str:
        res = ", ".join(str(t) for t in self.result_types)
        res = res if len(self.result_types) == 1 else f"({res})"
        return f"({', '.join(str(t) for t in self.arg_types)}) -> {res}"

    def __repr__(self) -> str:
        return f"<Func @{self.sym_name}: {self.function_type()}>"


def _nested(op: Op) -> Iterator[Op]:
    """The ops directly in ``op``'s regions, block by block, read live: each block's op list is
    iterated by a list iterator taken when the walk reaches the block, so ops appended to it
    later are seen. One region with one block, the common case, is its list's own iterator;
    several are chained in C (``itertools.chain``), with no Python generator in between."""
    regions = op.regions
    if len(regions) == 1:
        blocks = regions[0].blocks
        if len(blocks) == 1:
            return iter(blocks[0].ops)
    return chain.from_iterable(b.ops for r in regions for b in r.blocks)


def _quote(s: str) -> str:
    from shardwise.ir.attrs import quote

    return quote(s)


def _unquote(s: str) -> str:
    from shardwise.ir.attrs import unquote

    return unquote(s)


def tensor_type(v: Value) -> TensorType:
    """The value's tensor type; ``TypeError`` naming the value otherwise."""
    if not isinstance(v.type, TensorType):
        raise TypeError(f"{v} is not a ranked tensor")
    return v.type
