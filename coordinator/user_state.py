"""specrun's own per-user state, outside every project: ``$XDG_STATE_HOME/specrun/``.

What specrun records for itself (trust decisions, undo checkpoints, and in time sessions,
apply journals, pending-accept records, logs) lives here and not in the project, so a
repository can ship none of it: a file that came with a clone is the repository's word,
never specrun's own record.

Each project has one directory, keyed by its real path (links resolved), named for people
by the project's folder name and for uniqueness by a hash of the whole path:
``~/.local/state/specrun/projects/calc-3f2a9c0d1b7e4a55/``. Every directory on the way is
the user's, mode 0700, and none is a symbolic link: one that is refuses the directory with
one sentence rather than writing wherever the link points.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

PROJECT_KEY_HEX = 16


class UserStateError(RuntimeError):
    """specrun's state directory cannot be made or is not the user's own (a link, another
    owner, a file in the way). ``hint``: what to do."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def user_state_root(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/specrun``, or ``~/.local/state/specrun`` (the XDG default). A
    relative ``XDG_STATE_HOME`` is ignored, as the XDG rules say. ``environ``: another
    process's environment (a service started with one of its own) instead of this one's."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME", "")
    if base and os.path.isabs(base):
        return Path(base) / "specrun"
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return home / ".local" / "state" / "specrun"


def project_key(project_root: Path) -> str:
    """The name of a project's state directory: its folder name and a hash of its real path."""
    real = os.path.realpath(project_root)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:PROJECT_KEY_HEX]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(real).name)[:40]
    return f"{name or 'root'}-{digest}"


def _private_dir(path: Path) -> None:
    """``path`` as a directory of this user's, mode 0700, not a link: made if missing."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UserStateError(
            f"Cannot create {path} ({(exc.strerror or str(exc)).lower()}): specrun keeps its "
            "own records there.",
            "Make the directory writable, or set XDG_STATE_HOME to a directory you own.",
        ) from None
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise UserStateError(
            f"{path} is a symbolic link, not a directory, or not yours: specrun keeps its "
            "own records only in a directory of its user's.",
            f"Remove it (`rm {path}`) or set XDG_STATE_HOME to a directory you own.",
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)


def project_state_dir(project_root: Path, *parts: str) -> Path:
    """``<state root>/projects/<key>/<parts…>``, each level created 0700 and checked."""
    root = user_state_root()
    root.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = root
    _private_dir(path)
    for name in ("projects", project_key(project_root), *parts):
        path = path / name
        _private_dir(path)
    return path


def project_state_path(
    project_root: Path, *parts: str, state_root: Path | None = None
) -> Path:
    """Where ``project_state_dir`` keeps ``parts``, without creating or checking anything:
    for reading a record that may not exist (a command that only looks makes no
    directory). ``state_root``: another state root than this user's (the demo's own)."""
    root = state_root if state_root is not None else user_state_root()
    return root.joinpath("projects", project_key(project_root), *parts)


def journal_dir(project_root: Path) -> Path:
    """Where the service's applies write their journals (``overlay.apply``)."""
    return project_state_dir(project_root, "journal")


def sessions_dir(project_root: Path) -> Path:
    """The main chat's session files."""
    return project_state_dir(project_root, "sessions")


def logs_dir(project_root: Path) -> Path:
    """``service.log`` and ``web.log``."""
    return project_state_dir(project_root, "logs")


def pending_accept_path(project_root: Path) -> Path:
    """The record of an accept whose chat turns are not yet in the session."""
    return project_state_dir(project_root) / "pending-accept.json"


def personal_settings_path(project_root: Path) -> Path:
    """The settings ``specrun config set`` writes for this project: the person's own, so
    they apply whether or not the project is trusted (unlike ``.specrun/settings.json`` in
    the project, which may have come with it). Not created: ``config set`` makes its
    directory with ``project_state_dir``."""
    return project_state_path(project_root, "settings.json")
