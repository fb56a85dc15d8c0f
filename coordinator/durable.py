"""Crash-safe small-file writes shared by the history, the memory store and settings:
a reader sees the old file or the whole new one, never a torn one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make a rename or link in ``path`` durable (best effort)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_temp(directory: Path, data: bytes) -> Path:
    """``data`` in a fsynced temp file in ``directory`` (the caller renames or links it)."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return Path(tmp)


def atomic_write(path: Path, data: bytes, *, replace: bool = True) -> bool:
    """Write ``data`` to ``path`` through a fsynced temp file. With ``replace=False`` an
    existing ``path`` is never overwritten (returns False instead)."""
    tmp = write_temp(path.parent, data)
    try:
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        fsync_dir(path.parent)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
