"""Small file-descriptor level helpers shared by copy-up and apply."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable

from overlay.kernel import libc

CHUNK = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)

READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _CLOEXEC
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
TRUNC_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of ``data`` to ``fd`` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def copy_fd(src: int, dst: int, on_chunk: Callable[[bytes], None] | None = None) -> int:
    """Copy ``src`` to ``dst`` from the current offsets until EOF; returns the byte count.

    ``on_chunk`` sees every chunk exactly as written (used to hash the copied bytes).
    """
    total = 0
    while True:
        chunk = os.read(src, CHUNK)
        if not chunk:
            return total
        if on_chunk is not None:
            on_chunk(chunk)
        write_all(dst, chunk)
        total += len(chunk)


def fsync_dir(path: str) -> None:
    """Flush a directory's entries (new, renamed or removed names) to stable storage."""
    fd = os.open(path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dirs(paths: Iterable[str]) -> None:
    """fsync each distinct directory once."""
    for path in dict.fromkeys(paths):
        fsync_dir(path)


def unlink_quiet(path: str) -> bool:
    """Remove a file if present; True if something was removed. Other errors propagate."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def rmdir_quiet(path: str) -> bool:
    """Remove a directory if it exists and is empty; never raises."""
    with contextlib.suppress(OSError):
        os.rmdir(path)
        return True
    return False


def has_syncfs() -> bool:
    return libc.has_syncfs()


def syncfs_dirs(paths: Iterable[str]) -> None:
    """Flush every file system holding one of ``paths`` (directories), once per device.

    One call makes all our staged files, renames and unlinks on that file system durable at
    once, instead of one fsync (and one journal commit) per file.
    """
    seen: set[int] = set()
    for path in dict.fromkeys(paths):
        fd = os.open(path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            dev = os.fstat(fd).st_dev
            if dev in seen:
                continue
            seen.add(dev)
            libc.syncfs(fd, path)
        finally:
            os.close(fd)
