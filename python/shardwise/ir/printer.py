"""The program IR as MLIR text (``Module.to_mlir`` / ``Module.save``; as in MLIR, the printer is
part of the IR and the parser, ``shardwise.importers.mlir``, is not).

The IR is written in MLIR's generic op form (every attribute in the attribute dictionary, the
shardings put back where ``ir/slots.py`` says), which the native printer (or jaxlib) reads,
verifies and prints in the usual custom form; so shardings come out exactly as Shardy prints
them.
"""

from __future__ import annotations

import os
from itertools import islice
from typing import TYPE_CHECKING

from shardwise._jaxlib import context, diagnostics_line, ir, jax_available
from shardwise._native import MlirReadError, MlirVerifyError, print_mlir
from shardwise.errors import ProgramError
from shardwise.files import write_atomic
from shardwise.ir.attrs import attr_name
from shardwise.ir.ops import Block, Func, Op, Value
from shardwise.ir.slots import OPERAND_SLOTS, Slot, result_slot
from shardwise.sharding import DimSharding, TensorSharding

if TYPE_CHECKING:
    from shardwise.ir.core import Module

__all__ = ["Writer", "save", "to_mlir"]


#: The printers ``to_mlir`` can use for the custom form: ``"auto"`` (shardwise's own, with
#: jaxlib for an op it has no custom form for), ``"native"`` and ``"jaxlib"``.
PRINTERS = ("auto", "native", "jaxlib")


def to_mlir(module: Module, *, generic: bool = False, printer: str = "auto") -> str:
    """MLIR text of ``module``: the custom form as jaxlib prints it, or (``generic=True``) the
    generic op form.

    ``printer``:

    * ``"native"``: shardwise's native verifier (``rust/src/mlir/verify/``: op arities, the
      shapes of element-wise ops, ``reshape``, ``transpose``, ``broadcast_in_dim``,
      ``concatenate``, ``dot`` and ``dot_general``, what regions take and return, terminators
      and return types, calls against their callee's signature, unique symbols, sharding rules
      against the op, shardings against their meshes and shapes; sources in the module) and
      printer (``rust/src/mlir/printer.rs``, byte-identical to jaxlib's printing on the
      conformance corpus and real JAX programs, measured in
      ``tests/python/test_native_reader.py``); no jax needed. An op it has no custom form for
      is printed in the generic form.
    * ``"jaxlib"``: jaxlib parses the generic form, which runs every dialect's verifier
      (element types and the type inference of every op too), and prints it.
    * ``"auto"`` (the default): ``"native"``, except that a module with an op of a dialect
      jaxlib knows but the native printer has no custom form for is printed by jaxlib when jax
      is installed.

    Raises ``ProgramError`` when the module does not verify (the message names the op, its
    location and the rule), ``ValueError`` for an unknown ``printer``."""
    if printer not in PRINTERS:
        raise ValueError(f"printer must be one of {', '.join(PRINTERS)}, got {printer!r}")
    program = module.native
    if program is not None and not generic and printer != "jaxlib":
        # Verified when read and after each native pass run on it.
        strict = printer == "auto" and jax_available()
        try:
            return program.print(strict=strict)
        except MlirReadError as e:
            if not e.unsupported:
                raise ProgramError(f"the module cannot be printed natively: {e}") from None
    text = Writer().module(module)
    if generic:
        return text
    if printer != "jaxlib":
        strict = printer == "auto" and jax_available()
        try:
            return print_mlir(text, verify=True, strict=strict)
        except MlirVerifyError as e:
            # The op in the module: its name and the location it was read from (the text
            # verified is the writer's, whose lines mean nothing to the user).
            op = next(islice(module.op.walk(), e.op_index, None), None)
            where = op.where() if op is not None and op.name == e.op_name else e.op_name
            raise ProgramError(f"the module does not verify: {where}: {e.detail}") from None
        except MlirReadError as e:
            if not (strict and e.unsupported):  # only a writer bug gets here: the text is ours
                raise ProgramError(f"the module cannot be printed natively: {e}") from None
    _ir = ir()
    with context():
        try:
            m = _ir.Module.parse(text)
        except _ir.MLIRError as e:
            raise ProgramError(f"the module does not verify: {diagnostics_line(e)}") from None
        return str(m)


def save(module: Module, path: str | os.PathLike[str]) -> None:
    """Writes ``to_mlir(module)`` to ``path`` through a temporary file and a rename, so a failed
    export never leaves a half-written file."""
    write_atomic(path, to_mlir(module))


class Writer:
    """Writes modules in the generic op form, naming values ``%v1``, ``%v2``, ... in order
    (``names``: value id -> name, kept after writing); ``locations``: each op's location
    (``Op.location``) after it, as MLIR's ``--mlir-print-debuginfo`` writes it."""

    def __init__(self, *, locations: bool = False) -> None:
        self.locations = locations
        self.names: dict[int, str] = {}
        self.counter = 0
        # The text of each result-sharding attribute written so far, by slot form and
        # shardings (all set): a propagated program holds few distinct shardings.
        self.slot_texts: dict[tuple[str, tuple[TensorSharding | None, ...]], str | None] = {}

    def name(self, v: Value) -> str:
        try:
            return self.names[id(v)]
        except KeyError:
            raise ProgramError(f"{v} is used before it is defined (or is not in this module)") from None

    def fresh(self) -> str:
        self.counter += 1
        return f"%v{self.counter}"

    def module(self, module: Module) -> str:
        lines: list[str] = []
        self.op(module.op, lines, "")
        return "\n".join(lines) + "\n"

    def block(self, b: Block, lines: list[str], indent: str, index: int) -> None:
        args = []
        for a in b.args:
            n = self.fresh()
            self.names[id(a)] = n
            args.append(f"{n}: {a.type}")
        if index or args or not b.ops:  # an empty block exists only with its label
            lines.append(f"{indent}^bb{index}({', '.join(args)}):" if args else f"{indent}^bb{index}:")
        for op in b.ops:
            self.op(op, lines, indent + "  ")

    def op(self, op: Op, lines: list[str], indent: str) -> None:
        lhs = ""
        if op.results:
            base = self.fresh()
            if len(op.results) == 1:
                self.names[id(op.results[0])] = base
            else:
                for i, r in enumerate(op.results):
                    self.names[id(r)] = f"{base}#{i}"
            lhs = f"{base} = " if len(op.results) == 1 else f"{base}:{len(op.results)} = "
        operands = ", ".join(self.name(v) for v in op.operands)
        attrs = self.attributes(op)
        head = f'{indent}{lhs}"{op.name}"({operands})'
        operand_types = ", ".join(str(v.type) for v in op.operands)
        result_types = ", ".join(str(v.type) for v in op.results)
        tail = f" {{{attrs}}}" if attrs else ""
        tail += f" : ({operand_types}) -> ({result_types})"
        if self.locations and op.name != "builtin.module":
            loc = op.location
            if loc is not None:
                tail += " " + loc
        if not op.regions:
            lines.append(head + tail)
            return
        lines.append(head + " (")
        for ri, region in enumerate(op.regions):
            lines.append(indent + "{" if ri == 0 else indent + "}, {")
            for bi, b in enumerate(region.blocks):
                self.block(b, lines, indent + "  ", bi)
        lines.append(indent + "})" + tail)

    def attributes(self, op: Op) -> str:
        attrs = dict(op.attributes)
        if isinstance(op, Func):
            attrs["function_type"] = op.function_type()
            if any(op.arg_attrs) or any(a.sharding for a in op.args):
                attrs["arg_attrs"] = _dict_list(op.arg_attrs, [a.sharding for a in op.args])
            if any(op.result_attrs) or any(op.result_shardings):
                attrs["res_attrs"] = _dict_list(op.result_attrs, op.result_shardings)
        elif op.name != "builtin.module":
            slot = result_slot(op.name)
            shardings = [r.sharding for r in op.results]
            if any(s is None for s in shardings):
                text = _slot_text(slot, shardings, op)  # reads the results' types too
            else:
                key = (slot.form, tuple(shardings))
                text = self.slot_texts.get(key)
                if text is None:
                    text = self.slot_texts[key] = _slot_text(slot, shardings, op)
            if text is not None:
                attrs[slot.attribute] = text
            if op.name in OPERAND_SLOTS and op.operand_shardings is not None:
                text = _slot_text(OPERAND_SLOTS[op.name], list(op.operand_shardings), op)
                if text is not None:
                    attrs[OPERAND_SLOTS[op.name].attribute] = text
        return ", ".join(f"{attr_name(k)} = {v}" for k, v in sorted(attrs.items()))


def _dict_list(attrs: list[dict[str, str]], shardings: list[TensorSharding | None]) -> str:
    out = []
    for d, s in zip(attrs, shardings):
        items = dict(d)
        if s is not None:
            items["sdy.sharding"] = str(s)
        out.append("{" + ", ".join(f"{attr_name(k)} = {v}" for k, v in sorted(items.items())) + "}")
    return "[" + ", ".join(out) + "]"


def _slot_text(slot: Slot, shardings: list[TensorSharding | None], op: Op) -> str | None:
    if all(s is None for s in shardings):
        return None
    if slot.form == "single":
        (s,) = shardings
        assert s is not None
        return str(s)
    if any(s is None for s in shardings):
        # A per-value list needs one sharding per value: the others are fully open.
        ref = next(s for s in shardings if s is not None)
        shardings = [s if s is not None else _open_like(ref, v) for s, v in zip(shardings, op.results)]
    return TensorSharding.print_per_value([s for s in shardings if s is not None])


def _open_like(ref: TensorSharding, v: Value) -> TensorSharding:
    dims = [DimSharding((), closed=False) for _ in range(v.type.rank)]
    if ref.mesh is not None:
        return TensorSharding(ref.mesh, dims, mesh_name=ref.mesh_name or "mesh", inline=ref.mesh_name is None)
    return TensorSharding(ref.mesh_name or "mesh", dims)
