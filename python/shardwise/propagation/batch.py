"""``propagate_many``: many modules, or one program with many candidate sets of in/out
shardings (what-if evaluation for a sharding search), propagated as ``shardwise.propagate``
would propagate each one.

For candidates, the steps of Shardy's ``sdy-propagation-pipeline`` before propagation run once
on a copy of the program, the program is frozen once, and the Rust solver propagates every
candidate on worker threads with the GIL released (``rust/src/propagation/batch.rs``). The
steps after propagation (closing shardings, explicit reshards, …) run only when a candidate's
module is asked for (``CandidateResult.module()``).

That is exact when the steps before propagation do not read the annotated shardings: the
annotated values are @main's arguments and results, the program has one function, no
annotated argument feeds a sharding constraint, sharding group or manual computation, and no
mesh has a size-one axis. Otherwise each candidate runs the whole pipeline on its own (still
identical, just not faster); ``CandidateResults.batched`` says which path ran.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Union

from shardwise import _native
from shardwise.errors import ProgramError
from shardwise.ir.core import Func, Module, Value
from shardwise.ir.freeze import Frozen, freeze
from shardwise.ir.gc import no_cyclic_gc
from shardwise.sharding import TensorSharding

__all__ = ["CandidateResult", "CandidateResults", "propagate_many"]

#: A candidate: ``"argN"`` / ``"resultN"`` (or an argument ``Value`` of @main) -> sharding
#: (``None`` removes the stored one).
Candidate = Mapping[Union[str, Value], Union[TensorSharding, None]]

_PROPAGATION_STEP = "sdy-user-priority-propagate{keep-sharding-rules=true}"
_GUARDED_USERS = ("sdy.sharding_constraint", "sdy.sharding_group", "sdy.manual_computation")


def _threads(threads: int | None) -> int:
    if threads is None:
        return max(1, os.cpu_count() or 1)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int or None, got {threads!r}")
    return threads


@functools.lru_cache(maxsize=1)
def _pipeline_halves() -> tuple[str, str]:
    """``sdy-propagation-pipeline``'s steps before and after its propagation step."""
    from shardwise.api import PIPELINES
    from shardwise.passes.pipeline import expand_pipeline

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

    __slots__ = ("_batch", "_index", "_annotations", "_out", "_module")

    def __init__(self, batch: CandidateResults, index: int, annotations: dict[tuple[str, int], TensorSharding | None], out: Any) -> None:
        self._batch = batch
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
        if self._out is None or self._out.group_conflicts:
            m = self.module()
            f = m.func("main") if len(m.funcs) > 1 else m.funcs[0]
            return [a.sharding for a in f.args], list(f.result_shardings)
        b = self._batch
        assert b._frozen is not None and b._main is not None
        meshes = b._base_meshes
        wires = self._out.shardings_of([b._frozen.value_index(a) for a in b._main.args])
        args = [_sharding(w, meshes) for w in wires]
        main_index = b._frozen.op_index(b._main)
        results: list[TensorSharding | None] = []
        for f, ws in self._out.func_results:
            if f == main_index:
                results = [_sharding(w, meshes) for w in ws]
        return args, results

    def module(self) -> Module:
        """The propagated module, identical to ``shardwise.propagate`` of the original module
        with this candidate's annotations."""
        if self._module is None:
            self._module = self._batch._materialize(self)
        return self._module


def _sharding(w: Any, meshes: Mapping[str, Any]) -> TensorSharding | None:
    if w is None:
        return None
    return TensorSharding._from_wire(w, meshes.get(w[0]) if w[0] is not None else None)


class CandidateResults(Sequence[CandidateResult]):
    """The results of ``propagate_many(module, candidates)``, in candidate order;
    ``batched``: whether the solver ran all candidates on one frozen program (see the module
    docstring), ``threads``: worker threads used."""

    def __init__(self, module: Module, conservative: bool, threads: int) -> None:
        self.original = module
        self.conservative = conservative
        self.threads = threads
        self.batched = False
        self._items: list[CandidateResult] = []
        self._base: Module | None = None
        self._frozen: Frozen | None = None
        self._main: Func | None = None
        self._base_meshes: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> CandidateResult:  # type: ignore[override]
        return self._items[i]

    def _annotated(self, annotations: Mapping[tuple[str, int], TensorSharding | None], module: Module) -> Module:
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

    def _materialize(self, c: CandidateResult) -> Module:
        from shardwise.api import propagate
        from shardwise.passes import run_pipeline
        from shardwise.propagation import _write_back

        if c._out is None or c._out.group_conflicts or self._base is None:
            return propagate(self._annotated(c._annotations, self.original), conservative=self.conservative)
        m = self._annotated(c._annotations, self._base)
        with no_cyclic_gc():
            frozen = freeze(m, rules=False)
            _write_back(m, frozen, c._out, True)
            run_pipeline(m, _pipeline_halves()[1])
        return m


def _main(module: Module) -> Func:
    from shardwise.propagation import _main_func

    f = _main_func(module)
    if f is None:
        raise ProgramError("the module has no function to propagate")
    return f


def _key(main: Func, key: str | Value) -> tuple[str, int]:
    if isinstance(key, Value):
        for i, a in enumerate(main.args):
            if a is key:
                return ("arg", i)
        raise ValueError(f"candidate key {key!r} is no argument of @{main.sym_name}")
    for kind in ("arg", "result"):
        if isinstance(key, str) and key.startswith(kind) and key[len(kind) :].isdigit():
            i = int(key[len(kind) :])
            n = len(main.args) if kind == "arg" else len(main.result_types)
            if i >= n:
                raise ValueError(f"candidate key {key!r}: @{main.sym_name} has {n} {kind}s")
            return (kind, i)
    raise ValueError(f"candidate key {key!r}: expected 'argN', 'resultN' or an argument Value of @{main.sym_name}")


def _check(main: Func, meshes: dict[str, Any], key: tuple[str, int], s: TensorSharding | None) -> TensorSharding | None:
    if s is None:
        return None
    if not isinstance(s, TensorSharding):
        raise TypeError(f"candidate sharding for {key[0]}{key[1]} must be a TensorSharding or None, got {type(s).__name__}")
    if s.mesh_name not in meshes:
        raise ValueError(f"candidate sharding {s} for {key[0]}{key[1]} names mesh @{s.mesh_name}; the module defines {sorted(meshes)}")
    if s.mesh is None:
        s = s.bind(meshes[s.mesh_name])
    t = main.args[key[1]].type if key[0] == "arg" else main.result_types[key[1]]
    s.validate(t.shape)
    return s


def _batchable(module: Module, keys: set[tuple[str, int]]) -> bool:
    if len(module.funcs) != 1 or any(op.name == "func.call" for op in module.walk()):
        return False
    if any(a.size == 1 for m in module.meshes.values() for a in m.axes):
        return False
    main = module.funcs[0]
    from shardwise.ir.rewrite import Uses

    uses = Uses(module)
    for kind, i in keys:
        if kind == "arg" and any(u.name in _GUARDED_USERS for u in uses.users(main.args[i])):
            return False
    return True


def _propagate_candidates(module: Module, candidates: Sequence[Candidate], threads: int, conservative: bool) -> CandidateResults:
    # The collector is paused throughout: the many small objects made here would otherwise
    # set off full collections, which walk every object of the process (the module's IR, and
    # whatever else the caller holds).
    with no_cyclic_gc():
        return _propagate_candidates_nogc(module, candidates, threads, conservative)


def _propagate_candidates_nogc(module: Module, candidates: Sequence[Candidate], threads: int, conservative: bool) -> CandidateResults:
    from shardwise.passes import run_pipeline
    from shardwise.propagation import _check_types, _facts, _stored

    results = CandidateResults(module, conservative, threads)
    main, meshes = _main(module), module.meshes
    annotated = [{k: _check(main, meshes, k, s) for k, s in ((_key(main, key), s) for key, s in c.items())} for c in candidates]
    keys = {k for a in annotated for k in a}
    if not _batchable(module, keys):
        results._items = [CandidateResult(results, i, a, None) for i, a in enumerate(annotated)]
        return results
    base = module.copy()
    _check_types(base)
    run_pipeline(base, _pipeline_halves()[0])
    frozen = freeze(base, conservative=conservative)
    main = _main(base)
    main_index = frozen.op_index(main)
    meshes = base.meshes
    wires = [
        (
            [(frozen.value_index(main.args[i]), None if s is None else s._wire()) for (kind, i), s in a.items() if kind == "arg"],
            [(main_index, i, None if s is None else s._wire()) for (kind, i), s in a.items() if kind == "result"],
        )
        for a in annotated
    ]
    func_results = [(frozen.op_index(f), [None if s is None else s._wire() for s in f.result_shardings]) for f in base.funcs]
    outs = _native.propagate_candidates(
        frozen.graph,
        {name: m._wire() for name, m in meshes.items()},
        _stored(frozen),
        func_results,
        wires,
        threads,
        pass_name="user-priority",
        strategy="aggressive",
        conservative=conservative,
        run_op_priority=True,
        **_facts(base, frozen, []),
    )
    results.batched = True
    results._base, results._frozen, results._main, results._base_meshes = base, frozen, main, dict(meshes)
    results._items = [CandidateResult(results, i, a, out) for i, (a, out) in enumerate(zip(annotated, outs))]
    return results


def propagate_many(
    modules: Module | Sequence[Module],
    candidates: Sequence[Candidate] | None = None,
    *,
    threads: int | None = None,
    conservative: bool = False,
) -> list[Module] | CandidateResults:
    """Propagates many programs at once (Shardy's ``sdy-propagation-pipeline``, as
    ``shardwise.propagate``):

    * ``propagate_many([m1, m2, …], threads=N)`` -> the propagated modules, in order (inputs
      unchanged). The modules run on ``N`` Python threads; only their Rust solver steps run
      in parallel (the import/export passes hold the GIL).
    * ``propagate_many(module, candidates, threads=N)`` -> ``CandidateResults``: one result per
      candidate, a mapping ``"argN"`` / ``"resultN"`` (or an argument ``Value`` of @main) ->
      ``TensorSharding`` (or ``None``), the in/out shardings to try. ``result.module()`` is
      identical to ``shardwise.propagate`` of the module with those shardings set; the solver
      runs all candidates on one frozen program on ``N`` threads with the GIL released (see
      the module docstring for when that batching applies).

    ``threads`` defaults to the number of CPUs. No thread outlives the call (safe with fork).
    Raises ``ValueError`` for a bad key, a sharding on an unknown mesh or one that does not fit
    the value's shape (``InvalidShardingError``), ``TypeError`` for a non-sharding, and what
    ``shardwise.propagate`` raises."""
    n = _threads(threads)
    if candidates is not None:
        if not isinstance(modules, Module):
            raise TypeError(f"candidates go with one Module, got {type(modules).__name__}")
        return _propagate_candidates(modules, list(candidates), n, conservative)
    if isinstance(modules, Module):
        modules = [modules]
    from shardwise.api import propagate

    mods = list(modules)
    for m in mods:
        if not isinstance(m, Module):
            raise TypeError(f"propagate_many expects Modules, got {type(m).__name__}")
    if n == 1 or len(mods) < 2:
        return [propagate(m, conservative=conservative) for m in mods]
    with ThreadPoolExecutor(max_workers=min(n, len(mods))) as pool:
        return list(pool.map(lambda m: propagate(m, conservative=conservative), mods))
