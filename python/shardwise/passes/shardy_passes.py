"""Shardy's passes, which shardwise runs natively (``rust/src/transforms/``, one file per
pass, each naming the Shardy source it follows), declared in ``PASSES`` with their anchors,
options and defaults, so that pipelines and ``PASSES[name](module)`` check them as they check
every pass. Running one runs the Rust pass on the module's Rust program
(``shardwise.passes.native``).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from shardwise.passes.registry import OptionValue, declare_native_pass

__all__ = ["NATIVE_ONLY"]


class _Native(NamedTuple):
    name: str
    anchor: Literal["builtin.module", "func.func"]
    options: dict[str, OptionValue]
    summary: str


#: The options of every propagation pass (Shardy's ``PropagationOptions``);
#: ``module-dump-directory`` is accepted and ignored (nothing is dumped).
_PROPAGATION_OPTIONS: dict[str, OptionValue] = {
    "keep-sharding-rules": False,
    "module-dump-directory": "",
    "conservative-propagation": False,
    "debug-sharding-origins": False,
    "debug-propagation-edge-sharding": False,
}

_DEBUG_SUMMARY = (
    " ``debug-sharding-origins`` writes where each axis came from (``sdy.sharding_origins``,"
    " ``sdy.sharding_origin_name``) and ``debug-propagation-edge-sharding`` the edges that moved it"
    " (``sdy.propagation_edges``), as Shardy's ``SourceShardingHandler`` does"
    " (``rust/src/transforms/propagation/source_sharding.rs``)."
)


def _propagation(name: str, options: dict[str, OptionValue], what: str) -> _Native:
    return _Native(name, "builtin.module", {**_PROPAGATION_OPTIONS, **options}, what + _DEBUG_SUMMARY)


#: The passes, by their Shardy names.
NATIVE_ONLY: tuple[_Native, ...] = (
    _propagation(
        "sdy-basic-propagate",
        {},
        (
            "Shardy's basic propagation: along every factor of every op's sharding rule, the"
            " longest compatible major axes, to a fixed point (``rust/src/propagation/``)."
        ),
    ),
    _propagation(
        "sdy-aggressive-propagate",
        {"propagation-strategy": "aggressive"},
        "Shardy's aggressive propagation: the basic propagation, then conflicts resolved by the strategy.",
    ),
    _propagation(
        "sdy-op-priority-propagate",
        {"propagation-strategy": "aggressive", "run-op-priority-propagation": True},
        "Shardy's op-priority propagation: the aggressive propagation, op by op in the order of their priorities.",
    ),
    _propagation(
        "sdy-user-priority-propagate",
        {"propagation-strategy": "aggressive", "run-op-priority-propagation": True},
        "Shardy's user-priority propagation: the op-priority propagation per user priority (``p0`` first).",
    ),
    _Native(
        "sdy-apply-sharding-constraints",
        "builtin.module",
        {"debug-sharding-origins": False, "debug-propagation-edge-sharding": False},
        (
            "Gives the input of each ``sdy.sharding_constraint`` (and each operand of a manual"
            " computation) the constraint's sharding when the input has none, the sharding is fully"
            " closed and no other constraint on it disagrees; an input that is a data flow edge"
            " target instead has all its uses go through the constraint. A chain of constraints also"
            " takes over the later uses of the chain's input in its block." + _DEBUG_SUMMARY
        ),
    ),
    _Native(
        "sdy-insert-explicit-reshards",
        "func.func",
        {"enable-full-version": False},
        (
            "Makes the ops of each function agree with their shardings: all-reduces where unreduced axes"
            " become replicated, reshards of call operands to the callee's argument shardings, the reshard"
            " that makes a dot compatible and, with the full version, reshards to the common factor"
            " shardings of every op with a sharding rule (decisions in ``rust/src/export/``)."
        ),
    ),
    _Native(
        "sdy-populate-op-sharding-rules",
        "func.func",
        {"conservative-propagation": False},
        "Gives every op that has a sharding rule and none yet its ``sdy.sharding_rule``.",
    ),
    _Native(
        "sdy-explicit-gather-scatter-batching",
        "func.func",
        {},
        (
            "Turns the implicit batch dimension 0 of a ``stablehlo.gather`` / ``stablehlo.scatter``"
            " (indexed by an iota along dimension 0) into explicit batching dimensions, dropping that"
            " index component, then removes ops left without uses."
        ),
    ),
    _Native(
        "sdy-save-module",
        "builtin.module",
        {"module-dump-directory": "", "module-file-name": "", "dump-index": 0},
        "Shardy's ``sdy-save-module`` debugging dump: does nothing here (no dump directory).",
    ),
    _Native(
        "sdy-add-func-data-flow-edges",
        "builtin.module",
        {},
        (
            "Inserts an ``sdy.func_data_flow_edge`` for every argument of every function but the main"
            " one (at the start of its body) and for every result of every ``func.call`` (right after"
            " it), holding the value's sharding."
        ),
    ),
    _Native(
        "sdy-insert-func-call-reshards",
        "builtin.module",
        {},
        (
            "Where a call's result sharding differs from its callee's result sharding, makes the call"
            " take the callee's sharding and adds an ``sdy.reshard`` to the call's former sharding"
            " (fully closed when it had none) for the other uses."
        ),
    ),
    _Native(
        "sdy-lift-inlined-meshes",
        "builtin.module",
        {},
        (
            "Replaces every inlined mesh in a sharding by a reference to an ``sdy.mesh`` with the"
            " same mesh, creating one when none exists (named ``maximal_mesh_<id>``, ``empty_mesh`` or"
            " the first free of ``mesh``, ``mesh_0``, ``mesh_1``, …); duplicate ``sdy.mesh``"
            " definitions are removed and references to them redirected to the first one; every"
            " ``sdy.mesh`` gets a ``stablehlo.mesh`` attribute describing it."
        ),
    ),
    _Native(
        "sdy-close-shardings",
        "builtin.module",
        {},
        ("Closes every dimension of every sharding and drops replicated axes (Shardy's ``getClosedLike``)."),
    ),
    _Native(
        "sdy-manual-axes-cleanup",
        "builtin.module",
        {},
        (
            "For every ``sdy.manual_computation``: sorts ``manual_axes`` in mesh order and adds the"
            " manual axes an in/out sharding does not use to its replicated axes."
        ),
    ),
    _Native(
        "sdy-constant-or-scalar-splitter",
        "builtin.module",
        {},
        (
            "Turns every ``stablehlo.constant`` into ``sdy.constant`` and gives each non-constant"
            " user of a constant sub-computation (constants, iotas, and broadcasts, reshapes, slices,"
            " element-wise ops, named computations and calls of constant-preserving functions applied"
            " to them) or of a broadcast of a scalar its own copy, then removes the originals; called"
            " functions are cloned (``sdy.original_func_name`` records the original)."
        ),
    ),
    _Native(
        "sdy-unflatten-call-graph",
        "builtin.module",
        {"dedup-functions-fully": False},
        (
            "Makes calls of functions cloned from the same original (``sdy.original_func_name``) with"
            " the same manual axes and argument/result shardings call one of them (the first called);"
            " with ``dedup-functions-fully``, shardings are ignored and the most called variant is"
            " kept."
        ),
    ),
    _Native(
        "sdy-export-named-computations",
        "builtin.module",
        {},
        (
            "Turns every ``sdy.named_computation`` (innermost first) into a ``func.call`` of a new"
            " private function holding its body (named after it, renamed ``name_N`` on a clash, with"
            " ``sdy.original_func_name``); shardings come from its data flow edges (then removed) or"
            " its in/out shardings: the inputs' on the function arguments, the outputs' on the call."
        ),
    ),
    _Native(
        "sdy-add-data-flow-edges",
        "builtin.module",
        {},
        (
            "Inserts an ``sdy.data_flow_edge`` for every data flow edge owner (the body arguments and"
            " results of named and manual computations, the results of ``while``, ``case`` and"
            " ``optimization_barrier``), taking the owner's sharding."
        ),
    ),
    _Native(
        "sdy-sharding-constraint-to-reshard",
        "func.func",
        {},
        (
            "Turns every ``sdy.sharding_constraint`` into an ``sdy.reshard`` with the same input,"
            " sharding and other attributes."
        ),
    ),
    _Native(
        "sdy-sink-data-flow-edges",
        "func.func",
        {"sink-debug-sharding-origins": False, "sink-debug-propagation-edge-sharding": False},
        (
            "Moves the shardings of the ``sdy.data_flow_edge`` ops of ``func`` back onto their data"
            " flow ops (in/out shardings of named and manual computations, result shardings of the"
            " others) and removes the edges; with the debug options, also gathers the edges'"
            " ``sdy.sharding_origins`` / ``sdy.propagation_edges`` onto the op."
        ),
    ),
    _Native(
        "canonicalize",
        "builtin.module",
        {
            "enable-patterns": "",
            "disable-patterns": "",
            "max-iterations": 10,
            "max-num-rewrites": -1,
            "region-simplify": "aggressive",
            "test-convergence": False,
            "top-down": False,
            "cse-between-iterations": False,
        },
        (
            "MLIR's ``canonicalize`` as Shardy's export pipeline runs it (``enable-patterns={sdy-"
            " collective}``): Shardy's collective patterns (no-op ``all_gather`` / ``all_slice`` /"
            " ``all_reduce`` / ``reduce_scatter`` / ``collective_permute`` removed; ``all_slice`` of a"
            " matching ``all_gather`` and ``all_reduce`` of a matching ``replicated_to_unreduced``"
            " folded away; ``all_reduce`` of a matching ``sharded_to_unreduced`` turned into an"
            " ``all_gather``; ``all_slice`` of an ``all_reduce`` fused into a ``reduce_scatter``;"
            " chained ``all_to_all`` fused; unused ``all_to_all`` removed), plus the greedy rewriter's"
            " removal of unused side-effect-free ops and uniquing/hoisting of ``stablehlo.constant``."
        ),
    ),
    _Native(
        "sdy-inline-meshes",
        "builtin.module",
        {},
        ("Replaces every mesh reference in a sharding by the mesh itself and removes every ``sdy.mesh``."),
    ),
    _Native("sdy-remove-sharding-groups", "builtin.module", {}, "Removes every ``sdy.sharding_group``."),
    _Native(
        "sdy-remove-size-one-axes",
        "builtin.module",
        {},
        (
            "Removes axes of size one from every sharding (dimension, replicated and unreduced axes;"
            " a closed dimension left empty loses its priority) when some ``sdy.mesh`` has a size-one"
            " axis; meshes and manual axes are kept."
        ),
    ),
    _Native(
        "symbol-dce",
        "builtin.module",
        {},
        (
            'MLIR\'s ``symbol-dce``: removes the private symbols (``sym_visibility = "private"``) of'
            " the module that no live op references, transitively."
        ),
    ),
    _Native(
        "sdy-propagate-to-func-results",
        "builtin.module",
        {},
        (
            "Sets the result shardings of every function but the main one to the shardings of the"
            " values it returns (clearing those without one)."
        ),
    ),
    _Native(
        "sdy-sink-func-data-flow-edges",
        "func.func",
        {},
        (
            "Moves the sharding of each ``sdy.func_data_flow_edge`` in ``func`` onto its operand (a"
            " fully open one when the edge has none but the operand has) and removes the edge."
        ),
    ),
    _Native(
        "sdy-update-non-divisible-input-output-shardings",
        "builtin.module",
        {},
        (
            "Shrinks the function argument/result, call result and manual computation in/out"
            " shardings that do not divide their tensor: each non-dividing dimension keeps its longest"
            " prefix of axes (possibly ending in a sub-axis) that divides it."
        ),
    ),
    _Native(
        "sdy-sharding-group-import",
        "builtin.module",
        {},
        (
            "Merges sharding groups that share a value (transitively), renumbers the groups"
            " ``0..N-1`` in the order their first members appear, and removes duplicate"
            " ``sdy.sharding_group`` ops of a value within a group."
        ),
    ),
    _Native(
        "sdy-remove-sub-axes-in-input-output-shardings",
        "builtin.module",
        {},
        (
            "In the argument and result shardings of the main function, cuts every open dimension"
            " before its first sub-axis."
        ),
    ),
    _Native(
        "sdy-propagate-sharding-from-func-to-call",
        "builtin.module",
        {},
        (
            "Gives every ``func.call`` without result shardings the result shardings of its callee"
            " (``getFuncResultShardings``), if it has any."
        ),
    ),
    _Native(
        "sdy-drop-sharding-rules",
        "func.func",
        {},
        ("Removes the ``sdy.sharding_rule`` of every op in the function except users' custom rules."),
    ),
    _Native(
        "sdy-pre-order-funcs",
        "builtin.module",
        {},
        (
            "Moves the functions (with bodies) to the end of the module in pre-order of the call"
            " graph (callers before callees)."
        ),
    ),
    _Native(
        "sdy-constant-or-scalar-merger",
        "func.func",
        {},
        (
            "Merges identical constants (same attributes and shardings, same region) and identical"
            " broadcasts of the same scalar, keeping the first."
        ),
    ),
    _Native(
        "sdy-remove-propagation-debug-info",
        "builtin.module",
        {},
        (
            "Removes the propagation debug attributes (sharding origins and propagation edges) from"
            " every op and function argument/result."
        ),
    ),
    _Native(
        "sdy-flatten-call-graph",
        "builtin.module",
        {},
        (
            "Makes every function called at most once: each call after the first of a function calls"
            " a fresh recursive copy of it (``name_N``, with ``sdy.original_func_name``)."
        ),
    ),
    _Native(
        "sdy-import-func-calls",
        "builtin.module",
        {"add-data-flow-edges-on-named-computations": True},
        (
            "Replaces every ``func.call`` by an ``sdy.named_computation`` named after the callee's"
            " original name, holding the callee's body (moved for the first call of a function, cloned"
            " for the others, with a ``PassWarning``), with the callee's argument shardings as"
            " ``in_shardings``, the call's result shardings as ``out_shardings`` and the call's other"
            " discardable attributes (and the callee's ``execution_thread``); the inlined functions"
            " are removed."
        ),
    ),
)

for _p in NATIVE_ONLY:
    declare_native_pass(_p.name, _p.anchor, _p.options, _p.summary)
