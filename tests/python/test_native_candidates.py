"""``CandidateBatch`` on a module still held as a Rust program (``load_mlir``, no op asked for):
every step runs natively (``rust/src/transforms/propagation/candidates.rs``), the module is
never built, and each result is what the batch gives on the built module and what
``shardwise.propagate`` gives one by one."""

from __future__ import annotations

import warnings

import pytest
import shardwise as sw
from shardwise.importers.mlir import load_mlir
from shardwise.propagation import ShardingGroupWarning
from shardwise.rules.registry import register_op_rule, unregister_op_rule
from shardwise.testing.programs import random_candidates, transformer_step

GUARDED = """
sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {?}]> : tensor<8x8xf32>
  %1 = stablehlo.add %0, %arg1 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}"""

#: Two members of one sharding group with conflicting shardings: every solve reports the
#: conflict, so each candidate's module runs the whole pipeline (which inserts constraints).
CONFLICTING_GROUP = """
sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<8x8xf32>
  %1 = stablehlo.multiply %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}, {}]>]>} : tensor<8x8xf32>
  sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %1 group_id=0 : tensor<8x8xf32>
  %2 = stablehlo.add %0, %1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}"""


def _one_by_one(text: str, c: dict[str, sw.TensorSharding | None], conservative: bool = False) -> str:
    m = load_mlir(text)
    main = m.funcs[0]
    for key, s in c.items():
        if key.startswith("arg"):
            main.args[int(key[3:])].sharding = s
        else:
            i = int(key[6:])
            while len(main.result_shardings) <= i:
                main.result_shardings.append(None)
            main.result_shardings[i] = s
    return sw.propagate(m, conservative=conservative).to_mlir()


def _built(text: str) -> sw.Module:
    m = load_mlir(text)
    assert m.op is not None and m.native is None
    return m


@pytest.fixture(scope="module")
def step() -> str:
    return transformer_step(1)


@pytest.mark.jax
@pytest.mark.parametrize("conservative", [False, True])
def test_native_batch_equals_the_built_batch_and_one_by_one(step: str, conservative: bool) -> None:
    native = load_mlir(step)
    built = _built(step)
    batch = sw.CandidateBatch(native, conservative=conservative)
    on_built = sw.CandidateBatch(built, conservative=conservative)
    for seed, threads in ((7, 2), (8, 1), (7, 1)):
        cands = random_candidates(built, 4, seed=seed)
        cands[0]["result0"] = None  # a result too
        results = batch.propagate(cands, threads=threads)
        expected = on_built.propagate(cands, threads=threads)
        assert results.batched and expected.batched
        assert type(batch._prepared).__name__ == "_NativePrepared"
        for c, r, e in zip(cands, results, expected):
            assert r.annotations == e.annotations
            assert r.main_shardings() == e.main_shardings()
            out = r.module()
            assert out.native is not None  # still a Rust program
            assert out.to_mlir() == e.module().to_mlir() == _one_by_one(step, c, conservative)
    assert native.native is not None  # never built


@pytest.mark.jax
def test_native_batch_through_propagate_many_stays_native(step: str) -> None:
    built = _built(step)
    cands = random_candidates(built, 3, seed=21)
    native = load_mlir(step)
    results = sw.propagate_many(native, cands, threads=2)
    assert isinstance(results, sw.CandidateResults) and results.batched
    assert native.native is not None
    for c, r in zip(cands, results):
        assert r.module().to_mlir() == _one_by_one(step, c)


def test_guarded_arguments_fall_back_natively() -> None:
    m = load_mlir(GUARDED)
    batch = sw.CandidateBatch(m)
    s = sw.TensorSharding(m.meshes["mesh"], [[], ["y"]])
    free = batch.propagate([{"arg1": s}], threads=1)
    guarded = batch.propagate([{"arg0": s}, {"arg0": None}], threads=1)
    assert free.batched and not guarded.batched
    assert free[0].module().native is not None and guarded[0].module().native is not None
    assert free[0].module().to_mlir() == _one_by_one(GUARDED, {"arg1": s})
    assert guarded[0].module().to_mlir() == _one_by_one(GUARDED, {"arg0": s})
    assert guarded[1].module().to_mlir() == _one_by_one(GUARDED, {"arg0": None})
    expected = sw.CandidateBatch(_built(GUARDED)).propagate([{"arg0": s}, {"arg0": None}], threads=1)
    # Read from the results' Rust programs (nothing built), as from the built ones.
    assert [r.main_shardings() for r in guarded] == [r.main_shardings() for r in expected]
    assert guarded[0].main_shardings()[0][1] is not None
    assert all(r.module().native is not None for r in guarded) and m.native is not None


def test_conflicting_groups_run_the_whole_pipeline_natively() -> None:
    m = load_mlir(CONFLICTING_GROUP)
    s = sw.TensorSharding(m.meshes["mesh"], [[], ["y"]])
    results = sw.CandidateBatch(m).propagate([{"arg1": s}, {"result0": s}], threads=1)
    assert results.batched
    for c, r in zip(({"arg1": s}, {"result0": s}), results):
        assert r._out is not None and r._out.group_conflicts
        (conflict,) = r._out.group_conflicts
        assert (conflict.group_id, len(conflict.members)) == (0, 2)
        assert conflict.sharding.mesh_name == "mesh"
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            out = r.module()
        assert [w.category for w in got] == [ShardingGroupWarning]
        assert out.native is not None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert out.to_mlir() == _one_by_one(CONFLICTING_GROUP, c)
    assert m.native is not None


def test_values_name_arguments_once_the_module_is_built() -> None:
    m = load_mlir(GUARDED)
    batch = sw.CandidateBatch(m)
    assert m.native is not None
    s = sw.TensorSharding(m.meshes["mesh"], [[], ["y"]])
    arg1 = m.funcs[0].args[1]  # builds m; the batch's copy stays native
    results = batch.propagate([{arg1: s}], threads=1)
    assert results.batched and results[0].annotations == {("arg", 1): s.bind(m.meshes["mesh"])}
    assert results[0].module().to_mlir() == _one_by_one(GUARDED, {"arg1": s})
    other = load_mlir(GUARDED).funcs[0].args[1]
    with pytest.raises(ValueError, match="is no argument of @main"):
        batch.propagate([{other: s}], threads=1)


def test_bad_candidates_on_a_native_module() -> None:
    m = load_mlir(GUARDED)
    mesh = m.meshes["mesh"]
    batch = sw.CandidateBatch(m)
    with pytest.raises(ValueError, match="'arg9': @main has 2 args"):
        batch.propagate([{"arg9": None}])
    with pytest.raises(ValueError, match="'result1': @main has 1 results"):
        batch.propagate([{"result1": None}])
    with pytest.raises(ValueError, match="names mesh @other"):
        batch.propagate([{"arg1": sw.TensorSharding(sw.Mesh.parse('<["x"=2]>'), [[], []], mesh_name="other")}])
    with pytest.raises(sw.InvalidShardingError):
        batch.propagate([{"arg1": sw.TensorSharding(mesh, [["x"]])}])  # rank mismatch
    with pytest.raises(sw.ProgramError, match="no function to propagate"):
        sw.CandidateBatch(load_mlir('sdy.mesh @mesh = <["x"=2]>'))
    assert m.native is not None


def test_a_user_rule_takes_the_python_steps() -> None:
    m = load_mlir(GUARDED)
    s = sw.TensorSharding(m.meshes["mesh"], [[], ["y"]])
    register_op_rule("shardwise_test.op", lambda op, c: None)
    try:
        batch = sw.CandidateBatch(m)
        results = batch.propagate([{"arg1": s}], threads=1)
        assert type(batch._prepared).__name__ == "_Prepared"
        # The passes that read rules ran on the Python IR, the others natively: the export
        # passes leave a Rust program.
        assert results[0].module().native is not None
        expected = _one_by_one(GUARDED, {"arg1": s})
    finally:
        unregister_op_rule("shardwise_test.op")
    assert results[0].module().to_mlir() == expected
    assert m.native is not None  # the input stays native


def test_module_meshes_are_read_without_building() -> None:
    m = load_mlir(GUARDED)
    assert m.meshes == _built(GUARDED).meshes
    assert m.native is not None


def test_a_solve_of_another_program_is_refused() -> None:
    # NativeCandidates.materialize writes a solve back by value index: a solve of another
    # program is refused with an error, never indexed out of range.
    from shardwise import _native
    from shardwise.batch import _native_halves

    halves = _native_halves()
    assert halves is not None
    before, after = halves
    other = GUARDED.replace(
        "%1 = stablehlo.add %0, %arg1", "%2 = stablehlo.abs %arg1 : tensor<8x8xf32>\n  %1 = stablehlo.add %0, %2"
    )
    mine = _native.NativeCandidates(load_mlir(GUARDED).native, before, False)
    theirs = _native.NativeCandidates(load_mlir(other).native, before, False)
    with pytest.raises(sw.ProgramError, match="it is no solve of these candidates"):
        mine.materialize([], theirs.propagate([[]])[0], after)
    assert mine.materialize([], mine.propagate([[]])[0], after).print() == sw.propagate(load_mlir(GUARDED)).to_mlir()


def test_annotations_cross_as_typed_objects() -> None:
    # @main's candidate shardings go to the Rust program as `_native.Annotation`s, one kind
    # of place each ("arg" or "result"); another kind is refused when it is built.
    from shardwise import _native

    m = load_mlir(GUARDED)
    core = sw.TensorSharding(m.meshes["mesh"], [["x"], []])._native_sharding()
    a = _native.Annotation("arg", 1, core)
    assert (a.kind, a.index, a.sharding) == ("arg", 1, core)
    assert a == _native.Annotation("arg", 1, core) and a != _native.Annotation("result", 1, core)
    assert _native.Annotation("result", 0, None).sharding is None
    with pytest.raises(ValueError, match='unknown annotation kind "args"; expected "arg" or "result"'):
        _native.Annotation("args", 0, None)
    assert m.native is not None
    annotated = m.native.annotated([a]).main_shardings()[0]
    assert annotated[1] == core
