"""What applying one overlay entry would do to the real tree, file by file.

This is the single place that decides, for an entry of a speculation's overlay, whether Tab
creates, modifies, deletes or only changes the mode of a real file, leaves it alone (the
overlay still holds the original), or must refuse it because the real file changed since the
speculation copied it (a conflict). The apply plans with it, so the listing a user sees after
Tab, ``specrun diff`` before it, and any other view of a speculation all say exactly what the
apply does.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from overlay.fingerprint import Fingerprint, check_unchanged, hash_fd

ChangeKind = Literal["created", "modified", "deleted", "mode"]
#: How the overlay file of an entry is opened, given its relative path and overlay path:
#: returns a read-only fd, never following a symlink.
OpenSource = Callable[[str, str], int]

APPLIED_BITS = 0o777
"""The permission bits Tab applies: read, write and execute. A set-uid, set-gid or sticky
bit on an overlay file is never carried into the real tree: no tool sets one, a captured
command's are dropped, and only a forged or damaged overlay could hold one (a set-uid
root program in the project, for a service run as root)."""

_CLASSES = (("u", 6), ("g", 3), ("o", 0))
_BITS = (("r", 4), ("w", 2), ("x", 1))


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file Tab would change.

    ``kind``: ``created`` (no real file before), ``modified`` (new content; the mode may change
    too), ``deleted``, or ``mode`` (same content, other permission bits). ``mode_before`` is the
    real file's permission bits now (None: it does not exist), ``mode_after`` what Tab leaves
    (None: deleted). ``conflict`` says how the real file changed since the speculation copied
    it (``created``, ``deleted``, ``modified``, ``replaced``, or a parent-directory reason);
    such a file is never applied.
    """

    rel: str
    kind: ChangeKind
    mode_before: int | None
    mode_after: int | None
    conflict: str | None = None
    #: a symlink Tab creates (its target, as the command made it); None: a file
    link: str | None = None

    @property
    def mode_change(self) -> str:
        """The permission bits that change, chmod style (``+x``, ``g-w``); '' if none."""
        if self.mode_before is None or self.mode_after is None:
            return ""
        return describe_mode_change(self.mode_before, self.mode_after)

    @property
    def gains_exec(self) -> bool:
        """Tab leaves an executable file where there was none or a non-executable one."""
        after = self.mode_after or 0
        before = self.mode_before or 0
        return bool(after & 0o111) and not before & 0o111


def describe_mode_change(before: int, after: int) -> str:
    """``+x`` (all of user, group and other gained x), ``u+x``, ``go-w``, ``+x g-w``;
    set-uid/gid and sticky changes are named too. '' when the bits are equal."""
    parts: list[str] = []
    for sign, bits in (("+", after & ~before), ("-", before & ~after)):
        for letter, value in _BITS:
            who = "".join(c for c, shift in _CLASSES if bits & (value << shift))
            if who:
                parts.append(f"{'' if who == 'ugo' else who}{sign}{letter}")
        for name, mask in (("setuid", stat.S_ISUID), ("setgid", stat.S_ISGID), ("sticky", 0o1000)):
            if bits & mask:
                parts.append(f"{sign}{name}")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Classified:
    """What :func:`classify` found: a change, or why there is none (``unchanged``: the
    overlay holds what the real file holds; ``never_written``: registered, no content)."""

    change: FileChange | None
    unchanged: bool = False
    never_written: bool = False


def classify(
    rel: str,
    target: str,
    fingerprint: Fingerprint | None,
    *,
    deleted: bool = False,
    source: str | None = None,
    open_source: OpenSource | None = None,
    mode: int | None = None,
    link: str | None = None,
) -> Classified:
    """Classify the entry ``rel``: ``target`` is the real file's absolute path, ``fingerprint`` the
    real file as the speculation copied it (None: it did not exist), ``deleted`` whether the
    speculation removed it, ``source`` the overlay file (opened through ``open_source``,
    which must not follow symlinks), ``mode`` the bits the applied file gets (None: the
    source's), ``link`` the target of a symlink the speculation left there instead of a file
    (``source`` is then not read). Raises OSError when the source is not a regular file
    or cannot be read (a forged or damaged overlay)."""
    real_mode = _mode_of(target)
    if link is not None:
        return _classify_link(rel, target, fingerprint, link, real_mode)
    if deleted:
        if fingerprint is None:
            return Classified(None, unchanged=True)  # created and removed again
        reason = check_unchanged(target, fingerprint)
        if reason == "deleted":
            return Classified(None, unchanged=True)  # gone already: nothing to do
        return Classified(FileChange(rel, "deleted", real_mode, None, reason))
    assert source is not None and open_source is not None
    try:
        fd = open_source(rel, source)
    except (FileNotFoundError, NotADirectoryError):
        return Classified(None, never_written=True)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"the overlay copy {source} is not a regular file")
        new_mode = (stat.S_IMODE(st.st_mode) if mode is None else mode) & APPLIED_BITS
        same_content = False
        if fingerprint is not None and fingerprint.link is None and st.st_size == fingerprint.size:
            same_content = hash_fd(fd)[1] == fingerprint.sha256
    finally:
        os.close(fd)
    reason = check_unchanged(target, fingerprint)
    if same_content and (reason is not None or real_mode == new_mode):
        # The speculation did not change this file (whatever became of the real one).
        return Classified(None, unchanged=True)
    if fingerprint is None:
        kind: ChangeKind = "created"
    elif same_content:
        kind = "mode"
    else:
        kind = "modified"
    before = None if kind == "created" and reason is None else real_mode
    return Classified(FileChange(rel, kind, before, new_mode, reason))


def _classify_link(
    rel: str, target: str, fingerprint: Fingerprint | None, link: str, real_mode: int | None
) -> Classified:
    # Anything at the path now that was not there (a link included) is a conflict.
    reason = check_unchanged(target, fingerprint)
    kind: ChangeKind = "created" if fingerprint is None else "modified"
    before = None if kind == "created" and reason is None else real_mode
    return Classified(FileChange(rel, kind, before, None, reason, link=link))


def _mode_of(path: str) -> int | None:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
