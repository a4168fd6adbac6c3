"""Atomic file writes: the data goes to a temporary file in the target's directory, which is
then renamed over the target (``os.replace``, atomic on POSIX and Windows), so readers never
see a half-written file and a failure leaves the old file (or none) in place. The new file
gets the old file's permissions, or for a new file the usual ones (0o666 less the umask), not
the owner-only 0o600 of a temporary file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Writes ``data`` (text as UTF-8, or bytes) to ``path`` atomically. Raises ``OSError``
    when the directory is missing or not writable; the temporary file is removed on failure."""
    target = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _mode_for(target: Path) -> int:
    """Permission bits for ``target``: its current ones, or 0o666 less the process umask."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
