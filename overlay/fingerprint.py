"""Fingerprints of original files, taken at copy-up and checked again at apply."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Any

from overlay.kernel import fs


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a real file looked like when the speculation copied it.

    ``sha256`` is the hex digest of exactly the bytes copied into the overlay, and ``size`` is
    their count. ``mtime_ns`` is kept for diagnostics: the content decides whether a file
    changed, so a file saved again with identical bytes is not a conflict.

    ``link``: what was there is a symlink with this target (``size`` and ``sha256`` are then
    its target's bytes): what an undo expects where an accept left a link. Never read from a
    record (``from_dict``): a speculation's copy-up is always of a regular file.
    """

    size: int
    mtime_ns: int
    sha256: str
    link: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "mtime_ns": self.mtime_ns, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, data: Any) -> Fingerprint:
        """Build from ``to_dict()`` output; raises ValueError on malformed data."""
        if not isinstance(data, dict):
            raise ValueError("a fingerprint must be a dict")
        size, mtime_ns, digest = data.get("size"), data.get("mtime_ns"), data.get("sha256")
        if type(size) is not int or size < 0 or type(mtime_ns) is not int:
            raise ValueError("a fingerprint needs integer size and mtime_ns")
        if not isinstance(digest, str) or len(digest) != 64:
            raise ValueError("a fingerprint needs a 64-digit sha256")
        try:
            int(digest, 16)
        except ValueError:
            raise ValueError("a fingerprint needs a hexadecimal sha256") from None
        return cls(size=size, mtime_ns=mtime_ns, sha256=digest.lower())


def copy_with_fingerprint(src_path: str, dst_path: str) -> Fingerprint:
    """Copy a regular file (content and mode bits) and fingerprint the bytes copied.

    The source is read once: the digest is of the very bytes written to ``dst_path``.
    Raises IsADirectoryError / OSError for anything that is not a regular file.
    """
    src = os.open(src_path, fs.READ_FLAGS)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(f"{src_path} is not a regular file")
        digest = hashlib.sha256()
        dst = os.open(dst_path, fs.TRUNC_FLAGS, 0o600)
        try:
            size = fs.copy_fd(src, dst, digest.update)
            os.fchmod(dst, stat.S_IMODE(st.st_mode))
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return Fingerprint(size=size, mtime_ns=st.st_mtime_ns, sha256=digest.hexdigest())


def hash_regular_file(path: str) -> tuple[int, str, int] | None:
    """(size, sha256 hex, mode) of a regular file, or None if ``path`` is not one.

    Symlinks are not followed, so a file replaced by a symlink does not match; nor is a
    FIFO waited on (``O_NONBLOCK``: a project's named pipe would block the open forever).
    """
    try:
        fd = os.open(path, fs.READ_FLAGS | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        if os.path.islink(path):
            return None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        size, hexdigest = hash_fd(fd)
        return size, hexdigest, stat.S_IMODE(st.st_mode)
    finally:
        os.close(fd)


def hash_fd(fd: int) -> tuple[int, str]:
    """(size, sha256 hex) of what ``fd`` reads from its current offset to the end."""
    digest = hashlib.sha256()
    size = 0
    while chunk := os.read(fd, fs.CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def check_unchanged(path: str, fingerprint: Fingerprint | None) -> str | None:
    """Compare the real file at ``path`` with its copy-up fingerprint.

    Returns None when it still matches (or still does not exist, for ``None``), else a short
    reason: ``created``, ``deleted``, ``modified`` or ``replaced``.
    """
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None if fingerprint is None else "deleted"
    if fingerprint is None:
        return "created"
    if fingerprint.link is not None:
        if not stat.S_ISLNK(st.st_mode):
            return "replaced"
        return None if os.readlink(path) == fingerprint.link else "modified"
    if not stat.S_ISREG(st.st_mode):
        return "replaced"
    if st.st_size != fingerprint.size:
        return "modified"
    found = hash_regular_file(path)
    if found is None:
        return "replaced"
    if found[0] != fingerprint.size or found[1] != fingerprint.sha256:
        return "modified"
    return None
