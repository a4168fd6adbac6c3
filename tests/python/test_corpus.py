"""Every mesh and sharding written in ../shared/conformance: our printer gives Shardy's text.

Files printed by Shardy (``*.out.mlir``) must round-trip byte for byte without jax; for all
files, our print must equal Shardy's own print of the same attribute (through jaxlib's MLIR
bindings), and each sharding whose mesh the file defines must pass validation.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from corpus import balanced_end, corpus_files, corpus_params, extract, require_corpus
from shardwise import Mesh, TensorSharding

FILES = corpus_files()
_COMMENT = re.compile(r"//[^\n]*")


def _items(path: Path) -> tuple[dict[str, Mesh], list[tuple[str, str]]]:
    text = _COMMENT.sub("", path.read_text())  # FileCheck lines are not part of the module
    items = list(extract(text))
    meshes = dict(Mesh.parse_op(s) for k, s in items if k == "mesh_op")
    return meshes, items


def _ours(kind: str, text: str, meshes: dict[str, Mesh]) -> str:
    """Parse (bound and validated when the file defines the mesh) and print again."""
    if kind == "mesh_op":
        name, mesh = Mesh.parse_op(text)
        return mesh.op_text(name)
    if kind == "per_value":
        ts = TensorSharding.parse_per_value(text)
        known = {t.mesh_name for t in ts} <= meshes.keys()
        return TensorSharding.print_per_value(TensorSharding.parse_per_value(text, meshes) if known else ts)
    t = TensorSharding.parse(text)
    if t.mesh_name in meshes:
        t = TensorSharding.parse(text, meshes)
    return str(t) if kind == "sharding" else t.body()


def test_corpus_present_and_large() -> None:
    require_corpus()
    kinds: dict[str, int] = {}
    for p in FILES:
        for k, _ in _items(p)[1]:
            kinds[k] = kinds.get(k, 0) + 1
    # Sanity: the extraction finds the shardings (thousands of each kind).
    assert min(kinds.values()) > 500, kinds


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params([p for p in FILES if p.name.endswith(".out.mlir")]))
def test_shardy_output_round_trips_byte_identical(path: Path) -> None:
    meshes, items = _items(path)
    for kind, text in items:
        assert _ours(kind, text, meshes) == text, f"{path.name}: {kind}"


@pytest.mark.jax
@pytest.mark.corpus
def test_every_sharding_prints_as_shardy_prints_it() -> None:
    """All files, including hand-written lit inputs: our text equals Shardy's printer's."""
    require_corpus()
    pytest.importorskip("jax")
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    checked = 0
    with jmlir.make_ir_context():
        for path in FILES:
            meshes, items = _items(path)
            for kind, text in items:
                if kind == "mesh_op":
                    body = text.split("=", 1)[1].strip()
                    assert str(Mesh.parse(body)) == str(ir.Attribute.parse("#sdy.mesh" + body)), path.name
                elif kind == "bare":
                    want = str(ir.Attribute.parse("#sdy.sharding" + text))[len("#sdy.sharding") :]
                    assert _ours(kind, text, meshes) == want, f"{path.name}: {text}"
                else:
                    assert _ours(kind, text, meshes) == str(ir.Attribute.parse(text)), f"{path.name}: {text}"
                checked += 1
    assert checked > 5000


_ARG = re.compile(r"tensor<((?:[0-9?]+x)*)[a-z0-9]+>\s*\{[^{}]*?sdy\.sharding = (#sdy\.sharding<)")


@pytest.mark.corpus
def test_value_shardings_valid_for_their_shapes() -> None:
    """Shardings on typed values (function arguments and results) pass Shardy's rules for their
    shapes; the RFC's user-only rules flag exactly the known cases where Shardy's propagation
    exceeds a dimension or shards a size-0 dimension on a size-1 axis."""
    require_corpus()
    checked, user_rule_hits = 0, set()
    for path in FILES:
        text = _COMMENT.sub("", path.read_text())
        meshes = dict(Mesh.parse_op(s) for k, s in extract(text) if k == "mesh_op")
        for m in _ARG.finditer(text):
            shape = [-1 if d == "?" else int(d) for d in m.group(1).split("x") if d]
            ts = TensorSharding.parse(text[m.start(2) : balanced_end(text, m.end(2) - 1)])
            if ts.mesh_name not in meshes:
                continue
            ts.validate(shape, meshes=meshes)
            checked += 1
            if not any(a.is_sub_axis for a in ts.axis_refs):
                try:
                    ts.validate(shape, meshes=meshes, user=True)
                except ValueError as e:
                    user_rule_hits.add(getattr(e, "rule", None))
    assert checked > 1000
    assert user_rule_hits <= {"dim-exhausted", "zero-size-dim-sharded"}
