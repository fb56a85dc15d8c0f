"""Writes of the main chat that ask whatever the approval mode, ``yolo`` included.

A speculation stops at a protected path; the main chat used to write one unasked in
``auto-edit`` (and anything in ``yolo``): ``.specrun/settings.json`` (the next start is
``yolo``, silently), ``.git/config`` (``core.fsmonitor`` then runs on the person's own
``git status``, outside any sandbox), a CI workflow or an ``.envrc``. That is the agent
writing what a later, unsandboxed run executes. So a main-chat write to

- specrun's own files (``.specrun/`` at any depth, the memory directories, the person's
  settings and specrun's state directory outside the project),
- git's metadata (``.git/`` config, hooks, info/attributes; ``.gitattributes``,
  ``.gitmodules``) and the ``protectedPaths`` setting (``protocol.rules.protected``),
- a file that runs later without a key press (``protocol.rules.runs_later``: ``.envrc``,
  CI workflows, editor task files, hooks managers, build and test configuration, and the
  ``runsLaterPaths`` setting)

asks, naming why, and is refused where no terminal can ask. The path is judged both as
written and as the file system would resolve it (a link inside the project to ``.git``
is ``.git``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from coordinator.memory import memory_dirs
from coordinator.settings import Settings, user_settings_path
from coordinator.user_state import user_state_root
from protocol.rules.protected import is_protected_name, protected_reason
from protocol.rules.runs_later import runs_later
from protocol.rules.tools import WRITE_PATH_ARGUMENTS, WRITE_TOOLS
from protocol.text.inert_text import quote_name
from protocol.wire.chat import ToolCall

_GIT = frozenset({".git", ".gitattributes", ".gitmodules"})


def _inside(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` (posix), or None when it is not below it."""
    if path == root or not path.startswith(root.rstrip(os.sep) + os.sep):
        return None
    return os.path.relpath(path, root).replace(os.sep, "/")


@dataclass(frozen=True)
class ProtectedWrites:
    """The rule for one project: ``root`` its real path, ``protected`` the
    ``protectedPaths`` patterns, ``later`` the ``runsLaterPaths`` ones, ``private`` the
    absolute directories of specrun's own state (memory directories, the state root, the
    user's settings directory)."""

    root: str
    protected: Sequence[str] = ()
    later: Sequence[str] = ()
    private: Sequence[str] = ()

    def reason(self, call: ToolCall) -> str | None:
        """Why this write asks whatever the mode (one clause), or None."""
        if call.name not in WRITE_TOOLS:
            return None
        args = call.args()
        for key in WRITE_PATH_ARGUMENTS.get(call.name, ()):
            value = args.get(key)
            if isinstance(value, str) and value:
                why = self._path_reason(value)
                if why is not None:
                    return why
        return None

    def _candidates(self, given: str) -> list[str]:
        """The absolute paths a write to ``given`` may land on: as written (normalized)
        and with every link on the way resolved."""
        path = given if os.path.isabs(given) else os.path.join(self.root, given)
        lexical = os.path.normpath(path)
        out = [lexical, os.path.realpath(lexical)]
        parent, name = os.path.split(lexical)
        out.append(os.path.join(os.path.realpath(parent), name))
        return list(dict.fromkeys(out))

    def _path_reason(self, given: str) -> str | None:
        for path in self._candidates(given):
            for private in self.private:
                if path == private or path.startswith(private.rstrip(os.sep) + os.sep):
                    return (f"it writes {quote_name(path)}, specrun's own state (its settings "
                            "and memory decide what runs without a yes and what the model "
                            "is told)")
            rel = _inside(path, self.root)
            if rel is None:
                continue
            parts = rel.split("/")
            if any(is_protected_name(p) for p in parts):
                if any(p.casefold().rstrip(". ") in _GIT for p in parts):
                    return (f"it writes {quote_name(rel)}, git's own configuration (its "
                            "config, hooks and attributes run programs on your next git "
                            "command, outside any sandbox)")
                return (f"it writes {quote_name(rel)}, specrun's own settings and memory "
                        "(they decide what runs without a yes)")
            if protected_reason(rel, tuple(self.protected)) is not None:
                return f"it writes {quote_name(rel)}, which the protectedPaths setting protects"
            if runs_later(rel, tuple(self.later)):
                return (f"it writes {quote_name(rel)}, which runs later without a key press "
                        "(your shell, CI, the editor, a build or the tests run it, outside "
                        "any sandbox)")
        return None


def for_project(project_root: Path, settings: Settings) -> ProtectedWrites:
    """The rule with this project's settings and specrun's own directories."""
    private = (
        *memory_dirs(project_root, settings.memory_dir or None),
        str(user_state_root()),
        str(user_settings_path().parent),
    )
    return ProtectedWrites(
        os.path.realpath(project_root),
        protected=settings.protected_paths,
        later=settings.runs_later_paths,
        private=tuple(os.path.realpath(p) for p in private),
    )
