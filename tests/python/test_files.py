"""``shardwise.files``: contents, permissions, and no trace of a failed or interrupted write."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from shardwise.files import replace_dir, write_atomic


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


def _interrupting(make: Callable[..., Any]) -> Callable[..., Any]:
    """``make`` (``tempfile.mkstemp`` or ``mkdtemp``) followed by a Ctrl-C to this process before
    it returns: the interrupt lands between the creation of the temporary path and the caller's
    record of its name, the window the CI run hit (a ``.out.mlir.*.tmp`` left behind)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        made = make(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # os.kill runs the Python handler before returning
        return made

    return wrapped


def test_ctrl_c_right_after_the_temporary_file_is_made_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.mlir"
    out.write_text("old")
    monkeypatch.setattr(tempfile, "mkstemp", _interrupting(tempfile.mkstemp))
    with pytest.raises(KeyboardInterrupt):
        write_atomic(out, "new")
    assert [p.name for p in tmp_path.iterdir()] == ["out.mlir"] and out.read_text() == "old"


@pytest.mark.parametrize("existing", [False, True])
def test_ctrl_c_right_after_a_temporary_directory_is_made_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    out = tmp_path / "part"
    if existing:
        out.mkdir()
        (out / "old").write_text("old")

    def fill(d: Path) -> None:
        (d / "new").write_text("new")
        if existing:  # interrupt the second mkdtemp (the old output's place), not the first
            monkeypatch.setattr(tempfile, "mkdtemp", _interrupting(real))

    real = tempfile.mkdtemp
    if not existing:
        monkeypatch.setattr(tempfile, "mkdtemp", _interrupting(real))
    with pytest.raises(KeyboardInterrupt):
        replace_dir(out, fill, is_ours=lambda p: True)
    assert [p.name for p in tmp_path.iterdir()] == (["part"] if existing else [])
    if existing:
        assert [p.name for p in out.iterdir()] == ["old"]
