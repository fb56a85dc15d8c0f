"""Which program file specrun may run itself, when something a cloned repository can set
named it: a variable from the repository's ``.envrc`` or CI file (``SPECRUN_RG``), or a
``PATH`` entry inside the project (direnv's ``PATH_add bin``).

Such a program (ripgrep, ``find``) is not a command the model proposed: no gate or sandbox
looks at it, it runs with the person's rights. So it must be a file the person or the
system installed: a regular file (a link is followed to its target, and the target is what
is judged), executable, owned by the person or by root, writable by nobody else, and not
inside the project, whose files are hostile input until the person reads them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path


def refusal(program: str, project: Path) -> str | None:
    """Why ``program`` may not be run for ``project``, in one sentence; None when it may."""
    if not os.path.isabs(program):
        return f"{program} is not an absolute path."
    target = os.path.realpath(program)
    if Path(target).is_relative_to(os.path.realpath(project)):
        return f"{program} is inside the project {project}, whose files are not trusted."
    try:
        info = os.stat(target)
    except OSError as exc:
        return f"{program} cannot be read ({exc.strerror})."
    if not stat.S_ISREG(info.st_mode):
        return f"{program} is not a regular file."
    if info.st_uid not in (0, os.getuid()):
        return f"{program} belongs to another user (uid {info.st_uid})."
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{program} can be changed by other users (mode {stat.S_IMODE(info.st_mode):o})."
    if not os.access(target, os.X_OK):
        return f"{program} is not executable."
    return None


def on_path(name: str, project: Path) -> Iterator[str]:
    """Every file ``name`` on ``PATH``, in order, that may be run for ``project``: a
    ``PATH`` entry inside the project is passed over, not only a refused first match."""
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        found = os.path.join(directory, name)
        if directory and os.path.isfile(found) and refusal(found, project) is None:
            yield found


def which(name: str, project: Path) -> str | None:
    """The first ``name`` on ``PATH`` that may be run for ``project`` (``on_path``)."""
    return next(on_path(name, project), None)
