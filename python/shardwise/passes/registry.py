"""The pass registry: every pass shardwise can run, by Shardy's pass name, with its anchor
(``builtin.module`` or ``func.func``), its options and their defaults.

Most passes run natively (``rust/src/transforms/``; ``shardwise.passes.native``) and are
declared here without a Python function (``declare_native_pass``). A pass with a Python
version (``register_pass``: the passes the native ones cannot stand in for yet, and passes
users register) is a function over a ``Module`` that edits it in place: module passes are
called as ``fn(module, options)``, function passes as ``fn(module, func, options)``, once per
``func.func`` of the module. ``PASSES[name](module, **options)`` runs a pass on a module (a
function pass on every function), natively where it can (``runs_natively``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from shardwise.errors import PipelineError
from shardwise.ir.core import Func, Module
from shardwise.passes.native import RULE_PASSES, run_native, runs_natively
from shardwise.rules.registry import has_user_rules

__all__ = [
    "PASSES",
    "UNSUPPORTED",
    "OptionValue",
    "Options",
    "PassInfo",
    "PipelineError",
    "declare_native_pass",
    "option_text",
    "register_pass",
]

OptionValue = bool | int | str
#: Option values of one pass run, by Shardy's option name (``dedup-functions-fully``).
Options = Mapping[str, OptionValue]

ModulePassFn = Callable[[Module, Options], None]
FuncPassFn = Callable[[Module, Func, Options], None]


@dataclass(frozen=True)
class PassInfo:
    """One registered pass: ``name`` (Shardy's), ``anchor`` (the op it runs on), ``run`` (the
    Python function; ``None`` for a pass that runs only natively), ``options`` (name ->
    default value, whose type is the option's type), ``summary``, ``native`` (the native pass
    of that name runs in its place where it can: shardwise's own passes; a pass a user
    registers under a native pass's name replaces it), and what ``run_pipeline`` may skip its
    Python function on:

    * ``acts_on``: op names such that the pass changes nothing (and raises nothing) in a
      module without any op of these names, unless one of the options named in
      ``acts_always_with`` is set; ``None``: the pass may act on any module;
    * ``adds``: the op names the pass may add to a module that did not have them (a renamed
      op counts as added); ``None``: unknown."""

    name: str
    anchor: Literal["builtin.module", "func.func"]
    run: Callable[..., None] | None
    options: Mapping[str, OptionValue] = field(default_factory=dict)
    summary: str = ""
    acts_on: frozenset[str] | None = None
    acts_always_with: tuple[str, ...] = ()
    adds: frozenset[str] | None = None
    native: bool = False

    def may_act(self, options: Mapping[str, OptionValue], op_names: Callable[[], frozenset[str] | set[str]]) -> bool:
        """Whether the pass, run with ``options`` (resolved), may change a module whose op
        names are among ``op_names()`` (called only when the answer depends on them)."""
        if self.acts_on is None or any(options.get(o) for o in self.acts_always_with):
            return True
        return not self.acts_on.isdisjoint(op_names())

    def resolve(self, given: Mapping[str, object]) -> dict[str, OptionValue]:
        """The defaults overridden by ``given``; option names may use ``-`` or ``_``. Raises
        ``PipelineError`` for an unknown option or a value of the wrong type."""
        out: dict[str, OptionValue] = dict(self.options)
        for key, value in given.items():
            name = key.replace("_", "-")
            if name not in self.options:
                known = ", ".join(self.options) or "none"
                raise PipelineError(f"pass {self.name} has no option {key!r} (options: {known})")
            out[name] = _convert(self.name, name, self.options[name], value)
        return out

    def __call__(self, module: Module, options: Mapping[str, object] | None = None, **kwargs: object) -> None:
        """Runs the pass on ``module`` (a function pass on each of its functions): natively
        when it can (``runs_natively``; the module's Python ops are then new, see
        ``run_native``), else its Python function. Raises ``PipelineError`` for a bad option or
        a pass that cannot run on this module here."""
        given = {**(options or {}), **kwargs}
        opts = self.resolve(given)
        written = {k.replace("_", "-"): option_text(v) for k, v in given.items()}
        if self.native and runs_natively(self.name, written):
            step = self.name + ("{" + " ".join(f"{k}={v}" for k, v in written.items()) + "}" if written else "")
            reads_rules = self.name in RULE_PASSES and has_user_rules()
            conservative = bool(opts.get("conservative-propagation", False)) if reads_rules else None
            if run_native(module, [step], required=self.run is None, user_rules=conservative):
                return
        self.run_python(module, opts)

    def run_python(self, module: Module, options: Mapping[str, OptionValue]) -> None:
        """Runs the pass's Python function on ``module`` with resolved ``options`` (a function
        pass on each function with a body). Raises ``PipelineError`` when it has none."""
        if self.run is None:
            raise PipelineError(
                f"pass {self.name} runs only natively, and cannot run here: the native reader does not read "
                "the module, an option is not supported natively, a propagation debugging option is set, or "
                "(for passes that read sharding rules) a rule is registered by the user"
            )
        if self.anchor == "func.func":
            for f in list(module.funcs):
                if f.regions[0].blocks:
                    self.run(module, f, options)
        else:
            self.run(module, options)


def option_text(value: object) -> str:
    """An option value as pipeline text (``true``/``false`` for booleans)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _convert(pass_name: str, option: str, default: OptionValue, value: object) -> OptionValue:
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "false", "0"):
            return value.lower() in ("true", "1")
        raise PipelineError(f"option {option} of pass {pass_name} takes true or false, got {value!r}")
    if isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise PipelineError(f"option {option} of pass {pass_name} takes an integer, got {value!r}")
    if isinstance(value, str):
        return value
    raise PipelineError(f"option {option} of pass {pass_name} takes a string, got {value!r}")


#: Every registered pass by name.
PASSES: dict[str, PassInfo] = {}

#: Passes of Shardy's pipelines that shardwise.passes does not implement, with the reason
#: (``run_pipeline`` rejects them before running anything). Empty: every pass of Shardy's
#: pipelines is declared (``shardy_passes``).
UNSUPPORTED: dict[str, str] = {}


def register_pass(
    name: str,
    anchor: Literal["builtin.module", "func.func"] = "builtin.module",
    options: Mapping[str, OptionValue] | None = None,
    summary: str = "",
    *,
    acts_on: frozenset[str] | None = None,
    acts_always_with: tuple[str, ...] = (),
    adds: frozenset[str] | None = None,
    native: bool = False,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorator registering ``fn`` as pass ``name`` (replacing any earlier registration, and
    lifting an ``UNSUPPORTED`` mark): module passes take ``(module, options)``, function passes
    ``(module, func, options)``. ``acts_on``, ``acts_always_with``, ``adds`` and ``native``
    (``fn`` is the Python version of the native pass of that name, run only where that one
    cannot; off for users' passes, which always run): see ``PassInfo``."""

    def deco(fn: Callable[..., None]) -> Callable[..., None]:
        summary_ = summary or (fn.__doc__ or "").strip().split("\n")[0]
        PASSES[name] = PassInfo(
            name, anchor, fn, dict(options or {}), summary_, acts_on, acts_always_with, adds, native
        )
        UNSUPPORTED.pop(name, None)
        return fn

    return deco


def declare_native_pass(
    name: str,
    anchor: Literal["builtin.module", "func.func"] = "builtin.module",
    options: Mapping[str, OptionValue] | None = None,
    summary: str = "",
) -> None:
    """Registers ``name`` as a pass that runs only natively (``PassInfo.run`` is ``None``),
    with its anchor, options (name -> default) and summary; a later ``register_pass`` of the
    same name gives it a Python function."""
    PASSES[name] = PassInfo(name, anchor, None, dict(options or {}), summary, native=True)
    UNSUPPORTED.pop(name, None)
