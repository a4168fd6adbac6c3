"""Parse + print every sharding of the conformance corpus: shardwise vs Shardy's own attribute
parser/printer through jaxlib's MLIR bindings, in one run.

    pip install -e '.[test,bench]' && pytest benches --benchmark-only -p no:cacheprovider
"""

from __future__ import annotations

import re

import pytest
from shardwise import TensorSharding, _native
from shardwise.testing.corpus import corpus_files, extract

_COMMENT = re.compile(r"//[^\n]*")


def _texts() -> list[str]:
    out = []
    for p in corpus_files():
        for kind, text in extract(_COMMENT.sub("", p.read_text())):
            if kind == "sharding":
                out.append(text)
    return out


TEXTS = _texts()
pytestmark = pytest.mark.skipif(not TEXTS, reason="../shared/conformance is absent")


def _run_shardwise() -> int:
    return sum(len(str(TensorSharding.parse(t))) for t in TEXTS)


def _run_native() -> int:
    return sum(len(str(_native.Sharding.parse(t))) for t in TEXTS)


def test_shardwise_python_objects(benchmark) -> None:  # type: ignore[no-untyped-def]
    benchmark.extra_info["shardings"] = len(TEXTS)
    assert benchmark(_run_shardwise) > 0


def test_shardwise_core_only(benchmark) -> None:  # type: ignore[no-untyped-def]
    benchmark.extra_info["shardings"] = len(TEXTS)
    assert benchmark(_run_native) > 0


def test_shardy_mlir_attribute(benchmark) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("jax")
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    with jmlir.make_ir_context():
        benchmark.extra_info["shardings"] = len(TEXTS)
        assert benchmark(lambda: sum(len(str(ir.Attribute.parse(t))) for t in TEXTS)) > 0
