"""The ATen ops ``from_torch`` translates: ``@aten("permute.default", ...)`` registers a
translation (a function of the :class:`~shardwise.importers.pytorch.lowering.Lowering` and the FX
node, returning the node's value, or a tuple for ops with several results) under the op's
overload name as ``str(node.target)`` gives it (``aten.permute.default``). One op family per
module: ``aten_shape`` (views and data movement), ``aten_pointwise`` (elementwise ops),
``aten_linalg`` (matrix products), ``aten_reduce`` (reductions, softmax, layer norm, cumsum),
``aten_index`` (embedding, advanced indexing, gather), ``aten_conv`` (convolution, batch norm),
``aten_pool`` (max, average and adaptive average pooling).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shardwise.importers.pytorch.lowering import Lowering

Translation = Callable[[Lowering, Any], Any]

#: ``aten.<op>.<overload>`` -> its translation.
ATEN: dict[str, Translation] = {}


def aten(*names: str) -> Callable[[Translation], Translation]:
    """Registers the decorated translation for each ``<op>.<overload>`` of ``names``."""

    def register(fn: Translation) -> Translation:
        for name in names:
            ATEN[f"aten.{name}"] = fn
        return fn

    return register
