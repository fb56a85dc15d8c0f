"""Opening a file below a directory without following any symlink on the way.

Accept reads every overlay file a worker reported. The worker is not trusted: a symlink it
left in its overlay (as the file itself, or as any directory on the way to it) must never make
the coordinator read a file outside that overlay, such as one in the user's home directory.

``openat2(2)`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` (Linux 5.6+) makes the kernel
refuse both ``..`` escapes and every symlink in the path, atomically. It is called through
``syscall(2)`` (glibc has no wrapper). Where it is missing (an older kernel, a seccomp filter
answering ENOSYS or EPERM, another architecture), the same rule is kept by a walk: each
directory is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to the one before, and the
file itself with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import errno
import os

from overlay.kernel import libc

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_openat2_works: bool | None = None  # learnt from the first call


def _split(rel: str) -> list[str]:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise OSError(errno.EINVAL, "not a plain relative path", rel)
    return parts


def _openat2(dir_fd: int, rel: str, flags: int) -> int | None:
    """The fd, or None when openat2 itself is unavailable (the walk is used instead)."""
    global _openat2_works
    if _openat2_works is False:
        return None
    try:
        fd = libc.openat2(dir_fd, rel, flags, libc.RESOLVE_BENEATH | libc.RESOLVE_NO_SYMLINKS)
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.EPERM) and not _openat2_works:
            _openat2_works = False
            return None
        raise
    _openat2_works = True
    return fd


def _walk(dir_fd: int, parts: list[str], flags: int) -> int:
    current = dir_fd
    try:
        for name in parts[:-1]:
            nxt = os.open(name, _DIR_FLAGS, dir_fd=current)
            if current != dir_fd:
                os.close(current)
            current = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=current)
    finally:
        if current != dir_fd:
            os.close(current)


def open_beneath(directory: str | int, rel: str, flags: int = _FLAGS) -> int:
    """An fd for ``directory/rel`` opened with ``flags``, refusing any symlink in ``rel``
    (directories and the file itself) and any path out of ``directory``.

    ``directory`` is a path (opened without following a symlink as its last component) or an
    open directory fd. ``rel`` must be a relative posix path without ``.``, ``..`` or empty
    components. Raises OSError: ELOOP (or ENOTDIR) for a symlink on the way, EXDEV for an
    escape, ENOENT for a missing file, EINVAL for a malformed ``rel``.
    """
    parts = _split(rel)
    owned = isinstance(directory, str)
    dir_fd = os.open(directory, _DIR_FLAGS) if isinstance(directory, str) else directory
    try:
        fd = _openat2(dir_fd, rel, flags)
        if fd is None:
            fd = _walk(dir_fd, parts, flags)
        return fd
    finally:
        if owned:
            os.close(dir_fd)


def openat2_available() -> bool:
    """Whether the kernel path (openat2) is in use; False before the first call decides."""
    return bool(_openat2_works)
