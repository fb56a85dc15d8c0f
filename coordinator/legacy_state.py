"""The records an older specrun kept in the project's ``.specrun/``, moved once.

Sessions and logs now live in specrun's per-user state directory
(``coordinator.user_state``). What an older version left in ``<project>/.specrun/`` is
moved there once, and only when it is this person's: the directory is theirs (owner, no
link) and the state directory holds their trust record for the project (``specrun trust``,
or yes to the question at ``start``). A clone or a tarball can put the same names there;
until the person vouches for the project they are ignored, with one sentence.

Apply journals and a pending-accept record are never moved: they are instructions (renames
in the project, turns to append to the session) that only mean something right after a
crash of the version that wrote them, and the same names in a repository are forgeries.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from pathlib import Path

from coordinator.durable import atomic_write
from coordinator.user_state import logs_dir, project_state_dir, sessions_dir

LEGACY_NAMES = ("sessions", "logs", "journal", "pending-accept.json")
MOVED_RECORD = "legacy-moved.json"


def _legacy_entries(project_root: Path) -> list[str]:
    top = project_root / ".specrun"
    return [name for name in LEGACY_NAMES if os.path.lexists(top / name)]


def _is_mine(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return not stat.S_ISLNK(info.st_mode) and info.st_uid == os.getuid()


def _move_files(source: Path, dest: Path) -> int:
    """Move this user's regular files from ``source`` into ``dest`` (never over a file
    there); the number moved."""
    if not (_is_mine(source) and source.is_dir()):
        return 0
    moved = 0
    for entry in sorted(source.iterdir()):
        target = dest / entry.name
        if _is_mine(entry) and stat.S_ISREG(os.lstat(entry).st_mode) and not target.exists():
            with contextlib.suppress(OSError):
                os.replace(entry, target)
                moved += 1
    return moved


def adopt_legacy_state(project_root: Path, *, trusted: bool) -> str:
    """Move an older specrun's sessions and logs out of the project once (see the module's
    note); one sentence saying what was moved or why nothing was, '' when there was
    nothing."""
    found = _legacy_entries(project_root)
    if not found:
        return ""
    top = project_root / ".specrun"
    record = project_state_dir(project_root) / MOVED_RECORD
    names = ", ".join(found)
    state = project_state_dir(project_root)
    if record.exists() or not trusted or not _is_mine(top):
        why = ("this project is not trusted (`specrun trust` moves them if you made them)"
               if not trusted and not record.exists() else
               "they are not yours to move" if not _is_mine(top) else
               "specrun moved an older version's records once already")
        return (f"{top} holds {names}, which specrun no longer reads from a project (an older "
                f"specrun's records, or the repository's): ignored, since {why}.")
    moved = _move_files(top / "sessions", sessions_dir(project_root))
    moved += _move_files(top / "logs", logs_dir(project_root))
    atomic_write(record, (json.dumps({"at": time.time(), "moved": moved}) + "\n").encode())
    return (f"Moved {moved} session and log file(s) an older specrun kept in {top} to {state}; "
            "its apply journals and pending accept, if any, are not replayed.")
