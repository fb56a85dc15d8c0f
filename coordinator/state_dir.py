"""The project's ``.specrun/`` directory: settings, logs, history, memory.

It never shows up in ``git status`` (neither the person's nor the agent's own): the
first thing written into it is a ``.gitignore`` that ignores everything inside,
itself included.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

GITIGNORE = "# specrun's own state; written by specrun\n*\n"


def state_dir(project_root: Path) -> Path:
    """``<project>/.specrun``, created with its ``.gitignore`` if missing."""
    path = project_root / ".specrun"
    path.mkdir(parents=True, exist_ok=True)
    ignore = path / ".gitignore"
    if not ignore.exists():
        # A read-only or vanished project is not worth failing a command for.
        with contextlib.suppress(OSError):
            ignore.write_text(GITIGNORE)
    return path
