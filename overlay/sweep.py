"""Removal of overlay directories left behind by worker processes that died."""

from __future__ import annotations

import contextlib
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


OWNER_FILE = "owner"


def mark_owner(pid_dir: StrPath, owner_pid: int) -> None:
    """Record which live process still needs ``pid_dir`` after its worker exits.

    A worker exits as soon as its speculation is done, but the overlay must wait for the
    user's Tab; the coordinator side (its fork server, which lives exactly as long as the
    coordinator) is the owner. ``sweep`` keeps a dead worker's directory while its owner
    lives; the coordinator removes it itself on accept or abort.
    """
    # Never through a planted link: O_NOFOLLOW, and the file is replaced, not appended to.
    path = os.path.join(os.fspath(pid_dir), OWNER_FILE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, f"{owner_pid}\n".encode())
    finally:
        os.close(fd)


def release_pid_dir(pid_dir: StrPath) -> bool:
    """Remove a worker's per-pid directory once nothing but its owner mark is left in it
    (the last overlay was applied or removed, the worker's temp dir is gone). Never raises;
    True if it is gone."""
    path = Path(pid_dir)
    try:
        names = set(os.listdir(path))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if names - {OWNER_FILE}:
        return False
    with contextlib.suppress(OSError):
        (path / OWNER_FILE).unlink(missing_ok=True)
        path.rmdir()
        return True
    return False


def _owner_alive(pid_dir: Path) -> bool:
    try:
        text = (pid_dir / OWNER_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return False
    return text.isdigit() and pid_alive(int(text))


def sweep(base_dir: StrPath | None = None) -> list[Path]:
    """Remove ``<base_dir>/<pid>/`` for every pid that is no longer alive (unless the
    directory's owner, see ``mark_owner``, still is).

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
        if stat.S_ISDIR(st.st_mode) and _owner_alive(path):
            continue
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
