"""Pass lists of the native pipeline (``rust/src/transforms/``, run by
``shardwise._native.run_native_passes``), in Shardy's pipeline syntax: what
``tests/python/test_native_passes.py`` compares with the Python passes and what
``benches/bench_native_passes.py`` times beside Shardy."""

from __future__ import annotations

__all__ = ["AFTER", "CANONICALIZE", "EXPORT", "NATIVE", "PIPELINE", "PROPAGATE"]

#: The native passes: the import part of ``sdy-propagation-pipeline`` (everything before
#: ``sdy-user-priority-propagate``), in its order. Each is compared alone, and all of them in
#: a row.
NATIVE = [
    "symbol-dce",
    "sdy-lift-inlined-meshes",
    "sdy-remove-size-one-axes",
    "sdy-propagate-sharding-from-func-to-call",
    "sdy-constant-or-scalar-splitter",
    "symbol-dce",
    "sdy-manual-axes-cleanup",
    "sdy-save-module",
    "sdy-add-data-flow-edges",
    "sdy-flatten-call-graph",
    "symbol-dce",
    "sdy-import-func-calls",
    "symbol-dce",
    "sdy-apply-sharding-constraints",
    "sdy-sharding-group-import",
    "sdy-pre-order-funcs",
]

#: The propagation passes, each after the import part, with options: the pipeline's step
#: first, then the other three passes and their options.
PROPAGATE = [
    "sdy-user-priority-propagate{keep-sharding-rules=true}",
    "sdy-basic-propagate",
    "sdy-aggressive-propagate{propagation-strategy=basic-then-aggressive}",
    "sdy-op-priority-propagate{conservative-propagation=true run-op-priority-propagation=false}",
]

#: The passes of ``sdy-propagation-pipeline`` after propagation that run natively, in its order.
AFTER = [
    "sdy-export-named-computations",
    "sdy-propagate-to-func-results",
    "sdy-unflatten-call-graph",
    "symbol-dce",
    "sdy-insert-func-call-reshards",
]

#: MLIR's canonicalizer as Shardy's export pipeline runs it: Shardy's collective patterns.
CANONICALIZE = "canonicalize{enable-patterns={sdy-collective}}"

#: Native passes of the export pipeline (``sdy-export-pipeline``) tested each alone.
EXPORT = [
    "sdy-constant-or-scalar-merger",
    "sdy-sink-data-flow-edges{sink-debug-propagation-edge-sharding=false sink-debug-sharding-origins=false}",
    "sdy-remove-sharding-groups",
    "sdy-sharding-constraint-to-reshard",
    "sdy-update-non-divisible-input-output-shardings",
    "sdy-remove-sub-axes-in-input-output-shardings",
    "sdy-close-shardings",
    "sdy-insert-explicit-reshards",
    "sdy-insert-explicit-reshards{enable-full-version=true}",
    "sdy-remove-propagation-debug-info",
    "sdy-drop-sharding-rules",
    CANONICALIZE,
]

#: ``sdy-propagation-pipeline`` with its default options, in its order: every pass of it runs
#: natively.
PIPELINE = [
    *NATIVE,
    PROPAGATE[0],
    *AFTER,
    *EXPORT[:7],
    "sdy-save-module",
    "sdy-insert-explicit-reshards",
    CANONICALIZE,
    "sdy-save-module",
    "sdy-drop-sharding-rules",
]
