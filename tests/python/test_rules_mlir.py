"""The oracle for ``shardwise.rules``: Shardy inside jaxlib.

Helpers (imported by the other ``test_rules_*`` files): ``op_infos`` builds an ``OpInfo`` for
every op of a jaxlib module; ``compare_module`` runs Shardy's ``sdy-populate-op-sharding-
rules`` pass on the module and compares, op by op, ``str(rule_for(op))`` with the rule Shardy
attached (and ``None`` with no rule). Tests here run it over the conformance corpus: every
``*.in.mlir`` of ``dev/`` and the ``op_sharding_rule_registry*`` lit cases (with the pipeline
the lit index gives each case).
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from shardwise.rules import BlockInfo, OpInfo, UnknownOpWarning, ValueInfo, rule_for

jax_mlir = pytest.importorskip("jax._src.interpreters.mlir", reason="jax/jaxlib (the test extra) is not installed")
from corpus import conformance_dir, require_corpus
from jaxlib.mlir import ir, passmanager

PIPELINE = "builtin.module(func.func(sdy-populate-op-sharding-rules))"
CONSERVATIVE_PIPELINE = "builtin.module(func.func(sdy-populate-op-sharding-rules{conservative-propagation=true}))"

_CTX: Any = None


def context() -> Any:
    """One jaxlib MLIR context (with the stablehlo, sdy, ... dialects) for all tests."""
    global _CTX
    if _CTX is None:
        _CTX = jax_mlir.make_ir_context()
    return _CTX


def walk(op: Any) -> Iterator[Any]:
    """``op`` and every op nested in its regions, in pre-order."""
    op = op.operation
    yield op
    for region in op.regions:
        for block in region:
            for o in block.operations:
                yield from walk(o)


def _ranked(t: Any) -> Any:
    """``t`` as a ``RankedTensorType``, or None."""
    if isinstance(t, ir.RankedTensorType):
        return t
    try:
        return ir.RankedTensorType(t)
    except (ValueError, TypeError):
        return None


class _Converter:
    """Builds ``OpInfo``s for a jaxlib module: one ``ValueInfo`` per SSA value as its producer
    sees it and one as its users see it (with ``defining_op``), sharing a ``value_id``."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.used: dict[Any, ValueInfo] = {}
        self.infos: dict[Any, OpInfo] = {}
        self.order: list[OpInfo] = []

    def _id(self, v: Any) -> int:
        return self.ids.setdefault(v, len(self.ids))

    def _value(self, v: Any, defining: OpInfo | None) -> ValueInfo:
        t = v.type
        users = tuple(sorted({u.owner.name for u in v.uses}))
        rt = _ranked(t)
        if rt is not None:
            dyn = ir.ShapedType.get_dynamic_size()
            shape = tuple(-1 if d == dyn else d for d in rt.shape)
            return ValueInfo(shape, str(rt.element_type), defining, self._id(v), True, users)
        return ValueInfo((), str(t), defining, self._id(v), False, users)

    def _operand(self, v: Any) -> ValueInfo:
        if v not in self.used:
            owner = v.owner
            defining = None if isinstance(owner, ir.Block) else self.infos.get(owner.operation)
            self.used[v] = self._value(v, defining)
        return self.used[v]

    def block(self, block: Any) -> BlockInfo:
        args = tuple(self._operand(a) for a in block.arguments)
        return BlockInfo(args, tuple(self.op(o) for o in block.operations))

    def op(self, o: Any) -> OpInfo:
        o = o.operation
        regions = tuple(tuple(self.block(b) for b in r) for r in o.regions)
        attrs = {}
        for a in o.attributes:
            name = a if isinstance(a, str) else a.name
            attrs[name] = str(o.attributes[name])
        info = OpInfo(
            o.name,
            tuple(self._operand(v) for v in o.operands),
            tuple(self._value(r, None) for r in o.results),
            attrs,
            regions,
        )
        self.infos[o] = info
        return info


def op_infos(module: Any) -> list[OpInfo]:
    """An ``OpInfo`` for every op of ``module`` (the module op included), in ``walk`` order."""
    c = _Converter()
    c.op(module.operation)
    return [c.infos[o] for o in walk(module.operation)]


@dataclass
class Comparison:
    """Ops compared, exact matches, and the mismatches ``(op name, ours, Shardy's)``."""

    ops: int = 0
    ruled: int = 0
    matches: int = 0
    by_op: Counter[str] = field(default_factory=Counter)
    mismatches: list[tuple[str, str | None, str | None]] = field(default_factory=list)

    def add(self, other: Comparison) -> None:
        self.ops += other.ops
        self.ruled += other.ruled
        self.matches += other.matches
        self.by_op.update(other.by_op)
        self.mismatches += other.mismatches


def compare_module(text: str, conservative: bool = False) -> Comparison:
    """Parses ``text``, builds ``OpInfo``s, runs Shardy's rule pass and compares every op."""
    with context():
        module = ir.Module.parse(text)
        infos = op_infos(module)
        pm = passmanager.PassManager.parse(CONSERVATIVE_PIPELINE if conservative else PIPELINE)
        pm.run(module.operation)
        expected = [
            str(o.attributes["sdy.sharding_rule"]) if "sdy.sharding_rule" in o.attributes else None
            for o in walk(module.operation)
        ]
    assert len(expected) == len(infos)
    out = Comparison()
    for info, want in zip(infos, expected):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rule = rule_for(info, conservative=conservative)
        got = None if rule is None else str(rule)
        unknown = [w for w in caught if issubclass(w.category, UnknownOpWarning)]
        others = [w for w in caught if not issubclass(w.category, UnknownOpWarning)]
        assert not others, [str(w.message) for w in others]
        out.ops += 1
        out.ruled += want is not None
        ok = got == want and not (unknown and want is not None)
        out.matches += ok
        out.by_op[info.name] += 1
        if not ok:
            out.mismatches.append((info.name, got, want))
    return out


def lit_cases() -> list[tuple[str, str, bool]]:
    """``(id, input file, conservative)`` for the ``op_sharding_rule_registry*`` lit cases."""
    root = conformance_dir()
    if root is None:
        return []
    index = json.loads((root / "lit" / "index.json").read_text())
    cases = []
    for case in index["cases"]:
        if Path(case["in"]).name.startswith("op_sharding_rule_registry"):
            conservative = "conservative-propagation=true" in case["pipeline"]
            assert case["pipeline"] in (PIPELINE, CONSERVATIVE_PIPELINE), case["pipeline"]
            cases.append((case["id"], case["in"], conservative))
    return cases


def dev_files() -> list[Path]:
    root = conformance_dir()
    return sorted((root / "dev").glob("*.in.mlir")) if root else []


def _report(c: Comparison) -> str:
    lines = [f"{c.matches}/{c.ops} ops match ({c.ruled} with a Shardy rule)"]
    for name, got, want in c.mismatches[:20]:
        lines.append(f"  {name}\n    ours:   {got}\n    shardy: {want}")
    return "\n".join(lines)


@pytest.mark.jax
@pytest.mark.corpus
def test_dev_corpus_matches_shardy() -> None:
    """Every op of the 53 JAX programs of ``dev/``."""
    require_corpus()
    files = dev_files()
    assert files
    total = Comparison()
    for f in files:
        total.add(compare_module(f.read_text()))
    assert total.ruled > 1000
    assert total.matches == total.ops, _report(total)


@pytest.mark.jax
@pytest.mark.corpus
def test_lit_registry_cases_match_shardy() -> None:
    """Shardy's own registry lit tests, the conservative one with its option."""
    root = require_corpus()
    cases = lit_cases()
    assert {c[2] for c in cases} == {False, True}
    total = Comparison()
    for _, name, conservative in cases:
        total.add(compare_module((root / "lit" / name).read_text(), conservative))
    assert total.ruled > 100
    assert total.matches == total.ops, _report(total)


@pytest.mark.jax
@pytest.mark.corpus
def test_lit_expected_output_has_our_rules() -> None:
    """Every rule in the lit cases' FileCheck'd outputs parses and prints back byte for byte."""
    from shardwise.rules import OpShardingRule

    root = require_corpus()
    seen = 0
    for _, name, _ in lit_cases():
        out = (root / "lit" / name.replace(".in.mlir", ".out.mlir")).read_text()
        for line in out.splitlines():
            start = line.find("#sdy.op_sharding_rule<")
            if start < 0:
                continue
            depth, end = 0, start
            for end in range(start, len(line)):
                if line[end] == "<":
                    depth += 1
                elif line[end] == ">" and line[end - 1] != "-":
                    depth -= 1
                    if depth == 0:
                        break
            text = line[start : end + 1]
            assert str(OpShardingRule.parse(text)) == text
            seen += 1
    assert seen > 100
