"""Running passes natively (``rust/src/transforms/``, one Rust pass per Shardy pass) on any
module: its Rust program while it is not built, else one read from its Python ops.

``runs_natively(name, options)`` says whether a pass step runs natively: a native pass
(``_native.native_pass_options()``) given only options it takes. ``run_native``
runs native steps on a module in place. The native passes do not call Python: before a pass
that reads sharding rules (``RULE_PASSES``) runs while the user has a rule registered
(``shardwise.rules.register_rule``, ``register_op_rule``), ``set_user_rules`` gives every op
the user's rule applies to that rule as an attribute (``USER_RULE``, read after the op's own
``sdy.sharding_rule`` and before the builtin registry), and the native
``shardwise-drop-user-rules`` removes them afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shardwise import _native
from shardwise._native import MlirReadError, MlirVerifyError, NativeProgram
from shardwise.errors import ProgramError
from shardwise.importers.native import build_op, reuse_of
from shardwise.ir.core import Module
from shardwise.ir.printer import Writer
from shardwise.rules.from_ir import RuleCache
from shardwise.rules.registry import has_user_rule

__all__ = [
    "DROP_USER_RULES",
    "RULE_PASSES",
    "USER_RULE",
    "drop_user_rules",
    "native_program",
    "run_native",
    "runs_natively",
    "set_user_rules",
]

#: Passes whose result depends on the sharding rules of ops: with a rule registered by the
#: user, the user's rules are set on the ops before they run (``set_user_rules``).
RULE_PASSES = frozenset(
    {
        "sdy-basic-propagate",
        "sdy-aggressive-propagate",
        "sdy-op-priority-propagate",
        "sdy-user-priority-propagate",
        "sdy-apply-sharding-constraints",
        "sdy-insert-explicit-reshards",
        "sdy-populate-op-sharding-rules",
    }
)


#: The attribute of an op holding the rule a user registered for it (``set_user_rules``;
#: ``rust/src/transforms/propagation/freeze.rs``'s ``USER_RULE``).
USER_RULE = "shardwise.user_rule"
#: The native step that removes ``USER_RULE`` from every op.
DROP_USER_RULES = "shardwise-drop-user-rules"


def runs_natively(name: str, options: Mapping[str, str], native: Mapping[str, Sequence[str]] | None = None) -> bool:
    """Whether pass ``name`` with ``options`` (as written: name -> text) runs natively.
    ``native`` (``_native.native_pass_options()``) is read when not given."""
    takes = (_native.native_pass_options() if native is None else native).get(name)
    if takes is None:
        return False
    return all(k.replace("_", "-") in takes for k in options)


def native_program(module: Module, *, required: bool = False) -> NativeProgram | None:
    """``module`` as a Rust program: its ``native`` program while it is not built, else its
    Python ops written in the generic form with their locations and read by the native reader;
    ``None`` when the native reader cannot read that text (an op or type it has no grammar
    for), or, when ``required``, ``ProgramError`` with the reader's message. Raises
    ``ProgramError`` (op and location) when the module does not verify."""
    program = module.native
    if program is not None:
        return program
    try:
        return NativeProgram.read(Writer(locations=True).module(module), "-")
    except MlirReadError as e:
        if required:
            raise ProgramError(
                f"the native passes cannot run on this module: the native reader refuses it: {e}"
            ) from None
        return None
    except MlirVerifyError as e:
        raise ProgramError(f"the module does not verify: {e.op_name} at {e.location}: {e.detail}") from None


def set_user_rules(module: Module, conservative: bool) -> None:
    """Gives every op of ``module`` that a rule registered by the user applies to
    (``shardwise.rules.registry.has_user_rule``) and that has no ``sdy.sharding_rule`` of its
    own the rule as ``USER_RULE`` (``"none"`` where the user's function gives none), computed
    on the module as it is (``RuleCache``, with ``conservative`` as the pass that reads it);
    builds the module. Raises what the user's rule raises."""
    cache = RuleCache(module, conservative=conservative)
    for op in module.walk():
        own = op.attributes.get("sdy.sharding_rule")
        if own is not None and own.lstrip().startswith("#sdy.op_sharding_rule"):
            continue
        if has_user_rule(op.name, op.attributes):
            rule = cache.rule(op)
            op.attributes[USER_RULE] = '"none"' if rule is None else str(rule)


def drop_user_rules(module: Module) -> None:
    """Removes ``USER_RULE`` from every op of built ``module`` (``set_user_rules`` undone, when
    the native passes did not run after all)."""
    for op in module.walk():
        op.attributes.pop(USER_RULE, None)


def run_native(module: Module, steps: list[str], *, required: bool = False, user_rules: bool | None = None) -> bool:
    """Runs the native pass ``steps`` (``name`` or ``name{key=value ...}``, as
    ``NativeProgram.run`` takes them) on ``module`` in place (``Module.assign_native``); a
    built module is built again when next asked for, with the Python objects of the ops and
    values the passes kept (``importers.native.reuse_of``: ops the passes replaced are new
    objects, as Python passes would make them); ``False``, with the module unchanged, when the
    native reader cannot read it (``native_program``; with ``required``, ``ProgramError``).
    ``user_rules`` (not ``None``): the users' rules are set first (``set_user_rules``, with
    that ``conservative`` flag) and dropped after the steps, or at once when the reader
    refuses the module. Raises ``ProgramError`` where a pass does (op and location) or the
    result does not verify."""
    if user_rules is not None:
        set_user_rules(module, user_rules)
        steps = [*steps, DROP_USER_RULES]
    built = module.native is None
    try:
        program = native_program(module, required=required)
    except ProgramError:
        if user_rules is not None:
            drop_user_rules(module)
        raise
    if program is None:
        if user_rules is not None:
            drop_user_rules(module)
        return False
    try:
        out = program.run(steps)
    except MlirVerifyError as e:
        raise ProgramError(f"the module does not verify: {e.op_name} at {e.location}: {e.detail}") from None
    module.assign_native(out, build_op, reuse_of(module, program.tables()) if built else None)
    return True
