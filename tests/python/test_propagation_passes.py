"""Shardy's propagation passes (``shardwise.propagation``) against Shardy itself.

The oracle is the Shardy inside jaxlib 0.10.2: the lit corpus it produced
(``../shared/conformance/lit``, every case of ``sdy-basic-propagate``,
``sdy-aggressive-propagate``, ``sdy-op-priority-propagate`` and
``sdy-user-priority-propagate``), and the passes run by jaxlib on generated programs. A result
must be the same text as jaxlib's printing of Shardy's module. The other tests check the API:
copies, options, errors, dead ops, sharding groups, rules, manual computations.
"""

from __future__ import annotations

import json
import math
import random
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import shardwise as sw
from shardwise import _native
from shardwise.errors import InvalidShardingError, ProgramError
from shardwise.propagation import PASS_NAMES, PropagationStats, ShardingGroupWarning, run_propagation_pass
from shardwise.propagation.freeze import freeze
from shardwise.rules import UnknownOpWarning

jax_mlir = pytest.importorskip("jax._src.interpreters.mlir", reason="jax/jaxlib (the test extra) is not installed")
from corpus import conformance_dir
from jaxlib.mlir import ir, passmanager

pytestmark = [pytest.mark.jax, pytest.mark.filterwarnings("ignore::shardwise.rules.UnknownOpWarning")]

#: Lit pipelines of the four passes -> (pass name, options of ``run_propagation_pass``).
LIT_PIPELINES: dict[str, tuple[str, dict[str, Any]]] = {
    "builtin.module(sdy-basic-propagate)": ("basic", {}),
    "builtin.module(sdy-basic-propagate{conservative-propagation=true})": ("basic", {"conservative": True}),
    "builtin.module(sdy-basic-propagate{keep-sharding-rules=true})": ("basic", {"keep_sharding_rules": True}),
    "builtin.module(sdy-aggressive-propagate{propagation-strategy=aggressive})": ("aggressive", {}),
    "builtin.module(sdy-op-priority-propagate)": ("op-priority", {}),
    "builtin.module(sdy-user-priority-propagate)": ("user-priority", {}),
}

_CTX: Any = None


def _context() -> Any:
    global _CTX
    if _CTX is None:
        _CTX = jax_mlir.make_ir_context()
    return _CTX


def jax_print(text: str) -> str:
    """jaxlib's printing of a module (the normal form ``to_mlir`` produces)."""
    with _context():
        return str(ir.Module.parse(text))


def shardy(text: str, pipeline: str) -> str:
    """Shardy's result of ``pipeline`` on ``text``, as jaxlib prints it."""
    with _context():
        m = ir.Module.parse(text)
        passmanager.PassManager.parse(pipeline).run(m.operation)
        return str(m)


def ours(text: str, pass_name: str, **options: Any) -> str:
    module = sw.load_mlir(text)
    run_propagation_pass(module, pass_name, **options)
    return module.to_mlir()


# ---------------------------------------------------------------------------- the lit corpus


def _lit_cases() -> list[dict[str, Any]]:
    path = conformance_dir()
    if path is None or not (path / "lit" / "index.json").is_file():
        return []
    index = json.loads((path / "lit" / "index.json").read_text())
    return [c for c in index["cases"] if c["pipeline"] in LIT_PIPELINES]


LIT_CASES = _lit_cases()


@pytest.mark.corpus
def test_lit_corpus_has_every_case_of_the_four_passes() -> None:
    if not LIT_CASES:
        pytest.skip("../shared/conformance/lit is absent (set SHARDWISE_CONFORMANCE to point at it)")
    counts: dict[str, int] = {}
    for c in LIT_CASES:
        name = LIT_PIPELINES[c["pipeline"]][0]
        counts[name] = counts.get(name, 0) + 1
    assert counts == {"basic": 123, "aggressive": 23, "op-priority": 15, "user-priority": 19}


@pytest.mark.corpus
@pytest.mark.parametrize("case", LIT_CASES, ids=[c["id"] for c in LIT_CASES])
def test_lit_case_is_exact(case: dict[str, Any]) -> None:
    lit = Path(str(conformance_dir())) / "lit"
    pass_name, options = LIT_PIPELINES[case["pipeline"]]
    expected = jax_print((lit / case["out"]).read_text())
    module = sw.load_mlir(lit / case["in"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_propagation_pass(module, pass_name, **options)
    group_warnings = [w for w in caught if issubclass(w.category, ShardingGroupWarning)]
    # Shardy's only diagnostics in these cases are its sharding group warnings.
    assert bool(group_warnings) == ("warning" in case["expected_diagnostics"])
    assert module.to_mlir() == expected


# ---------------------------------------------------------------------------- generated programs

AXES = ("a", "b", "c")
SHAPES = ((8, 16), (16, 8), (8, 8), (4, 8, 4), (128,))


def _type(shape: tuple[int, ...]) -> str:
    return "tensor<" + "x".join(map(str, shape)) + "xf32>"


def _sharding(r: random.Random, shape: tuple[int, ...], priorities: bool) -> str:
    used: list[str] = []
    dims = []
    for _ in shape:
        axes = []
        for _ in range(r.choice((0, 0, 1, 1, 2))):
            free = [a for a in AXES if a not in used]
            if free:
                a = r.choice(free)
                used.append(a)
                axes.append(a)
        closed = r.random() < 0.3
        body = ", ".join(f'"{a}"' for a in axes)
        if not closed:
            body = body + ", ?" if body else "?"
        prio = f"p{r.randint(0, 2)}" if priorities and (axes or not closed) and r.random() < 0.5 else ""
        dims.append("{" + body + "}" + prio)
    free = [a for a in AXES if a not in used]
    rep = f', replicated={{"{r.choice(free)}"}}' if free and r.random() < 0.15 else ""
    return "<@mesh, [" + ", ".join(dims) + "]" + rep + ">"


def program(seed: int, priorities: bool = False, op_shardings: bool = True) -> str:
    """A random program of elementwise ops, dots, transposes, reshapes, broadcasts, sharding
    constraints and an op without a rule, with random shardings (and priorities; with
    ``op_shardings``, on some op results too); every value without a user is returned, so
    nothing is dead."""
    r = random.Random(seed)
    values: list[tuple[str, tuple[int, ...]]] = []
    used: set[str] = set()
    args = []
    for i in range(r.randint(1, 4)):
        shape = r.choice(SHAPES)
        attr = f" {{sdy.sharding = #sdy.sharding{_sharding(r, shape, priorities)}}}" if r.random() < 0.6 else ""
        args.append(f"%arg{i}: {_type(shape)}{attr}")
        values.append((f"%arg{i}", shape))
    lines = []

    def attr(shape: tuple[int, ...]) -> str:
        if r.random() < 0.25 and op_shardings:
            return f" {{sdy.sharding = #sdy.sharding_per_value<[{_sharding(r, shape, priorities)}]>}}"
        return ""

    for _ in range(r.randint(2, 10)):
        x, shape = r.choice(values)
        v = f"%{len(lines)}"
        kind = r.choice(("add", "multiply", "tanh", "transpose", "dot", "reshape", "constraint", "broadcast", "custom"))
        if kind in ("add", "multiply"):
            y = r.choice([w for w in values if w[1] == shape])[0]
            line, out, ins = f"{v} = stablehlo.{kind} {x}, {y}{attr(shape)} : {_type(shape)}", shape, [x, y]
        elif kind == "tanh":
            line, out, ins = f"{v} = stablehlo.tanh {x}{attr(shape)} : {_type(shape)}", shape, [x]
        elif kind == "transpose" and len(shape) == 2:
            out = (shape[1], shape[0])
            line, ins = (
                f"{v} = stablehlo.transpose {x}, dims = [1, 0]{attr(out)} : ({_type(shape)}) -> {_type(out)}",
                [x],
            )
        elif kind == "dot" and len(shape) == 2 and any(len(w[1]) == 2 and w[1][0] == shape[1] for w in values):
            y, ys = r.choice([w for w in values if len(w[1]) == 2 and w[1][0] == shape[1]])
            out = (shape[0], ys[1])
            line = f"{v} = stablehlo.dot_general {x}, {y}, contracting_dims = [1] x [0]{attr(out)} : ({_type(shape)}, {_type(ys)}) -> {_type(out)}"
            ins = [x, y]
        elif kind == "reshape" and math.prod(shape) == 128:
            out = r.choice([s for s in SHAPES if s != shape and math.prod(s) == 128])
            line, ins = f"{v} = stablehlo.reshape {x}{attr(out)} : ({_type(shape)}) -> {_type(out)}", [x]
        elif kind == "constraint":
            line, out, ins = (
                f"{v} = sdy.sharding_constraint {x} {_sharding(r, shape, priorities)} : {_type(shape)}",
                shape,
                [x],
            )
        elif kind == "broadcast" and len(shape) == 2:
            out = (*shape, 4)
            line, ins = (
                f"{v} = stablehlo.broadcast_in_dim {x}, dims = [0, 1]{attr(out)} : ({_type(shape)}) -> {_type(out)}",
                [x],
            )
        elif kind == "custom":
            line, out, ins = (
                f"{v} = stablehlo.custom_call @foo({x}){attr(shape)} : ({_type(shape)}) -> {_type(shape)}",
                shape,
                [x],
            )
        else:
            continue
        lines.append("  " + line)
        used.update(ins)
        values.append((v, out))
    returned = [w for w in values if w[0] not in used]
    results = []
    for _, shape in returned:
        a = f" {{sdy.sharding = #sdy.sharding{_sharding(r, shape, priorities)}}}" if r.random() < 0.4 else ""
        results.append(_type(shape) + a)
    return "\n".join(
        [
            'sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>',
            f"func.func @main({', '.join(args)}) -> ({', '.join(results)}) {{",
            *lines,
            f"  return {', '.join(w[0] for w in returned)} : {', '.join(_type(w[1]) for w in returned)}",
            "}",
        ]
    )


GENERATED = [
    ("basic", "sdy-basic-propagate", {}, False),
    ("basic", "sdy-basic-propagate{conservative-propagation=true}", {"conservative": True}, False),
    ("aggressive", "sdy-aggressive-propagate", {}, False),
    (
        "aggressive",
        "sdy-aggressive-propagate{propagation-strategy=basic-then-aggressive}",
        {"propagation_strategy": "basic-then-aggressive"},
        False,
    ),
    ("op-priority", "sdy-op-priority-propagate", {}, False),
    ("user-priority", "sdy-user-priority-propagate", {}, True),
]


@pytest.mark.parametrize("pass_name, pipeline, options, priorities", GENERATED, ids=[g[1] for g in GENERATED])
def test_generated_programs_match_shardy(
    pass_name: str, pipeline: str, options: dict[str, Any], priorities: bool
) -> None:
    for seed in range(40):
        text = program(seed, priorities)
        expected = shardy(text, f"builtin.module({pipeline})")
        assert ours(text, pass_name, **options) == expected, f"seed {seed}:\n{text}"


#: Debug options on generated programs. Sharding origins only without shardings set on op
#: results: Shardy tracks the origins of user shardings (function arguments and results,
#: constraints, manual computations) only, and an axis propagated from a sharding set on an op
#: result makes it look up an origin that does not exist (undefined behaviour: it prints
#: garbage such as ``": 0"``, or crashes).
DEBUG_GENERATED = [
    (
        "aggressive",
        "sdy-aggressive-propagate{debug-propagation-edge-sharding=true}",
        {"debug_propagation_edge_sharding": True},
        True,
    ),
    (
        "basic",
        "sdy-basic-propagate{debug-sharding-origins=true debug-propagation-edge-sharding=true}",
        {"debug_sharding_origins": True, "debug_propagation_edge_sharding": True},
        False,
    ),
    (
        "op-priority",
        "sdy-op-priority-propagate{debug-sharding-origins=true debug-propagation-edge-sharding=true}",
        {"debug_sharding_origins": True, "debug_propagation_edge_sharding": True},
        False,
    ),
    (
        "user-priority",
        "sdy-user-priority-propagate{debug-propagation-edge-sharding=true}",
        {"debug_propagation_edge_sharding": True},
        True,
    ),
]


@pytest.mark.parametrize(
    "pass_name, pipeline, options, op_shardings", DEBUG_GENERATED, ids=[g[1] for g in DEBUG_GENERATED]
)
def test_generated_programs_debug_info_matches_shardy(
    pass_name: str, pipeline: str, options: dict[str, Any], op_shardings: bool
) -> None:
    for seed in range(40):
        text = program(seed, priorities=pass_name == "user-priority", op_shardings=op_shardings)
        expected = shardy(text, f"builtin.module({pipeline})")
        assert ours(text, pass_name, **options) == expected, f"seed {seed}:\n{text}"


# ---------------------------------------------------------------------------- the API

SIMPLE = """
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.abs %0 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
"""


def test_copy_or_in_place() -> None:
    module = sw.load_mlir(SIMPLE)
    before = module.to_mlir()
    stats = PropagationStats()
    copy = run_propagation_pass(module, "aggressive", in_place=False, stats=stats)
    assert copy is not module and module.to_mlir() == before
    assert copy.to_mlir() == shardy(SIMPLE, "builtin.module(sdy-aggressive-propagate)")
    assert stats.rounds == 1 and stats.visits >= 4 and stats.updates >= 3 and stats.erased == stats.inserted == 0
    assert run_propagation_pass(module, "aggressive") is module
    assert module.to_mlir() == copy.to_mlir()
    assert copy.func().args[1].sharding == sw.TensorSharding.parse(
        '#sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>', module.meshes
    )
    assert "rounds=1" in repr(stats)


def test_every_pass_name_and_strategy() -> None:
    for name in PASS_NAMES:
        for strategy in ("basic", "aggressive", "basic-then-aggressive"):
            expected_pipeline = (
                f"{PASS_NAMES[name]}{{propagation-strategy={strategy}}}" if name != "basic" else PASS_NAMES[name]
            )
            expected = shardy(SIMPLE, f"builtin.module({expected_pipeline})")
            assert ours(SIMPLE, name, propagation_strategy=strategy) == expected
    text = SIMPLE.replace(
        "stablehlo.abs %0", 'stablehlo.abs %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"a"}]>]>}'
    )
    for name in ("op-priority", "user-priority"):
        expected = shardy(text, f"builtin.module({PASS_NAMES[name]}{{run-op-priority-propagation=false}})")
        assert ours(text, name, run_op_priority=False) == expected


def test_bad_arguments_raise() -> None:
    module = sw.load_mlir(SIMPLE)
    with pytest.raises(ValueError, match="unknown propagation pass"):
        run_propagation_pass(module, "sideways")
    with pytest.raises(ValueError, match="unknown propagation strategy"):
        run_propagation_pass(module, "aggressive", propagation_strategy="greedy")


def test_native_options_and_facts_check_their_values() -> None:
    """The typed objects that carry the pass options and the program facts across the FFI
    refuse bad values when they are built, each with a one-line error."""
    with pytest.raises(ValueError, match='unknown propagation pass "sideways"'):
        _native.PropagationOptions(pass_name="sideways")
    with pytest.raises(ValueError, match='unknown propagation strategy "greedy"'):
        _native.PropagationOptions(strategy="greedy")
    with pytest.raises(InvalidShardingError, match='got "SIDEWAYS"'):
        _native.ProgramFacts(barrier_directions=[(0, "SIDEWAYS")])
    module = sw.load_mlir(SIMPLE)
    frozen = freeze(module)
    with pytest.raises(ValueError, match="without debugging records"):
        _native.CandidateBatch(
            frozen.graph,
            {name: m._core for name, m in module.meshes.items()},
            [None] * len(frozen.values),
            [],
            _native.ProgramFacts(),
            _native.PropagationOptions(debug_sharding_origins=True),
        )


def test_what_shardy_rejects_raises() -> None:
    dynamic = """
func.func @main(%arg0: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = stablehlo.abs %arg0 : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}"""
    with pytest.raises(ProgramError, match="static shape"):
        run_propagation_pass(sw.load_mlir(dynamic), "basic")
    two = """
func.func @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
func.func @g(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}"""
    with pytest.raises(ProgramError, match="@main"):
        run_propagation_pass(sw.load_mlir(two), "basic")
    # Propagating a manual axis into a manual computation from outside breaks Shardy's
    # verifier: a manual axis must come before the free ones.
    manual = """
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{?}]>] out_shardings=[<@mesh, [{?}]>] manual_axes={"b"} (%arg1: tensor<8xf32>) {
    %1 = stablehlo.add %arg1, %arg1 : tensor<8xf32>
    sdy.return %1 : tensor<8xf32>
  } : (tensor<8xf32>) -> tensor<8xf32>
  %1 = stablehlo.sine %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", "b"}]>]>} : tensor<8xf32>
  return %1 : tensor<8xf32>
}"""
    with pytest.raises(InvalidShardingError, match="manual axes come before free axes") as e:
        run_propagation_pass(sw.load_mlir(manual), "basic")
    assert e.value.rule == "manual-axis-after-free-axis"  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="come before free axes"):
        shardy(manual, "builtin.module(sdy-basic-propagate)")


def test_dead_ops_are_erased_as_shardy_erases_them() -> None:
    text = """
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.abs %0 : tensor<8x8xf32>
  %2 = stablehlo.custom_call @foo(%arg1) {has_side_effect = true} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %3 = sdy.propagation_barrier %arg0 allowed_direction=FORWARD : tensor<8x8xf32>
  return %arg0 : tensor<8x8xf32>
}"""
    for name, pipeline in PASS_NAMES.items():
        stats = PropagationStats()
        module = sw.load_mlir(text)
        run_propagation_pass(module, name, stats=stats)
        assert stats.erased == 3
        assert module.to_mlir() == shardy(text, f"builtin.module({pipeline})")
        assert [op.name for op in module.func().body.ops] == ["stablehlo.custom_call", "func.return"]


def test_conflicting_sharding_groups_get_open_constraints() -> None:
    text = """
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  sdy.sharding_group %arg0 group_id = 0 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id = 0 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}"""
    stats = PropagationStats()
    module = sw.load_mlir(text)
    with pytest.warns(ShardingGroupWarning, match="groupID: 0"):
        run_propagation_pass(module, "basic", stats=stats)
    assert stats.inserted == 2
    assert module.to_mlir() == shardy(text, "builtin.module(sdy-basic-propagate)")


def test_sharding_rules_kept_or_removed() -> None:
    text = SIMPLE.replace(
        "stablehlo.abs %0 :",
        "stablehlo.abs %0 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=8}>} :",
    )
    module = sw.load_mlir(text)
    run_propagation_pass(module, "basic", keep_sharding_rules=True)
    rules = {op.name: op.attributes.get("sdy.sharding_rule") for op in module.func().body.ops}
    assert rules["stablehlo.add"] == "#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=8, j=8}>"
    assert rules["stablehlo.abs"] is not None and rules["func.return"] is None
    assert module.to_mlir() == shardy(text, "builtin.module(sdy-basic-propagate{keep-sharding-rules=true})")
    module = sw.load_mlir(text)
    run_propagation_pass(module, "basic")
    assert all("sdy.sharding_rule" not in op.attributes for op in module.walk())
    assert module.to_mlir() == shardy(text, "builtin.module(sdy-basic-propagate)")
    custom = text.replace("{i=8, j=8}>", "{i=8, j=8}, custom>")
    module = sw.load_mlir(custom)
    run_propagation_pass(module, "basic")
    assert module.to_mlir() == shardy(custom, "builtin.module(sdy-basic-propagate)")
    assert "custom" in module.func().body.ops[1].attributes["sdy.sharding_rule"]


def test_unknown_ops_warn() -> None:
    text = SIMPLE.replace("stablehlo.abs %0 :", "stablehlo.custom_call @mystery(%0) : (tensor<8x8xf32>) ->")
    with pytest.warns(UnknownOpWarning):
        module = run_propagation_pass(sw.load_mlir(text), "basic")
    assert module.to_mlir() == shardy(text, "builtin.module(sdy-basic-propagate)")


def test_propagations_run_concurrently_in_threads() -> None:
    texts = [program(seed) for seed in range(8)]
    expected = [ours(t, "aggressive") for t in texts]
    got: list[str | None] = [None] * len(texts)
    modules = [sw.load_mlir(t) for t in texts]

    def work(i: int) -> None:
        run_propagation_pass(modules[i], "aggressive")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = [m.to_mlir() for m in modules]
    assert got == expected


# ---------------------------------------------------------------------------- whole pipelines


@pytest.fixture
def registered() -> Any:
    """The pass registry, which has the four passes as soon as ``shardwise.passes`` is
    imported."""
    from shardwise.passes import registry

    return registry


def _pipeline_cases() -> list[tuple[str, str, str, str]]:
    """``(id, in, out, pipeline)`` of every corpus case whose pipeline propagates other than
    the single-pass cases of ``LIT_PIPELINES``: lit cases (the debug option cases included)
    and the dev corpus (``sdy-propagation-pipeline``)."""
    path = conformance_dir()
    if path is None:
        return []
    out = []
    for sub in ("lit", "dev"):
        index = path / sub / "index.json"
        if not index.is_file():
            continue
        for c in json.loads(index.read_text())["cases"]:
            p = c["pipeline"]
            if "propagat" in p and p not in LIT_PIPELINES:
                out.append((c.get("id", c.get("name")), str(path / sub / c["in"]), str(path / sub / c["out"]), p))
    return out


PIPELINE_CASES = _pipeline_cases()


@pytest.mark.corpus
def test_whole_pipelines_with_the_import_and_export_passes(registered: Any) -> None:
    if not PIPELINE_CASES:
        pytest.skip("../shared/conformance is absent (set SHARDWISE_CONFORMANCE to point at it)")
    from shardwise.passes import PassWarning, run_pipeline

    assert registered.PASSES["sdy-user-priority-propagate"].options["run-op-priority-propagation"] is True
    failures = []
    for case_id, inp, out, pipeline in PIPELINE_CASES:
        module = sw.load_mlir(Path(inp))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PassWarning)
            run_pipeline(module, pipeline)
        if module.to_mlir() != jax_print(Path(out).read_text()):
            failures.append(case_id)
    assert not failures, failures
    assert len(PIPELINE_CASES) >= 214  # 161 lit cases (44 with debug options), 53 dev programs


def test_registered_passes_take_shardy_options(registered: Any) -> None:
    from shardwise.passes import run_pipeline

    module = sw.load_mlir(SIMPLE)
    run_pipeline(
        module, "builtin.module(sdy-aggressive-propagate{propagation-strategy=basic module-dump-directory=/tmp})"
    )
    assert module.to_mlir() == shardy(SIMPLE, "builtin.module(sdy-aggressive-propagate{propagation-strategy=basic})")
    for options in (
        "debug-sharding-origins=true",
        "debug-propagation-edge-sharding=true",
        "debug-sharding-origins=true debug-propagation-edge-sharding=true",
    ):
        pipeline = f"builtin.module(sdy-basic-propagate{{{options}}})"
        module = sw.load_mlir(SIMPLE)
        run_pipeline(module, pipeline)
        assert module.to_mlir() == shardy(SIMPLE, pipeline)


# ---------------------------------------------------------------------------- debugging records

TRACED = """
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=8]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>},
                %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"c", ?}]>},
                %arg2: tensor<8x16xf32>) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", ?}]>}) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{?}, {?}]> : tensor<8x8xf32>
  %2 = stablehlo.dot_general %1, %arg2, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}
"""


def test_trace_records_origins_and_edges_as_data() -> None:
    from shardwise.propagation import Edge, Origin, PropagationTrace

    module = sw.load_mlir(TRACED)
    trace = PropagationTrace()
    run_propagation_pass(module, "aggressive", trace=trace)
    f = module.func("main")
    add, constraint, dot = f.body.ops[0], f.body.ops[1], f.body.ops[2]
    a, b, c = (sw.AxisRef(n) for n in "abc")
    # Where each axis of each sharding came from: the user shardings.
    assert trace.origins[add.results[0]] == {a: Origin("input", 0), c: Origin("input", 1)}
    assert trace.origins[f.args[0]] == {a: Origin("input", 0), c: Origin("input", 1)}
    assert trace.origins[f.args[2]] == {c: Origin("input", 1), b: Origin("output", 0)}
    assert trace.origins[dot.results[0]] == {b: Origin("output", 0), a: Origin("input", 0)}
    assert trace.origin_names == {constraint: "constraint_0"}
    # Which op moved which axis, from where to where, at which step: the function result's
    # "b" went to the returned value first (step 0), then the add spread "a" and "c" (step 1).
    assert trace.edges[add] == {
        c: [Edge(("operand", 1), ("operand", 0), 1), Edge(("operand", 1), ("result", 0), 1)],
        a: [Edge(("operand", 0), ("operand", 1), 1), Edge(("operand", 0), ("result", 0), 1)],
    }
    assert trace.edges[dot][b] == [Edge(("result", 0), ("operand", 1), 3)]
    assert trace.func_result_edges[f] == [
        {b: [Edge(("result", 0), ("operand", 0), 0)], a: [Edge(("operand", 0), ("result", 0), 4)]}
    ]
    assert (trace.first_step, trace.next_step) == (0, 5)
    # The trace writes nothing: the module is what propagation alone gives.
    assert module.to_mlir() == shardy(TRACED, "builtin.module(sdy-aggressive-propagate)")


@pytest.mark.parametrize(
    "options, flags",
    [
        ({"debug_sharding_origins": True}, "debug-sharding-origins=true"),
        ({"debug_propagation_edge_sharding": True}, "debug-propagation-edge-sharding=true"),
        (
            {"debug_sharding_origins": True, "debug_propagation_edge_sharding": True},
            "debug-sharding-origins=true debug-propagation-edge-sharding=true",
        ),
    ],
)
def test_debug_attributes_print_as_shardy_prints_them(options: dict[str, Any], flags: str) -> None:
    for pass_name, shardy_name in PASS_NAMES.items():
        expected = shardy(TRACED, f"builtin.module({shardy_name}{{{flags}}})")
        got = ours(TRACED, pass_name, **options)
        assert got == expected
        assert ("sdy.sharding_origins" in got) == ("origins" in flags)
        assert ("sdy.propagation_edges" in got) == ("edge" in flags)
    # Steps number on from those already in the module, as Shardy's do.
    once = shardy(TRACED, f"builtin.module(sdy-basic-propagate{{{flags}}})")
    assert ours(once, "aggressive", **options) == shardy(once, f"builtin.module(sdy-aggressive-propagate{{{flags}}})")


def test_native_printers() -> None:
    from shardwise import _native

    a, c_sub = sw.AxisRef("a"), sw.AxisRef("c", 1, 2)
    assert (
        _native.sharding_origins_text([(c_sub._core, "self"), (a._core, "input: 0")])
        == '{a = "input: 0", "c:(1)2" = "self"}'
    )
    assert _native.propagation_edges_text([]) is None
    text = _native.propagation_edges_text(
        [
            (
                c_sub._core,
                [
                    _native.Edge("result", 0, "operand", 1, 3),
                    _native.Edge("result", 0, "operand", 0, 5),
                    _native.Edge("result", 0, "operand", 0, 2),
                ],
            ),
            (a._core, [_native.Edge("operand", 0, "result", 0, 2)]),
        ]
    )
    assert text == (
        '#sdy.propagation_edges<[{step-2 = [{"a" = operand-0 -> [result-0]}, {"c":(1)2 = result-0 -> [operand-0]}]}, '
        '{step-3 = [{"c":(1)2 = result-0 -> [operand-1]}]}]>'
    )
    e = _native.Edge("result", 0, "operand", 1, 3)
    assert (e.source_kind, e.source_index, e.target_kind, e.target_index, e.step) == ("result", 0, "operand", 1, 3)
    assert e == _native.Edge("result", 0, "operand", 1, 3) and len({e, _native.Edge("result", 0, "operand", 1, 3)}) == 1
    with pytest.raises(ValueError, match='unknown edge node kind "nowhere"; expected "operand" or "result"'):
        _native.Edge("nowhere", 0, "result", 0, 0)
