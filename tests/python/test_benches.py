"""Every benchmark under ``benches/`` runs, on its smallest input (``SHARDWISE_BENCH_SMOKE=1``),
so that none can stop importing or running unnoticed (``bench_partition_bytes.py`` once did).
The timings of these runs mean nothing; the benchmarks' own reports are written to a temporary
directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import conformance_dir

ROOT = Path(__file__).resolve().parents[2]
BENCHES = ROOT / "benches"

pytest.importorskip("pytest_benchmark")
pytest.importorskip("jax")


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(
        os.environ,
        SHARDWISE_BENCH_SMOKE="1",
        SHARDWISE_BENCH_OUT=str(tmp_path),
        SHARDWISE_BENCH_LAYERS="2",
        XLA_FLAGS="--xla_force_host_platform_device_count=8",
    )


def _run(args: list[str], tmp_path: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=timeout
    )
    assert res.returncode == 0, f"{' '.join(args)} exited {res.returncode}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


PYTEST_BENCHES = sorted(p.name for p in BENCHES.glob("bench_*.py") if "def test_" in p.read_text())
SCRIPT_BENCHES = sorted(
    p.name for p in BENCHES.glob("bench_*.py") if "def test_" not in p.read_text() and "__main__" in p.read_text()
)


def test_every_benchmark_is_covered() -> None:
    names = {p.name for p in BENCHES.glob("bench_*.py")} - {"bench_report.py"}
    assert names == set(PYTEST_BENCHES) | set(SCRIPT_BENCHES)
    assert {"bench_propagate.py", "bench_partition_bytes.py", "bench_collectives.py"} <= set(PYTEST_BENCHES)
    assert {"bench_auto.py", "bench_iopddl.py"} <= set(SCRIPT_BENCHES)


@pytest.mark.parametrize("name", PYTEST_BENCHES)
def test_pytest_benchmark_runs(name: str, tmp_path: Path) -> None:
    if name in ("bench_partition_bytes.py", "bench_text.py") and conformance_dir() is None:
        pytest.skip("../shared/conformance is absent")
    res = _run(
        [
            "-m",
            "pytest",
            str(BENCHES / name),
            "-q",
            "-p",
            "no:cacheprovider",
            "--benchmark-disable-gc",
            "-W",
            "ignore::DeprecationWarning",
        ],
        tmp_path,
    )
    assert " passed" in res.stdout, res.stdout[-2000:]


def test_auto_benchmark_runs(tmp_path: Path) -> None:
    res = _run([str(BENCHES / "bench_auto.py"), "--time-limit", "1"], tmp_path)
    assert "mlp" in res.stdout


def test_auto_real_benchmark_runs(tmp_path: Path) -> None:
    pytest.importorskip("flax")
    out = tmp_path / "auto_real.md"
    res = _run([str(BENCHES / "bench_auto_real.py"), "--time-limit", "1", "-o", str(out), "mlp"], tmp_path)
    assert "| mlp | data=2,model=4 |" in res.stdout and "| pass |" in out.read_text()


def test_auto_large_benchmark_runs(tmp_path: Path) -> None:
    pytest.importorskip("flax")
    out = tmp_path / "auto_large.md"
    _run(
        [str(BENCHES / "bench_auto_large.py"), "--layers", "1", "--time-limit", "1", "--check", "-o", str(out)],
        tmp_path,
    )
    row = out.read_text().splitlines()[-1]
    assert row.startswith("| 1 |") and row.endswith("| pass |"), row


def test_iopddl_benchmark_runs(tmp_path: Path) -> None:
    data = ROOT.parent / "shared" / "iopddl"
    if not (data / "best_known.csv").is_file():
        pytest.skip("../shared/iopddl is absent")
    out = tmp_path / "iopddl.md"
    _run(
        [
            str(BENCHES / "bench_iopddl.py"),
            "--only",
            "B",
            "--time-scale",
            "0.05",
            "--repeat",
            "2",
            "--log",
            str(tmp_path / "logs"),
            "-o",
            str(out),
            "--bound-time",
            "0.5",
        ],
        tmp_path,
    )
    assert out.read_text().count("| B |") == 2
    for row in out.read_text().splitlines()[2:]:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        cost, lower = int(cells[3]), int(cells[10].split()[0])  # "our cost", "lower bound"
        assert 0 < lower <= cost and 0 <= float(cells[11]) < 100, row
    assert all((tmp_path / "logs" / f"run{i}" / "B.log").is_file() for i in (1, 2))  # traces: test_penalty


def test_fault_campaign_runs(tmp_path: Path) -> None:
    """``benches/fault_campaign.py`` (issue 25's fault suite, larger) on a few cases of each kind."""
    _run([str(BENCHES / "fault_campaign.py")], tmp_path)
    report = (tmp_path / "faults.md").read_text()
    assert "| **all** | **40** |" in report, report


def test_torch_plans_benchmark_runs(tmp_path: Path) -> None:
    """``benches/bench_torch_plans.py`` on its smallest case: the MLP's AdamW step fitted to
    DTensor and run on 2 gloo processes."""
    pytest.importorskip("torch")
    out = tmp_path / "torch.md"
    _run(
        [str(BENCHES / "bench_torch_plans.py"), "--models", "mlp", "--kinds", "step", "--mesh", "data=1,model=2"]
        + ["--time-limit", "2", "-o", str(out)],
        tmp_path,
    )
    row = out.read_text().splitlines()[-1]
    assert row.startswith("| mlp | step |") and row.endswith("| pass |"), row
