"""The one C library module: real calls, and a failed one is always OSError with the
kernel's errno and a message naming the call."""

from __future__ import annotations

import errno
import os
import select
import subprocess
from pathlib import Path

import pytest

from overlay.kernel import libc

OVERLAYFS_MAGIC = 0x794C7630


def test_a_failed_call_is_oserror_with_the_errno_and_what_failed(tmp_path: Path) -> None:
    with pytest.raises(OSError) as refused:
        libc.umount2(str(tmp_path))  # not a mount point
    assert refused.value.errno == errno.EINVAL
    assert refused.value.strerror.startswith(f"umount {tmp_path} failed: ")
    with pytest.raises(OSError) as bad_fd:
        libc.setns(-1, libc.CLONE_NEWNET, what="setns(network)")
    assert bad_fd.value.errno == errno.EBADF
    assert bad_fd.value.strerror == f"setns(network) failed: {os.strerror(errno.EBADF)}"
    with pytest.raises(OSError) as unknown:
        libc.prctl(-1)
    assert unknown.value.errno == errno.EINVAL


def test_statfs_names_the_file_system(tmp_path: Path) -> None:
    assert libc.statfs_type(str(tmp_path)) not in (0, OVERLAYFS_MAGIC)
    assert libc.statfs_type("/proc") == 0x9FA0  # PROC_SUPER_MAGIC
    with pytest.raises(FileNotFoundError):
        libc.statfs_type(str(tmp_path / "missing"))


def test_openat2_refuses_a_symlink_and_an_escape(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("x")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    rules = libc.RESOLVE_BENEATH | libc.RESOLVE_NO_SYMLINKS
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = libc.openat2(dir_fd, "real.txt", os.O_RDONLY, rules)
        assert os.read(fd, 1) == b"x"
        os.close(fd)
        with pytest.raises(OSError) as link:
            libc.openat2(dir_fd, "link.txt", os.O_RDONLY, rules)
        assert link.value.errno == errno.ELOOP and link.value.filename == "link.txt"
        with pytest.raises(OSError) as escape:
            libc.openat2(dir_fd, "../x", os.O_RDONLY, rules)
        assert escape.value.errno == errno.EXDEV
    finally:
        os.close(dir_fd)


def test_syncfs_flushes_or_names_the_path(tmp_path: Path) -> None:
    assert libc.has_syncfs()
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        libc.syncfs(fd, str(tmp_path))
    finally:
        os.close(fd)
    with pytest.raises(OSError) as closed:
        libc.syncfs(fd, str(tmp_path))
    assert closed.value.errno == errno.EBADF and closed.value.filename == str(tmp_path)


def test_pidfd_open_is_readable_at_exit_and_none_once_reaped() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    fd = libc.pidfd_open(proc.pid)
    assert fd is not None
    try:
        assert select.select([fd], [], [], 0) == ([], [], [])  # running: not readable
        proc.kill()
        assert select.select([fd], [], [], 10)[0] == [fd]  # readable once it exits
        proc.wait()
        assert libc.pidfd_open(proc.pid) is None  # reaped: gone
    finally:
        os.close(fd)
        proc.kill()
        proc.wait()
