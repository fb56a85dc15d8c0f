"""The project's ``.specrun/`` directory: the project's settings and memory.

specrun's own records (sessions, logs, apply journals, the pending accept, trust
decisions) are not here but in its per-user state directory (``coordinator.user_state``):
whatever is in ``.specrun/`` may have come with the repository, so it applies only in a
trusted project (``coordinator.trust``), and nothing specrun records is ever read from it.

It never shows up in ``git status`` (neither the person's nor the agent's own): the
first thing written into it is a ``.gitignore`` that ignores everything inside,
itself included.

It holds no symbolic link. A repository can ship one (``.specrun/logs/service.log ->
~/.bashrc``, ``.specrun -> ~/somewhere``), and specrun would then append its log, write
its sessions or read its journal wherever the link points: the directory is refused
(one sentence naming the link) until it is removed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

GITIGNORE = "# specrun's own state; written by specrun\n*\n"


class StateDirError(RuntimeError):
    """The project's ``.specrun/`` cannot be created (a read-only project, a full disk) or
    holds a symbolic link. ``hint``: what to do."""

    def __init__(self, message: str, hint: str = "Run specrun in a project directory you "
                 "can write to.") -> None:
        super().__init__(message)
        self.hint = hint


def _first_link(path: Path) -> Path | None:
    """``path`` itself or the first entry below it that is a symbolic link (or anything
    but a directory at ``path``), or None. The memory directory's files are the memory
    store's to judge (it reads them and skips what it cannot use); the directory itself is
    checked like the rest."""
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        return path
    for dirpath, dirnames, filenames in os.walk(path):  # never follows a link
        for name in dirnames + filenames:
            entry = Path(dirpath, name)
            if entry.is_symlink():
                return entry
        if dirpath == str(path) and "memory" in dirnames:
            dirnames.remove("memory")
    return None


def state_dir(project_root: Path) -> Path:
    """``<project>/.specrun``, created with its ``.gitignore`` if missing."""
    path = project_root / ".specrun"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise StateDirError(
            f"Cannot create {path} ({reason}): specrun keeps this project's memory there."
        ) from None
    link = _first_link(path)
    if link is not None:
        raise StateDirError(
            f"{link} is a symbolic link (or not a directory): specrun writes the project's "
            "memory only into real files below the project, and a repository may ship such "
            "a link to make it write elsewhere.",
            f"Remove it (`rm {link}`), then run the command again.",
        )
    ignore = path / ".gitignore"
    if not ignore.exists():
        # A read-only or vanished project is not worth failing a command for.
        with contextlib.suppress(OSError):
            ignore.write_text(GITIGNORE)
    return path
