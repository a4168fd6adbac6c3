"""``shardwise.files.write_atomic``: contents, permissions, and no trace of a failed write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from shardwise.files import write_atomic


def test_text_and_bytes_and_permissions(tmp_path: Path) -> None:
    out = tmp_path / "a.txt"
    write_atomic(out, "héllo\n")
    assert out.read_bytes() == "héllo\n".encode()
    mask = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.bin"
        write_atomic(fresh, b"\x00\x01")
        assert fresh.read_bytes() == b"\x00\x01"
        assert fresh.stat().st_mode & 0o777 == 0o644  # not the temporary file's 0o600
    finally:
        os.umask(mask)
    out.chmod(0o640)
    write_atomic(out, b"new")  # replacing keeps the old file's permissions
    assert out.read_bytes() == b"new" and out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "fresh.bin"]


def test_failed_write_leaves_old_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "a.txt"
    out.write_text("old")
    with pytest.raises(TypeError):
        write_atomic(out, 12)  # type: ignore[arg-type]
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "missing" / "b.txt", "x")
