"""jaxlib's Shardy as the oracle: a module's text through an sdy pass pipeline in process."""

from __future__ import annotations


def shardy(text: str, pipeline: str = "builtin.module(sdy-propagation-pipeline)") -> str:
    """``text`` parsed by jaxlib, run through ``pipeline`` by Shardy, printed."""
    from jaxlib.mlir import passmanager
    from shardwise._jaxlib import context, ir

    with context():
        m = ir().Module.parse(text)
        passmanager.PassManager.parse(pipeline).run(m.operation)
        return str(m)
