"""The program IR as MLIR text: ``to_mlir`` and ``save``, from the IR's printer
(``shardwise.ir.printer``), kept under this path."""

from __future__ import annotations

from shardwise.ir.printer import Writer, save, to_mlir

#: The printer's writer under its old name here.
_Writer = Writer

__all__ = ["save", "to_mlir"]
