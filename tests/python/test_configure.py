"""MindSpore's workflow in the search (issue 26): per-operator strategies (``shardwise.configure``,
MindSpore's ``op.shard``), BFS sharding propagation from them, MindSpore's notation in the report
(shared/references/mindspore-sharding-propagation.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from shardwise import (
    Builder,
    Mesh,
    OpStrategy,
    auto_shard,
    check_partition,
    configure,
    load_mlir,
    partition,
)
from shardwise.errors import SearchError
from shardwise.ir.core import Module, Op
from shardwise.search import DeviceModel, evaluate, solve_bfs
from shardwise.search.auto import resolve_mesh
from shardwise.search.build import build_problem
from shardwise.search.op_strategy import STRATEGY_ATTR, configure_spec
from shardwise.search.report import Report
from shardwise.spmd.redistribute import CostModel, Link

MESH = {"data": 2, "model": 4}
FLAT = DeviceModel(cost_model=CostModel(Link(latency=0.0)))


def matmul(n: int = 64) -> Module:
    """The note's ``Y = MatMul(X, W)``, X and W ``(n, n)``."""
    b = Builder(Mesh(MESH))
    x, w = b.arg((n, n)), b.arg((n, n))
    return b.ret(b.dot_general(x, w, contracting=((1,), (0,))))


def ffn(n: int = 64, d: int = 64) -> Module:
    """The note's FFN: Dense(64, 64) (MatMul + BiasAdd), ReLU, Dense(64, 64). Args: x
    ``(n, d)``, w1 ``(d, d)``, b1 ``(d,)``, w2 ``(d, d)``, b2 ``(d,)``."""
    b = Builder(Mesh(MESH))
    x, w1, b1, w2, b2 = (
        b.arg((n, d)),
        b.arg((d, d)),
        b.arg((d,)),
        b.arg((d, d)),
        b.arg((d,)),
    )
    h = b.dot_general(x, w1, contracting=((1,), (0,)))
    h = b.add(h, b.broadcast_in_dim(b1, (n, d), (1,)))
    h = b.maximum(h, b.broadcast_in_dim(b.constant(0.0), (n, d), ()))
    y = b.dot_general(h, w2, contracting=((1,), (0,)))
    return b.ret(b.add(y, b.broadcast_in_dim(b2, (n, d), (1,))))


def _dots(module: Module) -> list[Op]:
    return [op for op in module.func().body.ops if op.name == "stablehlo.dot_general"]


def _arg_dims(module: Module) -> list[list[list[str]]]:
    out = []
    for v in module.func().args:
        assert v.sharding is not None
        out.append([[a.name for a in d.axes] for d in v.sharding.dims])
    return out


def _partition_kinds(module: Module) -> list[tuple[str, str]]:
    part = partition(module)
    res = check_partition(module, part.global_module, part.ranks, seed=2)
    assert res.passed, [(o.max_abs, o.max_rel) for o in res.outputs]
    return [(c.kind, c.text) for c in part.collectives]


def _no_attr(module: Module) -> None:
    assert all(STRATEGY_ATTR not in op.attributes for op in module.walk())
    assert STRATEGY_ATTR not in module.to_mlir()


def test_matmul_rows_by_2_and_columns_by_4() -> None:
    # Figure "tensor_layout": strategy ((2, 1), (1, 4)): X split in 2 by rows, W in 4 by columns, no
    # communication.
    m = matmul()
    assert configure(_dots(m)[0], ((2, 1), (1, 4))) == OpStrategy(splits=((2, 1), (1, 4)))
    for method in ("bfs", "ilp"):
        out, rep = auto_shard(m, None, method=method, time_limit=2, device=FLAT)
        assert _arg_dims(out) == [[["data"], []], [[], ["model"]]]
        dot = rep.nodes[2]
        assert dot.configured and dot.mindspore == "((2, 1), (1, 4))" and dot.strategy == "i:data,j:model"
        assert [n.mindspore for n in rep.nodes[:2]] == ["((2, 1),)", "((1, 4),)"]
        assert rep.comm_bytes == 0 and not dot.collectives
        _no_attr(out)
        assert _partition_kinds(out) == []
    # The input module keeps its configuration.
    assert STRATEGY_ATTR in _dots(m)[0].attributes


def test_matmul_contraction_by_4_ends_with_an_all_reduce_over_model() -> None:
    # Strategy ((2, 4), (4, 1)) (the note's second MatMul): X rows by 2 and columns by 4, W rows
    # by 4; the partial products are summed by an AllReduce over the 4-way axis.
    m = matmul()
    configure(_dots(m)[0], "((2, 4), (4, 1))")
    out, rep = auto_shard(m, None, method="bfs", device=FLAT)
    assert _arg_dims(out) == [[["data"], ["model"]], [["model"], []]]
    dot = rep.nodes[2]
    assert dot.mindspore == "((2, 4), (4, 1))" and dot.strategy == "i:data,k:model"
    assert dot.collectives == ("all_reduce",)
    kinds = _partition_kinds(out)
    assert any(k == "sdy.all_reduce" and '{"model"}' in text for k, text in kinds), kinds
    _no_attr(out)


def test_shardy_form_and_text_forms_round_trip() -> None:
    s = OpStrategy.of([[["data"], ["model"]], [["model"], []]])
    assert str(s) == '[{"data"}, {"model"}], [{"model"}, {}]'
    assert OpStrategy.parse(str(s)) == s == OpStrategy.parse('[[{"data"}, {"model"}], [{"model"}, {}]]')
    # MindSpore's printed forms of a bias operand and of a single operand.
    assert OpStrategy.parse("((2, 4), (4))") == OpStrategy(splits=((2, 4), (4,)))
    assert OpStrategy.parse("((2, 4))") == OpStrategy(splits=((2, 4),))
    assert OpStrategy.parse(str(OpStrategy.of(((2, 4), (4,))))) == OpStrategy.of(((2, 4), (4,)))
    m = matmul()
    configure(_dots(m)[0], s)
    _, rep = auto_shard(m, None, method="bfs", device=FLAT)
    assert rep.nodes[2].mindspore == "((2, 4), (4, 1))"


def test_ffn_configured_first_matmul_shards_both_weights_within_a_budget() -> None:
    # The note's FFN with dense1.matmul.shard(((2, 1), (1, 4))): the walk reaches the bias add, the
    # ReLU and dense2's MatMul, which follows with ((2, 4), (4, 1)) as in the note's
    # step_parallel_begin IR; both weights end sharded, never replicated.
    replicated_weight = 64 * 64 * 4
    # The sharded plan's peak is 18752 B; a replicated weight adds 12288 B.
    budget = 20_000
    m = ffn()
    configure(_dots(m)[0], ((2, 1), (1, 4)))
    out, rep = auto_shard(m, None, method="bfs", memory_budget=budget, device=FLAT)
    by = {n.label: n for n in rep.nodes}
    _, w1, _, w2, _ = _arg_dims(out)
    assert w1 == [[], ["model"]] and w2 == [["model"], []]
    assert by["%arg1"].memory < replicated_weight and by["%arg3"].memory < replicated_weight
    dots = [n for n in rep.nodes if n.label.startswith("stablehlo.dot_general")]
    assert dots[0].mindspore == "((2, 1), (1, 4))" and dots[0].configured
    assert dots[1].mindspore == "((2, 4), (4, 1))" and not dots[1].configured
    adds = [n for n in rep.nodes if n.label.startswith("stablehlo.add")]
    # MindSpore's Add ((2, 4), (4)), after the bias broadcast.
    assert adds[0].mindspore == "((2, 4), (2, 4))"
    assert rep.feasible and rep.peak_memory <= budget
    _partition_kinds(out)
    _no_attr(out)


def test_bfs_is_feasible_where_the_old_walk_was_not() -> None:
    # The old walk gave each argument its cheapest own cost among the zero-communication
    # strategies: replicated (slicing a replicated weight is free), which does not fit here.
    m = ffn()
    configure(_dots(m)[0], ((2, 1), (1, 4)))
    name, mesh = resolve_mesh(m, None)
    problem = build_problem(m, name, mesh, FLAT, 20_000)
    conf = {i: 0 for i, nd in enumerate(problem.nodes) if nd.configured}
    sol = solve_bfs(problem.graph, conf)
    assert sol.feasible and sol.peak_usage <= 20_000
    weights = [i for i, nd in enumerate(problem.nodes) if nd.label in ("%arg1", "%arg3")]
    assert all(not problem.nodes[i].strategies[sol.assignment[i]].is_replicated for i in weights)
    old = list(sol.assignment)
    for i in weights:  # what the old walk chose for them
        old[i] = next(k for k, s in enumerate(problem.nodes[i].strategies) if s.is_replicated)
    assert not evaluate(problem.graph, old).feasible


def test_bfs_walk_respects_the_memory_budget_without_configuration() -> None:
    from shardwise.testing.auto_programs import mlp

    # Unconfigured, the walk starts at the heaviest op; before, it left both (64 KiB) weights
    # replicated and the 44 KB budget exceeded (peak 137216 B).
    out, rep = auto_shard(mlp(), MESH, memory_budget=44_000, method="bfs", device=FLAT)
    assert rep.feasible and rep.peak_memory <= 44_000
    _partition_kinds(out)


def test_bad_strategies_are_one_line_errors_naming_the_op() -> None:
    m = matmul()
    dot = _dots(m)[0]
    for bad, what in [
        (((2, 1),), "gives 1 operands, the op has 2"),
        (((2, 1, 1), (1, 4)), "operand 0 3 dimensions"),
        (((0, 1), (1, 4)), "split counts >= 1"),
        ("((2, 1), (1, 4)", "nested tuple"),
        ('[{"data":(1)2}, {}], [{}, {}]', "sub-axes"),
        ([["data"]], "expected MindSpore"),
    ]:
        with pytest.raises(SearchError, match="configure stablehlo.dot_general") as e:
            configure(dot, bad)  # malformed on purpose
        assert what in str(e.value) and "\n" not in str(e.value)
    assert STRATEGY_ATTR not in dot.attributes
    for strat, what in [
        # No axis of size 3; the contracting dim split two ways differently; W's contraction
        # split, X's not.
        (((3, 1), (1, 4)), "no valid strategy has it; valid: ((1, 1), (1, 1)); "),
        (((2, 2), (4, 1)), "no valid strategy"),
        ([[["model"], []], [["data"], []]], "valid: [{}, {}], [{}, {}]; "),
    ]:
        configure(dot, strat)  # valid forms, no valid strategy
        with pytest.raises(SearchError, match=r"configured strategy .* of stablehlo.dot_general") as e:
            auto_shard(m, None, method="bfs", device=FLAT)
        assert what in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(SearchError, match="function"):
        configure(m.func(), ((1,),))


def test_mindspore_counts_map_onto_mesh_axes_major_to_minor() -> None:
    b = Builder(Mesh({"a": 2, "b": 2}))
    x, w = b.arg((8, 8)), b.arg((8, 8))
    m = b.ret(b.dot_general(x, w, contracting=((1,), (0,))))
    # Rows on a, contraction on b (not the reverse).
    configure(_dots(m)[0], ((2, 2), (2, 1)))
    out, _ = auto_shard(m, None, method="bfs", device=FLAT)
    assert _arg_dims(out) == [[["a"], ["b"]], [["b"], []]]
    configure(_dots(m)[0], ((4, 1), (1, 1)))
    out, _ = auto_shard(m, None, method="bfs", device=FLAT)
    assert _arg_dims(out)[0] == [["a", "b"], []]


def test_configure_survives_copy_save_and_load(tmp_path: Path) -> None:
    m = ffn()
    configure(_dots(m)[1], ((2, 4), (4, 1)))
    path = tmp_path / "ffn.mlir"
    m.copy().save(str(path))
    loaded = load_mlir(path)
    assert _dots(loaded)[1].attributes[STRATEGY_ATTR] == '"((2, 4), (4, 1))"'
    out, rep = auto_shard(loaded, None, method="ilp", time_limit=2, device=FLAT)
    dots = [n for n in rep.nodes if n.label.startswith("stablehlo.dot_general")]
    assert dots[1].configured and dots[1].mindspore == "((2, 4), (4, 1))"
    _no_attr(out)
    load_mlir(out.to_mlir())  # jaxlib reads the output


def test_report_table_has_the_mindspore_column() -> None:
    from rich.console import Console

    m = matmul()
    configure(_dots(m)[0], ((2, 1), (1, 4)))
    _, rep = auto_shard(m, None, method="bfs", device=FLAT)
    console = Console(record=True, width=200)
    console.print(rep.table())
    text = console.export_text()
    assert "MindSpore" in text and "((2, 1), (1, 4))" in text
    assert Report(**rep.__dict__).to_dict()["nodes"][2]["mindspore"] == "((2, 1), (1, 4))"


def test_configure_spec_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from shardwise.cli import main

    m = ffn()
    with pytest.raises(SearchError, match="has 2 ops stablehlo.dot_general; say which"):
        configure_spec(m, "stablehlo.dot_general=((2, 1), (1, 4))")
    with pytest.raises(SearchError, match="op index 2 out of range"):
        configure_spec(m, "stablehlo.dot_general#2=((2, 1), (1, 4))")
    with pytest.raises(SearchError, match="expected NAME"):
        configure_spec(m, "stablehlo.dot_general#0")
    with pytest.raises(SearchError, match="no op stablehlo.conv"):
        configure_spec(m, "stablehlo.conv#0=((1, 1),)")
    assert configure_spec(m, "stablehlo.dot_general#1=((2, 4), (4, 1))") is _dots(m)[1]

    src, dst = tmp_path / "ffn.mlir", tmp_path / "out.mlir"
    ffn().save(str(src))
    spec = "stablehlo.dot_general#0=((2, 1), (1, 4))"
    rc = main(
        [
            "auto",
            str(src),
            "-o",
            str(dst),
            "--method",
            "bfs",
            "--memory-budget",
            "20000",
            "--json",
            "--configure",
            spec,
        ]
    )
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    dots = [n for n in report["nodes"] if n["label"].startswith("stablehlo.dot_general")]
    assert dots[0]["configured"] and dots[0]["mindspore"] == "((2, 1), (1, 4))"
    assert report["feasible"] and report["peak_memory"] <= 20000
    out = load_mlir(dst)
    assert _arg_dims(out)[1] == [[], ["model"]] and _arg_dims(out)[3] == [["model"], []]
    _no_attr(out)
    rc = main(
        [
            "auto",
            str(src),
            "-o",
            str(dst),
            "--configure",
            'stablehlo.dot_general#1=[{"model"}, {}], [{"data"}, {}]',
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("shardwise: error: configured strategy")
        and "stablehlo.dot_general" in err
        and err.count("\n") == 1
    )
    rc = main(
        [
            "auto",
            str(src),
            "-o",
            str(dst),
            "--configure",
            "stablehlo.dot_general#7=((2, 1), (1, 4))",
        ]
    )
    assert rc == 2 and "--configure" in capsys.readouterr().err


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
