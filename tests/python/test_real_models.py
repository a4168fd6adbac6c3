"""Real training steps written with flax and optax (``real_models.py``: an MLP, a CNN with
BatchNorm, a GPT-style LM, a top-2 MoE, ``nn.scan`` over layers, an LSTM, a VAE, a BERT-style
encoder, a ResNet with GroupNorm, a bag-of-words classifier, a depthwise TCN; ten optax
optimizers), lowered raw at test time on a 2x4 mesh with data-parallel inputs and
Megatron-style parameters, calls included. For each: propagation identical to jaxlib's Shardy,
the partition checked on 8 simulated devices, and on 8 MPI ranks."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")

import shardwise as sw
from shardwise.testing.real_models import model_names, real_model
from shardy_oracle import shardy

# Shardy's registry has no rule for the CHLO ops JAX leaves (chlo.square, chlo.top_k, ...) and
# says so; shardwise propagate warns the same way.
pytestmark = [pytest.mark.jax, pytest.mark.filterwarnings("ignore::shardwise.rules.exceptions.UnknownOpWarning")]


def _need_devices() -> None:
    import jax

    if len(jax.devices()) < 8:
        pytest.skip("needs 8 CPU devices (XLA_FLAGS set before jax was imported)")


@pytest.mark.parametrize("name", model_names())
def test_real_model_propagates_as_shardy_and_partitions_correctly(name: str) -> None:
    _need_devices()
    model = real_model(name)
    module = sw.load_mlir(model.text)
    assert any(op.name == "func.call" for op in module.walk()), "the raw lowering keeps its calls"
    propagated = sw.propagate(module)
    assert propagated.to_mlir() == shardy(model.text), name
    part = sw.partition(propagated)
    assert not any(op.name == "func.call" for op in part.global_module.walk())
    res = sw.check_partition(module, part.global_module, part.ranks, seed=0)
    assert res.passed, [o for o in res.outputs if not o.passed]


@pytest.mark.parametrize("name", model_names())
def test_real_model_on_8_mpi_ranks(name: str, tmp_path: Path) -> None:
    pytest.importorskip("mpi4py")
    _need_devices()
    from shardwise.spmd.launch import launch

    part = sw.partition(sw.load_mlir(real_model(name).text))
    part.write(tmp_path / "p")
    res = launch(tmp_path / "p", 8, check=True, timeout=300)
    assert res.passed, [c for c in res.checks or [] if not c.passed]
