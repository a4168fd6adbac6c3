"""The main job: ``propagate(module, pipeline=...)``, Shardy's propagation pipeline on a module.

Pipelines are Shardy's pass-pipeline strings (as its lit tests use them) or these short names:

| name            | Shardy pipeline                                                        |
|-----------------|------------------------------------------------------------------------|
| ``full``        | ``builtin.module(sdy-propagation-pipeline)``: import, user-priority propagation, export |
| ``user-priority`` | ``builtin.module(sdy-user-priority-propagate)``                      |
| ``op-priority`` | ``builtin.module(sdy-op-priority-propagate)``                          |
| ``aggressive``  | ``builtin.module(sdy-aggressive-propagate{propagation-strategy=aggressive})`` |
| ``basic``       | ``builtin.module(sdy-basic-propagate)``                                |

The passes are in ``shardwise.passes`` (import/export steps, the registry and the pipelines)
and ``shardwise.propagation`` (the Rust solver; ``propagation_pipeline.cc`` and friends in
Shardy), both below this module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from shardwise import _native
from shardwise.errors import PipelineError, ProgramError
from shardwise.importers.mlir import MAX_BRACKETS, MAX_NESTING, check_encodable, check_nesting, verify_error
from shardwise.importers.native import build_op
from shardwise.ir.core import Module
from shardwise.ir.gc import no_cyclic_gc
from shardwise.passes.native import native_program, run_native
from shardwise.passes.pipeline import COMPOSITES, expand_pipeline, native_steps, run_pipeline
from shardwise.passes.registry import PASSES
from shardwise.rules.registry import has_user_rules

__all__ = [
    "PIPELINES",
    "native_pipeline_steps",
    "pipeline_text",
    "propagate",
    "propagate_native_modules",
    "propagate_text",
    "propagate_texts",
]

PIPELINES: dict[str, str] = {
    "full": "builtin.module(sdy-propagation-pipeline)",
    "user-priority": "builtin.module(sdy-user-priority-propagate)",
    "op-priority": "builtin.module(sdy-op-priority-propagate)",
    "aggressive": "builtin.module(sdy-aggressive-propagate{propagation-strategy=aggressive})",
    "basic": "builtin.module(sdy-basic-propagate)",
}

_PASS_OF = {
    "full": "sdy-propagation-pipeline",
    "user-priority": "sdy-user-priority-propagate",
    "op-priority": "sdy-op-priority-propagate",
    "aggressive": "sdy-aggressive-propagate",
    "basic": "sdy-basic-propagate",
}


def pipeline_text(pipeline: str = "full", *, conservative: bool = False) -> str:
    """The Shardy pipeline string for a short name (``full``, ``basic``, …) or a pipeline
    string, with ``conservative-propagation=true`` added to a named pipeline's pass when asked.

    Raises ``ValueError`` for ``conservative`` with a pipeline string (write the option in it),
    ``PipelineError`` for a bare word that is neither a short name nor a pass or pipeline
    shardwise runs (the message lists the short names first)."""
    if pipeline not in PIPELINES:
        word = pipeline.strip()
        if re.fullmatch(r"[\w.-]+", word) and word not in PASSES and word not in COMPOSITES:
            raise PipelineError(
                f"unknown pipeline {pipeline!r}: expected a name ({', '.join(PIPELINES)}) or a Shardy pass pipeline "
                f"such as 'builtin.module(sdy-propagation-pipeline)'"
            )
        if conservative:
            raise ValueError(
                f"conservative=True needs a pipeline name {sorted(PIPELINES)}; add conservative-propagation=true to {pipeline!r}"
            )
        return pipeline
    if not conservative:
        return PIPELINES[pipeline]
    name = _PASS_OF[pipeline]
    if pipeline == "full":
        # Shardy's composite pipeline takes no conservative option: its propagation step does.
        step = "sdy-user-priority-propagate{keep-sharding-rules=true}"
        text = str(expand_pipeline(PIPELINES["full"]))
        if step not in text:
            raise AssertionError(f"unexpected expansion of {PIPELINES['full']}: {text}")
        text = text.replace(step, "sdy-user-priority-propagate{conservative-propagation=true keep-sharding-rules=true}")
        # sdy-save-module only dumps the module (to a directory not set here); jaxlib does not
        # register it as a pass of its own.
        return text.replace("sdy-save-module,", "").replace(",sdy-save-module", "")
    if pipeline == "aggressive":
        return f"builtin.module({name}{{conservative-propagation=true propagation-strategy=aggressive}})"
    return f"builtin.module({name}{{conservative-propagation=true}})"


def propagate(module: Module, pipeline: str = "full", *, conservative: bool = False, in_place: bool = False) -> Module:
    """Runs Shardy's propagation ``pipeline`` (a short name or a pass-pipeline string, see the
    module docstring) and returns the module with every value's sharding decided, identical to
    what Shardy's ``sdy-propagation-pipeline`` gives (measured on the conformance corpus).
    ``conservative`` forbids split axes and non-divisible axes, as Shardy's
    ``conservative-propagation``. The input is left unchanged unless ``in_place``. A module
    runs the native passes on its Rust program (``NativeProgram.run``, the GIL released) when
    every pass of the pipeline is native and no rule is registered by the user: the module's
    own while it is not built (``Module.native``: read by ``load_mlir``, no op asked for),
    else one read from its Python ops (``shardwise.passes.native.native_program``); the result
    is such a module, built when asked for (``in_place``: the module itself, whose ops and
    values the passes kept keep their Python objects). Otherwise ``run_pipeline`` runs the native passes
    natively and the others on the Python IR.

    Raises ``PipelineError`` for an unknown pass or option, ``ProgramError`` (op and location)
    for programs Shardy rejects or modules that do not verify, ``ShardingError`` for invalid
    shardings."""
    text = pipeline_text(pipeline, conservative=conservative)
    steps = native_pipeline_steps(text)
    if steps is not None and in_place:
        if run_native(module, steps):  # a built module keeps the objects of the ops kept
            return module
    elif steps is not None:
        program = native_program(module)
        if program is not None:
            try:
                out = program.run(steps)
            except _native.MlirVerifyError as e:
                raise verify_error(e, None) from None
            return Module.from_native(out, build_op)
    # One pause of the cyclic collector over the copy and the pipeline (``shardwise.ir.gc``):
    # the collector then runs once after both, not once after each.
    with no_cyclic_gc():
        target = module if in_place else module.copy()
        run_pipeline(target, text)
    return target


def propagate_text(text: str, pipeline: str, *, source: str | os.PathLike[str] | None = None) -> str | None:
    """``text`` (MLIR) propagated by ``pipeline`` (a Shardy pipeline string, see
    ``pipeline_text``) entirely in Rust, text to text with the GIL released
    (``_native.run_native_passes``), when every pass of it runs natively, no rule is registered
    by the user and the native reader reads the text; ``None`` otherwise (then load the module
    and ``propagate`` it: ``load_mlir`` then decides about text the native reader refuses, as it
    would without this path). The output is what ``propagate`` and ``Module.to_mlir`` give (the
    native passes are compared with the Python ones on the conformance corpus and real
    programs). ``source``, the file the text was read from, names it in errors and in the
    locations of ops without one, as ``load_mlir(path)`` does.

    Raises what the passes raise (``ProgramError``, ``ShardingError``, ...) and, as
    ``load_mlir`` and ``Module.to_mlir`` do, ``ProgramError`` for text nested too deeply
    (``MAX_NESTING``, ``MAX_BRACKETS``) and for a module that does not verify, before or after
    the passes."""
    steps = native_pipeline_steps(pipeline)
    if steps is None:
        return None
    check_nesting(text, source)
    try:
        return _native.run_native_passes(text, steps, "-" if source is None else os.fspath(source))
    except _native.MlirReadError:
        return None
    except _native.MlirVerifyError as e:
        raise verify_error(e, source) from None


def propagate_texts(texts: Sequence[str], pipeline: str, *, threads: int = 1) -> list[str] | None:
    """``propagate_text`` for each of ``texts``, all in Rust on ``threads`` scoped threads with
    the GIL released throughout (``_native.run_native_passes_many``): the propagated texts in
    order, or ``None`` when the pipeline is not native, a user rule is registered, or the native
    reader does not read one of the texts. The warnings come afterwards, text by text.

    Raises what ``propagate_text`` raises, for the first text (in order) that fails, with a
    note naming its index."""
    steps = native_pipeline_steps(pipeline)
    if steps is None:
        return None
    try:
        # The nesting bound (``check_nesting``) is checked on the threads, text by text.
        return _native.run_native_passes_many(list(texts), steps, threads, nesting=(MAX_NESTING, MAX_BRACKETS))
    except UnicodeEncodeError:
        for i, text in enumerate(texts):
            try:
                check_encodable(text, None)
            except ProgramError as e:
                e.add_note(f"in text {i} of {len(texts)}")
                raise
        raise
    except _native.MlirReadError:
        return None
    except _native.MlirVerifyError as e:
        raise _noted_verify_error(e) from None


def propagate_native_modules(modules: Sequence[Module], pipeline: str, *, threads: int = 1) -> list[Module] | None:
    """``propagate`` of each of ``modules`` (inputs unchanged), all in Rust on ``threads``
    scoped threads with the GIL released throughout (``_native.run_native_programs_many``),
    when the pipeline is native and no user rule is registered: each module's Rust program
    (its own while not built, else read from its Python ops: ``shardwise.passes.
    native_program``); ``None`` otherwise, or when the native reader cannot read a built
    module. The results are modules built when asked for. The warnings come afterwards,
    module by module.

    Raises what ``propagate`` raises, for the first module (in order) that fails, with a note
    naming its index."""
    steps = native_pipeline_steps(pipeline)
    if steps is None:
        return None
    programs = []
    for m in modules:
        program = native_program(m)
        if program is None:
            return None
        programs.append(program)
    try:
        out = _native.run_native_programs_many(programs, steps, threads)
    except _native.MlirVerifyError as e:
        raise _noted_verify_error(e) from None
    return [Module.from_native(p, build_op) for p in out]


def _noted_verify_error(e: _native.MlirVerifyError) -> ProgramError:
    """``verify_error`` of a batch's failure, with its notes (the failing item's index)."""
    err = verify_error(e, None)
    for note in getattr(e, "__notes__", []):
        err.add_note(note)
    return err


def native_pipeline_steps(pipeline: str) -> list[str] | None:
    """The native passes ``pipeline`` (Shardy's pipeline syntax) runs, as ``NativeProgram.run``
    takes them, or ``None`` when it cannot run natively (a pass or option without a native
    version, or a rule registered by the user). Raises ``PipelineError`` for malformed text."""
    if has_user_rules():
        return None
    return native_steps(pipeline, _native.native_pass_options())
