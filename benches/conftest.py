"""Benchmarks session hooks: the propagation report is written when the session ends."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from bench_report import table, write

    out = write()
    if out is not None:
        print("\n" + table() + f"\nreport written to {out}")
