"""The native export passes (``rust/src/transforms/export/``) give, module for module, the
text and warnings the Python passes of the same name give, each after the import part and
propagation, and all of them in the export pipeline's order, on the conformance corpus and on
raw JAX training steps of real flax models."""

from __future__ import annotations

import warnings

import pytest
from shardwise import _native
from shardwise.errors import ShardwiseError
from shardwise.importers.mlir import load_mlir
from shardwise.testing.corpus import conformance_dir, corpus_files
from shardwise.testing.native_passes import NATIVE, PROPAGATE
from shardwise.testing.real_models import model_names, plain_model, real_model
from test_native_passes import _both, _native_text

#: The export passes, in the order ``sdy-export-pipeline`` runs them
#: (``func.func(sdy-sink-data-flow-edges)`` first).
CHAIN = [
    "sdy-sink-data-flow-edges",
    "sdy-remove-sharding-groups",
    "sdy-sharding-constraint-to-reshard",
    "sdy-update-non-divisible-input-output-shardings",
    "sdy-remove-sub-axes-in-input-output-shardings",
    "sdy-close-shardings",
]

_PROPAGATED = [*NATIVE, PROPAGATE[0]]

#: The least number of corpus modules each run changes (after import and propagation), so the
#: comparison is not of no-ops. (Measured: 558, 44, 88, 46, 40, 744 and 988 of 1,158.)
_LEAST = {
    "sdy-sink-data-flow-edges": 300,
    "sdy-remove-sharding-groups": 20,
    "sdy-sharding-constraint-to-reshard": 40,
    "sdy-update-non-divisible-input-output-shardings": 20,
    "sdy-remove-sub-axes-in-input-output-shardings": 20,
    "sdy-close-shardings": 300,
    "chain": 500,
}


@pytest.mark.skipif(conformance_dir() is None, reason="needs ../shared/conformance")
@pytest.mark.parametrize("passes", [[p] for p in CHAIN] + [CHAIN], ids=[*CHAIN, "chain"])
def test_native_export_passes_give_the_python_passes_text_on_the_corpus(passes: list[str]) -> None:
    same = changed = 0
    for path in corpus_files():
        text = path.read_text()
        try:
            load_mlir(text)
        except ShardwiseError:  # the corpus's refused modules: test_native_reader covers them
            continue
        native, native_warnings, python, python_warnings = _both(text, [*_PROPAGATED, *passes])
        if native is None:
            continue
        assert native == python, path
        assert native_warnings == python_warnings, path
        same += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # compared above
                before = _native_text(text, _PROPAGATED)
        except ShardwiseError:  # refused before the export passes: refused alike above
            before = native
        changed += native != before
    assert same >= 1100
    assert changed >= _LEAST["chain" if len(passes) > 1 else passes[0]]


@pytest.mark.parametrize("annotated", [True, False], ids=["annotated", "plain"])
@pytest.mark.parametrize("name", model_names())
def test_native_export_passes_give_the_python_passes_text_on_real_jax_steps(name: str, annotated: bool) -> None:
    text = real_model(name).text if annotated else plain_model(name).text
    native, native_warnings, python, python_warnings = _both(text, [*_PROPAGATED, *CHAIN])
    assert native == python
    assert native_warnings == python_warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # compared above
        before = _native.run_native_passes(text, _PROPAGATED)
    assert native != before  # the export passes acted


def test_native_export_pass_options_it_does_not_take_are_refused() -> None:
    text = "module {\n  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n    return %arg0 : tensor<8xf32>\n  }\n}\n"
    with pytest.raises(ShardwiseError, match='pass sdy-sink-data-flow-edges has no option "sink-everything"'):
        _native.run_native_passes(text, ["sdy-sink-data-flow-edges{sink-everything=true}"])
