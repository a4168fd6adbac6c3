"""Importers: MLIR text (``load_mlir``) and JAX functions (``from_jax``) into the program IR."""

from shardwise.importers.jax import from_jax
from shardwise.importers.mlir import load_mlir

__all__ = ["from_jax", "load_mlir"]
