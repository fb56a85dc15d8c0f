"""Rendering selected memories as one system-reminder text for the main model."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from pathlib import Path

from .store import MemoryDoc

BODY_MAX_CHARS = 1_200
_DAY = 86_400.0


def age_days(mtime: float, now: float) -> int:
    """Whole days since ``mtime`` (a file stamped in the future counts as today)."""
    return max(0, int((now - mtime) // _DAY))


def age_label(mtime: float, now: float) -> str:
    days = age_days(mtime, now)
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    return f"{days} days ago"


def display_path(
    doc: MemoryDoc,
    project_root: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> str:
    """Where the memory lives, as short as is unambiguous: project-relative, ``~/…`` or absolute."""
    path = Path(doc.path)
    if project_root is not None:
        with contextlib.suppress(ValueError):
            return path.relative_to(Path(project_root).resolve()).as_posix()
    base = Path(home).resolve() if home is not None else Path.home()
    with contextlib.suppress(ValueError):
        return "~/" + path.relative_to(base).as_posix()
    return doc.relative_path


def render_memories(
    docs: Sequence[MemoryDoc],
    *,
    project_root: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
    now: float | None = None,
    body_max_chars: int = BODY_MAX_CHARS,
) -> str:
    """The memory prompt for ``docs``; empty string for no docs."""
    if not docs:
        return ""
    now = time.time() if now is None else now
    out = [
        "## Relevant memory",
        "",
        "Notes saved in earlier sessions that may bear on this request. Use one only when it is "
        "directly relevant, and check any claim it makes about files, functions or behaviour "
        "against the current code before you rely on it.",
    ]
    for doc in docs:
        age = age_label(doc.mtime, now)
        out += ["", f"### {doc.name} ({display_path(doc, project_root, home)})"]
        out.append(f"Saved {age} · {doc.type} memory — {doc.description}")
        if age_days(doc.mtime, now) >= 1:
            out.append(
                f"(Written {age}: a point-in-time observation that may no longer hold; "
                "the code may have changed since.)"
            )
        body = doc.body.strip()
        if len(body) > body_max_chars:
            body = (
                body[:body_max_chars].rstrip()
                + f"\n[… memory cut here: {len(body) - body_max_chars} more characters; "
                f"read {doc.path} for the rest]"
            )
        if body:
            out += ["", body]
    return "\n".join(out)
