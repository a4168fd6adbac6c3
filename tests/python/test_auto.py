"""auto_shard: cost-based sharding of whole programs (issue 8)."""

from __future__ import annotations

import itertools

import pytest
from shardwise import Builder, Mesh, auto_shard, check_partition, partition
from shardwise.errors import InfeasibleBudget, ProgramError, SearchError
from shardwise.ir.core import Module
from shardwise.rules.rule import OpShardingRule
from shardwise.search import DeviceModel, StrategyGraph, evaluate, solve, solve_bfs
from shardwise.search.auto import parse_bytes, resolve_mesh
from shardwise.search.build import build_problem
from shardwise.search.strategies import enumerate_strategies
from shardwise.spmd.redistribute import CostModel, Link
from shardwise.testing.auto_programs import mlp, transformer_block

MESH = {"data": 2, "model": 4}
#: No latency: the plans are decided by bytes (the programs are small enough for latency to hide them).
FLAT = DeviceModel(cost_model=CostModel(Link(latency=0.0)))
#: The data axis across hosts (4x slower links), the model axis inside a host.
HOSTS = DeviceModel(cost_model=CostModel(Link(latency=0.0), {"data": Link(25e9, 0.0)}))


def _arg_dims(module: Module) -> list[list[list[str]]]:
    return [[[a.name for a in d.axes] for d in a.sharding.dims] for a in module.func().args]  # type: ignore[union-attr]


def _check(module: Module) -> float:
    part = partition(module)
    res = check_partition(module, part.global_module, part.ranks, seed=2)
    assert res.passed, [(o.max_abs, o.max_rel) for o in res.outputs]
    return part.bytes_per_device


def test_mlp_is_data_parallel_plus_megatron_and_moves_the_predicted_bytes() -> None:
    # Replicated w1 and w2 take 64 KiB each: a 44 KB budget forces both to be split 4 ways.
    out, rep = auto_shard(mlp(), MESH, memory_budget=44_000, method="ilp", time_limit=5, device=FLAT)
    _x, w1, w2 = _arg_dims(out)
    assert w1 == [[], ["model"]]  # column parallel: output features
    assert w2 == [["model"], []]  # row parallel: input features
    dot1 = next(op for op in out.func().body.ops if op.name == "stablehlo.dot_general")
    assert [[a.name for a in d.axes] for d in dot1.results[0].sharding.dims] == [["data"], ["model"]]
    assert rep.feasible and rep.peak_memory <= 44_000 and rep.optimal
    # The second dot reduces over model; with the result free it reduce-scatters it (each
    # device keeps a quarter of its (8, 64) f32 block): 3/4 * 2048 bytes, half an all-reduce.
    dot2 = [n for n in rep.nodes if n.label.startswith("stablehlo.dot_general")][1]
    assert dot2.collectives == ("reduce_scatter",) and "reduce-scatter" in dot2.strategy
    assert rep.comm_bytes == 1536
    assert _check(out) == rep.comm_bytes


def test_transformer_block_megatron_on_a_two_level_mesh() -> None:
    m = transformer_block(batch=4, seq=8, d=128, heads=4, ffn=512)
    out, rep = auto_shard(m, MESH, memory_budget=215_000, method="ilp", time_limit=5, device=HOSTS)
    x, wq, wk, wv, wo, w1, w2 = _arg_dims(out)
    assert x == [["data"], [], []]
    assert wq == wk == wv == [[], ["model"]]  # heads split by model (column parallel)
    assert w1 == [[], ["model"]] and w2 == [["model"], []]  # MLP: column then row
    # wo is a tie in bytes: row parallel (all-reduce of the (2, 8, 128) output, 12288 B) costs
    # what column parallel does (all-gather of the heads' output + of the residual, 2 x 6144 B).
    assert wo in ([[], ["model"]], [["model"], []])
    assert rep.feasible and rep.peak_memory <= 215_000
    moved = _check(out)
    # The partitioner fuses an all-reduce whose result is then sliced (the last residual add
    # wants its operand split by model) into a reduce-scatter: half the all-reduce's bytes.
    # So the partition moves at most the predicted bytes and at least the prediction less half
    # of its all-reduce bytes.
    reduced = sum(n.comm_bytes for n in rep.nodes if "all_reduce" in n.collectives)
    assert rep.comm_bytes - reduced / 2 <= moved <= rep.comm_bytes


def test_no_budget_no_sharding_of_weights_needed_and_replicated_budget_zero_is_infeasible() -> None:
    out, rep = auto_shard(mlp(), MESH, method="ilp", time_limit=2, device=FLAT)
    assert rep.feasible and rep.comm_bytes == 0  # batch parallel alone costs no communication
    _check(out)
    _, rep0 = auto_shard(
        mlp(), MESH, memory_budget=0, method="local", time_limit=0.5, device=FLAT, allow_infeasible=True
    )
    assert not rep0.feasible


def test_an_infeasible_budget_is_an_error_naming_the_peak_the_bound_and_the_heaviest_nodes() -> None:
    # x (16, 64), w1 (64, 256), w2 (256, 64) f32: split 8 ways at best, the arguments alone
    # need (4096 + 65536 + 65536) / 8 = 16,896 B, and the dots' results add to that.
    with pytest.raises(InfeasibleBudget) as e:
        auto_shard(mlp(), MESH, memory_budget=10_000, method="ilp", time_limit=2, device=FLAT)
    msg = str(e.value)
    assert "\n" not in msg and "memory budget 10,000 B per device is below" in msg, msg
    bound = int(msg.split("is below ")[1].split(" B")[0].replace(",", ""))
    assert bound >= 16_896
    assert e.value.report.peak_memory >= bound and not e.value.report.feasible
    assert "%arg1" in msg or "%arg2" in msg  # the weights dominate the peak
    # The bound is tight here: at it, a plan is found.
    _, rep = auto_shard(mlp(), MESH, memory_budget=bound, method="ilp", time_limit=2, device=FLAT)
    assert rep.feasible and rep.peak_memory == bound


def test_bfs_keeps_configured_shardings() -> None:
    b = Builder(Mesh(MESH))
    x = b.arg((16, 64))
    w1 = b.arg((64, 256), sharding=b.sharding([["model"], None]))
    w2 = b.arg((256, 64))
    h = b.tanh(b.dot_general(x, w1, contracting=((1,), (0,))))
    module = b.ret(b.dot_general(h, w2, contracting=((1,), (0,))))
    for method in ("bfs", "ilp"):
        out, rep = auto_shard(module, None, method=method, time_limit=2, device=FLAT)
        assert _arg_dims(out)[1] == [["model"], []]
        assert rep.nodes[1].configured and rep.nodes[1].strategy == "[model, -]"
        _check(out)
    # From the configured row-split w1, BFS reaches the dot first: its contracting factor k on model
    # with x split the same way (no reshard of x, an argument), so the dot's all-reduce
    # over model (or its reduce-scatter) is the cheapest choice for it.
    out, rep = auto_shard(module, None, method="bfs", device=FLAT)
    dot1 = rep.nodes[3]
    assert "k:model" in dot1.strategy and {"all_reduce", "reduce_scatter"} & set(dot1.collectives)


def test_bfs_without_configuration_starts_from_the_heaviest_op() -> None:
    out, rep = auto_shard(mlp(), MESH, method="bfs", device=FLAT)
    assert rep.method == "bfs" and rep.feasible
    _check(out)


def _exhaustive(g: StrategyGraph) -> int:
    best = None
    for x in itertools.product(*(range(g.k(v)) for v in range(g.num_nodes))):
        s = evaluate(g, x)
        if s.feasible and (best is None or s.cost < best):
            best = s.cost
    assert best is not None
    return best


@pytest.mark.parametrize("budget", [None, 30_000])
def test_ilp_equals_exhaustive_search_on_a_small_program(budget: int | None) -> None:
    module = mlp(batch=8, d=16, hidden=32)
    name, mesh = resolve_mesh(module, {"a": 2, "b": 2})
    problem = build_problem(module, name, mesh, FLAT, budget, max_strategies=4)
    g = problem.graph
    assert g.num_nodes == 6
    sol = solve(g, 5.0, "ilp")
    assert sol.feasible and sol.cost == _exhaustive(g)


def test_strategies_respect_divisibility_reduction_and_the_cap() -> None:
    mesh = Mesh(MESH)
    rule = OpShardingRule([6, 8, 4], [[[0], [1]], [[1], [2]]], [[[0], [2]]], reduction_factors=[1])
    all_ = enumerate_strategies(rule, mesh)
    assert all_[0].is_replicated
    for s in all_:
        for f, axes in enumerate(s.factor_axes):
            n = 1
            for a in axes:
                n *= mesh.axis_size(a)
            assert rule.factor_sizes[f] % n == 0
    # 6 is not divisible by 4: model never shards factor i.
    assert all("model" not in s.factor_axes[0] for s in all_)
    red = [s for s in all_ if s.factor_axes[1]]
    assert red and all(s.reduction_axes == tuple(a for a in ("data", "model") if a in s.factor_axes[1]) for s in red)
    assert len(enumerate_strategies(rule, mesh, max_strategies=3)) == 3
    with pytest.raises(SearchError, match="max_strategies"):
        enumerate_strategies(rule, mesh, max_strategies=0)
    blocked = OpShardingRule([8, 8], [[[0, 1]]], [[[0, 1]]], need_replication_factors=[0])
    assert all(not s.factor_axes[0] and not s.factor_axes[1] for s in enumerate_strategies(blocked, mesh))


def test_compound_dimension_shards_a_minor_factor_only_under_a_fully_sharded_major() -> None:
    mesh = Mesh({"x": 2, "y": 4})
    rule = OpShardingRule([2, 8], [[[0, 1]]], [[[0], [1]]])  # reshape (16,) -> (2, 8)
    for s in enumerate_strategies(rule, mesh):
        if s.factor_axes[1]:
            assert s.factor_axes[0] == ("x",)


def test_errors_name_the_bad_value() -> None:
    with pytest.raises(SearchError, match="method"):
        auto_shard(mlp(), MESH, method="greedy")
    with pytest.raises(SearchError, match="memory budget.*12 parsecs"):
        auto_shard(mlp(), MESH, memory_budget="12 parsecs")
    with pytest.raises(ProgramError, match="no sdy.mesh"):
        auto_shard(mlp(), None)
    with pytest.raises(SearchError, match="flop_rate"):
        DeviceModel(flop_rate=0)
    with pytest.raises(SearchError, match="configured node 9"):
        solve_bfs(StrategyGraph.build([[1]], [[0]], [[0, 1]], [], []), {9: 0})
    assert parse_bytes("16GiB") == 16 * 2**30 and parse_bytes("1.5kB") == 1500 and parse_bytes(7) == 7


def test_report_dict_and_table() -> None:
    from rich.console import Console

    _out, rep = auto_shard(mlp(), MESH, memory_budget="44KB", method="ilp", time_limit=3, device=FLAT)
    d = rep.to_dict()
    assert d["comm_bytes"] == rep.comm_bytes and len(d["nodes"]) == 6 and d["seconds"] == rep.seconds
    assert rep.compute_seconds == pytest.approx(sum(n.flops for n in rep.nodes) / FLAT.flop_rate)
    console = Console(record=True, width=200)
    console.print(rep.table())
    text = console.export_text()
    assert "stablehlo.dot_general" in text and "reduce_scatter" in text and "[-, model]" in text


def test_report_shows_a_lower_bound_of_the_objective() -> None:
    from rich.console import Console

    _, opt = auto_shard(mlp(), MESH, memory_budget=44_000, method="ilp", time_limit=5, device=FLAT, bound_time=1)
    assert opt.optimal and opt.lower_bound_ps == opt.objective_ps and opt.gap == 0.0
    _, loc = auto_shard(
        mlp(), MESH, memory_budget=44_000, method="local", time_limit=1, device=FLAT, bound_time=2, baselines={}
    )
    # The Lagrangian bound is below every plan within the budget, the ILP's optimum included.
    assert loc.lower_bound_ps is not None and 0 < loc.lower_bound_ps <= opt.objective_ps <= loc.objective_ps
    assert loc.gap == pytest.approx((loc.objective_ps - loc.lower_bound_ps) / loc.objective_ps)
    assert loc.to_dict()["gap"] == loc.gap
    console = Console(record=True, width=400)
    console.print(loc.table())
    assert f"(lower bound; gap {100 * loc.gap:.2f} %)" in console.export_text()
    _, none = auto_shard(mlp(), MESH, memory_budget=44_000, method="local", time_limit=1, device=FLAT, baselines={})
    assert none.lower_bound_ps is None and none.gap is None


def test_cli_auto_writes_the_module_and_reports(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    from pathlib import Path

    from shardwise.cli import main
    from shardwise.importers.mlir import load_mlir

    d = Path(str(tmp_path))
    src, dst = d / "mlp.mlir", d / "out.mlir"
    mlp().save(str(src))  # no mesh: --mesh adds it
    rc = main(
        [
            "auto",
            str(src),
            "-o",
            str(dst),
            "--mesh",
            "data=2,model=4",
            "--memory-budget",
            "60KiB",
            "--time-limit",
            "2",
            "--json",
            "--bound",
            "1",
        ]
    )
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["feasible"] and report["peak_memory"] <= 60 * 1024 and len(report["nodes"]) == 6
    assert 0 < report["lower_bound_ps"] <= report["objective_ps"] and 0 <= report["gap"] < 1
    out = load_mlir(dst)
    assert out.meshes["mesh"] == Mesh(MESH)
    assert all(a.sharding is not None for a in out.func().args)
    _check(out)
    rc = main(["auto", str(src), "-o", str(dst), "--mesh", "data=2,model=4", "--memory-budget", "0", "--method", "bfs"])
    assert rc == 1  # infeasible: nothing fits in 0 bytes
    assert "EXCEEDED" in capsys.readouterr().out
    assert main(["auto", str(src), "-o", str(dst), "--mesh", "data=2,model=4", "--memory-budget", "lots"]) == 2
    assert "memory budget" in capsys.readouterr().err


def test_search_sees_through_calls_and_finds_megatron_for_a_jax_mlp() -> None:
    # sum(relu(x @ w1) @ w2) lowered raw: jax.nn.relu is a func.call. Before, the call was one
    # node with only a replicated strategy, and the ILP's "optimal" plan split both weights on
    # their second dimension and all-gathered 2.3 MB per device; with the calls inlined
    # (issue 26) it finds Megatron: w1 by columns, w2 by rows, the batch on data.
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import shardwise as sw
    from shardwise.search.auto import auto_shard

    def f(x: object, w1: object, w2: object) -> object:
        return jnp.sum(jax.nn.relu(x @ w1) @ w2)  # type: ignore[operator]

    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in ((256, 512), (512, 2048), (2048, 512))]
    text = jax.jit(f).lower(*args).as_text()
    assert "call @relu" in text
    _, report = auto_shard(sw.load_mlir(text), {"data": 2, "model": 4}, memory_budget=3_000_000, time_limit=5)
    by_label = {n.label: n.strategy for n in report.nodes}
    assert by_label["%arg1"] == "[-, model]" and by_label["%arg2"] == "[model, -]", by_label
    dots = [n.strategy for n in report.nodes if n.label.startswith("stablehlo.dot_general")]
    assert dots[0] == "i:data,j:model" and dots[1].startswith("i:data,k:model"), dots
    assert report.feasible and report.comm_bytes < 1_000_000
