"""Removal of overlay directories left behind by worker processes that died."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import psutil

from overlay.paths import StrPath, speculation_base_dir


def pid_alive(pid: int) -> bool:
    """True if ``pid`` is a running process (a zombie counts as dead)."""
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    if not psutil.pid_exists(pid):
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # exists but cannot be inspected: keep its directory


def sweep(base_dir: StrPath | None = None) -> list[Path]:
    """Remove ``<base_dir>/<pid>/`` for every pid that is no longer alive.

    ``base_dir`` defaults to :func:`~overlay.paths.speculation_base_dir`. Names that are not
    decimal pids are ignored, and so are directories owned by other users. Returns the
    removed paths; never raises for a single entry that cannot be removed.
    """
    base = Path(base_dir) if base_dir is not None else speculation_base_dir()
    try:
        entries = list(os.scandir(base))
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed: list[Path] = []
    uid = os.geteuid()
    for entry in entries:
        name = entry.name
        if not (name.isascii() and name.isdigit()):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid != uid or pid_alive(int(name)):
            continue
        path = Path(entry.path)
        try:
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path)
            elif stat.S_ISLNK(st.st_mode):
                os.unlink(path)  # never follow a link planted under a pid name
            else:
                continue
        except FileNotFoundError:
            continue  # someone else swept it first
        except OSError:
            shutil.rmtree(path, ignore_errors=True)
            if os.path.lexists(path):
                continue
        removed.append(path)
    return removed
