"""Which paths a main-chat write may only touch after a person's yes, whatever the mode.

One definition for both ways the main chat writes: its file tools (judged in the
coordinator) and its shell commands (judged in the worker from the command's parse tree).
A write lands on a protected path when, as written or as the file system resolves it, it is

- specrun's own state (``private``: memory directories, the state root, the person's
  settings directory), or ``.specrun/`` at any depth in the project,
- git's metadata (``.git/``, ``.gitattributes``, ``.gitmodules``) or a ``protectedPaths``
  pattern (``protocol.rules.protected``),
- a file that runs later without a key press (``protocol.rules.runs_later``).
"""

from __future__ import annotations

import os

from protocol.rules.protected import is_protected_name, protected_reason
from protocol.rules.runs_later import runs_later
from protocol.text.inert_text import quote_name
from protocol.wire.work import WriteGuard

_GIT = frozenset({".git", ".gitattributes", ".gitmodules"})


def _inside(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` (posix), or None when it is not below it."""
    if path == root or not path.startswith(root.rstrip(os.sep) + os.sep):
        return None
    return os.path.relpath(path, root).replace(os.sep, "/")


def write_candidates(guard: WriteGuard, given: str, cwd: str | None = None) -> list[str]:
    """The absolute paths a write to ``given`` (relative to ``cwd``, else the root) may
    land on: as written with ``..`` folded, and with every link resolved."""
    path = given if os.path.isabs(given) else os.path.join(cwd or guard.root, given)
    lexical = os.path.normpath(path)
    out = [lexical, os.path.realpath(lexical)]
    parent, name = os.path.split(lexical)
    out.append(os.path.join(os.path.realpath(parent), name))
    return list(dict.fromkeys(out))


def protected_write(guard: WriteGuard, given: str, cwd: str | None = None) -> str | None:
    """Why a write to ``given`` asks whatever the mode (one clause), or None."""
    for path in write_candidates(guard, given, cwd):
        for private in guard.private:
            if path == private or path.startswith(private.rstrip(os.sep) + os.sep):
                return (f"it writes {quote_name(path)}, specrun's own state (its settings "
                        "and memory decide what runs without a yes and what the model "
                        "is told)")
        rel = _inside(path, guard.root)
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
        if protected_reason(rel, guard.protected) is not None:
            return f"it writes {quote_name(rel)}, which the protectedPaths setting protects"
        if runs_later(rel, guard.later):
            return (f"it writes {quote_name(rel)}, which runs later without a key press "
                    "(your shell, CI, the editor, a build or the tests run it, outside "
                    "any sandbox)")
    return None
