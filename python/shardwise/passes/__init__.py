"""Shardy's passes and pipelines over a shardwise ``Module``.

``PASSES`` maps Shardy's pass names to what runs them (``PASSES["sdy-close-shardings"](module)``);
``run_pipeline(module, text)`` runs a pipeline written in MLIR's pass-pipeline syntax
(``builtin.module(a,func.func(b{opt=v}))``), including the composite ``sdy-import-pipeline``,
``sdy-export-pipeline`` and ``sdy-propagation-pipeline``. Every pass runs natively
(``rust/src/transforms/``, one Rust file per Shardy pass, compared with jaxlib's Shardy pass by
pass on the conformance corpus), consecutive native passes as one call with the GIL released
(``native``); the rules users register are set on the ops before a pass that reads rules
runs. Users may register passes of their own (``register_pass``), which run on the Python IR.

Modules: ``registry`` (``PASSES``, ``register_pass``), ``shardy_passes`` (Shardy's passes,
declared), ``native`` (when and how a step runs natively) and ``pipeline`` (parsing and
running pipelines).
"""

from shardwise.errors import PassWarning
from shardwise.passes import shardy_passes  # noqa: F401  (importing it declares Shardy's passes)
from shardwise.passes.pipeline import COMPOSITES, expand_pipeline, parse_pipeline, run_pipeline
from shardwise.passes.registry import PASSES, UNSUPPORTED, Options, PassInfo, PipelineError, register_pass

__all__ = [
    "COMPOSITES",
    "PASSES",
    "UNSUPPORTED",
    "Options",
    "PassInfo",
    "PassWarning",
    "PipelineError",
    "expand_pipeline",
    "parse_pipeline",
    "register_pass",
    "run_pipeline",
]
