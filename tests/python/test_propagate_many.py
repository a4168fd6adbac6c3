"""``shardwise.propagate_many``: batched candidates and many modules give exactly what
``shardwise.propagate`` gives one by one."""

from __future__ import annotations

import os
import signal
import time

import pytest
import shardwise as sw
from shardwise.importers.mlir import load_mlir
from shardwise.testing.programs import nested_cases, random_candidates, transformer_step

pytestmark = pytest.mark.jax


@pytest.fixture(scope="module")
def step() -> sw.Module:
    return load_mlir(transformer_step(1))


def _one_by_one(m: sw.Module, c: dict[str, sw.TensorSharding | None]) -> str:
    a = m.copy()
    for key, s in c.items():
        a.funcs[0].args[int(key[3:])].sharding = s
    return sw.propagate(a).to_mlir()


def test_batched_candidates_equal_one_by_one(step: sw.Module) -> None:
    cands = random_candidates(step, 6, seed=1)
    results = sw.propagate_many(step, cands, threads=2)
    assert isinstance(results, sw.CandidateResults)
    assert results.batched and len(results) == len(cands)
    for c, r in zip(cands, results):
        assert r.module().to_mlir() == _one_by_one(step, c)
        args, _ = r.main_shardings()
        for key, s in c.items():
            if s is not None:  # a user's sharding is kept (its closed dims at least)
                assert args[int(key[3:])] is not None


def test_candidate_results_read_value_by_value(step: sw.Module) -> None:
    # Each result keeps only what differs from the unannotated program's result; reading some
    # values gives what reading all of them gives.
    results = sw.propagate_many(step, random_candidates(step, 4, seed=3), threads=2)
    assert isinstance(results, sw.CandidateResults) and results.batched
    for r in results:
        out = r._out
        full = out.shardings
        assert any(w is not None for w in full)
        assert out.shardings_of(list(range(len(full)))) == full
        assert out.shardings_of([len(full) - 1, 0]) == [full[-1], full[0]]
        with pytest.raises(IndexError, match=f"value {len(full)} is out of range"):
            out.shardings_of([len(full)])


def test_threads_do_not_change_results(step: sw.Module) -> None:
    cands = random_candidates(step, 8, seed=2)
    one = sw.propagate_many(step, cands, threads=1)
    two = sw.propagate_many(step, cands, threads=2)
    assert isinstance(one, sw.CandidateResults) and isinstance(two, sw.CandidateResults)
    assert [r.main_shardings() for r in one] == [r.main_shardings() for r in two]


def test_many_modules(step: sw.Module) -> None:
    mods = [step, step.copy()]
    out = sw.propagate_many(mods, threads=2)
    assert isinstance(out, list)
    expected = sw.propagate(step).to_mlir()
    assert [m.to_mlir() for m in out] == [expected, expected]


def test_unbatchable_program_falls_back() -> None:
    text = """
    sdy.mesh @mesh = <["x"=2, "y"=4]>
    func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
      %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {?}]> : tensor<8x8xf32>
      %1 = stablehlo.add %0, %0 : tensor<8x8xf32>
      return %1 : tensor<8x8xf32>
    }"""
    m = load_mlir(text)
    s = sw.TensorSharding(m.meshes["mesh"], [[], ["y"]])
    results = sw.propagate_many(m, [{"arg0": s}, {"arg0": None}])
    assert isinstance(results, sw.CandidateResults) and not results.batched
    assert results[0].module().to_mlir() == _one_by_one(m, {"arg0": s})


def test_bad_candidates(step: sw.Module) -> None:
    mesh = step.meshes["mesh"]
    with pytest.raises(ValueError, match="arg999"):
        sw.propagate_many(step, [{"arg999": None}])
    with pytest.raises(ValueError, match="expected 'argN'"):
        sw.propagate_many(step, [{"bogus": None}])
    with pytest.raises(TypeError, match="TensorSharding"):
        sw.propagate_many(step, [{"arg0": "x"}])  # type: ignore[dict-item]
    with pytest.raises(sw.InvalidShardingError):
        sw.propagate_many(step, [{"arg0": sw.TensorSharding(mesh, [["x"]])}])  # rank mismatch
    with pytest.raises(ValueError, match="threads"):
        sw.propagate_many(step, [], threads=0)


def test_candidate_batch_calls_equal_one_by_one(step: sw.Module) -> None:
    # A batch is prepared once and keeps what its workers computed from call to call; each
    # call, on any number of threads, still gives what propagating one by one gives.
    m = step.copy()
    batch = sw.CandidateBatch(m)
    m.funcs[0].args[0].sharding = sw.TensorSharding(
        m.meshes["mesh"], [["x"]] + [[] for _ in m.funcs[0].args[0].type.shape[1:]]
    )
    for seed, threads in ((11, 2), (12, 1), (11, 2)):
        cands = random_candidates(step, 3, seed=seed)
        results = batch.propagate(cands, threads=threads)
        assert results.batched and results.threads == min(threads, os.cpu_count() or 1) and len(results) == len(cands)
        for c, r in zip(cands, results):
            # The batch copied the module when it was made: the later change is not seen.
            assert r.module().to_mlir() == _one_by_one(step, c)


def test_thread_counts_beyond_the_cpus_are_capped(step: sw.Module) -> None:
    """threads=20000 once raised a PanicException (thread spawn failed) or used every thread
    the system allows; it is capped at the CPU count and gives the same results."""
    cands = random_candidates(step, 3, seed=5)
    results = sw.CandidateBatch(step.copy()).propagate(cands, threads=20000)
    assert results.threads == (os.cpu_count() or 1)
    for c, r in zip(cands, results):
        assert r.module().to_mlir() == _one_by_one(step, c)


def test_candidate_batch_falls_back_for_guarded_arguments() -> None:
    text = """
    sdy.mesh @mesh = <["x"=2, "y"=4]>
    func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
      %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {?}]> : tensor<8x8xf32>
      %1 = stablehlo.add %0, %arg1 : tensor<8x8xf32>
      return %1 : tensor<8x8xf32>
    }"""
    m = load_mlir(text)
    batch = sw.CandidateBatch(m)
    s = sw.TensorSharding(m.meshes["mesh"], [[], ["y"]])
    free = batch.propagate([{"arg1": s}], threads=1)
    guarded = batch.propagate([{"arg0": s}], threads=1)
    assert free.batched and not guarded.batched
    assert free[0].module().to_mlir() == _one_by_one(m, {"arg1": s})
    assert guarded[0].module().to_mlir() == _one_by_one(m, {"arg0": s})
    with pytest.raises(TypeError, match="expects a Module"):
        sw.CandidateBatch("not a module")  # type: ignore[arg-type]


def test_candidate_batch_checks_each_key(step: sw.Module) -> None:
    # A batch remembers the annotations it checked, per argument: a sharding that fits one
    # argument is still checked against another's shape, and bad keys still raise.
    main = step.funcs[0]
    ranks = {i: len(a.type.shape) for i, a in enumerate(main.args)}
    i = next(i for i, r in ranks.items() if r == 2)
    j = next(j for j, r in ranks.items() if r != 2)
    s = sw.TensorSharding(step.meshes["mesh"], [[], []])
    batch = sw.CandidateBatch(step)
    assert batch.propagate([{f"arg{i}": s}], threads=1).batched
    assert batch.propagate([{main.args[i]: s}], threads=1).batched
    with pytest.raises(sw.InvalidShardingError):
        batch.propagate([{f"arg{j}": s}], threads=1)
    with pytest.raises(ValueError, match="expected 'argN'"):
        batch.propagate([{"bogus": s}], threads=1)
    with pytest.raises(TypeError, match="TensorSharding"):
        batch.propagate([{f"arg{i}": "x"}], threads=1)  # type: ignore[dict-item]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's warning; the child uses no JAX
def test_candidate_batch_in_a_forked_child(step: sw.Module) -> None:
    # A child process starts its calls from the unannotated solve (never from the states the
    # parent kept) and gets the same results. A fork during another thread's call, whose lock
    # the child would find held, is not reproduced here.
    batch = sw.CandidateBatch(step)
    cands = random_candidates(step, 3, seed=31)
    expected = [r.main_shardings() for r in batch.propagate(cands, threads=2)]
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 when the results match
        code = 1
        try:
            code = 0 if [r.main_shardings() for r in batch.propagate(cands, threads=2)] == expected else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 120
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child did not finish its batch call in 120 s")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0


def test_many_texts_propagate_natively_on_threads_as_one_by_one() -> None:
    """MLIR texts in, texts out: what ``load_mlir`` + ``propagate`` + ``to_mlir`` give, on one
    or two threads alike, with each text's warnings issued in the texts' order."""
    import warnings

    from shardwise.rules.exceptions import UnknownOpWarning
    from shardwise.testing.real_models import model_names, real_model

    texts = [real_model(n).text for n in model_names()[:3]]
    # A custom call without a rule warns: the second text has one.
    kernel = """module {
  sdy.mesh @m = <["x"=2]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@m, [{"x"}]>}) -> tensor<8xf32> {
    %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}"""
    batch = [texts[0], kernel, texts[1], texts[2]]
    with warnings.catch_warnings(record=True) as one_by_one:
        warnings.simplefilter("always")
        expected = [sw.propagate(load_mlir(t)).to_mlir() for t in batch]
    for threads in (1, 2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = sw.propagate_many(batch, threads=threads)
        assert out == expected
        assert [(w.category, str(w.message)) for w in caught] == [(w.category, str(w.message)) for w in one_by_one]
        assert any("my_kernel" in str(w.message) for w in caught)
    with pytest.warns(UnknownOpWarning):
        assert sw.propagate_many(kernel) == expected[1:2]


def test_many_texts_name_the_text_that_fails_and_fall_back_without_native_passes() -> None:
    from shardwise.errors import ShardwiseError
    from shardwise.rules.registry import register_op_rule, unregister_op_rule

    good = "module {\n  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n    return %arg0 : tensor<8xf32>\n  }\n}\n"
    # Read natively, refused by the native verifier; not read natively (the Python path, which
    # reads it through jaxlib, refuses it).
    unknown_axis = (
        'module {\n  sdy.mesh @m = <["x"=2]>\n  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = '
        '#sdy.sharding<@m, [{"q"}]>}) -> tensor<8xf32> {\n    return %arg0 : tensor<8xf32>\n  }\n}\n'
    )
    undefined = good.replace("return %arg0", "return %arg1")
    for bad, says in ((unknown_axis, 'unknown axis "q"'), (undefined, "undeclared SSA value")):
        with pytest.raises(ShardwiseError, match=says) as info:
            sw.propagate_many([good, good, bad], threads=2)
        assert "in text 2 of 3" in info.value.__notes__
    with pytest.raises(TypeError, match="Modules or MLIR texts"):
        sw.propagate_many([good, load_mlir(good)])  # type: ignore[list-item]
    # A user's rule sends the texts through the Python passes: the same output.
    native = sw.propagate_many([good], threads=1)
    register_op_rule("mydialect.op", lambda op, c: None)
    try:
        assert sw.propagate_many([good], threads=1) == native
    finally:
        unregister_op_rule("mydialect.op")


def test_many_texts_nested_too_deeply_or_not_unicode_are_named() -> None:
    """The nesting bound ``load_mlir`` keeps (``check_nesting``) holds for a batch of texts too,
    checked on the threads: the text's index in a note, the depth and line in the message; a
    lone surrogate is one ``ProgramError`` with the line, not the ``UnicodeEncodeError`` of
    handing the text to Rust."""
    from shardwise.errors import ProgramError
    from shardwise.importers.mlir import MAX_NESTING

    good = "module {\n  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n    return %arg0 : tensor<8xf32>\n  }\n}\n"
    levels = MAX_NESTING + 10
    deep = nested_cases(levels)
    for threads in (1, 2):
        with pytest.raises(
            ProgramError, match=f"nests regions {levels + 1} levels deep .line {MAX_NESTING + 1}."
        ) as info:
            sw.propagate_many([good, deep, good], threads=threads)
        assert "in text 1 of 3" in info.value.__notes__
        with pytest.raises(ProgramError, match="not valid Unicode text: character '.udcff' at line 3") as info:
            sw.propagate_many([good, good, good.replace("return %arg0 ", "return %arg0\udcff ")], threads=threads)
        assert "in text 2 of 3" in info.value.__notes__
