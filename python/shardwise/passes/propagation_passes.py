"""The Python versions of Shardy's four propagation passes, under Shardy's names and options:
``sdy-basic-propagate``, ``sdy-aggressive-propagate``, ``sdy-op-priority-propagate`` and
``sdy-user-priority-propagate``. They run where the native passes cannot
(``shardwise.passes.native``): with the propagation debugging options. The work is
``shardwise.propagation.run_propagation_pass`` (``shardwise.propagation`` sits below this
package).

Options: ``keep-sharding-rules``, ``conservative-propagation``, ``debug-sharding-origins``,
``debug-propagation-edge-sharding``, ``module-dump-directory`` (accepted and ignored: nothing
is dumped), and ``propagation-strategy`` (all but the basic pass) and
``run-op-priority-propagation`` (op- and user-priority passes)."""

from __future__ import annotations

from collections.abc import Callable

from shardwise.ir.core import Module
from shardwise.passes.registry import Options, OptionValue, register_pass
from shardwise.propagation import PASS_NAMES, run_propagation_pass

__all__: list[str] = []  # importing the module registers the passes (names: propagation.PASS_NAMES)

_COMMON_OPTIONS: dict[str, OptionValue] = {
    "keep-sharding-rules": False,
    "module-dump-directory": "",
    "conservative-propagation": False,
    "debug-sharding-origins": False,
    "debug-propagation-edge-sharding": False,
}


def _make(pass_name: str) -> Callable[[Module, Options], None]:
    def run(module: Module, options: Options) -> None:
        run_propagation_pass(
            module,
            pass_name,
            conservative=bool(options.get("conservative-propagation", False)),
            keep_sharding_rules=bool(options.get("keep-sharding-rules", False)),
            propagation_strategy=str(options.get("propagation-strategy", "aggressive")),
            run_op_priority=bool(options.get("run-op-priority-propagation", True)),
            debug_sharding_origins=bool(options.get("debug-sharding-origins", False)),
            debug_propagation_edge_sharding=bool(options.get("debug-propagation-edge-sharding", False)),
        )

    run.__doc__ = f"Shardy's {PASS_NAMES[pass_name]} (shardwise.propagation)."
    return run


for _name, _shardy_name in PASS_NAMES.items():
    _options = dict(_COMMON_OPTIONS)
    if _name != "basic":
        _options["propagation-strategy"] = "aggressive"
    if _name in ("op-priority", "user-priority"):
        _options["run-op-priority-propagation"] = True
    # Conflicting sharding groups get open sharding constraints (``_insert_group_constraints``).
    register_pass(_shardy_name, "builtin.module", _options, adds=frozenset({"sdy.sharding_constraint"}), native=True)(
        _make(_name)
    )
