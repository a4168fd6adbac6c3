"""Rules on IR modules: ``populate_rules`` gives the module Shardy's
``sdy-populate-op-sharding-rules`` gives, and the ``shardwise rules`` command."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from corpus import conformance_dir, corpus_params
from shardwise import Builder, Mesh, UnknownOpWarning, load_mlir, populate_rules
from shardwise.cli import main

jax = pytest.importorskip("jax")
from shardwise._jaxlib import context, ir


def _cases() -> list[Path]:
    root = conformance_dir()
    if root is None:
        return []
    return sorted((root / "dev").glob("*.in.mlir")) + sorted((root / "lit").glob("op_sharding_rule_registry*.in.mlir"))


CASES = _cases()


def _shardy(text: str, conservative: bool) -> str:
    from jaxlib.mlir import passmanager

    option = "{conservative-propagation=true}" if conservative else ""
    with context():
        m = ir().Module.parse(text)
        passmanager.PassManager.parse(f"builtin.module(func.func(sdy-populate-op-sharding-rules{option}))").run(
            m.operation
        )
        return str(m)


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params(CASES))
def test_populate_rules_equals_shardy(path: Path) -> None:
    text = path.read_text()
    conservative = "conservative" in path.name
    module = load_mlir(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownOpWarning)  # Shardy warns for the same ops
        populate_rules(module, conservative=conservative)
    assert module.to_mlir() == _shardy(text, conservative)


def test_populate_rules_on_a_builder_program() -> None:
    b = Builder(Mesh({"x": 2}))
    x = b.arg((8, 16))
    w = b.arg((16, 4))
    y = b.dot_general(x, w, contracting=((1,), (0,)))
    m = b.ret(b.reshape(y, (2, 4, 4)))
    assert populate_rules(m) == 2
    ops = m.func().body.ops
    assert (
        ops[0].attributes["sdy.sharding_rule"]
        == "#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=8, j=4, k=16} reduction={k}>"
    )
    assert ops[1].attributes["sdy.sharding_rule"] == "#sdy.op_sharding_rule<([ij, k])->([i, j, k]) {i=2, j=4, k=4}>"
    assert _shardy(b.module.to_mlir(), False) == m.to_mlir()  # rules already there are kept


def test_rules_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = Builder(Mesh({"x": 2}))
    x = b.arg((8, 16))
    b.ret(b.add(x, x)).save(tmp_path / "in.mlir")
    assert main(["rules", str(tmp_path / "in.mlir"), "-o", str(tmp_path / "out.mlir")]) == 0
    assert "sharding rules on 1 ops" in capsys.readouterr().out
    assert "#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=8, j=16}>" in (tmp_path / "out.mlir").read_text()
    (tmp_path / "bad.mlir").write_text("func.func @f( {")
    assert main(["rules", str(tmp_path / "bad.mlir"), "-o", str(tmp_path / "never.mlir")]) == 2
    assert "cannot parse MLIR" in capsys.readouterr().err
    assert not (tmp_path / "never.mlir").exists()


@pytest.mark.corpus
def test_compare_py_check_rules_on_lit_registry_cases() -> None:
    """The issue's own measure: compare.py --check-rules over the lit registry cases, running
    the installed ``shardwise rules`` command."""
    import os
    import re
    import subprocess
    import sys

    root = conformance_dir()
    if root is None:
        pytest.skip("../shared/conformance is absent")
    bindir = str(Path(sys.executable).parent)
    cmd = "shardwise rules {in} -o {out} $(case {name} in *conservative*) echo --conservative;; esac)"
    r = subprocess.run(
        [
            sys.executable,
            str(root.parent / "tools" / "compare.py"),
            "-q",
            "--dir",
            str(root / "lit"),
            "--filter",
            "op_sharding_rule_registry",
            "--check-rules",
            "--actual-cmd",
            cmd,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")},
    )
    m = re.search(r"conformance: (\d+)/(\d+) cases exact, (\d+)/(\d+) values match", r.stdout)
    assert m and m.group(1) == m.group(2) == "2" and m.group(3) == m.group(4), r.stdout[-2000:] + r.stderr[-2000:]
