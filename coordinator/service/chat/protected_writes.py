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
from protocol.rules.protected_writes import protected_write
from protocol.rules.tools import SHELL_TOOL, WRITE_PATH_ARGUMENTS, WRITE_TOOLS
from protocol.wire.chat import ToolCall
from protocol.wire.work import WriteGuard
from worker.shell.write_targets import protected_write_reason


@dataclass(frozen=True)
class ProtectedWrites:
    """The rule for one project: ``root`` its real path, ``protected`` the
    ``protectedPaths`` patterns, ``later`` the ``runsLaterPaths`` ones, ``private`` the
    absolute directories of specrun's own state (memory directories, the state root, the
    user's settings directory). The path judgement itself is
    ``protocol.rules.protected_writes`` (shared with the worker's shell check)."""

    root: str
    protected: Sequence[str] = ()
    later: Sequence[str] = ()
    private: Sequence[str] = ()

    @property
    def rule(self) -> WriteGuard:
        """The same rule as sent to a worker (it judges shell commands with it)."""
        return WriteGuard(self.root, tuple(self.protected), tuple(self.later),
                          tuple(self.private))

    def reason(self, call: ToolCall) -> str | None:
        """Why this write asks whatever the mode (one clause), or None. A shell command is
        judged here too, by the worker's own function (``worker.shell.write_targets``), so
        a worker's reply that left the question out cannot turn a protected write into an
        unasked one."""
        rule = self.rule
        args = call.args()
        if call.name == SHELL_TOOL:
            command = args.get("command")
            return protected_write_reason(command, rule) if isinstance(command, str) else None
        if call.name not in WRITE_TOOLS:
            return None
        for key in WRITE_PATH_ARGUMENTS.get(call.name, ()):
            value = args.get(key)
            if isinstance(value, str) and value:
                why = protected_write(rule, value)
                if why is not None:
                    return why
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
