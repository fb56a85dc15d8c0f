"""The project's ``.specrun/`` directory: settings, logs, history, memory.

It never shows up in ``git status`` (neither the person's nor the agent's own): the
first thing written into it is a ``.gitignore`` that ignores everything inside,
itself included.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

GITIGNORE = "# specrun's own state; written by specrun\n*\n"


class StateDirError(RuntimeError):
    """The project's ``.specrun/`` cannot be created (a read-only project, a full disk)."""


def state_dir(project_root: Path) -> Path:
    """``<project>/.specrun``, created with its ``.gitignore`` if missing."""
    path = project_root / ".specrun"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise StateDirError(
            f"Cannot create {path} ({reason}): specrun keeps this project's settings, logs "
            "and history there."
        ) from None
    ignore = path / ".gitignore"
    if not ignore.exists():
        # A read-only or vanished project is not worth failing a command for.
        with contextlib.suppress(OSError):
            ignore.write_text(GITIGNORE)
    return path
