"""``sdy-insert-explicit-reshards`` where operands and results disagree: propagated corpus
programs whose op results get random, conflicting shardings (sub-axes included), run through
the pass's full and basic versions, against jaxlib's Shardy on the same text. The decisions
(``rust/src/export/``) are Shardy's ``findCommonAxes`` heuristic, the dot rule, reshapes with
overflow axes and the unreduced collectives; this is where they meet many ops at once. Also the
axis-list helpers the passes share (``AxisRef.set_diff``, ``AxisRef.sort_and_merge``) and the
errors Shardy raises."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from corpus import require_corpus
from shardwise import AxisRef, DimSharding, Mesh, TensorSharding, load_mlir
from shardwise.errors import ProgramError
from shardwise.ir.types import TensorType
from shardwise.passes import run_pipeline

FULL = "builtin.module(func.func(sdy-insert-explicit-reshards{enable-full-version=true}))"
BASIC = "builtin.module(func.func(sdy-insert-explicit-reshards))"

#: Modules per seed, and seeds: ~60 modules, about 2/3 of which the full version changes.
PER_SEED = 20
SEEDS = (11, 12, 13)


def _random_sharding(rng: random.Random, mesh_name: str, mesh: Mesh, rank: int) -> TensorSharding:
    pool: list[AxisRef] = []
    for axis in mesh.axes:
        name, size = axis.name, axis.size
        parts = [k for k in range(2, size) if size % k == 0]
        if parts and rng.random() < 0.3:
            k = rng.choice(parts)
            pool.append(AxisRef(name, 1, k) if rng.random() < 0.5 else AxisRef(name, k, size // k))
        else:
            pool.append(AxisRef(name))
    rng.shuffle(pool)
    dims: list[list[AxisRef]] = [[] for _ in range(rank)]
    for a in pool:
        if rng.random() < 0.6:
            dims[rng.randrange(rank)].append(a)
    return TensorSharding(mesh_name, [DimSharding(d, closed=rng.random() < 0.5) for d in dims])


def _perturbed(seed: int) -> list[tuple[str, str]]:
    """``PER_SEED`` propagated programs of the corpus with random result shardings: every
    ranked result of an op outside manual computations (whose bodies may not use the manual
    axes), with probability 0.6."""
    root = require_corpus()
    rng = random.Random(seed)
    sources = sorted(root.glob("dev/*.out.mlir")) + sorted(root.glob("lit/*propagation*.out.mlir"))
    rng.shuffle(sources)
    out: list[tuple[str, str]] = []
    for path in sources:
        if len(out) >= PER_SEED:
            break
        module = load_mlir(path.read_text())
        if not module.meshes:
            continue
        mesh_name, mesh = next(iter(module.meshes.items()))
        if mesh.is_maximal or not mesh.axes:
            continue
        changed = 0
        for op in module.walk():
            if op.name.startswith(("func.", "sdy.", "builtin")) or op.regions or _in_manual(op):
                continue
            for r in op.results:
                t = r.type
                if isinstance(t, TensorType) and len(t.shape) > 0 and rng.random() < 0.6:
                    r.sharding = _random_sharding(rng, mesh_name, mesh, len(t.shape))
                    changed += 1
        if not changed:
            continue
        try:
            text = module.to_mlir()
        except ProgramError:
            continue  # a random sharding broke a rule (an sdy.all_reduce's operand and result)
        if _parses(text):  # jaxlib agrees that the program is valid
            out.append((Path(path).name, text))
    return out


def _parses(text: str) -> bool:
    from shardwise._jaxlib import context, ir

    with context():
        try:
            ir().Module.parse(text)
        except ir().MLIRError:
            return False
    return True


def _in_manual(op: object) -> bool:
    block = getattr(op, "parent", None)
    while block is not None and block.parent is not None and block.parent.parent is not None:
        owner = block.parent.parent
        if owner.name == "sdy.manual_computation":
            return True
        block = owner.parent
    return False


def _shardy(text: str, pipeline: str) -> str | None:
    """jaxlib's output, or None where Shardy refuses the program."""
    from jaxlib.mlir import passmanager
    from shardwise._jaxlib import context, ir

    with context():
        m = ir().Module.parse(text)
        try:
            passmanager.PassManager.parse(pipeline).run(m.operation)
        except ir().MLIRError:
            return None
        return str(m)


@pytest.mark.jax
@pytest.mark.parametrize("seed", SEEDS)
def test_conflicting_shardings_get_the_reshards_shardy_inserts(seed: int) -> None:
    cases = _perturbed(seed)
    assert len(cases) == PER_SEED
    changed = compared = 0
    for name, text in cases:
        for pipeline in (FULL, BASIC):
            expected = _shardy(text, pipeline)
            module = load_mlir(text)
            if expected is None:
                with pytest.raises((ProgramError, ValueError)):
                    run_pipeline(module, pipeline)
                    module.to_mlir()
                continue
            run_pipeline(module, pipeline)
            got = module.to_mlir()
            assert got == expected, f"{name} ({pipeline})"
            compared += 1
            changed += got != text
    # The seeds are chosen so that the programs disagree: most full-version runs insert ops.
    assert compared >= PER_SEED and changed >= PER_SEED // 2


MESH = Mesh({"x": 4, "y": 2})


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (['"x"'], ['"x":(1)2'], ['"x":(2)2']),
        (['"x"', '"y"'], ['"y"'], ['"x"']),
        (['"x"'], ['"x":(2)2'], ['"x":(1)2']),
        (['"x":(1)2', '"y"'], ['"x"'], ['"y"']),
        (['"x"', '"y"'], [], ['"x"', '"y"']),
        ([], ['"x"'], []),
    ],
)
def test_set_diff_keeps_what_the_other_axes_do_not_cover(a: list[str], b: list[str], expected: list[str]) -> None:
    got = AxisRef.set_diff([AxisRef.parse(t) for t in a], [AxisRef.parse(t) for t in b], MESH)
    assert [str(r) for r in got] == [str(AxisRef.parse(t)) for t in expected]


def test_sort_and_merge_orders_by_mesh_and_merges_adjacent_sub_axes() -> None:
    got = AxisRef.sort_and_merge([AxisRef("y"), AxisRef("x", 2, 2), AxisRef("x", 1, 2)], MESH)
    assert [str(r) for r in got] == ['"x"', '"y"']


def test_unreduced_axes_both_ways_are_refused_with_the_op() -> None:
    # Shardy's insertUnreducedCollectives refuses this (jaxlib 0.10.2 crashes on it).
    text = """
sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}], unreduced={"x"}>}) -> tensor<8x8xf32> {
  %0 = sdy.reshard %arg0 <@mesh, [{}, {}], unreduced={"y"}> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}"""
    module = load_mlir(text)
    with pytest.raises(ProgramError, match="sdy.reshard.*unreduced axes the other lacks"):
        run_pipeline(module, BASIC)
