"""The executor on CuPy arrays: the interpreter and the in-process SPMD simulator with every
simulated rank's arrays on one GPU (``device="cuda"``, ``shardwise run --device cuda``), against
the same programs on numpy. Skipped without CuPy and a CUDA GPU, except the error a user gets
for asking for one that is not there.

GPU arithmetic may differ from numpy's in the last bits (fused multiply-add, other reduction
orders, other transcendental functions), so floats are compared as ``check_partition`` does
first, ``max|a-b| <= 1e-5 * max(max|ref|, 1)`` (an element near zero after cancellation may
differ by more than its own size), and the partition checks use ``check_partition``'s own
criterion; integers and booleans are exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import shardwise as sw
from corpus import conformance_dir, corpus_params
from shardwise import examples
from shardwise.cli import main
from shardwise.errors import ShardwiseError
from shardwise.execute import random_inputs, run
from shardwise.execute.devices import array_namespace, cuda_available, to_host
from shardwise.spmd.load import check_outdir, simulate_outdir

pytest.importorskip("jax")

needs_gpu = pytest.mark.skipif(
    not cuda_available(), reason="needs CuPy (pip install 'shardwise[cuda]') and a CUDA GPU; none here"
)

#: CuPy has no bfloat16 or float8 dtypes.
_NO_CUPY = ("bf16", "f8E")


def _programs() -> list[Path]:
    root = conformance_dir()
    if root is None:
        return []
    return [p for p in sorted((root / "dev").glob("*.in.mlir")) if not any(k in p.read_text() for k in _NO_CUPY)]


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    if np.issubdtype(want.dtype, np.inexact):
        finite = np.isfinite(want)
        np.testing.assert_array_equal(np.isfinite(got), finite)
        np.testing.assert_array_equal(got[~finite], want[~finite])
        scale = max(float(np.abs(want[finite]).max(initial=0.0)), 1.0)
        assert float(np.abs(got[finite] - want[finite]).max(initial=0.0)) <= 1e-5 * scale
    else:
        np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module")
def mlp_adam_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled flax + optax step (raw lowering, calls kept) partitioned for its 8 devices."""
    out = tmp_path_factory.mktemp("cupy") / "mlp_adam"
    sw.partition(sw.load_mlir(examples.text("mlp_adam")), out)
    return out


def test_cuda_without_a_gpu_is_one_line(mlp_adam_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if cuda_available():
        pytest.skip("a GPU is here: the error path is not reachable")
    with pytest.raises(ShardwiseError, match="device 'cuda'"):
        array_namespace("cuda")
    assert main(["run", str(mlp_adam_dir), "--check", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert "device 'cuda'" in err and len(err.splitlines()) == 1, err


@needs_gpu
@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params(_programs()))
def test_program_on_cupy_matches_numpy(path: Path) -> None:
    xp = array_namespace("cuda")
    module = sw.load_mlir(path.read_text())
    inputs = random_inputs(module.func("main"), seed=1)
    want = run(module, inputs)
    got = run(module, [xp.asarray(a) for a in inputs], xp=xp)
    assert all(type(g).__module__.startswith("cupy") for g in got)
    for g, w in zip(got, want, strict=True):
        _close(to_host(g), np.asarray(w))


@needs_gpu
@pytest.mark.parametrize("name", examples.names())
def test_partition_checks_on_cupy_as_on_numpy(name: str) -> None:
    module = sw.load_mlir(examples.text(name))
    part = sw.partition(module)
    cpu = sw.check_partition(module, part.global_module, part.ranks, seed=2)
    gpu = sw.check_partition(module, part.global_module, part.ranks, seed=2, device="cuda")
    assert gpu.passed, gpu.outputs
    # The same collectives move the same bytes, whatever holds the arrays.
    assert [(c.kind, c.group, c.bytes_sent) for c in gpu.collectives] == [
        (c.kind, c.group, c.bytes_sent) for c in cpu.collectives
    ]
    assert gpu.bytes_sent == cpu.bytes_sent


@needs_gpu
def test_partition_directory_on_cupy(mlp_adam_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim = simulate_outdir(mlp_adam_dir, seed=3, device="cuda")
    ref = simulate_outdir(mlp_adam_dir, seed=3)
    for got_rank, want_rank in zip(sim.outputs, ref.outputs, strict=True):
        for g, w in zip(got_rank, want_rank, strict=True):
            assert type(g).__module__.startswith("cupy")
            _close(to_host(g), np.asarray(w))
    assert check_outdir(mlp_adam_dir, seed=3, device="cuda").passed
    assert main(["run", str(mlp_adam_dir), "--check", "--device", "cuda"]) == 0
    assert "simulated ranks on cuda" in capsys.readouterr().out
