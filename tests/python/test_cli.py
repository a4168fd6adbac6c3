from __future__ import annotations

import subprocess
import sys

import pytest
from shardwise.cli import main


def test_demo_runs_and_shows_the_representation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert '#sdy.sharding<@mesh, [{"x"}, {"y"}]>' in out
    assert "{devices=[2,4]<=[8]}" in out  # HLO column
    assert "dev 0" in out  # device grid
    for rule in ("duplicate-axis", "unsorted-replicated", "mergeable-sub-axes", "dim-exhausted"):
        assert rule in out
    assert "accepted?!" not in out
    # the program part: ops of the bundled MLP with their sharding rules
    assert "stablehlo.dot_general" in out and "reduction={k}" in out and "([i, jk])->([i, j, k])" in out
    # the propagation part (needs jax): the bundled transformer step, propagated
    if "skipped:" not in out:
        assert "propagation (148 ops" in out and "dot_general" in out and "result 6" in out


def test_show_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", '#sdy.sharding<@mesh, [{"x"}, {}]>', "--mesh", "x=2,y=4", "--shape", "8,16"]) == 0
    out = capsys.readouterr().out
    assert "valid for shape (8, 16)" in out and "last_tile_dim_replicate" in out
    assert main(["show", '#sdy.sharding<@mesh, [{"q"}]>', "--mesh", "x=2"]) == 2
    assert "unknown axis" in capsys.readouterr().err
    assert main(["show", "<@mesh, [{}]>", "--mesh", "x"]) == 2
    assert "name=size" in capsys.readouterr().err


def test_console_script_entry_point() -> None:
    r = subprocess.run([sys.executable, "-m", "shardwise.cli", "--version"], capture_output=True, text=True, check=True)
    assert r.stdout.startswith("shardwise ")
