"""Importers: MLIR text (``load_mlir``), JAX functions (``from_jax``) and PyTorch modules
(``from_torch``, through ``torch.export``) into the program IR."""

from shardwise.importers.jax import from_jax
from shardwise.importers.mlir import load_mlir
from shardwise.importers.pytorch import from_torch, from_torch_step

__all__ = ["from_jax", "from_torch", "from_torch_step", "load_mlir"]
