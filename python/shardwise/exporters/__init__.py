"""Exporters: the program IR as MLIR text."""

from shardwise.exporters.mlir import save, to_mlir

__all__ = ["save", "to_mlir"]
