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

import ctypes
import errno
import functools
import os
import platform

_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(platform.machine())
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
    except (OSError, AttributeError):
        return None
    return libc


_openat2_works: bool | None = None if _SYS_OPENAT2 is not None else False


def _split(rel: str) -> list[str]:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise OSError(errno.EINVAL, "not a plain relative path", rel)
    return parts


def _openat2(dir_fd: int, rel: str, flags: int) -> int | None:
    """The fd, or None when openat2 itself is unavailable (the walk is used instead)."""
    global _openat2_works
    libc = _libc()
    if _openat2_works is False or libc is None or _SYS_OPENAT2 is None:
        return None
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS)
    fd = int(
        libc.syscall(
            _SYS_OPENAT2,
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(rel)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
    )
    if fd >= 0:
        _openat2_works = True
        return fd
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and not _openat2_works:
        _openat2_works = False
        return None
    raise OSError(err, os.strerror(err), rel)


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
