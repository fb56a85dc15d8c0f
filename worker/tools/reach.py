"""Where a read may lead: the one rule every read tool goes through.

A read tool reads the project and nothing else. A path is judged with every symlink in it
resolved (any chain, relative or absolute, through ``/proc/self/root`` too): the file it
finally names must lie inside the project root. specrun's own state is not the user's
project: ``.specrun/`` at the root and the memory directories (wherever they are) are
*private*.

* An explicit target (the file of ``read_file``, the directory a search or listing starts
  from) that leaves the project or is private is refused (:meth:`Reach.check` raises
  ``ToolStop``), unless the access allows reads anywhere (a main-chat call the user
  approved).
* A walk (``list_directory``, the search walk, ripgrep's extra list) keeps only vetted
  entries: a symlink is resolved and, when it leads outside the project or into private
  state, skipped and recorded (:class:`Skipped`) so the result can name it; the private
  directories themselves are left out silently.
* Content is only ever read through :meth:`Reach.open`: the resolved path is opened below
  the root by ``overlay.kernel.beneath.open_beneath`` (``openat2(RESOLVE_BENEATH |
  RESOLVE_NO_SYMLINKS)``, or a walk opening one component at a time with ``O_NOFOLLOW``
  where ``openat2`` is missing), so a link swapped in after the check fails the open
  instead of leading out.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from overlay.kernel.beneath import open_beneath
from protocol.wire.boundary import BoundaryReason
from worker.tools.args import PathArg
from worker.tools.errors import ToolStop

__all__ = [
    "PRIVATE_TOP",
    "Place",
    "Reach",
    "Skipped",
    "read_boundary",
]

PRIVATE_TOP = ".specrun"
"""specrun's state directory at the project root: never read by a tool on the model's behalf."""
_PRIVATE_SHORT = frozenset(f"specru~{n}" for n in range(1, 5))


def _names_state_dir(name: str) -> bool:
    """Whether a top-level entry called ``name`` may be specrun's state directory: a
    case-insensitive file system (a Windows drive under WSL, an SMB share) opens
    ``.SPECRUN`` or ``.specrun.`` or the short name ``SPECRU~1`` as ``.specrun``."""
    folded = name.casefold()
    return folded.rstrip(". ") == PRIVATE_TOP or folded in _PRIVATE_SHORT

Place = Literal["inside", "outside", "private"]

_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
"""O_NONBLOCK: a FIFO in the tree fails its read (EAGAIN) instead of hanging the tool;
regular files ignore it."""


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


@dataclass
class Skipped:
    """Links a walk met and did not follow, by where they lead (paths as shown)."""

    outside: list[str] = field(default_factory=list)
    private: list[str] = field(default_factory=list)

    def note(self, limit: int = 20) -> str:
        """One line per kind, or "" when nothing was skipped."""
        lines = []
        for names, where in (
            (self.outside, "outside the project"),
            (self.private, "into specrun's own state"),
        ):
            if not names:
                continue
            unique = list(dict.fromkeys(names))
            noun = "link" if len(unique) == 1 else "links"
            verb = "points" if len(unique) == 1 else "point"
            shown = ", ".join(unique[:limit])
            more = f" and {len(unique) - limit} more" if len(unique) > limit else ""
            lines.append(f"[Skipped {len(unique)} {noun} that {verb} {where}: {shown}{more}]")
        return "\n".join(lines)


class Reach:
    """The read rule for one project: what is inside, outside and private.

    ``private``: absolute paths of specrun's state besides ``<root>/.specrun`` (the memory
    directories); one that is the root or holds it is the project itself and is ignored.
    ``anywhere``: explicit targets may leave the project (a main-chat call the user
    approved); walks still never follow a link out.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        private: Iterable[str | os.PathLike[str]] = (),
        *,
        anywhere: bool = False,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.anywhere = anywhere
        root_text = str(self.root)
        tops: list[str] = []
        for given in (Path(root) / PRIVATE_TOP, self.root / PRIVATE_TOP, *private):
            lexical = os.path.normpath(os.path.join(root_text, os.fspath(given)))
            for spelling in (lexical, os.path.realpath(lexical)):
                if not _within(root_text, spelling) and spelling not in tops:
                    tops.append(spelling)
        self.private: tuple[str, ...] = tuple(tops)
        """Every spelling (as given, and resolved) of the private directories."""
        self._private_set = frozenset(tops)
        self._private_below = tuple(top.rstrip("/") + "/" for top in tops)
        self._root_below = root_text.rstrip("/") + "/"
        self._fd: int | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Reach({str(self.root)!r}, private={self.private!r}, anywhere={self.anywhere})"

    def is_private(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` (absolute, as spelled: no symlink resolved) is in private state."""
        text = os.fspath(path)
        if text in self._private_set or text.startswith(self._private_below):
            return True
        if text.startswith(self._root_below):
            return _names_state_dir(text[len(self._root_below) :].partition("/")[0])
        return False

    def place(self, path: str | os.PathLike[str]) -> Place:
        """Where ``path`` (absolute) leads once every symlink in it is resolved."""
        text = os.path.normpath(os.fspath(path))
        if self.is_private(text):
            return "private"
        real = os.path.realpath(text)
        if self.is_private(real):
            return "private"
        return "inside" if _within(real, str(self.root)) else "outside"

    def check(self, tool: str, path: str | os.PathLike[str]) -> None:
        """Refuse an explicit read target that leaves the project or is private
        (``ToolStop`` ``read_outside_project:<tool>`` / ``read_private:<tool>``), unless
        this access may read anywhere."""
        if self.anywhere:
            return
        where = self.place(path)
        if where == "outside":
            outside = BoundaryReason("read_outside_project", tool)
            raise ToolStop(outside, f"{path} is outside the project")
        if where == "private":
            raise ToolStop(BoundaryReason("read_private", tool), f"{path} is specrun's own state")

    def open(
        self,
        path: str | os.PathLike[str],
        physical: str | os.PathLike[str] | None = None,
        *,
        explicit: bool = False,
    ) -> int:
        """A read-only descriptor for the file at ``path`` (absolute, logical) whose content
        is in ``physical`` (the overlay copy of a file written in a speculation), opened so
        that it cannot lead outside the project or into private state, even if a link is
        swapped in after any earlier check (``OSError`` then).

        With ``anywhere``, an ``explicit`` target (one :meth:`check` passed: the user
        approved this very read) is opened as it is, and a file a walk found outside the
        project (a walk the user approved there) without following a last link."""
        if physical is not None and os.fspath(physical) != os.fspath(path):
            # The overlay's own file, in the worker's private directory: never a link.
            return os.open(physical, _READ_FLAGS | os.O_NOFOLLOW)
        if self.anywhere and explicit:
            return os.open(path, _READ_FLAGS)
        text = os.fspath(path)
        if "/." in text or "//" in text or text.endswith("/"):
            text = os.path.normpath(text)
        below = self._root_below
        if self.is_private(text):
            raise OSError(errno.EACCES, "specrun's own state is not read", text)
        if text.startswith(below):
            # A file the walk found: usually no link anywhere in its path below the root.
            try:
                return open_beneath(self._root_fd(), text[len(below) :], _READ_FLAGS)
            except OSError as exc:
                # A link on the way (ENOTDIR: the O_NOFOLLOW walk met one as a directory).
                if exc.errno not in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR, errno.EINVAL):
                    raise
        real = os.path.realpath(text)
        if self.is_private(real):
            raise OSError(errno.EACCES, "specrun's own state is not read", text)
        if real.startswith(below):
            return open_beneath(self._root_fd(), real[len(below) :], _READ_FLAGS)
        if self.anywhere:
            return os.open(real, _READ_FLAGS | os.O_NOFOLLOW)
        raise OSError(errno.EXDEV, "the path leads outside the project", text)

    def read_bytes(
        self,
        path: str | os.PathLike[str],
        physical: str | os.PathLike[str] | None = None,
        *,
        explicit: bool = False,
    ) -> bytes:
        """The whole content of a file, opened by :meth:`open` (``OSError`` for a FIFO or
        a device: nothing waits on one)."""
        fd = self.open(path, physical, explicit=explicit)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
            chunks = []
            size = info.st_size + 1  # one more: the file may have grown
            while chunk := os.read(fd, max(size, 1 << 16)):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def _root_fd(self) -> int:
        """The root, opened once (``O_PATH``) for every open below it."""
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                weakref.finalize(self, os.close, self._fd)
            return self._fd


def _glob_prefix(pattern: str) -> str:
    """The literal directory a glob pattern starts in (``src/app/**/*.py`` → ``src/app``)."""
    parts = pattern.removeprefix("./").split("/")
    literal: list[str] = []
    for part in parts[:-1]:
        if any(ch in part for ch in "*?[{"):
            break
        literal.append(part)
    return "/".join(literal)


def read_boundary(
    name: str,
    args: Mapping[str, Any],
    paths: Mapping[str, PathArg],
    project_root: str | os.PathLike[str],
    private: Iterable[str | os.PathLike[str]] = (),
) -> BoundaryReason | None:
    """Why the read tool call ``name(args)`` may not run unasked, or ``None``.

    ``paths`` are the tool's declared path arguments (``worker.tools.args``). The targets
    are its read paths and, for a ``glob`` path, the directory the pattern starts in (taken
    against the first read path; an absolute pattern or one with ``..`` always leaves).
    ``read_outside_project:<tool>`` when a target leaves the project once symlinks are
    resolved; ``read_private:<tool>`` when it names specrun's own state."""
    reach = Reach(project_root, private)
    root = str(reach.root)
    targets = [
        value
        for key, mark in paths.items()
        if mark.use == "read" and not mark.glob and isinstance(value := args.get(key), str)
    ]
    base = targets[0] if targets else "."
    for key, mark in paths.items():
        pattern = args.get(key)
        if not mark.glob or not isinstance(pattern, str):
            continue
        if os.path.isabs(pattern) or ".." in PurePosixPath(pattern).parts:
            return BoundaryReason("read_outside_project", name)
        prefix = _glob_prefix(pattern)
        if prefix:
            targets.append(os.path.join(base, prefix))
    for target in targets:
        if "\0" in target:
            continue  # the tool refuses it with its own message
        given = Path(project_root, target)
        # As spelled against the root the caller gave, and against the resolved root.
        for spelling in {os.path.normpath(given), os.path.normpath(os.path.join(root, target))}:
            where = reach.place(spelling)
            if where == "private":
                return BoundaryReason("read_private", name)
            if where == "outside":
                return BoundaryReason("read_outside_project", name)
    return None
