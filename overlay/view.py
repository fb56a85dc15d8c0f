"""A process's private view of the project with a speculation's writes on top.

Used in the child of a read-only shell command, between fork and exec: a new mount
namespace (and a user namespace when we are not root), a read-only overlayfs whose
upper layer is the speculation's overlay directory and whose lower layer is the real
project, mounted over the project path itself. The command then reads exactly what the
speculation has written so far, and nothing it does can write through the view. Each
command gets a fresh mount, so files the speculation writes later are seen by later
commands (overlayfs must not see its layers change while mounted).

The opt-in capture view does the same writable, in a network namespace of its own: a
command that is not read-only (tests, a build) runs against the speculation's view and
its writes land in a fresh upper directory, which the worker then copies into the
speculation's overlay.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY = 1
_MS_REC = 16384
_MS_PRIVATE = 1 << 18


class ViewError(OSError):
    """The kernel refused a namespace or the overlay mount."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise ViewError(errno, f"{what} failed: {os.strerror(errno)}")


def _escape(path: str) -> str:
    """overlayfs option syntax: `:` separates layers and `,` options; escape both."""
    return path.replace("\\", "\\\\").replace(":", "\\:").replace(",", "\\,")


def has_writes(overlay_dir: str | os.PathLike[str]) -> bool:
    try:
        with os.scandir(overlay_dir) as entries:
            return any(True for _ in entries)
    except FileNotFoundError:
        return False


def _private_namespace(extra_flags: int = 0) -> ctypes.CDLL:
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWNS | extra_flags | (0 if uid == 0 else _CLONE_NEWUSER)
    _check(libc.unshare(flags), "unshare")
    if uid != 0:  # become root of the new user namespace, mapped to ourselves outside
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
        Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    # Keep our mounts private: nothing propagates back to the host's namespace.
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")
    return libc


def _mount_over(libc: ctypes.CDLL, root: str, options: str, flags: int) -> None:
    _check(
        libc.mount(b"overlay", root.encode(), b"overlay", flags, options.encode()),
        f"mounting the speculation's view over {root}",
    )
    os.chdir(os.getcwd())  # the old cwd still points below the mount; step onto it


def enter_overlay_view(root: str | os.PathLike[str], overlay_dir: str | os.PathLike[str]) -> None:
    """Mount ``overlay_dir`` over ``root`` (read-only) in a new mount namespace of this
    process, then re-enter the current directory through the mount. Single-threaded
    callers only (a forked child before exec)."""
    libc = _private_namespace()
    root_s = os.fspath(root)
    lower = f"{_escape(os.fspath(overlay_dir))}:{_escape(root_s)}"
    _mount_over(libc, root_s, f"lowerdir={lower}", _MS_RDONLY)


def enter_capture_view(
    root: str | os.PathLike[str],
    overlay_dir: str | os.PathLike[str],
    upper: str | os.PathLike[str],
    work: str | os.PathLike[str],
) -> None:
    """Like ``enter_overlay_view`` but writable, and without network: whatever the
    command writes lands in ``upper`` (``work`` is overlayfs's scratch dir, on the same
    filesystem), never in the project or the speculation's overlay."""
    libc = _private_namespace(_CLONE_NEWNET)
    root_s = os.fspath(root)
    lower = f"{_escape(os.fspath(overlay_dir))}:{_escape(root_s)}"
    options = (
        f"lowerdir={lower},upperdir={_escape(os.fspath(upper))},workdir={_escape(os.fspath(work))}"
    )
    _mount_over(libc, root_s, options, 0)
