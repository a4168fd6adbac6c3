"""Writing the user's outputs safely (issue 25, "Output safety").

``write_atomic`` writes a file so that readers never see it half-written and nothing but the
named file changes:

* a regular file (or a new one): the data goes to a temporary file in the target's directory,
  is flushed to disk (``fsync``), and is renamed over the target (``os.replace``, atomic on
  POSIX), which keeps the old file's permission bits (a new file gets 0o666 less the umask,
  not the owner-only 0o600 of a temporary file); a failure leaves the old file in place;
* a symbolic link: the file it points to is written that way (the link stays a link);
* anything else that exists and is not a directory (a character device such as
  ``/dev/null`` or ``/dev/stdout``, a FIFO, a process substitution ``>(gzip > f)``): the data
  is written through it, never replacing it.

``output_dir`` does the same for a directory of outputs (``shardwise partition``): see its
docstring.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from shardwise._signals import held_signals
from shardwise.errors import ShardwiseError

__all__ = ["check_replaceable", "current_umask", "replace_dir", "write_atomic"]


def current_umask() -> int:
    """The process umask, read without changing it where the system tells it
    (``/proc/self/status`` on Linux); elsewhere set and restored at once."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Writes ``data`` (text as UTF-8, or bytes) to ``path`` (module docstring). Raises
    ``OSError`` when the directory is missing or not writable or ``path`` is a directory; the
    temporary file is removed on failure."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        st: os.stat_result | None = os.stat(path)  # follows symbolic links
    except OSError:  # missing (or a dangling link): a new file
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{os.fspath(path)} is a directory, expected a file to write")
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(path, "wb") as dev:  # a device, FIFO or pipe: write through it
            dev.write(raw)
        return
    target = Path(os.path.realpath(path))
    mode = (st.st_mode & 0o7777) if st is not None else (0o666 & ~current_umask())
    tmp: str | None = None
    f: BinaryIO | None = None
    try:
        # Ctrl-C is held while the temporary file is created and opened, so that it is never
        # left behind because the interrupt came before its name was recorded (CI, issue 25).
        with held_signals():
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            f = os.fdopen(fd, "wb")
        with f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with held_signals():
            if f is not None:
                f.close()
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_dir(out: Path, fill: object, *, is_ours: object, force: bool = False, what: str = "output") -> None:
    """Makes directory ``out`` hold exactly what ``fill(tmp)`` writes into a fresh temporary
    directory beside it, atomically: the temporary directory is renamed to ``out``; an
    existing ``out`` is moved aside first and removed only once the new one is in place.

    ``out`` may be missing, an empty directory, or a directory for which ``is_ours(out)`` is
    true (a previous output of the same kind); anything else (a file, a non-empty directory of
    the user's) raises ``ShardwiseError`` naming it, unless ``force``. The current directory
    and its ancestors are never replaced. The new directory gets the usual permissions (0o777
    less the umask). On any exception, ``KeyboardInterrupt`` and ``SystemExit`` included, the
    temporary directory is removed and ``out`` is left as it was."""
    assert callable(fill)
    out = check_replaceable(out, is_ours, force=force, what=what)
    _replace(out, out.parent, fill)


def check_replaceable(
    out: str | os.PathLike[str], is_ours: object, *, force: bool = False, what: str = "output"
) -> Path:
    """The absolute path ``replace_dir`` would write (a symbolic link resolved), after the
    checks of its docstring; ``ShardwiseError`` naming ``out`` when it may not be replaced.
    Call it before long work, so a bad ``-o`` fails at once."""
    assert callable(is_ours)
    out = Path(os.path.abspath(out))
    if out.is_symlink():
        out = Path(os.path.realpath(out))
    cwd = Path.cwd().resolve()
    if out.resolve() == cwd or out.resolve() in cwd.parents:
        raise ShardwiseError(
            f"refusing to replace {out}: it is the current directory or one of its parents; name a new directory"
        )
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            if not force:
                raise ShardwiseError(
                    f"{out} exists and is not a directory; name a new directory for the {what} (or pass --force)"
                )
        elif any(out.iterdir()) and not is_ours(out) and not force:
            raise ShardwiseError(
                f"{out} is a non-empty directory that is not a previous {what}; name a new directory (or pass --force to replace it)"
            )
    if not out.parent.is_dir():
        raise ShardwiseError(f"cannot write {out}: its parent directory {out.parent} does not exist")
    return out


def _replace(out: Path, parent: Path, fill: object) -> None:
    assert callable(fill)
    tmp: Path | None = None
    old: Path | None = None
    try:
        # Ctrl-C is held over each step that creates a directory and records its name, so that
        # none is left behind by an interrupt between the two (issue 25).
        with held_signals():
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
        os.chmod(tmp, 0o777 & ~current_umask())
        fill(tmp)
        if out.exists() or out.is_symlink():
            with held_signals():
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=parent))
                os.rename(out, old / "d")
        os.rename(tmp, out)
    except BaseException:
        with held_signals():
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            if old is not None:
                if not out.exists() and (old / "d").exists():
                    os.rename(old / "d", out)
                shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)  # the previous output, moved aside
    _fsync_dir(parent)
