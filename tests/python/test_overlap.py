"""``DeviceModel.overlap``: the collectives next to a matmul hide behind pieces of its compute
(collective matmul; ``search/cost_model.py``), an optional term of the search's cost model
(issue 26, "an optional overlap of compute and communication")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from shardwise import auto_shard, check_partition, partition
from shardwise.errors import SearchError
from shardwise.search import DeviceModel
from shardwise.search.auto import prepare
from shardwise.search.cost_model import PS, op_cost
from shardwise.spmd.redistribute import CostModel, Link
from shardwise.testing.auto_programs import mlp

MESH = {"data": 2, "model": 4}
#: A slow device, so that compute and communication are of one order on a small program.
SLOW = DeviceModel(flop_rate=2e9, cost_model=CostModel(Link(latency=0.0)))


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "half", float("nan")])
def test_overlap_is_a_share(bad: object) -> None:
    with pytest.raises(SearchError, match="overlap"):
        DeviceModel(overlap=bad)  # type: ignore[arg-type]


def test_a_matmul_hides_each_adjacent_collective_behind_a_share_of_its_compute() -> None:
    problem = prepare(mlp(), MESH, device=replace(SLOW, overlap=0.6))
    dot = next(nd for nd in problem.nodes if nd.op is not None and nd.op.name == "stablehlo.dot_general")
    for s, c in zip(dot.strategies, dot.costs):
        plain = op_cost(dot.op, dot.rule, s, problem.mesh, SLOW)  # type: ignore[arg-type]
        assert c.compute_seconds == plain.compute_seconds and c.comm_bytes == plain.comm_bytes
        # Two tensor operands and its own collective share the compute.
        assert c.hide == pytest.approx(0.6 * c.compute_seconds / 3)
        assert c.seconds == pytest.approx(plain.seconds - min(plain.comm_seconds, c.hide))
    other = next(nd for nd in problem.nodes if nd.op is not None and nd.op.name == "stablehlo.tanh")
    assert all(c.hide == 0 for c in other.costs)  # only matmuls and convolutions overlap


def test_overlap_lowers_the_objective_by_what_it_hides_and_keeps_the_bytes() -> None:
    _out0, r0 = auto_shard(mlp(), MESH, memory_budget=44_000, method="ilp", time_limit=5, device=SLOW)
    out1, r1 = auto_shard(
        mlp(), MESH, memory_budget=44_000, method="ilp", time_limit=5, device=replace(SLOW, overlap=1.0)
    )
    assert r0.hidden_seconds == 0 and r0.seconds == r0.compute_seconds + r0.comm_seconds
    assert r1.hidden_seconds > 0 and r1.objective_ps < r0.objective_ps
    for n in r1.nodes:
        assert n.hidden_seconds <= min(n.comm_seconds, n.compute_seconds) * (1 + 1e-12)
    # The report's step time is the objective (each term rounded to a picosecond).
    assert r1.seconds * PS == pytest.approx(r1.objective_ps, abs=2 * len(r1.nodes) + 8)
    part = partition(out1)
    assert part.bytes_per_device == r1.comm_bytes  # hiding changes seconds, not bytes
    assert check_partition(out1, part.global_module, part.ranks, seed=0).passed


def test_cli_auto_overlap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from shardwise.cli import main

    src, dst = tmp_path / "mlp.mlir", tmp_path / "out.mlir"
    mlp().save(str(src))
    args = [
        "auto",
        str(src),
        "-o",
        str(dst),
        "--mesh",
        "data=2,model=4",
        "--memory-budget",
        "44000",
        "--time-limit",
        "2",
    ]
    assert main([*args, "--overlap", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["hidden_seconds"] > 0 and report["seconds"] < report["compute_seconds"] + report["comm_seconds"]
    assert main([*args, "--overlap", "2"]) == 2
    err = capsys.readouterr().err
    assert "overlap" in err and len(err.strip().splitlines()) == 1
