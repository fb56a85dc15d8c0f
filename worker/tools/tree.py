"""The project tree as the search tools see it: the real tree merged with a speculation's
overlay files, filtered by ``.gitignore`` rules, plus glob pattern matching.

Paths here are *logical* (where a file sits in the project); each node also knows the
*physical* file holding its content (the overlay copy for a file written in a speculation).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pathspec

from worker.tools.access import FileAccess
from worker.tools.base import show_path
from worker.tools.reach import Place, Reach, Skipped

__all__ = [
    "SKIPPED_DIRS",
    "IgnoreRules",
    "Node",
    "TreeView",
    "glob_regex",
    "split_glob",
    "walk_files",
]

SKIPPED_DIRS = frozenset({".git"})


@dataclass(frozen=True, slots=True)
class Node:
    path: Path
    """Logical absolute path."""
    physical: Path
    """Where the content lives (the overlay copy of a speculatively written file)."""
    is_dir: bool
    is_symlink: bool = False

    @property
    def name(self) -> str:
        return self.path.name


class TreeView:
    """The real tree under the access object's root, with overlay-written files merged in:
    a file that exists only in the overlay (and every directory leading to it) shows up;
    a modified file is read from the overlay.

    Only vetted entries come out (the read rule of ``worker.tools.reach``): the private
    directories (``.specrun``, the memory directories) are left out, and a symlink that
    leads outside the project or into them is left out and recorded in :attr:`skipped`,
    so the tool can name it. Content is read with :meth:`read_bytes`, never directly."""

    def __init__(self, access: FileAccess) -> None:
        self.root = access.root
        self.reach: Reach = access.reach
        self._approved_private = False
        self.skipped: dict[Path, Place] = {}
        """Links left out by :meth:`children` or a search, by logical path: where they lead."""
        self._files: dict[Path, Path] = {}
        self._children: dict[Path, dict[str, Node]] = {}
        for logical, physical in access.overlay_files().items():
            if not os.path.isfile(physical) or self.reach.is_private(logical):
                continue  # registered but never written
            self._files[logical] = physical
            node = Node(logical, physical, is_dir=False)
            parent = logical.parent
            while True:
                siblings = self._children.setdefault(parent, {})
                if node.name in siblings:
                    break
                siblings[node.name] = node
                if parent == self.root or parent == parent.parent:
                    break
                node = Node(parent, parent, is_dir=True)
                parent = parent.parent

    def overlay_files(self) -> dict[Path, Path]:
        """Logical path → overlay file, for every file written (not only registered) in the
        speculation."""
        return dict(self._files)

    def start(self, tool: str, path: Path) -> Node | None:
        """The node a tool call names explicitly (where a search or listing starts), or
        ``None``; a place outside the project or in private state stops the call first
        (``ToolStop``, see :meth:`Reach.check`)."""
        self.reach.check(tool, path)
        if self.reach.anywhere and self.reach.place(path) == "private":
            self._approved_private = True  # the user said yes to searching specrun's state
        return self.node(path)

    @property
    def shows_private(self) -> bool:
        """Whether the user approved a search or listing that starts in private state."""
        return self._approved_private

    def hides(self, path: Path) -> bool:
        """Whether ``path`` is private state this view leaves out (all of it, unless the
        user approved a search or listing that starts in it)."""
        return not self.shows_private and self.reach.is_private(path)

    def read_bytes(self, node: Node, *, explicit: bool = False) -> bytes:
        """A file's content, opened so that it cannot lead out of the project (``OSError``
        if it would, or is gone); ``explicit``: the file the call named (see
        :meth:`Reach.open`)."""
        explicit = explicit or self._approved_private
        return self.reach.read_bytes(node.path, node.physical, explicit=explicit)

    def vet(self, path: Path) -> bool:
        """Whether a symlink met at ``path`` (logical) may be used: one that leads outside
        the project or into private state is recorded in :attr:`skipped` instead."""
        where = self.reach.place(path)
        if where == "inside":
            return True
        self.skipped[path] = where
        return False

    def skipped_note(self, start: Path, match: Callable[[str], bool] | None = None) -> str:
        """The lines naming the links a search from ``start`` left out (only those whose
        path relative to ``start`` satisfies ``match``), or ""."""
        found = Skipped()
        for path in sorted(self.skipped, key=lambda p: p.parts):
            rel = path.relative_to(start).as_posix() if path.is_relative_to(start) else ""
            if match is not None and not match(rel):
                continue
            kind = found.outside if self.skipped[path] == "outside" else found.private
            kind.append(show_path(self.root, path))
        return found.note()

    def node(self, path: Path) -> Node | None:
        """What sits at ``path`` (logical), or ``None``."""
        if path in self._files:
            return Node(path, self._files[path], is_dir=False)
        if path in self._children:
            return Node(path, path, is_dir=True)
        if not os.path.lexists(path):
            return None
        return Node(path, path, is_dir=os.path.isdir(path), is_symlink=os.path.islink(path))

    def children(self, directory: Node, keep: Callable[[Node], bool] | None = None) -> list[Node]:
        """Vetted entries of ``directory`` that ``keep`` wants (asked before a link is
        resolved, so what the caller leaves out anyway is never named), sorted by name;
        unreadable directories give what the overlay adds. ``OSError`` only when the
        directory itself cannot be listed and adds nothing."""
        found: dict[str, Node] = {}
        error: OSError | None = None
        try:
            with os.scandir(directory.physical) as entries:
                for entry in entries:
                    path = directory.path / entry.name
                    try:
                        is_link = entry.is_symlink()
                        is_dir = entry.is_dir()
                    except OSError:
                        is_link, is_dir = False, False
                    found[entry.name] = Node(path, Path(entry.path), is_dir, is_link)
        except FileNotFoundError as exc:
            if directory.path not in self._children:
                error = exc
        except OSError as exc:
            error = exc
        for name, node in self._children.get(directory.path, {}).items():
            found[name] = node  # an overlay file replaces the real one
        if error is not None and not found:
            raise error
        vetted = []
        for name in sorted(found):
            node = found[name]
            if self.hides(node.path) or (keep is not None and not keep(node)):
                continue
            if node.is_symlink and node.physical == node.path and not self.vet(node.path):
                continue
            vetted.append(node)
        return vetted


def _read_ignore_file(view: TreeView, node: Node) -> pathspec.GitIgnoreSpec | None:
    try:
        text = view.read_bytes(node).decode("utf-8", errors="replace")
    except OSError:
        return None
    try:
        return pathspec.GitIgnoreSpec.from_lines(text.splitlines())
    except Exception:  # a pattern pathspec cannot compile: ignore that file, not the search
        return None


class IgnoreRules:
    """``.gitignore`` rules in force at some directory: the project's ``.git/info/exclude``
    and the ``.gitignore`` files of every directory from the root down. A deeper file's rules
    win over a shallower one's, and within a file the last matching pattern wins (negation
    ``!`` included), as in git."""

    def __init__(self, specs: tuple[tuple[Path, pathspec.GitIgnoreSpec], ...] = ()) -> None:
        self._specs = specs

    @classmethod
    def at(cls, view: TreeView, directory: Path) -> IgnoreRules:
        """The rules in force inside ``directory``: collected from the project root down to
        it (only its own when it is outside the project)."""
        rules = cls()
        info = view.root / ".git" / "info" / "exclude"
        exclude = _read_ignore_file(view, Node(info, info, is_dir=False))
        if exclude is not None:
            rules = IgnoreRules(((view.root, exclude),))
        if directory.is_relative_to(view.root):
            chain = [view.root, *(view.root / p for p in _prefixes(directory, view.root))]
        else:
            chain = [directory]
        for level in chain:
            rules = rules.entering(view, level)
        return rules

    def entering(self, view: TreeView, directory: Path) -> IgnoreRules:
        """These rules plus ``directory``'s own ``.gitignore`` (if any)."""
        node = view.node(directory / ".gitignore")
        if node is None or node.is_dir:
            return self
        spec = _read_ignore_file(view, node)
        if spec is None:
            return self
        return IgnoreRules((*self._specs, (directory, spec)))

    def ignored(self, path: Path, is_dir: bool) -> bool:
        for base, spec in reversed(self._specs):
            if path == base or not path.is_relative_to(base):
                continue
            rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
            verdict = spec.check_file(rel).include
            if verdict is not None:
                return verdict
        return False


def _prefixes(path: Path, root: Path) -> list[Path]:
    parts = path.relative_to(root).parts
    return [Path(*parts[: i + 1]) for i in range(len(parts))]


def walk_files(
    view: TreeView, start: Node, *, gitignore: bool = True
) -> Iterator[tuple[Node, str]]:
    """Every file below directory ``start`` as (node, path relative to start in posix form),
    depth first in name order. Skips ``.git``, gitignored entries (unless ``start`` itself is
    ignored: a path asked for explicitly is searched as is), symlinked directories, the
    private directories, and links that lead outside the project or into private state
    (recorded in ``view.skipped``)."""
    rules = IgnoreRules.at(view, start.path) if gitignore else IgnoreRules()
    if gitignore and start.path != view.root and rules.ignored(start.path, True):
        rules = IgnoreRules()
        gitignore = False
    yield from _walk(view, start, "", rules, gitignore)


def _walk(
    view: TreeView, directory: Node, prefix: str, rules: IgnoreRules, gitignore: bool
) -> Iterator[tuple[Node, str]]:
    def keep(node: Node) -> bool:
        if node.is_dir and node.name in SKIPPED_DIRS:
            return False
        return not (gitignore and rules.ignored(node.path, node.is_dir))

    try:
        entries = view.children(directory, keep)
    except OSError:
        return
    for node in entries:
        rel = prefix + node.name
        if node.is_dir:
            if node.is_symlink:
                continue
            inner = rules.entering(view, node.path) if gitignore else rules
            yield from _walk(view, node, rel + "/", inner, gitignore)
        else:
            yield node, rel


# --- glob patterns -----------------------------------------------------------------------------

_MAGIC = re.compile(r"[*?\[{]")


def split_glob(pattern: str) -> tuple[str, str]:
    """(literal directory prefix, the rest): ``src/app/**/*.py`` → (``src/app``, ``**/*.py``),
    so a search starts where the pattern can match. ``./`` prefixes are dropped."""
    while pattern.startswith("./"):
        pattern = pattern[2:]
    parts = pattern.split("/")
    literal: list[str] = []
    for part in parts[:-1]:
        if _MAGIC.search(part):
            break
        literal.append(part)
    rest = "/".join(parts[len(literal) :])
    prefix = "/".join(literal)
    if pattern.startswith("/") and not prefix:
        prefix = "/"
    return prefix, rest


def _expand_braces(pattern: str) -> list[str]:
    """``*.{ts,tsx}`` → ``[*.ts, *.tsx]`` (nested braces too)."""
    depth = 0
    start = -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                options: list[str] = []
                level, last = 0, start + 1
                for j in range(start + 1, i):
                    if pattern[j] == "{":
                        level += 1
                    elif pattern[j] == "}":
                        level -= 1
                    elif pattern[j] == "," and level == 0:
                        options.append(pattern[last:j])
                        last = j + 1
                options.append(pattern[last:i])
                if len(options) < 2:
                    continue
                head, tail = pattern[:start], pattern[i + 1 :]
                return [x for opt in options for x in _expand_braces(head + opt + tail)]
    return [pattern]


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            if pattern.startswith("**", i):
                at_start = i == 0 or pattern[i - 1] == "/"
                j = i + 2
                if at_start and pattern.startswith("/", j):
                    out.append("(?:[^/]*/)*")  # "**/": any number of directories
                    i = j + 1
                    continue
                if at_start and j == n:
                    out.append(".*")  # trailing "**": everything below
                    i = j
                    continue
            out.append("[^/]*")
            while i < n and pattern[i] == "*":
                i += 1
            continue
        if ch == "?":
            out.append("[^/]")
        elif ch == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                body = body.replace("\\", "\\\\")
                out.append(f"(?!/)[{body}]")
                i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a glob over ``/``-separated relative paths: ``*`` and ``?`` stay within one
    path segment, ``**`` spans directories, ``[...]`` classes and ``{a,b}`` alternatives work.
    Case-sensitive; dot files are matched like any other."""
    options = _expand_braces(pattern)
    return re.compile("(?:" + "|".join(_translate(p) for p in options) + r")\Z", re.DOTALL)
