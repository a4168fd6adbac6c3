"""The complete op table: imports every op-family module so their implementations register
(``shardwise.execute.registry``) and re-exports the table; the interpreter imports it."""

from shardwise.execute import (  # noqa: F401
    ops_chlo,
    ops_collective,
    ops_control,
    ops_elementwise,
    ops_fft,
    ops_index,
    ops_linalg,
    ops_manual,
    ops_misc,
    ops_reduce,
    ops_shape,
    ops_sort,
    ops_special,
)
from shardwise.execute.registry import ELEMENTWISE, OPS

__all__ = ["ELEMENTWISE", "OPS"]
