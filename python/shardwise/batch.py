"""``propagate_many`` and ``CandidateBatch``: many modules, or one program with many candidate
sets of in/out shardings (what-if evaluation for a sharding search), propagated as
``shardwise.propagate`` would propagate each one.

For candidates, the steps of Shardy's ``sdy-propagation-pipeline`` before propagation run once
on a copy of the program, the program is frozen once, its unannotated form is propagated once,
and the Rust solver propagates every candidate on worker threads with the GIL released,
replaying the steps of earlier solves where their inputs recur
(``rust/src/propagation/batch.rs``). A ``CandidateBatch`` keeps all of that from call to call,
so a search that evaluates candidate sets of one program batch after batch pays for it once;
``propagate_many(module, candidates)`` is one call of a new batch. The steps after propagation
(closing shardings, explicit reshards, …) run only when a candidate's module is asked for
(``CandidateResult.module()``).

That is exact when the steps before propagation do not read the annotated shardings: the
annotated values are @main's arguments and results, the program has one function, no
annotated argument feeds a sharding constraint, sharding group or manual computation, and no
mesh has a size-one axis. Otherwise each candidate runs the whole pipeline on its own (still
identical, just not faster); ``CandidateResults.batched`` says which path ran.

A module still held as a Rust program (``Module.native``: read by ``load_mlir``, no op asked
for) stays one: the steps before propagation, freezing, the solves, writing a candidate's
solve back and the steps after propagation all run natively
(``rust/src/transforms/propagation/candidates.rs``), and ``CandidateResult.module()`` is such
a module too, as ``shardwise.propagate`` gives for it. That holds when every step is native
and no rule is registered by the user; otherwise the module is built and takes the Python
steps.

This module runs whole pipelines, so it sits above ``shardwise.api`` and ``shardwise.passes``,
and uses the solver driver of ``shardwise.propagation`` (freezing, program facts, write back).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shardwise import _native
from shardwise.api import (
    PIPELINES,
    native_pipeline_steps,
    pipeline_text,
    propagate,
    propagate_native_modules,
    propagate_texts,
)
from shardwise.errors import ProgramError
from shardwise.importers.mlir import load_mlir, verify_error
from shardwise.ir.core import Func, Module, Value
from shardwise.ir.gc import no_cyclic_gc
from shardwise.ir.rewrite import Uses
from shardwise.ir.types import parse_type
from shardwise.passes.pipeline import expand_pipeline, run_pipeline
from shardwise.propagation import _check_types, _main_func, _write_back, solver_inputs
from shardwise.propagation.freeze import freeze
from shardwise.sharding import TensorSharding

__all__ = ["CandidateBatch", "CandidateResult", "CandidateResults", "propagate_many"]

#: A candidate: ``"argN"`` / ``"resultN"`` (or an argument ``Value`` of @main) -> sharding
#: (``None`` removes the stored one).
Candidate = Mapping[str | Value, TensorSharding | None]

_PROPAGATION_STEP = "sdy-user-priority-propagate{keep-sharding-rules=true}"
#: Checked annotations a batch remembers at most (then it starts over).
_MAX_CHECKED = 1 << 16
_GUARDED_USERS = ("sdy.sharding_constraint", "sdy.sharding_group", "sdy.manual_computation")


def _threads(threads: int | None) -> int:
    """Worker threads for ``threads`` (``None``: one per CPU): at most one per CPU, since the
    solves are compute-bound and more threads only cost memory and start-up."""
    cpus = max(1, os.cpu_count() or 1)
    if threads is None:
        return cpus
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int or None, got {threads!r}")
    return min(threads, cpus)


def _native_halves() -> tuple[list[str], list[str]] | None:
    """The native steps of ``_pipeline_halves``, or ``None`` when either cannot run natively
    (a rule registered by the user)."""
    before, after = (native_pipeline_steps(h) for h in _pipeline_halves())
    return None if before is None or after is None else (before, after)


@functools.lru_cache(maxsize=1)
def _pipeline_halves() -> tuple[str, str]:
    """``sdy-propagation-pipeline``'s steps before and after its propagation step."""
    text = str(expand_pipeline(PIPELINES["full"]))
    inner = text[len("builtin.module(") : -1]
    before, sep, after = inner.partition("," + _PROPAGATION_STEP + ",")
    if not sep:
        raise AssertionError(f"unexpected expansion of sdy-propagation-pipeline: {text}")
    return f"builtin.module({before})", f"builtin.module({after})"


class CandidateResult:
    """One candidate's propagation: ``main_shardings()`` (from the solver, before the export
    steps) and ``module()`` (the module ``shardwise.propagate`` returns for the annotated
    program, built on first call)."""

    __slots__ = ("_results", "_index", "_annotations", "_out", "_module")

    def __init__(
        self, results: CandidateResults, index: int, annotations: dict[tuple[str, int], TensorSharding | None], out: Any
    ) -> None:
        self._results = results
        self._index = index
        self._annotations = annotations
        self._out = out
        self._module: Module | None = None

    @property
    def annotations(self) -> dict[tuple[str, int], TensorSharding | None]:
        """``("arg" | "result", index) -> sharding`` as given."""
        return dict(self._annotations)

    def main_shardings(self) -> tuple[list[TensorSharding | None], list[TensorSharding | None]]:
        """@main's argument and result shardings right after propagation (open dimensions
        still open; the export steps of the pipeline have not run)."""
        p = self._results._batch._prepared
        if self._out is None or self._out.group_conflicts or p is None:
            m = self.module()
            program = m.native
            if program is not None:  # read from the Rust program, nothing built
                meshes = m.meshes
                args, results = program.main_shardings()
                return [_sharding(w, meshes) for w in args], [_sharding(w, meshes) for w in results]
            f = m.func("main") if len(m.funcs) > 1 else m.funcs[0]
            return [a.sharding for a in f.args], list(f.result_shardings)
        return p.main_shardings(self._out)

    def module(self) -> Module:
        """The propagated module, identical to ``shardwise.propagate`` of the original module
        with this candidate's annotations."""
        if self._module is None:
            self._module = self._results._batch._materialize(self._annotations, self._out)
        return self._module


def _sharding(core: _native.Sharding | None, meshes: Mapping[str, Any]) -> TensorSharding | None:
    if core is None:
        return None
    return TensorSharding._from_core(core, meshes.get(core.mesh_name) if core.mesh_name is not None else None)


class CandidateResults(Sequence[CandidateResult]):
    """The results of one call of ``CandidateBatch.propagate`` (or ``propagate_many(module,
    candidates)``), in candidate order; ``batched``: whether the solver ran the candidates on
    the batch's frozen program (see the module docstring), ``threads``: worker threads
    used."""

    def __init__(
        self,
        batch: CandidateBatch,
        items: list[tuple[dict[tuple[str, int], TensorSharding | None], Any]],
        batched: bool,
        threads: int,
    ) -> None:
        self._batch = batch
        self.original = batch.original
        self.conservative = batch.conservative
        self.threads = threads
        self.batched = batched
        self._items = [CandidateResult(self, i, a, out) for i, (a, out) in enumerate(items)]

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> CandidateResult:  # type: ignore[override]
        return self._items[i]


class _Prepared:
    """The program after the steps before propagation, frozen, with the native batch (its
    unannotated form solved once)."""

    __slots__ = ("base", "main_index", "main_args", "meshes", "native")

    def __init__(self, module: Module, conservative: bool) -> None:
        base = module.copy()
        _check_types(base)
        run_pipeline(base, _pipeline_halves()[0])
        frozen = freeze(base, conservative=conservative)
        main = _main(base)
        self.base = base
        self.main_index = frozen.op_index(main)
        self.main_args = [frozen.value_index(a) for a in main.args]
        self.meshes = dict(base.meshes)
        inputs = solver_inputs(base, frozen, [])
        self.native = _native.CandidateBatch(
            frozen.graph,
            inputs.meshes,
            inputs.stored,
            inputs.func_results,
            inputs.facts,
            _native.PropagationOptions(
                pass_name="user-priority", strategy="aggressive", conservative=conservative, run_op_priority=True
            ),
        )

    def overrides(self, annotations: list[tuple[tuple[str, int], Any]]) -> _native.Candidate:
        """One candidate's overrides as the native batch takes them (from ``(key, core)``, the
        core a ``_native.Sharding`` or ``None``)."""
        return _native.Candidate(
            [(self.main_args[i], w) for (kind, i), w in annotations if kind == "arg"],
            [(self.main_index, i, w) for (kind, i), w in annotations if kind == "result"],
        )

    def propagate(self, checked: list[list[tuple[tuple[str, int], Any]]], threads: int) -> list[Any]:
        """The solves of the candidates ``checked`` (each a list of ``(key, core)``)."""
        return self.native.propagate([self.overrides(c) for c in checked], threads)

    def main_shardings(self, out: Any) -> tuple[list[TensorSharding | None], list[TensorSharding | None]]:
        """@main's argument and result shardings in the solve ``out``."""
        args = [_sharding(w, self.meshes) for w in out.shardings_of(self.main_args)]
        results: list[TensorSharding | None] = []
        for f, ws in out.func_results:
            if f == self.main_index:
                results = [_sharding(w, self.meshes) for w in ws]
        return args, results

    def materialize(self, annotations: Mapping[tuple[str, int], TensorSharding | None], out: Any) -> Module:
        """The module of the solve ``out`` of ``annotations``, after the pipeline's last steps."""
        m = _annotated(annotations, self.base)
        with no_cyclic_gc():
            frozen = freeze(m, rules=False)
            _write_back(m, frozen, out, True)
            run_pipeline(m, _pipeline_halves()[1])
        return m


class _NativePrepared:
    """``_Prepared`` for a module still held as a Rust program: the steps before propagation,
    freezing and the unannotated solve run natively (``_native.NativeCandidates``)."""

    __slots__ = ("module", "meshes", "native", "after")

    def __init__(self, module: Module, program: _native.NativeProgram, conservative: bool, steps: Any) -> None:
        before, self.after = steps
        self.module = module
        self.meshes = module.meshes
        self.native = _native.NativeCandidates(program, before, conservative)

    def propagate(self, checked: list[list[tuple[tuple[str, int], Any]]], threads: int) -> list[Any]:
        """The solves of the candidates ``checked`` (each a list of ``(key, core)``)."""
        return self.native.propagate([[_native.Annotation(kind, i, w) for (kind, i), w in c] for c in checked], threads)

    def main_shardings(self, out: Any) -> tuple[list[TensorSharding | None], list[TensorSharding | None]]:
        """@main's argument and result shardings in the solve ``out``."""
        args, results = self.native.main_shardings(out)
        return [_sharding(w, self.meshes) for w in args], [_sharding(w, self.meshes) for w in results]

    def materialize(self, annotations: Mapping[tuple[str, int], TensorSharding | None], out: Any) -> Module:
        """The module of the solve ``out`` of ``annotations``, after the pipeline's last steps
        (still a Rust program)."""
        try:
            program = self.native.materialize(_native_annotations(annotations), out, self.after)
        except _native.MlirVerifyError as e:
            raise verify_error(e, None) from None
        return self.module.with_native(program)


def _native_annotations(annotations: Mapping[tuple[str, int], TensorSharding | None]) -> list[_native.Annotation]:
    """``annotations`` as ``NativeProgram.annotated`` and ``NativeCandidates`` take them."""
    return [
        _native.Annotation(kind, i, None if s is None else s._native_sharding()) for (kind, i), s in annotations.items()
    ]


def _annotated(annotations: Mapping[tuple[str, int], TensorSharding | None], module: Module) -> Module:
    """A copy of ``module`` with @main's shardings set by ``annotations`` (still a Rust
    program when ``module`` is one)."""
    program = module.native
    if program is not None:
        return module.with_native(program.annotated(_native_annotations(annotations)))
    m = module.copy()
    main = _main(m)
    for (kind, i), s in annotations.items():
        if kind == "arg":
            main.args[i].sharding = s
        else:
            while len(main.result_shardings) <= i:
                main.result_shardings.append(None)
            main.result_shardings[i] = s
    return m


class _Main:
    """@main as candidates name it: its name, its argument ``Value``s (none while the module is
    a Rust program) and its argument and result types."""

    __slots__ = ("name", "args", "arg_types", "result_types")

    def __init__(self, module: Module) -> None:
        program = module.native
        if program is not None:
            self.name, args, results = program.main_signature()
            self.args: list[Value] = []
            self.arg_types = [parse_type(t) for t in args]
            self.result_types = [parse_type(t) for t in results]
        else:
            f = _main(module)
            self.name, self.args = f.sym_name, list(f.args)
            self.arg_types, self.result_types = [a.type for a in f.args], list(f.result_types)


class CandidateBatch:
    """A program prepared for propagating many candidate sets of @main's in/out shardings,
    call after call (the what-if evaluations of a sharding search).

    ``CandidateBatch(module)`` copies ``module`` (later changes to it are not seen; candidates
    still name @main's arguments by ``module``'s ``Value`` objects); the first
    call that can be batched runs the pipeline's steps before propagation, freezes the copy and
    solves it once unannotated. ``batch.propagate(candidates, threads=N)`` then gives one
    ``CandidateResult`` per candidate, each identical to ``shardwise.propagate`` of the module
    with that candidate's shardings set. The solver keeps what each worker thread computed
    from call to call and replays it where it recurs, so later calls are cheaper; results
    never depend on earlier calls. A candidate is a mapping ``"argN"`` / ``"resultN"`` (or an
    argument ``Value`` of @main) -> ``TensorSharding`` (or ``None`` to remove the stored one).
    A module still held as a Rust program (``Module.native``) is never built: everything runs
    natively (see the module docstring) and naming an argument by ``Value`` builds ``module``.

    Raises ``ProgramError`` when the module has no function to propagate; ``propagate`` raises
    ``ValueError`` for a bad key, a sharding on an unknown mesh or one that does not fit the
    value's shape (``InvalidShardingError``), ``TypeError`` for a non-sharding, and what
    ``shardwise.propagate`` raises. Calls from several Python threads are safe; their solves
    take turns. In a process forked from the one that made the batch, calls start from the
    unannotated solve (what the parent's workers kept stays behind)."""

    def __init__(self, module: Module, *, conservative: bool = False) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"CandidateBatch expects a Module, got {type(module).__name__}")
        with no_cyclic_gc():
            self._setup(module.copy(), conservative)
        # Candidates name @main's arguments by the Values of ``module`` (not of the copy).
        self._source: Module | None = module
        if module.native is None:
            self._name_source_args()

    @classmethod
    def _over(cls, module: Module, conservative: bool) -> CandidateBatch:
        """A batch over ``module`` itself, not a copy (for one call that leaves it as it is)."""
        batch = cls.__new__(cls)
        batch._setup(module, conservative)
        batch._source = None
        return batch

    def _setup(self, module: Module, conservative: bool) -> None:
        self.original = module
        self.conservative = conservative
        self._main = _Main(self.original)
        self._guarded = _guarded_args(self.original)
        self._meshes = self.original.meshes
        self._prepared: _Prepared | _NativePrepared | None = None
        # Keys and shardings already checked (a search repeats them from candidate to
        # candidate): key -> ("arg" | "result", index); (that, sharding) -> (the sharding bound
        # to its mesh, its core's sharding).
        self._keys: dict[str | Value, tuple[str, int]] = {}
        self._checked: dict[tuple[tuple[str, int], TensorSharding], tuple[TensorSharding, Any]] = {}

    def _name_source_args(self) -> None:
        """Names @main's arguments by the ``Value`` objects of the module the batch was made of
        (built, if it was still a Rust program)."""
        source, self._source = self._source, None
        if source is not None:
            self._keys.update((a, ("arg", i)) for i, a in enumerate(_main(source).args))

    def _annotation(
        self, key: str | Value, s: TensorSharding | None
    ) -> tuple[tuple[str, int], TensorSharding | None, Any]:
        """``(key, checked sharding, its core's sharding)`` of one annotation; raises as
        ``propagate``."""
        k = self._keys.get(key) if isinstance(key, (str, Value)) else None
        if k is None and isinstance(key, Value) and self._source is not None:
            self._name_source_args()
            k = self._keys.get(key)
        if k is None:
            k = _key(self._main, key)
            self._keys[key] = k
        if s is None:
            return k, None, None
        if not isinstance(s, TensorSharding):
            _check(self._main, self._meshes, k, s)  # raises
        known = self._checked.get((k, s))
        if known is None:
            bound = _check(self._main, self._meshes, k, s)
            assert bound is not None
            if len(self._checked) >= _MAX_CHECKED:
                self._checked.clear()
            known = self._checked[(k, s)] = (bound, bound._native_sharding())
        return k, known[0], known[1]

    def propagate(self, candidates: Sequence[Candidate], *, threads: int | None = None) -> CandidateResults:
        """One result per candidate, in order, propagated on ``threads`` worker threads
        (default: the number of CPUs); see the class docstring."""
        n = _threads(threads)
        # The collector is paused throughout: the many small objects made here would otherwise
        # set off full collections, which walk every object of the process (the module's IR,
        # and whatever else the caller holds).
        with no_cyclic_gc():
            checked = [[self._annotation(key, s) for key, s in c.items()] for c in candidates]
            annotated = [{k: s for k, s, _ in c} for c in checked]
            if self._guarded is None or any(k in self._guarded for a in annotated for k in a):
                return CandidateResults(self, [(a, None) for a in annotated], False, n)
            if self._prepared is None:
                self._prepared = self._prepare()
            outs = self._prepared.propagate([[(k, w) for k, _, w in c] for c in checked], n)
            return CandidateResults(self, list(zip(annotated, outs)), True, n)

    def _prepare(self) -> _Prepared | _NativePrepared:
        """The program ready for the candidates' solves: natively when the module is still a
        Rust program and every step is native (no user rule), else on the Python IR."""
        program = self.original.native
        if program is not None:
            steps = _native_halves()
            if steps is not None:
                return _NativePrepared(self.original, program, self.conservative, steps)
        return _Prepared(self.original, self.conservative)

    def _materialize(self, annotations: Mapping[tuple[str, int], TensorSharding | None], out: Any) -> Module:
        p = self._prepared
        if out is None or out.group_conflicts or p is None:
            return propagate(_annotated(annotations, self.original), conservative=self.conservative)
        return p.materialize(annotations, out)


def _main(module: Module) -> Func:
    f = _main_func(module)
    if f is None:
        raise ProgramError("the module has no function to propagate")
    return f


def _key(main: _Main, key: str | Value) -> tuple[str, int]:
    if isinstance(key, Value):
        for i, a in enumerate(main.args):
            if a is key:
                return ("arg", i)
        raise ValueError(f"candidate key {key!r} is no argument of @{main.name}")
    for kind in ("arg", "result"):
        if isinstance(key, str) and key.startswith(kind) and key[len(kind) :].isdigit():
            i = int(key[len(kind) :])
            n = len(main.arg_types) if kind == "arg" else len(main.result_types)
            if i >= n:
                raise ValueError(f"candidate key {key!r}: @{main.name} has {n} {kind}s")
            return (kind, i)
    raise ValueError(f"candidate key {key!r}: expected 'argN', 'resultN' or an argument Value of @{main.name}")


def _check(
    main: _Main, meshes: dict[str, Any], key: tuple[str, int], s: TensorSharding | None
) -> TensorSharding | None:
    if s is None:
        return None
    if not isinstance(s, TensorSharding):
        raise TypeError(
            f"candidate sharding for {key[0]}{key[1]} must be a TensorSharding or None, got {type(s).__name__}"
        )
    if s.mesh_name not in meshes:
        raise ValueError(
            f"candidate sharding {s} for {key[0]}{key[1]} names mesh @{s.mesh_name}; the module defines {sorted(meshes)}"
        )
    if s.mesh is None:
        s = s.bind(meshes[s.mesh_name])
    t = main.arg_types[key[1]] if key[0] == "arg" else main.result_types[key[1]]
    s.validate(getattr(t, "shape", None))
    return s


def _guarded_args(module: Module) -> set[tuple[str, int]] | None:
    """The annotations that the steps before propagation read (see the module docstring):
    ``None`` when no annotation can be batched, else the @main arguments that feed a sharding
    constraint, sharding group or manual computation (read natively while ``module`` is a Rust
    program: ``NativeProgram.guarded_args``)."""
    program = module.native
    if program is not None:
        guarded = program.guarded_args()
        return None if guarded is None else {("arg", i) for i in guarded}
    if len(module.funcs) != 1 or any(op.name == "func.call" for op in module.walk()):
        return None
    if any(a.size == 1 for m in module.meshes.values() for a in m.axes):
        return None
    main = module.funcs[0]
    uses = Uses(module)
    return {("arg", i) for i, a in enumerate(main.args) if any(u.name in _GUARDED_USERS for u in uses.users(a))}


def propagate_many(
    modules: Module | str | Sequence[Module] | Sequence[str],
    candidates: Sequence[Candidate] | None = None,
    *,
    threads: int | None = None,
    conservative: bool = False,
) -> list[Module] | list[str] | CandidateResults:
    """Propagates many programs at once (Shardy's ``sdy-propagation-pipeline``, as
    ``shardwise.propagate``):

    * ``propagate_many([m1, m2, …], threads=N)`` -> the propagated modules, in order (inputs
      unchanged). Modules still held as Rust programs (``Module.native``: read by
      ``load_mlir``, no op asked for) run the native pipeline on ``N`` threads with the GIL
      released (``shardwise.api.propagate_native_modules``); otherwise the modules run on
      ``N`` Python threads and only their Rust solver steps run in parallel (the
      import/export passes hold the GIL).
    * ``propagate_many([text1, text2, …], threads=N)`` -> the propagated programs as MLIR text,
      in order: read, propagated and printed in Rust on ``N`` threads with the GIL released
      (``shardwise.api.propagate_texts``), or, when that cannot run natively (a user rule is
      registered, or the native reader does not support a text), each loaded, propagated and
      printed as ``load_mlir``, ``propagate`` and ``Module.to_mlir`` do, which is what the
      native path gives too.
    * ``propagate_many(module, candidates, threads=N)`` -> ``CandidateResults``: one result per
      candidate, a mapping ``"argN"`` / ``"resultN"`` (or an argument ``Value`` of @main) ->
      ``TensorSharding`` (or ``None``), the in/out shardings to try. ``result.module()`` is
      identical to ``shardwise.propagate`` of the module with those shardings set; the solver
      runs all candidates on one frozen program on ``N`` threads with the GIL released (see
      the module docstring for when that batching applies).

    ``threads`` defaults to the number of CPUs and is capped at it. No thread outlives the call (safe with fork).
    Raises ``ValueError`` for a bad key, a sharding on an unknown mesh or one that does not fit
    the value's shape (``InvalidShardingError``), ``TypeError`` for a non-sharding or a list
    mixing modules and texts, and what ``shardwise.propagate`` raises (for texts also
    ``MlirReadError`` and ``MlirVerifyError``, noted with the text's index)."""
    n = _threads(threads)
    if candidates is not None:
        if not isinstance(modules, Module):
            raise TypeError(f"candidates go with one Module, got {type(modules).__name__}")
        return CandidateBatch._over(modules, conservative).propagate(list(candidates), threads=n)
    items: list[Any] = [modules] if isinstance(modules, (Module, str)) else list(modules)
    if items and all(isinstance(t, str) for t in items):
        return _propagate_texts(items, n, conservative)
    for m in items:
        if not isinstance(m, Module):
            raise TypeError(f"propagate_many expects Modules or MLIR texts (not both), got {type(m).__name__}")
    mods: list[Module] = items
    native = propagate_native_modules(mods, pipeline_text("full", conservative=conservative), threads=n)
    if native is not None:
        return native
    if n == 1 or len(mods) < 2:
        return [propagate(m, conservative=conservative) for m in mods]
    with ThreadPoolExecutor(max_workers=min(n, len(mods))) as pool:
        return list(pool.map(lambda m: propagate(m, conservative=conservative), mods))


def _propagate_texts(texts: list[str], threads: int, conservative: bool) -> list[str]:
    """``propagate_many`` of MLIR texts (see there)."""
    pipeline = pipeline_text("full", conservative=conservative)
    out = propagate_texts(texts, pipeline, threads=threads)
    if out is not None:
        return out

    def one(i: int) -> str:
        try:
            return propagate(load_mlir(texts[i]), pipeline, in_place=True).to_mlir()
        except Exception as e:
            e.add_note(f"in text {i} of {len(texts)}")
            raise

    if threads == 1 or len(texts) < 2:
        return [one(i) for i in range(len(texts))]
    with ThreadPoolExecutor(max_workers=min(threads, len(texts))) as pool:
        return list(pool.map(one, range(len(texts))))
