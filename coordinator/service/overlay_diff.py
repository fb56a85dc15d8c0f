"""What a speculation's overlay would change in the real tree, as the live view shows it.

``overlay_diff`` is the one place the web view's diff comes from. For now it reads the
overlay directory itself (so it also works on a running speculation: what it has written
so far); once the accept listing (created / modified / deleted / mode / runs later /
conflict, the computation Tab uses) is shared, this function returns that listing instead.

The overlay was written by a worker, which the coordinator does not trust: nothing here
follows a symbolic link (a planted link could otherwise show any file of yours in the
page), only regular files are read, and sizes are capped.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from protocol.control import FileChangeKind, LiveFileDiff
from protocol.work import WrittenFile

MAX_FILE_BYTES = 1 << 20  # larger files are listed, not diffed
MAX_DIFF_LINES = 400  # per file
MAX_FILES = 200
# Files a later step runs or loads by itself (tests, build and CI files, hooks): a change
# there acts after Tab, not when you look at it.
RUNS_LATER_NAMES = frozenset({
    "conftest.py", "setup.py", "noxfile.py", "tox.ini", "pyproject.toml", "setup.cfg",
    "Makefile", "makefile", "package.json", "Dockerfile", "justfile", ".envrc",
})
RUNS_LATER_DIRS = (".github/", ".gitlab/", ".circleci/", ".husky/", "scripts/", "bin/")


def runs_later(rel: str, mode: int) -> bool:
    name = PurePosixPath(rel).name
    if name in RUNS_LATER_NAMES or rel.startswith(RUNS_LATER_DIRS):
        return True
    if (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"):
        return True
    return bool(mode & 0o111)


def _read(path: str) -> tuple[bytes | None, os.stat_result | None]:
    """A regular file's bytes (None past the cap) and its stat, never through a link;
    (None, None) if it is missing or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None, None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, None
        if info.st_size > MAX_FILE_BYTES:
            return None, info
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks), info
    finally:
        os.close(fd)


def _text(data: bytes) -> str | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _overlay_files(overlay_dir: str) -> list[str]:
    found: list[str] = []
    for top, dirs, files in os.walk(overlay_dir, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(top, name)
            if stat.S_ISREG(os.lstat(full).st_mode):
                found.append(os.path.relpath(full, overlay_dir).replace(os.sep, "/"))
            if len(found) >= MAX_FILES:
                return found
    return found


def _conflict(real: os.stat_result | None, written: WrittenFile | None) -> str:
    """Why Tab would refuse this file, judged from the fingerprint the worker took when it
    first wrote it (only known once the speculation ended)."""
    if written is None:
        return ""
    original = written.original
    if original is None:
        return "" if real is None else "the file was created in the project meanwhile"
    if real is None:
        return "the file was deleted from the project meanwhile"
    if (real.st_size, real.st_mtime_ns) != (original.size, original.mtime_ns):
        return "the file changed in the project since the speculation read it"
    return ""


def overlay_diff(
    project_root: Path,
    overlay_dir: str,
    written: Mapping[str, WrittenFile] | None = None,
) -> tuple[LiveFileDiff, ...]:
    """Each file of the overlay against the real tree. ``written``: the worker's report of
    its files, once it ended (for the conflict check)."""
    if not overlay_dir or not os.path.isdir(overlay_dir):
        return ()
    out: list[LiveFileDiff] = []
    for rel in _overlay_files(overlay_dir):
        new, new_info = _read(os.path.join(overlay_dir, rel))
        old, old_info = _read(os.path.join(project_root, rel))
        mode = new_info.st_mode if new_info else 0
        change: FileChangeKind = "created" if old_info is None else "modified"
        if new == old and new is not None and old_info is not None:
            if new_info is not None and stat.S_IMODE(new_info.st_mode) != stat.S_IMODE(
                old_info.st_mode
            ):
                change = "mode"
            else:
                continue  # copied up, never changed
        conflict = _conflict(old_info, (written or {}).get(rel))
        later = runs_later(rel, mode)
        if new is None or (old is None and old_info is not None):
            out.append(LiveFileDiff(rel, change, "", True, True, later, conflict))
            continue
        new_text = _text(new)
        old_text = "" if old is None else _text(old)
        if new_text is None or old_text is None:
            out.append(LiveFileDiff(rel, change, "", True, False, later, conflict))
            continue
        lines = list(
            difflib.unified_diff(
                old_text.splitlines(keepends=True),
                new_text.splitlines(keepends=True),
                fromfile="/dev/null" if old_info is None else f"a/{rel}",
                tofile=f"b/{rel}",
            )
        )
        truncated = len(lines) > MAX_DIFF_LINES
        shown = lines[:MAX_DIFF_LINES]
        text = "".join(line if line.endswith("\n") else line + "\n" for line in shown)
        out.append(LiveFileDiff(rel, change, text, False, truncated, later, conflict))
    return tuple(out)
