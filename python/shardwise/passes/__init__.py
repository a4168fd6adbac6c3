"""Shardy's import and export passes as transformations of the program IR.

Every pass edits a ``Module`` in place and reproduces what jaxlib's Shardy does to the same
module (checked pass by pass against jaxlib on the conformance corpus). ``PASSES`` maps
Shardy's pass names to them (``PASSES["sdy-close-shardings"](module)``); ``run_pipeline(module,
text)`` runs a pipeline written in MLIR's pass-pipeline syntax
(``builtin.module(a,func.func(b{opt=v}))``), including the composite ``sdy-import-pipeline``,
``sdy-export-pipeline`` and ``sdy-propagation-pipeline``. The four propagation passes
(``sdy-basic-propagate`` ... ``sdy-user-priority-propagate``, ``shardwise.propagation``) are
registered too, by ``propagation_passes``.

Modules: ``meshes`` (lift/inline meshes, size-one axes), ``constants`` (splitter),
``data_flow`` (data flow edges and their sinking), ``call_graph`` (symbol DCE, flattening,
importing calls, call shardings, function order), ``import_passes`` (sharding constraints,
sharding groups, manual axes, gather/scatter batching), ``export_passes`` (named computations,
function results, unflattening, call reshards, merger, constraint -> reshard, non-divisible and
sub-axis shardings, closing, dropping rules and debug info), ``explicit_reshards``
(``sdy-insert-explicit-reshards``), ``canonicalize`` (the ``sdy-collective`` canonicalization),
``propagation_passes`` (the propagation passes), ``pipeline`` and ``registry``.
"""

from shardwise.errors import PassWarning
from shardwise.passes import (  # noqa: F401  (importing a module registers its passes)
    call_graph,
    canonicalize,
    constants,
    data_flow,
    explicit_reshards,
    export_passes,
    import_passes,
    meshes,
    propagation_passes,
)
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
