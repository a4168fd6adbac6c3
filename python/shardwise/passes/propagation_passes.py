"""The Python versions of Shardy's four propagation passes, under Shardy's names and options:
``sdy-basic-propagate``, ``sdy-aggressive-propagate``, ``sdy-op-priority-propagate`` and
``sdy-user-priority-propagate``, and of ``sdy-populate-op-sharding-rules``. They run where the
native passes cannot (``shardwise.passes.native``): with the propagation debugging options, or
with a sharding rule the user registered. The work is
``shardwise.propagation.run_propagation_pass`` (``shardwise.propagation`` sits below this
package) and ``shardwise.rules.from_ir.rules_for``.

Options: ``keep-sharding-rules``, ``conservative-propagation``, ``debug-sharding-origins``,
``debug-propagation-edge-sharding``, ``module-dump-directory`` (accepted and ignored: nothing
is dumped), and ``propagation-strategy`` (all but the basic pass) and
``run-op-priority-propagation`` (op- and user-priority passes)."""

from __future__ import annotations

from collections.abc import Callable

from shardwise.ir.core import Func, Module
from shardwise.passes.registry import Options, OptionValue, register_pass
from shardwise.propagation import PASS_NAMES, run_propagation_pass
from shardwise.rules.from_ir import rules_for

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


@register_pass(
    "sdy-populate-op-sharding-rules", anchor="func.func", options={"conservative-propagation": False}, native=True
)
def populate_op_sharding_rules(module: Module, func: Func, options: Options | None = None) -> None:
    """Gives every op of the function that has a sharding rule and none yet its
    ``sdy.sharding_rule`` (``shardwise.rules``, the user's rules included). Mirrors Shardy's
    ``populate_op_sharding_rules.cc``."""
    conservative = bool((options or {}).get("conservative-propagation", False))
    rules = rules_for(module, conservative=conservative)
    for op in func.walk():
        rule = rules.get(id(op))
        if rule is not None and "sdy.sharding_rule" not in op.attributes:
            op.attributes["sdy.sharding_rule"] = str(rule)
