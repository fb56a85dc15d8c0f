"""One speculation, one machine: what its commands share, held by the sandbox helper.

A speculation's commands run one after another, like commands typed into one shell. What
one command leaves behind, the next sees:

* **its ``/tmp`` and ``HOME``**: one tmpfs per speculation, in the helper's own mount
  namespace (never on the host's disk, never in the real ``/tmp``), bound at ``/tmp`` and
  at :data:`HOME` in every command's root. jest's cache (``/tmp/jest_<uid>``), pytest's
  and whatever tools keep under ``~/.cache`` stay warm from one command to the next.
* **the shape of the project it left**: the *carry* layer, a second small tmpfs that takes
  from each captured command's upper directory everything that is not a regular file's
  content: directories (with their modes), symlinks, and overlayfs's own marks for what
  it deleted (whiteouts) and for directories it removed and made again (opaque
  directories). Regular files go to the speculation's overlay as before (with their
  modification times and modes now), which lies above the carry layer in the next view:
  so a file a file tool writes later always wins, and a ``libz.so -> libz.so.1`` link, a
  removed ``build/`` or a new empty directory look to the next command as they did at the
  end of the last one.

Both are the helper's and die with it; the worker also ends the session when its
speculation ends (``SandboxHelper.end_session``), and a new session (another
speculation's first command on the same helper) replaces the old one. Nothing of either
is ever applied at Tab: the carry layer is what the commands see, the overlay is what Tab
applies.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from overlay.kernel import libc
from worker.contain.upper_layer import is_opaque, is_whiteout

HOME = "/home/speculation"
"""Where a speculation's ``HOME`` is in its commands' root (a directory of its own, so a
test that empties ``$TMPDIR`` does not take the caches along)."""

_MS_NOSUID = 2
_MS_NODEV = 4
OPAQUE_XATTR = "user.overlay.opaque"
# what the carry layer may hold besides the quota's files (each an inode; links are tiny)
_CARRY_BYTES = 16 << 20


class CarryFull(OSError):
    """The carry layer has no room left (more directories and links than the quota)."""


@dataclass
class Session:
    """One speculation's shared state in the helper: ``tmp`` (bound at ``/tmp``), ``home``
    (at :data:`HOME`) and ``carry`` (a lower layer of the project's view)."""

    key: str
    base: Path

    @property
    def tmp(self) -> Path:
        return self.base / "tmp" / "tmp"

    @property
    def home(self) -> Path:
        return self.base / "tmp" / "home"

    @property
    def carry(self) -> Path:
        return self.base / "carry"

    @classmethod
    def open(cls, key: str, base: Path, tmp_bytes: int, carry_inodes: int) -> Session:
        """Mount the session's two file systems under ``base`` (a fresh directory of the
        helper's). Raises OSError when the kernel refuses."""
        session = cls(key, base)
        base.mkdir(mode=0o700)
        (base / "tmp").mkdir(mode=0o700)
        session.carry.mkdir(mode=0o700)
        libc.mount(
            "tmpfs", str(base / "tmp"), "tmpfs", _MS_NOSUID | _MS_NODEV,
            f"size={max(tmp_bytes, 1 << 20)},mode=0700",
        )
        try:
            session.tmp.mkdir(mode=0o1777)
            os.chmod(session.tmp, 0o1777)
            session.home.mkdir(mode=0o700)
            libc.mount(
                "tmpfs", str(session.carry), "tmpfs", _MS_NOSUID | _MS_NODEV,
                f"size={_CARRY_BYTES},nr_inodes={max(carry_inodes, 64)},mode=0755",
            )
        except OSError:
            session.close()
            raise
        return session

    def close(self) -> None:
        """Unmount both (whatever a command left there is gone) and remove the directory."""
        for path in (self.carry, self.base / "tmp"):
            with contextlib.suppress(OSError):
                libc.umount2(str(path), libc.MNT_DETACH)
        shutil.rmtree(self.base, ignore_errors=True)

    def has_carry(self) -> bool:
        with os.scandir(self.carry) as entries:
            return any(True for _ in entries)


def _clear(path: str) -> None:
    """Remove whatever is at ``path`` in the carry layer (a directory with its contents)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def carry_over(upper: Path, carry: Path) -> None:
    """Merge one command's upper directory into the carry layer, as overlayfs would stack
    it: directories (an opaque one replaces what was there), symlinks and whiteouts; regular
    files only as far as they replace something (their content is the overlay's). Raises
    ``CarryFull`` when the carry layer is out of room."""
    try:
        _merge(str(upper), str(carry))
    except OSError as exc:
        if exc.errno in (28, 122):  # ENOSPC, EDQUOT
            raise CarryFull(exc.errno, "the speculation's carry layer is full") from exc
        raise


def _merge(upper: str, carry: str) -> None:
    for dirpath, dirnames, filenames in os.walk(upper):
        rel_dir = os.path.relpath(dirpath, upper)
        into = carry if rel_dir == "." else os.path.join(carry, rel_dir)
        for name in sorted(dirnames):
            source = os.path.join(dirpath, name)
            target = os.path.join(into, name)
            info = os.lstat(source)
            opaque = is_opaque(source)
            try:
                existing = os.lstat(target)
            except FileNotFoundError:
                existing = None
            if opaque or (existing is not None and not stat.S_ISDIR(existing.st_mode)):
                _clear(target)
                existing = None
            if existing is None:
                os.mkdir(target, 0o700)
            os.chmod(target, stat.S_IMODE(info.st_mode) & 0o777)
            if opaque:
                os.setxattr(target, OPAQUE_XATTR, b"y", follow_symlinks=False)
        for name in sorted(filenames):
            source = os.path.join(dirpath, name)
            target = os.path.join(into, name)
            info = os.lstat(source)
            if is_whiteout(source, info):
                _clear(target)
                os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(0, 0))
            elif stat.S_ISLNK(info.st_mode):
                _clear(target)
                os.symlink(os.readlink(source), target)
                os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)
            else:
                # A regular file (its content goes to the overlay, above this layer) or
                # anything else (a fifo, a device: not kept): nothing below may show through.
                _clear(target)
