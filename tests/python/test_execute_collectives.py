"""The SPMD simulator: hand-written local StableHLO programs with collectives on 2/4/8 ranks
against numpy, real collective StableHLO from ``shard_map`` against XLA's per-device results,
byte and peak-memory accounting, and a failing rank that must not hang the others."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from shardwise.errors import ProgramError

pytestmark = pytest.mark.jax


def _program(n_rows: int, n_cols: int, body: str, out_type: str, dtype: str = "f32") -> Any:
    from shardwise import load_mlir

    text = f"""module {{
  func.func @main(%arg0: tensor<{n_rows}x{n_cols}x{dtype}>) -> {out_type} {{
{body}
  }}
}}"""
    return load_mlir(text)


def _groups(groups: list[list[int]]) -> str:
    return f"dense<{groups}> : tensor<{len(groups)}x{len(groups[0])}xi64>"


def _reduction(kind: str, dtype: str = "f32") -> str:
    return f"""({{
    ^bb0(%a: tensor<{dtype}>, %b: tensor<{dtype}>):
      %s = stablehlo.{kind} %a, %b : tensor<{dtype}>
      stablehlo.return %s : tensor<{dtype}>
    }})"""


def _inputs(n: int, shape: tuple[int, int], dtype: Any = np.float32) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(n)
    if np.dtype(dtype).kind == "f":
        return [[rng.standard_normal(shape).astype(dtype)] for _ in range(n)]
    return [[rng.integers(-9, 10, size=shape).astype(dtype)] for _ in range(n)]


def _pairs_groups(n: int) -> list[list[int]]:
    return [[i, i + 1] for i in range(0, n, 2)]


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize(
    "kind,np_fn", [("add", np.sum), ("maximum", np.max), ("minimum", np.min), ("multiply", np.prod)]
)
def test_all_reduce_in_pair_groups(n: int, kind: str, np_fn: Any) -> None:
    from shardwise.execute.simulator import simulate

    groups = _pairs_groups(n)
    body = f"""    %0 = "stablehlo.all_reduce"(%arg0) <{{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = {_groups(groups)}, use_global_device_ids}}> {_reduction(kind)} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>"""
    prog = _program(2, 3, body, "tensor<2x3xf32>")
    ins = _inputs(n, (2, 3))
    res = simulate(prog, ins)
    for r in range(n):
        g = groups[r // 2]
        want = np_fn(np.stack([ins[m][0] for m in g]), axis=0)
        np.testing.assert_allclose(res.outputs[r][0], want, rtol=1e-6)
        (rec,) = res.collectives[r]
        assert rec.kind == "all_reduce" and rec.group == tuple(g)
        assert rec.bytes_sent == rec.bytes_received == 2 * 1 * 24 // 2


@pytest.mark.parametrize("n", [2, 4, 8])
def test_all_reduce_integers_and_booleans_exact(n: int) -> None:
    from shardwise.execute.simulator import simulate

    body = f"""    %0 = "stablehlo.all_reduce"(%arg0) <{{replica_groups = {_groups([list(range(n))])}}}> {_reduction("add", "i32")} : (tensor<3x2xi32>) -> tensor<3x2xi32>
    %1 = stablehlo.constant dense<0> : tensor<3x2xi32>
    %2 = stablehlo.compare GT, %arg0, %1 : (tensor<3x2xi32>, tensor<3x2xi32>) -> tensor<3x2xi1>
    %3 = "stablehlo.all_reduce"(%2) <{{replica_groups = dense<> : tensor<0x0xi64>}}> {_reduction("and", "i1")} : (tensor<3x2xi1>) -> tensor<3x2xi1>
    return %0, %3 : tensor<3x2xi32>, tensor<3x2xi1>"""
    prog = _program(3, 2, body, "(tensor<3x2xi32>, tensor<3x2xi1>)", "i32")
    ins = _inputs(n, (3, 2), np.int32)
    res = simulate(prog, ins)
    stacked = np.stack([i[0] for i in ins])
    for r in range(n):
        np.testing.assert_array_equal(res.outputs[r][0], stacked.sum(0))
        np.testing.assert_array_equal(res.outputs[r][1], np.all(stacked > 0, axis=0))


@pytest.mark.parametrize("n", [2, 4, 8])
def test_all_gather_reduce_scatter_all_to_all(n: int) -> None:
    from shardwise.execute.simulator import simulate

    everyone = _groups([list(range(n))])
    body = f"""    %0 = "stablehlo.all_gather"(%arg0) <{{all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = {everyone}, use_global_device_ids}}> : (tensor<8x{n}xf32>) -> tensor<8x{n * n}xf32>
    %1 = "stablehlo.reduce_scatter"(%arg0) <{{channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = {everyone}, scatter_dimension = 0 : i64, use_global_device_ids}}> {_reduction("add")} : (tensor<8x{n}xf32>) -> tensor<{8 // n}x{n}xf32>
    %2 = "stablehlo.all_to_all"(%arg0) <{{channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, concat_dimension = 1 : i64, replica_groups = {everyone}, split_count = {n} : i64, split_dimension = 0 : i64}}> : (tensor<8x{n}xf32>) -> tensor<{8 // n}x{n * n}xf32>
    return %0, %1, %2 : tensor<8x{n * n}xf32>, tensor<{8 // n}x{n}xf32>, tensor<{8 // n}x{n * n}xf32>"""
    prog = _program(8, n, body, f"(tensor<8x{n * n}xf32>, tensor<{8 // n}x{n}xf32>, tensor<{8 // n}x{n * n}xf32>)")
    ins = _inputs(n, (8, n))
    res = simulate(prog, ins)
    xs = [i[0] for i in ins]
    total = np.sum(np.stack(xs), axis=0)
    c = 8 // n
    for r in range(n):
        gathered, scattered, exchanged = res.outputs[r]
        np.testing.assert_array_equal(gathered, np.concatenate(xs, axis=1))
        np.testing.assert_allclose(scattered, total[r * c : (r + 1) * c], rtol=1e-6)
        np.testing.assert_array_equal(exchanged, np.concatenate([x[r * c : (r + 1) * c] for x in xs], axis=1))
        s = 8 * n * 4
        kinds = {rec.kind: rec for rec in res.collectives[r]}
        assert kinds["all_gather"].bytes_sent == (n - 1) * s
        assert kinds["reduce_scatter"].bytes_received == (n - 1) * s // n
        assert kinds["all_to_all"].bytes_sent == (n - 1) * s // n
        assert res.bytes_sent(r) == (n - 1) * s + 2 * ((n - 1) * s // n)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_collective_permute_and_partition_id(n: int) -> None:
    from shardwise.execute.simulator import simulate

    # A shift by one among the even ranks only: odd ranks receive nothing (zeros).
    evens = list(range(0, n, 2))
    pairs = [[evens[i], evens[(i + 1) % len(evens)]] for i in range(len(evens))]
    body = f"""    %0 = "stablehlo.collective_permute"(%arg0) <{{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<{pairs}> : tensor<{len(pairs)}x2xi64>}}> : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %1 = stablehlo.partition_id : tensor<ui32>
    %2 = stablehlo.convert %1 : (tensor<ui32>) -> tensor<f32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
    %4 = stablehlo.add %0, %3 : tensor<2x2xf32>
    return %4 : tensor<2x2xf32>"""
    prog = _program(2, 2, body, "tensor<2x2xf32>")
    ins = _inputs(n, (2, 2))
    res = simulate(prog, ins)
    for r in range(n):
        if r % 2:
            want = np.full((2, 2), r, np.float32)
            assert res.collectives[r][0].bytes_received == 0
        else:
            src = evens[(evens.index(r) - 1) % len(evens)]
            want = ins[src][0] + r
            assert res.collectives[r][0].bytes_received == (16 if src != r else 0)
        np.testing.assert_array_equal(res.outputs[r][0], want)


def test_peak_bytes_counts_values_until_their_last_use() -> None:
    from shardwise import load_mlir
    from shardwise.execute.simulator import simulate

    prog = load_mlir(
        """func.func @main(%arg0: tensor<256xf32>) -> tensor<256xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<256xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<256xf32>
  %2 = stablehlo.subtract %1, %1 : tensor<256xf32>
  return %2 : tensor<256xf32>
}"""
    )
    res = simulate(prog, [[np.ones(256, np.float32)]] * 2)
    # Each step holds its operand and its result: 2 x 1 KiB, never 4 arrays at once.
    assert res.peak_bytes == [2048, 2048]
    keep = load_mlir(
        """func.func @main(%arg0: tensor<256xf32>) -> tensor<256xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<256xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<256xf32>
  %2 = stablehlo.subtract %1, %arg0 : tensor<256xf32>
  return %2 : tensor<256xf32>
}"""
    )
    assert simulate(keep, [[np.ones(256, np.float32)]]).peak_bytes == [3072]


def test_a_failing_rank_aborts_the_others_and_is_named() -> None:
    from shardwise import load_mlir
    from shardwise.execute.simulator import simulate

    good = _program(
        2,
        2,
        f"""    %0 = "stablehlo.all_reduce"(%arg0) <{{replica_groups = {_groups([[0, 1, 2, 3]])}}}> {_reduction("add")} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>""",
        "tensor<2x2xf32>",
    )
    bad = load_mlir(
        """func.func @main(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = stablehlo.custom_call @no_such_target(%arg0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}"""
    )
    ins = _inputs(4, (2, 2))
    with pytest.raises(ProgramError, match=r"rank 2 failed.*no_such_target"):
        simulate([good, good, bad, good], ins)


def test_mismatched_group_and_missing_communicator_raise() -> None:
    from shardwise.execute import run
    from shardwise.execute.simulator import simulate

    prog = _program(
        2,
        2,
        f"""    %0 = "stablehlo.all_reduce"(%arg0) <{{replica_groups = {_groups([[0, 1]])}}}> {_reduction("add")} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>""",
        "tensor<2x2xf32>",
    )
    with pytest.raises(ProgramError, match="needs a communicator"):
        run(prog, [np.ones((2, 2), np.float32)])
    with pytest.raises(ProgramError, match="rank 2.*no replica group"):
        simulate(prog, _inputs(3, (2, 2)))


def _manual_body(module: Any) -> Any:
    """The body of the module's single ``sdy.manual_computation`` as a per-device function."""
    from shardwise.ir.core import Func

    (mc,) = [op for op in module.walk() if op.name == "sdy.manual_computation"]
    region = mc.regions[0]
    f = Func(
        "main", [a.type for a in region.entry.args], [v.type for v in region.entry.ops[-1].operands], declaration=True
    )
    f.regions[0] = region
    region.parent = f
    return f


def test_shard_map_collectives_match_xla_per_device() -> None:
    import jax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    from shardwise import load_mlir
    from shardwise.execute.simulator import simulate

    lax = jax.lax
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))

    def f(a: Any) -> Any:
        return (
            lax.psum(a, "y"),
            lax.all_gather(a, "x", axis=1, tiled=True),
            lax.psum_scatter(a, "y", scatter_dimension=1, tiled=True),
            lax.all_to_all(a, "y", 1, 0, tiled=True),
            lax.ppermute(a, "y", [(i, (i + 1) % 4) for i in range(4)]),
            lax.pmax(a * (lax.axis_index("x") + 1.0), ("x", "y")),
            lax.psum(a.sum(), ("x", "y")) * lax.axis_index("y"),
        )

    spec = P("x", "y")
    sm = jax.shard_map(f, mesh=mesh, in_specs=spec, out_specs=(spec,) * 6 + (P(),), check_vma=False)
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    placed = jax.device_put(x, NamedSharding(mesh, spec))
    text = jax.jit(sm).lower(placed).as_text()
    outs = jax.jit(sm)(placed)
    body = _manual_body(load_mlir(text))
    local = [[np.asarray(s.data)] for s in sorted(placed.addressable_shards, key=lambda s: s.device.id)]
    res = simulate(body, local)
    for i, out in enumerate(outs):
        for shard in out.addressable_shards:
            got = res.outputs[shard.device.id][i]
            want = np.asarray(shard.data)
            if i == 6:
                # Not really replicated (it scales with the y index): XLA returns device 0's
                # value for P(); each simulated device holds its own.
                want = np.float32(x.sum() * (shard.device.id % 4))
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
                continue
            np.testing.assert_allclose(
                got, want, rtol=1e-6, atol=1e-6, err_msg=f"result {i} on device {shard.device.id}"
            )
    assert {r.kind for r in res.collectives[0]} == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
        "collective_permute",
    }
