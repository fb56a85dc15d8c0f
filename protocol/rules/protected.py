"""Paths a speculation may never change, and names that are never a path at all.

The worker's gate stops a speculation that tries to write one of these; the coordinator
checks every entry of a worker's report against the same rule before accept applies
anything, because a worker is not trusted (a compromised one could report anything).

Protected wherever they appear: ``.git`` (hooks and config run programs), ``.gitattributes``
(filters), ``.gitmodules`` and ``.specrun`` (specrun's own settings, journal, sessions and
memory), plus the ``protectedPaths`` setting (gitignore-style patterns) and the memory
directory when it is inside the project.

The names are matched as a case-insensitive file system would open them: a project on a
Windows drive under WSL, an SMB share, a FAT stick or a case-folded ext4 directory opens
``.GIT/hooks/pre-commit`` as ``.git/hooks/pre-commit``, and Windows drops a name's trailing
dots and spaces (``.git.``) and knows ``.git`` by its short name ``GIT~1`` too (the
spellings git itself refuses in a tree, CVE-2014-9390).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import PurePosixPath

import pathspec

from protocol.text.inert_text import find_hidden
from protocol.wire.boundary import BoundaryReason

PROTECTED_NAMES = frozenset({".git", ".gitattributes", ".gitmodules", ".specrun"})
_SHORT_NAMES = frozenset(
    f"{stem}~{n}" for stem in ("git", "gitatt", "gitmod", "specru") for n in range(1, 5)
)


def is_protected_name(part: str) -> bool:
    """Whether one path component names a protected entry on some file system that
    could hold the project (any case, trailing dots or spaces, a Windows short name)."""
    folded = part.casefold()
    return folded.rstrip(". ") in PROTECTED_NAMES or folded in _SHORT_NAMES


def protected_reason(rel: str, extra: Sequence[str] = ()) -> BoundaryReason | None:
    """``protected_path`` ``rel`` if a speculation may never write ``rel`` (a project-relative
    posix path), else None. ``extra``: gitignore-style patterns (``protectedPaths``, and the
    memory directory's relative path followed by ``/``)."""
    parts = PurePosixPath(rel).parts
    if not parts:
        return None
    if any(is_protected_name(part) for part in parts):
        return BoundaryReason("protected_path", rel)
    if extra and _spec(tuple(extra)).match_file(rel):
        return BoundaryReason("protected_path", rel)
    return None


@lru_cache(maxsize=16)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    """Compiled once per pattern list: a report of 700 cache files asks 700 times."""
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def path_problem(rel: object) -> str | None:
    """Why ``rel`` is not a plain project-relative posix path of a file, or None: it must be a
    non-empty string without a leading ``/``, ``.``/``..``/empty components, NUL, or control
    characters, and encodable for the file system."""
    if not isinstance(rel, str) or not rel:
        return "not a path"
    if find_hidden(rel) is not None:
        return "a control, bidi or invisible character in the name"
    if rel.startswith("/") or any(part in ("", ".", "..") for part in rel.split("/")):
        return "not a plain relative path"
    try:
        rel.encode("utf-8", "surrogateescape")
    except UnicodeError:
        return "not encodable"
    return None
