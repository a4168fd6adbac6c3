"""The program IR (``Module``, ``Func``, ``Op``, ``Value``, ``Block``, ``Region``), its types,
and the ``Builder`` for writing programs by hand."""

from shardwise.ir.builder import Builder
from shardwise.ir.core import Block, Func, Module, Op, Region, Value
from shardwise.ir.types import DYNAMIC, OpaqueType, TensorType, Type, parse_type

__all__ = [
    "DYNAMIC",
    "Block",
    "Builder",
    "Func",
    "Module",
    "Op",
    "OpaqueType",
    "Region",
    "TensorType",
    "Type",
    "Value",
    "parse_type",
]
