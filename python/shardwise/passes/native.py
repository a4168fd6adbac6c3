"""Running passes natively (``rust/src/transforms/``, one Rust pass per Shardy pass) on any
module: its Rust program while it is not built, else one read from its Python ops.

``runs_natively(name, options)`` says whether a pass step runs natively: a native pass
(``_native.native_pass_options()``) given only options it takes, without a debugging option of
propagation (``NOT_NATIVE_OPTIONS``: those records are written on the Python IR), and, while the
user has a sharding rule registered (``shardwise.rules.register_rule``), not one of the passes
that read rules (``RULE_PASSES``: the native passes do not see Python rules). ``run_native``
runs native steps on a module in place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shardwise import _native
from shardwise._native import MlirReadError, MlirVerifyError, NativeProgram
from shardwise.errors import ProgramError
from shardwise.importers.native import build_op, reuse_of
from shardwise.ir.core import Module
from shardwise.ir.printer import Writer
from shardwise.rules.registry import has_user_rules

__all__ = ["NOT_NATIVE_OPTIONS", "RULE_PASSES", "native_program", "run_native", "runs_natively"]

#: Pass options the native passes do not implement yet (the debugging records of
#: propagation): a step that sets one to anything but false is not native.
NOT_NATIVE_OPTIONS = frozenset({"debug-sharding-origins", "debug-propagation-edge-sharding"})

#: Passes whose result depends on the sharding rules of ops: with a rule registered by the
#: user, which the native passes do not see, they run on the Python IR.
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


def runs_natively(
    name: str,
    options: Mapping[str, str],
    native: Mapping[str, Sequence[str]] | None = None,
    user_rules: bool | None = None,
) -> bool:
    """Whether pass ``name`` with ``options`` (as written: name -> text) runs natively.
    ``native`` (``_native.native_pass_options()``) and ``user_rules`` (``has_user_rules()``)
    are read when not given."""
    takes = (_native.native_pass_options() if native is None else native).get(name)
    if takes is None:
        return False
    if (has_user_rules() if user_rules is None else user_rules) and name in RULE_PASSES:
        return False
    return all(k.replace("_", "-") in takes for k in options) and not any(
        k.replace("_", "-") in NOT_NATIVE_OPTIONS and v.lower() not in ("false", "0") for k, v in options.items()
    )


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


def run_native(module: Module, steps: list[str], *, required: bool = False) -> bool:
    """Runs the native pass ``steps`` (``name`` or ``name{key=value ...}``, as
    ``NativeProgram.run`` takes them) on ``module`` in place (``Module.assign_native``); a
    built module is built again when next asked for, with the Python objects of the ops and
    values the passes kept (``importers.native.reuse_of``: ops the passes replaced are new
    objects, as Python passes would make them); ``False``, with the module unchanged, when the
    native reader cannot read it (``native_program``; with ``required``, ``ProgramError``).
    Raises ``ProgramError`` where a pass does (op and location) or the result does not
    verify."""
    built = module.native is None
    program = native_program(module, required=required)
    if program is None:
        return False
    try:
        out = program.run(steps)
    except MlirVerifyError as e:
        raise ProgramError(f"the module does not verify: {e.op_name} at {e.location}: {e.detail}") from None
    module.assign_native(out, build_op, reuse_of(module, program.tables()) if built else None)
    return True
