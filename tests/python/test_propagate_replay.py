"""The Rust batch solver (``_native.CandidateBatch``) replays the steps of a base solve, and of
its earlier candidates and calls, where their inputs recur (``rust/src/propagation/step_memo.rs``)
and skips op visits known to change nothing (``visit_cache.rs``). Its output for each candidate
must be the output of a single solve (``_native.propagate_shardings``) of that candidate's
input, field by field, counters included, whatever the batch propagated before: checked here on
random candidate sets of a transformer step."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
import shardwise as sw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardwise import _native
from shardwise.importers.mlir import load_mlir
from shardwise.testing.programs import transformer_step

pytestmark = pytest.mark.jax

Captured = tuple[tuple[Any, ...], dict[str, Any]]


@pytest.fixture(scope="module")
def captured() -> tuple[sw.Module, Captured]:
    """A two-layer step and the arguments ``propagate_many`` hands to the batch solver."""
    m = load_mlir(transformer_step(2))
    seen: list[Captured] = []
    real = _native.CandidateBatch

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return real(*args, **kwargs)

    _native.CandidateBatch = spy  # type: ignore[misc, assignment]
    try:
        main = m.funcs[0]
        mesh = m.meshes["mesh"]
        sw.propagate_many(m, [{"arg0": sw.TensorSharding(mesh, [[] for _ in main.args[0].type.shape])}] * 2, threads=1)
    finally:
        _native.CandidateBatch = real  # type: ignore[misc]
    return m, seen[0]


def _random_candidate(m: sw.Module, captured: Captured, rng: random.Random) -> tuple[list[Any], list[Any]]:
    """Stored-sharding overrides, as ``_native.Sharding`` objects, for a few of the values that store one
    (@main's arguments among them) and sometimes one of @main's results: random axes on random
    dimensions, open or closed, some with a priority, some removed."""
    args, _ = captured
    base, func_results = args[2], args[3]
    main = m.funcs[0]
    stored = [i for i, s in enumerate(base) if s is not None]
    mesh_name = base[stored[0]].mesh_name

    def sharding(rank: int) -> _native.Sharding:
        used: set[str] = set()
        dims = []
        for _ in range(rank):
            axes = [a for a in rng.sample(["x", "y"], rng.randint(0, 2)) if a not in used]
            used.update(axes)
            closed = rng.random() < 0.5
            priority = rng.choice([None, None, 0, 1, 2]) if axes or not closed else None
            dims.append(_native.Dim([_native.Axis(a) for a in axes], closed, priority))
        return _native.Sharding(mesh_name, None, dims, [], [])

    values: list[Any] = []
    for v in rng.sample(stored, min(len(stored), rng.randint(1, 4))):
        values.append((v, None if rng.random() < 0.1 else sharding(len(base[v].dims))))
    results: list[Any] = []
    main_index, shardings = func_results[0]
    if shardings and rng.random() < 0.5:
        k = rng.randrange(len(shardings))
        results.append((main_index, k, sharding(len(main.result_types[k].shape))))
    return values, results


def _single(captured: Captured, candidate: tuple[list[Any], list[Any]]) -> Any:
    args, kwargs = captured
    graph, meshes, shardings, func_results = args[0], args[1], list(args[2]), [(f, list(r)) for f, r in args[3]]
    values, results = candidate
    for v, w in values:
        shardings[v] = w
    for f, k, w in results:
        for op, rs in func_results:
            if op == f:
                rs[k] = w
    return _native.propagate_shardings(graph, meshes, shardings, func_results, *args[4:], **kwargs)


def _fields(out: Any) -> tuple[Any, ...]:
    # The table of distinct shardings (what the write-back reads) says what ``shardings`` says.
    table, index = out.sharding_table
    assert [None if i < 0 else table[i] for i in index] == out.shardings
    assert len({repr(w) for w in table}) == len(table)
    return (
        out.shardings,
        out.func_results,
        out.erased_ops,
        out.rule_ops,
        out.group_conflicts,
        out.rounds,
        out.visits,
        out.updates,
    )


def _singles(cap: Captured, candidates: list[tuple[list[Any], list[Any]]]) -> list[Any]:
    """Each candidate's single solve (its fields), or the error it raises."""
    singles: list[Any] = []
    for candidate in candidates:
        try:
            singles.append(_fields(_single(cap, candidate)))
        except sw.ShardwiseError as e:
            singles.append(e)
    return singles


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(2, 12), threads=st.sampled_from([1, 2, 3]))
def test_batched_solves_equal_single_solves(
    captured: tuple[sw.Module, Captured], seed: int, count: int, threads: int
) -> None:
    m, cap = captured
    rng = random.Random(seed)
    candidates = [_random_candidate(m, cap, rng) for _ in range(count)]
    args, kwargs = cap
    singles = _singles(cap, candidates)
    failed = [s for s in singles if isinstance(s, Exception)]
    batch = _native.CandidateBatch(*args, **kwargs)
    if failed:
        with pytest.raises(type(failed[0]), match=re.escape(str(failed[0]))):
            batch.propagate([_native.Candidate(*c) for c in candidates], threads)
        return
    outs = batch.propagate([_native.Candidate(*c) for c in candidates], threads)
    assert [_fields(out) for out in outs] == singles


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    calls=st.lists(st.tuples(st.integers(1, 6), st.sampled_from([1, 2, 3])), min_size=2, max_size=4),
)
def test_later_calls_of_a_batch_equal_single_solves(
    captured: tuple[sw.Module, Captured], seed: int, calls: list[tuple[int, int]]
) -> None:
    """A batch keeps its workers' steps and caches from call to call (and a call on more
    threads than before adds fresh workers): every call still gives the single solves."""
    m, cap = captured
    rng = random.Random(seed)
    args, kwargs = cap
    batch = _native.CandidateBatch(*args, **kwargs)
    for count, threads in calls:
        candidates = [_random_candidate(m, cap, rng) for _ in range(count)]
        singles = _singles(cap, candidates)
        if any(isinstance(s, Exception) for s in singles):
            with pytest.raises(sw.ShardwiseError):
                batch.propagate([_native.Candidate(*c) for c in candidates], threads)
            continue
        assert [
            _fields(out) for out in batch.propagate([_native.Candidate(*c) for c in candidates], threads)
        ] == singles
