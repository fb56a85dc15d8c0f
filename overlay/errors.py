"""Exceptions raised by the overlay package.

Every message is one sentence that names the path(s) involved, so a caller can show it to a
user as is.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Mapping

_MAX_LISTED = 20


def describe_paths(paths: Iterable[str]) -> str:
    """Join paths for a message: ``a, b and c`` (long lists end with ``and N more``)."""
    items = list(paths)
    if len(items) > _MAX_LISTED:
        shown = items[:_MAX_LISTED]
        return ", ".join(shown) + f" and {len(items) - _MAX_LISTED} more"
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


_CAUSES = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.EIO: "input/output error",
    errno.ENAMETOOLONG: "file name too long",
    errno.EMFILE: "too many open files",
}


def describe_cause(exc: BaseException) -> str:
    """A short human phrase for an exception, e.g. ``disk full`` for ENOSPC."""
    if isinstance(exc, OSError) and exc.errno is not None:
        phrase = _CAUSES.get(exc.errno)
        if phrase is not None:
            return phrase
        return exc.strerror or os.strerror(exc.errno)
    text = str(exc)
    return text if text else type(exc).__name__


class OverlayError(Exception):
    """Base class of every error raised by the overlay package."""


class OverlayEscapeError(OverlayError, ValueError):
    """A write target resolves outside the project root (also a ValueError: a bad argument)."""

    def __init__(self, path: str, root: str) -> None:
        super().__init__(f"Refusing to write {path}: it resolves outside the project root {root}.")
        self.path = path
        self.root = root


class InvalidTargetError(OverlayError, ValueError):
    """A write target is inside the root but cannot be a file (the root, a directory, ...)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"Refusing to write {path}: {reason}.")
        self.path = path
        self.reason = reason


class ConflictError(OverlayError):
    """Files changed in the real tree after the speculation copied them; nothing was applied."""

    def __init__(self, reasons: Mapping[str, str]) -> None:
        self.reasons = dict(reasons)
        self.paths = list(self.reasons)
        detail = describe_paths(f"{path} ({why})" for path, why in self.reasons.items())
        count = len(self.paths)
        noun = "file" if count == 1 else "files"
        super().__init__(
            f"Nothing was applied because {count} {noun} changed in the project since the "
            f"speculation started: {detail}."
        )


class ApplyError(OverlayError):
    """Applying failed part-way; the tree was rolled back (unless the message says otherwise)."""

    def __init__(
        self,
        paths: Iterable[str],
        cause: BaseException,
        *,
        failed_path: str | None = None,
        rolled_back: bool = True,
    ) -> None:
        self.paths = list(paths)
        self.cause = cause
        self.failed_path = failed_path
        self.rolled_back = rolled_back
        reason = describe_cause(cause)
        where = f" (at {failed_path})" if failed_path else ""
        outcome = (
            "the project was left unchanged"
            if rolled_back
            else "the rollback did not finish, run recovery before using the project"
        )
        super().__init__(
            f"Could not apply {describe_paths(self.paths)}: {reason}{where}; {outcome}."
        )


class RecoveryError(OverlayError):
    """An interrupted apply could not be finished or rolled back."""

    def __init__(self, journal: str, cause: BaseException) -> None:
        self.journal = journal
        self.cause = cause
        super().__init__(
            f"Could not recover the interrupted apply recorded in {journal}: "
            f"{describe_cause(cause)}."
        )
