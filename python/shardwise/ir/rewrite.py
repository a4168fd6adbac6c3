"""Editing helpers for the program IR, in the spirit of MLIR's rewriter API: where an op or value
lives (parent op, block, enclosing function), inserting, moving and erasing ops, use lists
(``Uses``), replacing uses, cloning ops and regions with a value mapping (``Mapping``, from
``ir/clone.py``), block argument edits, and a module symbol table with MLIR's renaming of clashing symbols
(``SymbolTable``).

None of these helpers verifies the IR; ``Module.to_mlir()`` does (the native verifier, or jaxlib's).

Use lists follow MLIR's order: a value's most recent use comes first (so, right after import, in
reverse program order). Passes that must reproduce MLIR's iteration over users rely on this.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from shardwise.ir.attrs import quote, unquote
from shardwise.ir.clone import Mapping, clone_func, clone_op, clone_region
from shardwise.ir.core import Block, Func, Module, Op, Value
from shardwise.ir.types import Type

__all__ = [
    "DeferredInserts",
    "Mapping",
    "SymbolTable",
    "Uses",
    "add_block_arg",
    "ancestors",
    "append_op",
    "block_of",
    "clone_func",
    "clone_op",
    "clone_region",
    "enclosing",
    "enclosing_func",
    "erase_block_args",
    "erase_op",
    "erase_ops",
    "index_in_block",
    "insert_after",
    "insert_after_value",
    "insert_at_start",
    "insert_before",
    "is_ancestor",
    "is_before_in_block",
    "move_after",
    "move_before",
    "owning_op",
    "parent_op",
    "replace_all_uses",
    "symbol_name",
    "walk_block",
]

Use = tuple[Op, int]


# ---------------------------------------------------------------------------------- structure


def parent_op(op: Op) -> Op | None:
    """The op whose region holds ``op`` (the ``builtin.module`` op for a top-level op), or
    ``None`` for a detached op."""
    block = op.parent
    if block is None or block.parent is None:
        return None
    return block.parent.parent


def ancestors(op: Op) -> Iterator[Op]:
    """The ops enclosing ``op``, innermost first (``op`` itself not included)."""
    p = parent_op(op)
    while p is not None:
        yield p
        p = parent_op(p)


def enclosing(op: Op, name: str) -> Op | None:
    """The innermost op named ``name`` that encloses ``op`` (not ``op`` itself), or ``None``."""
    for a in ancestors(op):
        if a.name == name:
            return a
    return None


def enclosing_func(op: Op) -> Func | None:
    """The ``func.func`` enclosing ``op`` (``op`` itself if it is one), or ``None``."""
    if isinstance(op, Func):
        return op
    for a in ancestors(op):
        if isinstance(a, Func):
            return a
    return None


def is_ancestor(ancestor: Op, op: Op) -> bool:
    """``ancestor`` is ``op`` or encloses it (MLIR's ``isAncestor``)."""
    return ancestor is op or any(a is ancestor for a in ancestors(op))


def block_of(value: Value) -> Block | None:
    """The block that defines ``value``: the owner of a block argument, the block holding the
    defining op of a result (``None`` if that op is detached)."""
    if isinstance(value.owner, Block):
        return value.owner
    return value.owner.parent


def owning_op(value: Value) -> Op | None:
    """The defining op of a result, or the op whose region holds the block of a block argument
    (Shardy's ``getOwningOp``); ``None`` for a detached block."""
    if isinstance(value.owner, Op):
        return value.owner
    region = value.owner.parent
    return None if region is None else region.parent


def index_in_block(op: Op) -> int:
    """Position of ``op`` in its block; ``ValueError`` for a detached op."""
    if op.parent is None:
        raise ValueError(f"{op.where()} is not in a block")
    try:
        # Ops compare by identity, so list.index finds this very op (a scan in C).
        return op.parent.ops.index(op)
    except ValueError:
        raise ValueError(f"{op.where()} is not in its parent block") from None


def is_before_in_block(a: Op, b: Op) -> bool:
    """``a`` comes strictly before ``b``; both must be in the same block."""
    if a.parent is not b.parent or a.parent is None:
        raise ValueError(f"{a.where()} and {b.where()} are not in the same block")
    return index_in_block(a) < index_in_block(b)


def walk_block(block: Block) -> Iterator[Op]:
    """Every op of ``block`` and the ops nested in them, in pre-order. The block's op list is
    copied first, so erasing the op just yielded is safe."""
    for op in list(block.ops):
        yield from op.walk()


# ---------------------------------------------------------------------------------- insertion


def _insert(block: Block, at: int, ops: Sequence[Op]) -> None:
    for k, op in enumerate(ops):
        if op.parent is not None:
            raise ValueError(f"{op.where()} is already in a block; erase or move it first")
        op.parent = block
        block.ops.insert(at + k, op)


def insert_before(anchor: Op, *ops: Op) -> None:
    """Inserts detached ``ops`` (in order) right before ``anchor``."""
    if anchor.parent is None:
        raise ValueError(f"{anchor.where()} is not in a block")
    _insert(anchor.parent, index_in_block(anchor), ops)


def insert_after(anchor: Op, *ops: Op) -> None:
    """Inserts detached ``ops`` (in order) right after ``anchor``."""
    if anchor.parent is None:
        raise ValueError(f"{anchor.where()} is not in a block")
    _insert(anchor.parent, index_in_block(anchor) + 1, ops)


class DeferredInserts:
    """Insertions before anchors, applied by ``flush()`` with one pass over each block instead
    of one position search per insertion. Ops inserted before the same anchor keep their
    order (as repeated ``insert_before`` would); until ``flush`` they are detached, so code in
    between must not read block positions of the anchors' blocks."""

    __slots__ = ("_pending", "_blocks")

    def __init__(self) -> None:
        self._pending: dict[int, list[Op]] = {}
        self._blocks: dict[int, Block] = {}

    def before(self, anchor: Op, *ops: Op) -> None:
        """Queues detached ``ops`` (in order) right before ``anchor``."""
        if anchor.parent is None:
            raise ValueError(f"{anchor.where()} is not in a block")
        for op in ops:
            if op.parent is not None:
                raise ValueError(f"{op.where()} is already in a block; erase or move it first")
        self._pending.setdefault(id(anchor), []).extend(ops)
        self._blocks[id(anchor.parent)] = anchor.parent

    def flush(self) -> None:
        """Inserts everything queued; anchors erased meanwhile lose their queue's place (an
        error)."""
        pending, self._pending = self._pending, {}
        blocks, self._blocks = self._blocks, {}
        for block in blocks.values():
            out: list[Op] = []
            for op in block.ops:
                queued = pending.pop(id(op), None)
                if queued:
                    for q in queued:
                        q.parent = block
                    out.extend(queued)
                out.append(op)
            block.ops[:] = out
        if pending:
            raise ValueError(
                f"{sum(len(v) for v in pending.values())} queued ops lost their anchor (erased before flush)"
            )


def insert_at_start(block: Block, *ops: Op) -> None:
    """Inserts detached ``ops`` (in order) at the start of ``block``."""
    _insert(block, 0, ops)


def append_op(block: Block, *ops: Op) -> None:
    """Appends detached ``ops`` (in order) at the end of ``block``."""
    _insert(block, len(block.ops), ops)


def insert_after_value(value: Value, *ops: Op) -> None:
    """Inserts ``ops`` right after the op defining ``value``, or at the start of its block for a
    block argument (MLIR's ``setInsertionPointAfterValue``)."""
    if isinstance(value.owner, Block):
        insert_at_start(value.owner, *ops)
    else:
        insert_after(value.owner, *ops)


def _detach(op: Op) -> None:
    if op.parent is not None:
        block = op.parent
        block.ops.pop(index_in_block(op))
        op.parent = None


def move_before(op: Op, anchor: Op) -> None:
    """Moves ``op`` (attached or not) right before ``anchor``."""
    _detach(op)
    insert_before(anchor, op)


def move_after(op: Op, anchor: Op) -> None:
    """Moves ``op`` (attached or not) right after ``anchor``."""
    _detach(op)
    insert_after(anchor, op)


def erase_op(op: Op, uses: Uses | None = None) -> None:
    """Removes ``op`` (and everything nested in it) from its block; with ``uses``, drops the
    uses made by the erased ops. Raises ``ValueError`` if ``uses`` shows that a result of
    ``op`` is still used outside it (MLIR asserts the same)."""
    if uses is not None:
        _drop_uses(op, uses)
    _detach(op)


def _drop_uses(op: Op, uses: Uses) -> None:
    """Drops the uses made by ``op`` and the ops nested in it; ``ValueError`` if a result of
    ``op`` is still used outside it."""
    inner = {id(o) for o in op.walk()}
    for r in op.results:
        if any(id(u) not in inner for u, _ in uses.of(r)):
            raise ValueError(f"cannot erase {op.where()}: result {r.index} still has uses")
    uses.drop(op)


def erase_ops(ops: Iterable[Op], uses: Uses | None = None, *, release: bool = False) -> None:
    """``erase_op`` for each of ``ops``, with one pass over each block they are in instead of
    one search per op (erasing k ops of an n-op block costs O(n + k), not O(n·k)). With
    ``release`` (for ops that nothing refers to any more), each erased op is also emptied (see
    ``_release``), so that reference counting frees it at once instead of the cyclic
    collector."""
    ops = list(ops)
    by_block: dict[int, tuple[Block, set[int]]] = {}
    for op in ops:
        if uses is not None:
            _drop_uses(op, uses)
        block = op.parent
        if block is not None:
            by_block.setdefault(id(block), (block, set()))[1].add(id(op))
            op.parent = None
    for block, gone in by_block.values():
        block.ops[:] = [o for o in block.ops if id(o) not in gone]
    if release:
        for op in ops:
            _release(op)


def _release(op: Op) -> None:
    """Empties a detached op and everything nested in it (results, operands, regions, blocks'
    ops and arguments): an op and its results refer to each other, a cycle that otherwise waits
    for the cyclic collector. The op must not be used afterwards."""
    stack = [op]
    while stack:
        o = stack.pop()
        for r in o.regions:
            for b in r.blocks:
                stack.extend(b.ops)
                b.ops.clear()
                b.args.clear()
            r.blocks.clear()
        o.regions.clear()
        o.results.clear()
        o.operands.clear()


# ---------------------------------------------------------------------------------- use lists


class Uses:
    """Use lists of the values used under ``root`` (a module, an op, or a block), in MLIR's
    order (most recent use first), as the IR is when it is built. The editing methods keep them
    up to date; IR edits made without them are not seen (build a new ``Uses`` then)."""

    __slots__ = ("_uses",)

    def __init__(self, root: Module | Op | Block | None = None) -> None:
        uses: dict[Value, list[Use]] = {}
        self._uses = uses
        if root is None:
            return
        if isinstance(root, Module):
            ops: Iterable[Op] = root.walk()
        elif isinstance(root, Block):
            ops = (o for op in root.ops for o in op.walk())
        else:
            ops = root.walk()
        get = uses.get
        for op in ops:
            for i, v in enumerate(op.operands):
                lst = get(v)
                if lst is None:
                    uses[v] = [(op, i)]
                else:
                    lst.append((op, i))
        for lst in uses.values():
            lst.reverse()

    def of(self, value: Value) -> list[Use]:
        """The uses ``(user op, operand index)`` of ``value`` (a copy)."""
        return list(self._uses.get(value, ()))

    def users(self, value: Value) -> list[Op]:
        """The users of ``value``, one entry per use, in use-list order."""
        return [op for op, _ in self._uses.get(value, ())]

    def unique_users(self, value: Value) -> list[Op]:
        """The distinct users of ``value`` in use-list order."""
        seen: set[int] = set()
        out = []
        for op, _ in self._uses.get(value, ()):
            if id(op) not in seen:
                seen.add(id(op))
                out.append(op)
        return out

    def has_uses(self, value: Value) -> bool:
        """``value`` is used."""
        return bool(self._uses.get(value))

    def any_used(self, values: Iterable[Value]) -> bool:
        """Some value of ``values`` is used."""
        uses = self._uses
        for v in values:
            if uses.get(v):
                return True
        return False

    def has_one_use(self, value: Value) -> bool:
        """``value`` has exactly one use (MLIR's ``hasOneUse``)."""
        return len(self._uses.get(value, ())) == 1

    def count(self, value: Value) -> int:
        """The number of uses of ``value``."""
        return len(self._uses.get(value, ()))

    def _remove(self, value: Value, op: Op, index: int) -> None:
        lst = self._uses.get(value)
        if lst is None:
            return
        try:
            # Ops compare by identity: the search runs in C (values used by thousands of ops).
            del lst[lst.index((op, index))]
        except ValueError:
            return

    def _add(self, value: Value, op: Op, index: int) -> None:
        self._uses.setdefault(value, []).insert(0, (op, index))

    def set_operand(self, op: Op, index: int, value: Value) -> None:
        """``op.operands[index] = value``, updating the use lists."""
        self._remove(op.operands[index], op, index)
        op.operands[index] = value
        self._add(value, op, index)

    def add(self, op: Op, *, nested: bool = True) -> None:
        """Registers the operands of ``op`` and (``nested``) of the ops nested in it (a new
        op; ``nested=False`` when its regions were moved from ops already registered)."""
        for o in op.walk() if nested and op.regions else (op,):
            for i, v in enumerate(o.operands):
                self._add(v, o, i)

    def drop(self, op: Op, *, nested: bool = True) -> None:
        """Forgets the operands of ``op`` and (``nested``) of the ops nested in it (an op being
        erased)."""
        for o in op.walk() if nested and op.regions else (op,):
            for i, v in enumerate(o.operands):
                self._remove(v, o, i)

    def replace_all_uses(self, old: Value, new: Value, *, except_ops: Iterable[Op] = ()) -> None:
        """Makes every use of ``old`` (but those by ``except_ops``) use ``new``."""
        skip = {id(o) for o in except_ops}
        for op, i in self.of(old):
            if id(op) not in skip:
                self.set_operand(op, i, new)

    def replace_uses_if(self, old: Value, new: Value, pred: object) -> None:
        """Makes the uses ``(op, index)`` of ``old`` for which ``pred(op, index)`` is true use
        ``new``."""
        assert callable(pred)
        for op, i in self.of(old):
            if pred(op, i):
                self.set_operand(op, i, new)


def replace_all_uses(old: Value, new: Value, root: Module | Op | Block, *, except_ops: Iterable[Op] = ()) -> int:
    """Replaces every use of ``old`` under ``root`` (except uses by ``except_ops``) with
    ``new``, walking ``root``; returns how many uses were replaced. Prefer ``Uses`` when
    replacing many values."""
    skip = {id(o) for o in except_ops}
    if isinstance(root, Module):
        ops: Iterable[Op] = root.walk()
    elif isinstance(root, Block):
        ops = (o for op in root.ops for o in op.walk())
    else:
        ops = root.walk()
    n = 0
    for op in ops:
        if id(op) in skip:
            continue
        for i, v in enumerate(op.operands):
            if v is old:
                op.operands[i] = new
                n += 1
    return n


# ---------------------------------------------------------------------------------- block arguments


def add_block_arg(block: Block, type: Type, index: int | None = None) -> Value:
    """Adds an argument of ``type`` to ``block`` at ``index`` (default: last), renumbering the
    following ones. For a function's entry block, also update ``Func.arg_attrs``."""
    if index is None or index == len(block.args):
        return block.add_arg(type)
    v = Value(type, block, index)
    block.args.insert(index, v)
    for i, a in enumerate(block.args):
        a.index = i
    return v


def erase_block_args(block: Block, indices: Iterable[int]) -> None:
    """Removes the arguments at ``indices`` (they must be unused) and renumbers the rest."""
    drop = set(indices)
    block.args[:] = [a for i, a in enumerate(block.args) if i not in drop]
    for i, a in enumerate(block.args):
        a.index = i


# ---------------------------------------------------------------------------------- symbols


class SymbolTable:
    """The functions and meshes of a module by symbol name, with MLIR's ``SymbolTable``
    behaviour on insertion: a clashing name becomes ``name_N`` with one counter shared by all
    insertions into this table."""

    __slots__ = ("module", "_symbols", "_counter")

    def __init__(self, module: Module) -> None:
        self.module = module
        self._symbols: dict[str, Op] = {}
        self._counter = 0
        for op in module.ops:
            name = symbol_name(op)
            if name is not None:
                self._symbols.setdefault(name, op)

    def lookup(self, name: str) -> Op | None:
        """The symbol ``@name`` (a function or a mesh), or ``None``."""
        return self._symbols.get(name.removeprefix("@"))

    def lookup_func(self, name: str) -> Func:
        """The function ``@name``; ``KeyError`` naming it otherwise."""
        op = self._symbols.get(name.removeprefix("@"))
        if not isinstance(op, Func):
            raise KeyError(f"no function @{name.removeprefix('@')} in the module")
        return op

    def __contains__(self, name: str) -> bool:
        return name.removeprefix("@") in self._symbols

    def insert(self, op: Op, before: Op | None = None) -> str:
        """Adds ``op`` (detached: appended to the module, or put before ``before``; or already
        in the module) and returns its name, renamed ``name_N`` if the name is taken."""
        if op.parent is None:
            if before is not None:
                insert_before(before, op)
            else:
                append_op(self.module.op.regions[0].entry, op)
        name = symbol_name(op)
        assert name is not None, f"{op.where()} has no sym_name"
        if name not in self._symbols:
            self._symbols[name] = op
            return name
        if self._symbols[name] is op:
            return name
        while True:
            candidate = f"{name}_{self._counter}"
            self._counter += 1
            if candidate not in self._symbols:
                break
        op.attributes["sym_name"] = quote(candidate)
        self._symbols[candidate] = op
        return candidate

    def erase(self, op: Op) -> None:
        """Removes ``op`` from the table and from the module."""
        name = symbol_name(op)
        if name is not None and self._symbols.get(name) is op:
            del self._symbols[name]
        erase_op(op)

    def remove(self, op: Op) -> None:
        """Forgets ``op`` (keeping it in the module)."""
        name = symbol_name(op)
        if name is not None and self._symbols.get(name) is op:
            del self._symbols[name]


def symbol_name(op: Op) -> str | None:
    """The ``sym_name`` of ``op`` (unquoted), or ``None``."""
    text = op.attributes.get("sym_name")
    return None if text is None else unquote(text)
