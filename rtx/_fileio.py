"""Atomic file writes: every file rtx writes goes through ``atomic_write``.

The data go to a temporary file in the target's own directory (same file
system, so the final rename is atomic), which is flushed and fsynced, then
renamed over the target, and the directory entry is fsynced too.  A write that
fails at any point (an exception, a full disk) removes the temporary file and
leaves the previous target untouched: a reader sees either the old file or the
complete new one, never a partial one.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["atomic_write"]


def _umask() -> int:
    """The process umask, read without changing it where the OS allows."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # not thread-safe, hence the last resort only
    os.umask(old)
    return old


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: directories cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb",
                 **open_kwargs: Any) -> Iterator[IO[Any]]:
    """``with atomic_write(path, "w") as fh: ...`` writes ``path`` atomically.

    ``mode`` is ``"w"`` / ``"wb"`` (text mode takes ``encoding=`` etc.).  The new
    file keeps the permissions of the file it replaces, else gets the ones a
    plain ``open`` would give (``0o666`` less the umask).
    """
    if mode not in ("w", "wb", "wt"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', got {mode!r}")
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    try:
        perms = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        perms = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".",
                               suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, mode, **open_kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, perms)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)
