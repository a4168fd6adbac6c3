"""``canonicalize{enable-patterns={sdy-collective}}`` natively (``rust/src/transforms/canonicalize/``)
against jaxlib's: hand-written modules for each of Shardy's collective patterns (the corpus has
none of Shardy's canonicalization lit cases), the rewriter's dead-op removal (into regions, not
past side effects) and its constant uniquing and hoisting per isolated region. ``run_pipeline``
on a module built as Python ops (which it writes and reads back natively) is held to the same
output."""

from __future__ import annotations

import pytest
from shardwise import _native, load_mlir
from shardwise.passes import run_pipeline
from shardwise.testing.native_passes import CANONICALIZE

_MESH = 'sdy.mesh @mesh = <["x"=2, "y"=2, "z"=2]>'
_T = "tensor<16x8xf32>"


def _main(body: str, args: str = "%arg0: T {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}") -> str:
    return f"{_MESH}\nfunc.func @main({args.replace('T', _T)}) -> {_T} {{\n{body.replace(': T', ': ' + _T)}\n}}"


_SHARDED = '%arg0: T {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}'

#: name -> module; each is changed by jaxlib's pass unless its name says "kept".
CASES: dict[str, str] = {
    # ReduceScatterFusion with slicing axes left over, constant uniquing, a dead op, a no-op
    # all_gather.
    "reduce_scatter_fusion_with_rest": _main(
        """  %c = stablehlo.constant dense<1.0> : T
  %0 = sdy.all_reduce {"y"} %arg0 out_sharding=<@mesh, [{"x"}, {}]> : T
  %1 = sdy.all_slice [{"y", "z"}, {}] %0 out_sharding=<@mesh, [{"x", "y", "z"}, {}]> : T
  %2 = stablehlo.add %1, %c : T
  %c2 = stablehlo.constant dense<1.0> : T
  %3 = stablehlo.multiply %2, %c2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", "y", "z"}, {}]>]>} : T
  %4 = stablehlo.negate %3 : T
  %5 = sdy.all_gather [{}, {}] %3 out_sharding=<@mesh, [{"x", "y", "z"}, {}]> : T
  return %5 : T""",
        '%arg0: T {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}',
    ),
    # Two all_slice users: both become the one reduce_scatter.
    "reduce_scatter_fusion_two_users": _main(
        """  %0 = sdy.all_reduce {"y", "z"} %arg0 out_sharding=<@mesh, [{}, {}]> : T
  %1 = sdy.all_slice [{"y"}, {"z"}] %0 out_sharding=<@mesh, [{"y"}, {"z"}]> : T
  %2 = sdy.all_slice [{"y"}, {"z"}] %0 out_sharding=<@mesh, [{"y"}, {"z"}]> : T
  %3 = stablehlo.add %1, %2 : T
  return %3 : T"""
    ),
    "reduce_scatter_fusion_not_a_prefix_kept": _main(
        """  %0 = sdy.all_reduce {"y"} %arg0 out_sharding=<@mesh, [{}, {}]> : T
  %1 = sdy.all_slice [{"z", "y"}, {}] %0 out_sharding=<@mesh, [{"z", "y"}, {}]> : T
  return %1 : T"""
    ),
    "reduce_scatter_fusion_other_user_kept": _main(
        """  %0 = sdy.all_reduce {"y"} %arg0 out_sharding=<@mesh, [{}, {}]> : T
  %1 = sdy.all_slice [{"y"}, {}] %0 out_sharding=<@mesh, [{"y"}, {}]> : T
  %2 = stablehlo.add %1, %0 : T
  return %2 : T"""
    ),
    # all_slice of an all_gather over the same axes folds; over other axes it does not.
    "all_slice_of_all_gather": _main(
        """  %0 = sdy.all_gather [{"x"}, {"y"}] %arg0 out_sharding=<@mesh, [{}, {}]> : T
  %1 = sdy.all_slice [{"x"}, {"y"}] %0 out_sharding=<@mesh, [{"x"}, {"y"}]> : T
  %2 = sdy.all_gather [{"x"}, {}] %arg0 out_sharding=<@mesh, [{}, {"y"}]> : T
  %3 = sdy.all_slice [{}, {"x"}] %2 out_sharding=<@mesh, [{}, {"y", "x"}]> : T
  %4 = stablehlo.add %1, %3 : T
  return %4 : T""",
        _SHARDED,
    ),
    # all_reduce of replicated_to_unreduced folds; of sharded_to_unreduced becomes all_gather;
    # over other axes neither.
    "unreduced": _main(
        """  %0 = sdy.replicated_to_unreduced {"x", "y"} %arg1 out_sharding=<@mesh, [{}, {}], unreduced={"x", "y"}> : T
  %1 = sdy.all_reduce {"x", "y"} %0 out_sharding=<@mesh, [{}, {}]> : T
  %2 = sdy.sharded_to_unreduced [{"y"}, {"x"}] %arg0 out_sharding=<@mesh, [{}, {}], unreduced={"x", "y"}> : T
  %3 = sdy.all_reduce {"x", "y"} %2 out_sharding=<@mesh, [{}, {}]> : T
  %4 = sdy.sharded_to_unreduced [{"y"}, {}] %arg0 out_sharding=<@mesh, [{}, {"x"}], unreduced={"y"}> : T
  %5 = sdy.all_reduce {"y"} %4 out_sharding=<@mesh, [{}, {"x"}]> : T
  %6 = sdy.replicated_to_unreduced {"x"} %arg1 out_sharding=<@mesh, [{}, {}], unreduced={"x"}> : T
  %7 = sdy.all_reduce {"x"} %6 out_sharding=<@mesh, [{}, {}]> : T
  %8 = sdy.replicated_to_unreduced {"x", "y"} %arg1 out_sharding=<@mesh, [{}, {}], unreduced={"x", "y"}> : T
  %9 = sdy.all_reduce {"x"} %8 out_sharding=<@mesh, [{}, {}], unreduced={"y"}> : T
  %10 = stablehlo.add %1, %3 : T
  %11 = stablehlo.add %10, %5 : T
  %12 = stablehlo.add %11, %7 : T
  %13 = stablehlo.add %12, %9 : T
  return %13 : T""",
        '%arg0: T {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>}, %arg1: T {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}',
    ),
    "no_op_collectives": _main(
        """  %0 = sdy.all_reduce {} %arg0 out_sharding=<@mesh, [{"x"}, {}]> : T
  %1 = sdy.reduce_scatter [{}, {}] %0 out_sharding=<@mesh, [{"x"}, {}]> : T
  %2 = sdy.all_slice [{}, {}] %1 out_sharding=<@mesh, [{"x"}, {}]> : T
  %3 = sdy.reduce_scatter [{}, {"y"}] %2 out_sharding=<@mesh, [{"x"}, {"y"}]> : T
  return %3 : T""",
        '%arg0: T {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}',
    ),
    # A collective_permute to the sharding its operand has is a no-op.
    "collective_permute": _main(
        """  %0 = sdy.collective_permute %arg0 out_sharding=<@mesh, [{"x"}, {"y"}]> : T
  %1 = sdy.collective_permute %0 out_sharding=<@mesh, [{"y"}, {"x"}]> : T
  %2 = sdy.collective_permute %1 out_sharding=<@mesh, [{"y"}, {"x"}]> : T
  return %2 : T""",
        _SHARDED,
    ),
    # Chained all_to_alls over disjoint dimensions fuse (parameters by source dimension);
    # over a shared dimension they do not; the inner one, left unused, goes.
    "all_to_all": f"""{_MESH}
func.func @main(%arg0: tensor<8x8x8x8xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{"x"}}, {{"y"}}, {{}}, {{}}]>}}) -> tensor<8x8x8x8xf32> {{
  %0 = sdy.all_to_all [{{"y"}}: 1->3] %arg0 out_sharding=<@mesh, [{{"x"}}, {{}}, {{}}, {{"y"}}]> : tensor<8x8x8x8xf32>
  %1 = sdy.all_to_all [{{"x"}}: 0->2] %0 out_sharding=<@mesh, [{{}}, {{}}, {{"x"}}, {{"y"}}]> : tensor<8x8x8x8xf32>
  %2 = sdy.all_to_all [{{"x"}}: 2->0] %1 out_sharding=<@mesh, [{{"x"}}, {{}}, {{}}, {{"y"}}]> : tensor<8x8x8x8xf32>
  %3 = sdy.all_to_all [{{"y"}}: 3->1] %2 out_sharding=<@mesh, [{{"x"}}, {{"y"}}, {{}}, {{}}]> : tensor<8x8x8x8xf32>
  %4 = sdy.all_to_all [{{"x"}}: 0->1] %3 out_sharding=<@mesh, [{{}}, {{"y", "x"}}, {{}}, {{}}]> : tensor<8x8x8x8xf32>
  %5 = sdy.all_to_all [{{"x"}}: 0->1] %arg0 out_sharding=<@mesh, [{{}}, {{"y", "x"}}, {{}}, {{}}]> : tensor<8x8x8x8xf32>
  return %4 : tensor<8x8x8x8xf32>
}}""",
    # Dead ops in and around regions (a while whose body is pure goes, a side-effecting custom
    # call stays), constants uniqued and hoisted per function / named / manual computation,
    # whatever their sharding.
    "regions_and_constants": f"""{_MESH}
func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<i32>) -> tensor<8xf32> {{
  %c = stablehlo.constant dense<2.0> : tensor<8xf32>
  %0 = stablehlo.add %arg0, %c : tensor<8xf32>
  %1:2 = stablehlo.while(%iterArg = %arg1, %iterArg_0 = %0) : tensor<i32>, tensor<8xf32>
    cond {{
    %c3 = stablehlo.constant dense<10> : tensor<i32>
    %5 = stablehlo.compare  LT, %iterArg, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %5 : tensor<i1>
  }} do {{
    %c4 = stablehlo.constant dense<2.0> : tensor<8xf32>
    %c5 = stablehlo.constant dense<1> : tensor<i32>
    %6 = stablehlo.add %iterArg, %c5 : tensor<i32>
    %7 = stablehlo.multiply %iterArg_0, %c4 : tensor<8xf32>
    %8 = stablehlo.negate %7 : tensor<8xf32>
    stablehlo.return %6, %7 : tensor<i32>, tensor<8xf32>
  }}
  %2:2 = stablehlo.while(%iterArg = %arg1, %iterArg_0 = %0) : tensor<i32>, tensor<8xf32>
    cond {{
    %c3 = stablehlo.constant dense<10> : tensor<i32>
    %5 = stablehlo.compare  LT, %iterArg, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %5 : tensor<i1>
  }} do {{
    stablehlo.return %iterArg, %iterArg_0 : tensor<i32>, tensor<8xf32>
  }}
  %3 = stablehlo.custom_call @foo(%0) {{has_side_effect = true}} : (tensor<8xf32>) -> tensor<8xf32>
  %4 = stablehlo.custom_call @bar(%0) : (tensor<8xf32>) -> tensor<8xf32>
  %9 = sdy.named_computation<"foo">(%0) (%arg2: tensor<8xf32>) {{
    %c6 = stablehlo.constant dense<2.0> : tensor<8xf32>
    %10 = stablehlo.add %arg2, %c6 : tensor<8xf32>
    sdy.return %10 : tensor<8xf32>
  }} : (tensor<8xf32>) -> tensor<8xf32>
  %11 = sdy.manual_computation(%9) in_shardings=[<@mesh, [{{"x"}}]>] out_shardings=[<@mesh, [{{"x"}}]>] manual_axes={{"x"}} (%arg3: tensor<4xf32>) {{
    %c7 = stablehlo.constant dense<2.0> : tensor<4xf32>
    %c8 = stablehlo.constant dense<2.0> : tensor<4xf32>
    %12 = stablehlo.add %arg3, %c7 : tensor<4xf32>
    %13 = stablehlo.add %12, %c8 : tensor<4xf32>
    sdy.return %13 : tensor<4xf32>
  }} : (tensor<8xf32>) -> tensor<8xf32>
  %14 = stablehlo.add %11, %1#1 : tensor<8xf32>
  return %14 : tensor<8xf32>
}}
func.func private @other(%arg0: tensor<8xf32>) -> tensor<8xf32> {{
  %c = stablehlo.constant dense<2.0> : tensor<8xf32>
  %c1 = stablehlo.constant dense<2.0> : tensor<8xf32>
  %c2 = stablehlo.constant {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{{"x"}}]>]>}} dense<2.0> : tensor<8xf32>
  %c3 = stablehlo.constant dense<3.0> : tensor<8xf32>
  %0 = stablehlo.add %arg0, %c : tensor<8xf32>
  %1 = stablehlo.add %0, %c1 : tensor<8xf32>
  %2 = stablehlo.add %1, %c2 : tensor<8xf32>
  %3 = stablehlo.add %2, %c3 : tensor<8xf32>
  %c4 = stablehlo.constant dense<3.0> : tensor<8xf32>
  %4 = stablehlo.add %3, %c4 : tensor<8xf32>
  return %4 : tensor<8xf32>
}}""",
}


def _jaxlib(text: str) -> tuple[str, str]:
    from jaxlib.mlir import ir, passmanager
    from shardwise._jaxlib import context

    with context():
        m = ir.Module.parse(text)
        before = str(m)
        passmanager.PassManager.parse(f"builtin.module({CANONICALIZE})").run(m.operation)
        return before, str(m)


@pytest.mark.jax
@pytest.mark.parametrize("name", sorted(CASES))
def test_native_canonicalize_matches_jaxlib_on_text_and_built_modules(name: str) -> None:
    text = CASES[name]
    before, expected = _jaxlib(text)
    assert (expected == before) == name.endswith("_kept")
    assert _native.run_native_passes(text, [CANONICALIZE]) == expected
    module = load_mlir(text)
    module.op  # noqa: B018  (built)
    run_pipeline(module, f"builtin.module({CANONICALIZE})")
    assert module.to_mlir() == expected


#: A chain one rewrite opens up for the next: MLIR's worklist driver pushes the users of what a
#: rewrite replaced, so one sweep folds it all.
_CHAIN = _main(
    """  %0 = sdy.all_gather [{"x"}, {}] %arg0 out_sharding=<@mesh, [{}, {"y"}]> : T
  %1 = sdy.all_reduce {} %0 out_sharding=<@mesh, [{}, {"y"}]> : T
  %2 = sdy.all_slice [{"x"}, {}] %1 out_sharding=<@mesh, [{"x"}, {"y"}]> : T
  %3 = sdy.all_to_all [{"y"}: 1->0] %2 out_sharding=<@mesh, [{"x", "y"}, {}]> : T
  %4 = sdy.all_to_all [{"x", "y"}: 0->1] %3 out_sharding=<@mesh, [{}, {"x", "y"}]> : T
  return %2 : T""",
    _SHARDED,
)


@pytest.mark.jax
@pytest.mark.parametrize("iterations", [1, 2, 10])
def test_native_canonicalize_follows_mlirs_worklist_within_max_iterations(iterations: int) -> None:
    """With ``max-iterations=1`` the native pass folds as far as jaxlib's driver does in one
    sweep (a driver that only swept the ops in program order would need three), on text and on
    a built module."""
    from jaxlib.mlir import ir, passmanager
    from shardwise._jaxlib import context

    step = f"canonicalize{{enable-patterns={{sdy-collective}} max-iterations={iterations}}}"
    with context():
        m = ir.Module.parse(_CHAIN)
        passmanager.PassManager.parse(f"builtin.module({step})").run(m.operation)
        expected = str(m)
    assert "sdy.all_slice" not in expected and "sdy.all_to_all" not in expected
    assert _native.run_native_passes(_CHAIN, [step]) == expected
    module = load_mlir(_CHAIN)
    module.op  # noqa: B018  (built)
    run_pipeline(module, f"builtin.module({step})")
    assert module.to_mlir() == expected


def test_native_canonicalize_refuses_other_patterns_and_bad_options() -> None:
    from shardwise.errors import ProgramError

    text = CASES["no_op_collectives"]
    with pytest.raises(ProgramError, match=r"only enable-patterns=\{sdy-collective\} .* got \{sdy-reshard\}"):
        _native.run_native_passes(text, ["canonicalize{enable-patterns={sdy-reshard}}"])
    with pytest.raises(ProgramError, match=r"only enable-patterns=\{sdy-collective\} .* got \{\}"):
        _native.run_native_passes(text, ["canonicalize"])
    with pytest.raises(ProgramError, match='max-iterations takes an integer, got "many"'):
        _native.run_native_passes(text, ["canonicalize{enable-patterns={sdy-collective} max-iterations=many}"])
    with pytest.raises(ProgramError, match='pass canonicalize has no option "fold"'):
        _native.run_native_passes(text, ["canonicalize{fold=true}"])


def test_native_canonicalize_on_deep_nesting_and_many_dead_ops() -> None:
    """10,000 nested named computations, each with a constant and a dead op: no stack overflow,
    every dead op gone (and with them the constants)."""
    depth = 10_000
    lines = [_MESH, "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {"]
    for i in range(depth):
        lines.append(f'%r{i} = sdy.named_computation<"n{i}">(%arg0) (%a{i}: tensor<8xf32>) {{')
        lines.append(f"%c{i} = stablehlo.constant dense<1.0> : tensor<8xf32>")
        lines.append(f"%d{i} = stablehlo.negate %c{i} : tensor<8xf32>")
    lines.append("sdy.return %a9999 : tensor<8xf32>")
    for i in reversed(range(depth)):
        ret = f"%r{i + 1}" if i + 1 < depth else None
        if ret is not None:
            lines.append(f"sdy.return {ret} : tensor<8xf32>")
        lines.append("} : (tensor<8xf32>) -> tensor<8xf32>")
    lines.append("return %r0 : tensor<8xf32>\n}")
    out = _native.run_native_passes("\n".join(lines), [CANONICALIZE])
    assert out.count("sdy.named_computation") == depth
    assert "stablehlo.negate" not in out and "stablehlo.constant" not in out
