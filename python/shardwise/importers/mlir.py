"""``load_mlir``: StableHLO + sdy MLIR text (from ``jax.jit(f).lower(...).as_text()``, XLA's
Shardy dumps, Shardy's lit tests) into the program IR, parsed and verified by jaxlib's MLIR
bindings and walked once.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from sys import intern
from typing import Any

from shardwise._jaxlib import context, diagnostics_line, ir, jax_available
from shardwise._native import MlirReadError, MlirVerifyError, NativeProgram, mlir_nesting
from shardwise.errors import ProgramError
from shardwise.importers.native import build_op
from shardwise.importers.shardings import ShardingReader
from shardwise.ir.attrs import unquote
from shardwise.ir.core import Block, Func, Module, Op, Region, Value
from shardwise.ir.gc import no_cyclic_gc
from shardwise.ir.types import Type, parse_type
from shardwise.mesh import Mesh

#: The readers ``load_mlir`` can use: ``"auto"`` (the native reader, and jaxlib for text it
#: cannot read when jax is installed), ``"native"`` (no jaxlib) and ``"jaxlib"``.
READERS = ("auto", "native", "jaxlib")


def load_mlir(source: str | os.PathLike[str], *, reader: str = "auto") -> Module:
    """Reads a module from MLIR text or from a file path.

    ``reader``: ``"auto"`` reads with the native reader (``rust/src/mlir``: no jaxlib; on a
    transformer step 1.1-1.8 µs per op to read the text, 5.8-7.8 with the IR built, about
    half the time through jaxlib), which also runs the native verifier (``to_mlir`` says what
    it checks), and hands text it cannot read (an op form it has no grammar for, malformed
    text) to jaxlib when jax is installed (a module that does not verify is refused:
    ``reader="jaxlib"`` has jaxlib's verifiers decide instead); ``"native"`` never uses
    jaxlib; ``"jaxlib"`` always does (its parser runs every dialect's verifier). Ops without a
    location get ``loc("PATH":line:column)`` (``"-"`` for text).

    Raises ``ProgramError`` for text that cannot be read (with the line and column; with
    jaxlib, MLIR's diagnostics) or a module that does not verify (the op and its location), for regions nested more than ``MAX_NESTING`` levels deep or
    brackets of all kinds more than ``MAX_BRACKETS`` (checked before jaxlib's recursive parser
    sees the text: about 2,500 levels of regions crash it), ``ShardingError`` (with the op and
    location) for shardings shardwise rejects, ``ImportError`` for ``reader="jaxlib"`` without
    jax, ``ValueError`` for an unknown ``reader``.
    """
    if reader not in READERS:
        raise ValueError(f"reader must be one of {', '.join(READERS)}, got {reader!r}")
    text, path = _read(source)
    # The passes after reading walk regions recursively in places: the same nesting bound
    # holds for both readers.
    check_nesting(text, source)
    if reader != "jaxlib":
        try:
            program = NativeProgram.read(text, path or "-")
        except UnicodeEncodeError:
            check_encodable(text, source)  # a lone surrogate: not Unicode, cannot be read
            raise
        except MlirReadError as e:
            if reader == "native" or not jax_available():
                raise ProgramError(f"cannot parse MLIR{_name(source)}: {e}") from None
        except MlirVerifyError as e:  # jaxlib would refuse it too: no fallback
            raise verify_error(e, source) from None
        else:
            return Module.from_native(program, build_op)
    _ir = ir()
    with context():
        try:
            mlir_module = _ir.Module.parse(text)
        except _ir.MLIRError as e:
            raise ProgramError(f"cannot parse MLIR: {diagnostics_line(e, path)}") from None
        except TypeError:
            check_encodable(text, source)  # nanobind refuses text it cannot encode as UTF-8
            raise
        with no_cyclic_gc():
            try:
                return _Importer().module(mlir_module.operation)
            except RecursionError:
                raise ProgramError(f"MLIR{_name(source)} nests its ops too deeply to be read") from None


#: The deepest brace nesting (regions, and the attribute dictionaries inside them) read; real
#: programs nest a few dozen levels, the importer's recursion goes to about 450.
MAX_NESTING = 256
#: The deepest nesting of brackets of every kind together (``{ [ ( <``: regions, arrays, dense
#: literals, types, locations) read. jaxlib's recursive parser crashes (SIGSEGV) at about 2,500
#: nested braces, 10,000 nested ``[`` and 100,000 nested ``tuple<``, ``loc(fused[`` or
#: ``dense<[``; real programs nest a few dozen.
MAX_BRACKETS = 1024


def check_nesting(text: str, source: str | os.PathLike[str] | None) -> None:
    """``ProgramError`` (with the line) when braces outside string literals and comments nest
    deeper than ``MAX_NESTING``, or brackets of all kinds together (the ``>`` of a function
    type's ``->`` aside) deeper than ``MAX_BRACKETS``, before jaxlib's recursive parser sees
    them; one pass over the bytes in Rust (``shardwise._native.mlir_nesting``)."""
    if text.count("{") <= MAX_NESTING and sum(map(text.count, "{[(<")) <= MAX_BRACKETS:
        return
    try:
        nesting = mlir_nesting(text, MAX_NESTING, MAX_BRACKETS)
    except UnicodeEncodeError:
        check_encodable(text, source)
        raise
    for (deepest, line), limit, what in zip(nesting, (MAX_NESTING, MAX_BRACKETS), ("regions", "brackets")):
        if deepest > limit:
            raise ProgramError(
                f"MLIR{_name(source)} nests {what} {deepest} levels deep (line {line}); at most {limit} are read"
            )


def verify_error(e: MlirVerifyError, source: str | os.PathLike[str] | None) -> ProgramError:
    """The ``ProgramError`` for a native verifier's refusal of ``source`` (MLIR text or its
    path): of the text as read (``load_mlir``'s message, naming the op and its location) or,
    with ``e.after_passes``, of what the native passes made of it (``Module.to_mlir``'s)."""
    if getattr(e, "after_passes", False):
        return ProgramError(f"the module does not verify: {e.op_name} at {e.location}: {e.detail}")
    return ProgramError(f"invalid MLIR{_name(source)}: {e.op_name} at {e.location}: {e.detail}")


def check_encodable(text: str, source: str | os.PathLike[str] | None) -> None:
    """``ProgramError`` (with the line) for text holding a lone surrogate (from a non-UTF-8
    string decoded with ``surrogateescape``), which is not Unicode and cannot be parsed."""
    try:
        text.encode()
    except UnicodeEncodeError as e:
        line = text.count("\n", 0, e.start) + 1
        raise ProgramError(
            f"MLIR{_name(source)} is not valid Unicode text: character {text[e.start]!r} at line {line}"
        ) from None


#: Characters every MLIR module's text has and file names almost never do: a one-line string
#: without them (and without spaces), or ending in ``.mlir``, is taken for a path.
_MLIR_SYNTAX = re.compile(r"[{}()<>=%@]")


def _read(source: str | os.PathLike[str]) -> tuple[str, str | None]:
    """The text of ``source`` and the path it was read from (``None`` for text)."""
    if not isinstance(source, (str, os.PathLike)):
        raise ProgramError(f"load_mlir takes MLIR text or a path (str or os.PathLike), got {type(source).__name__}")
    path_like = isinstance(source, os.PathLike) or (
        "\n" not in source
        and len(source) < 4096
        and (
            Path(source).exists()
            or source.endswith(".mlir")
            or not (_MLIR_SYNTAX.search(source) or any(c.isspace() for c in source.strip()))
        )
    )
    if path_like:
        path = Path(source)
        if not path.exists():
            raise ProgramError(
                f"no such file: {str(source)!r} (load_mlir takes MLIR text or the path of an existing file)"
            )
        if path.is_dir():
            raise ProgramError(f"{str(source)!r} is a directory, expected an MLIR file")
        try:
            return path.read_text(), os.fspath(source)
        except (OSError, UnicodeDecodeError) as e:
            raise ProgramError(f"cannot read {source}: {e}") from None
    assert isinstance(source, str)
    return source, None


def _name(source: str | os.PathLike[str] | None) -> str:
    """`` from PATH`` for a path (or one-line text: a path that does not exist), else empty."""
    if source is None:
        return ""
    return f" from {source}" if isinstance(source, os.PathLike) or "\n" not in str(source) else ""


_VALUE_ATTR = re.compile(r"<\{value = (.*)\}> : \(")


def _attributes_from_asm(o: Any) -> dict[str, str]:
    """The attributes of a constant whose ``value`` jaxlib's Python bindings cannot hand over
    (dense complex elements: indexing the attribute map raises ``TypeError``), read from the
    op's generic form as MLIR prints it. ``ProgramError`` for any other op."""
    names = [str(n) for n in o.attributes]
    text = o.get_asm(print_generic_op_form=True, large_elements_limit=None)
    m = _VALUE_ATTR.search(text)
    if names != ["value"] or m is None:
        raise ProgramError(f"{o.name} at {o.location}: jaxlib's Python bindings cannot read its attributes {names}")
    return {"value": m.group(1)}


class _Importer(ShardingReader):
    """One walk over jaxlib's module. jaxlib uniques types and attributes in its context, so
    each distinct one is printed once (``type_of``, ``text_of``; a transformer step has about
    a dozen distinct result types and thirty attributes), and op locations are kept unprinted
    (``Op.location``): printing them all took 37-50 ms of a 22k-op step's 330 ms."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[Any, Value] = {}
        self.types: dict[Any, Type] = {}
        self.texts: dict[Any, str] = {}

    def type_of(self, t: Any) -> Type:
        """Our type of jaxlib's type ``t``."""
        known = self.types.get(t)
        if known is None:
            known = self.types[t] = parse_type(str(t))
        return known

    def text_of(self, attr: Any) -> str:
        """The MLIR text of jaxlib's attribute ``attr``."""
        known = self.texts.get(attr)
        if known is None:
            known = self.texts[attr] = str(attr)
        return known

    def module(self, mop: Any) -> Module:
        module = Module()
        module.op.attributes = {n: str(mop.attributes[n]) for n in mop.attributes}
        module.op.location = str(mop.location)
        body = mop.regions[0].blocks[0]
        for o in body.operations:
            if o.operation.name == "sdy.mesh":
                self.meshes[unquote(str(o.attributes["sym_name"]))] = Mesh.parse(str(o.attributes["mesh"]))
        for o in body.operations:
            module.op.regions[0].entry.append(self.op(o))
        return module

    def op(self, o: Any) -> Op:
        o = o.operation  # the generic view: OpView subclasses shadow `name` (func.func's is its symbol)
        if o.name == "func.func":
            return self.func(o)
        # Op names and attribute names are interned: passes compare them with literals and look
        # them up in sets and dicts, which an identical object answers without comparing text
        # (a 22k-op step's pipeline ran 6-8% faster).
        attributes = o.attributes
        try:
            attrs = {intern(n): self.text_of(attributes[n]) for n in attributes}
        except TypeError:
            attrs = _attributes_from_asm(o)
        op = Op(
            intern(o.name), [self.value(v, o) for v in o.operands], [self.type_of(r.type) for r in o.results], attrs
        )
        op._location = o.location
        for r, v in zip(o.results, op.results):
            self.values[r] = v
        for region in o.regions:
            op.add_region(self.region(region))
        if getattr(o, "successors", None):
            raise ProgramError(f"{op.where()}: ops with successor blocks are not supported")
        self.take_shardings(op)
        return op

    def func(self, o: Any) -> Func:
        ftype = o.attributes["function_type"].value
        attrs = {
            n: str(o.attributes[n])
            for n in o.attributes
            if n not in ("function_type", "arg_attrs", "res_attrs", "sym_name")
        }
        blocks = list(o.regions[0].blocks)
        arg_types = [parse_type(str(t)) for t in ftype.inputs]
        f = Func(
            unquote(str(o.attributes["sym_name"])),
            arg_types,
            [parse_type(str(t)) for t in ftype.results],
            attrs,
            str(o.location),
            declaration=not blocks,
        )
        for i, d in enumerate(self._dicts(o, "arg_attrs")):
            f.args[i].sharding = self.sharding(d.pop("sdy.sharding", None), f, f"argument {i}") if blocks else None
            f.arg_attrs[i] = d
        for i, d in enumerate(self._dicts(o, "res_attrs")):
            f.result_shardings[i] = self.sharding(d.pop("sdy.sharding", None), f, f"result {i}")
            f.result_attrs[i] = d
        if blocks:
            if len(blocks) > 1:
                raise ProgramError(f"{f.where()}: functions with several blocks are not supported")
            for a, v in zip(blocks[0].arguments, f.args):
                self.values[a] = v
            body = f.body
            for inner in blocks[0].operations:
                body.append(self.op(inner))
        return f

    @staticmethod
    def _dicts(o: Any, name: str) -> list[dict[str, str]]:
        if name not in o.attributes:
            return []
        return [{na.name: str(na.attr) for na in (d[i] for i in range(len(d)))} for d in o.attributes[name]]

    def region(self, r: Any) -> Region:
        region = Region()
        for b in r.blocks:
            block = region.append(Block([self.type_of(a.type) for a in b.arguments]))
            for a, v in zip(b.arguments, block.args):
                self.values[a] = v
            for inner in b.operations:
                block.append(self.op(inner))
        return region

    def value(self, v: Any, user: Any) -> Value:
        try:
            return self.values[v]
        except KeyError:
            raise ProgramError(
                f"{user.name} at {user.location}: operand defined outside the module or after its use"
            ) from None
