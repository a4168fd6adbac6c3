"""Imports every op-family module so their implementations register with the interpreter."""

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
