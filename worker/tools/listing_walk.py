"""One walk for a listing (``glob``) whose ignore files hold only plain name rules.

A listing needs three things from a tree: the files the walk of :mod:`worker.tools.tree`
would visit, the symlinks among its entries (named or followed by the caller), and every
listed file's modification time (newest first). rg lists the files on its own walk, but it
cannot name the symlinks it skips nor give the times: that took a second walk (a scan of the
directories) and a ``stat`` per file on top of rg's, about 2.2 times bare rg's CPU on a big
tree (docs/benchmarks.md). When every ignore file in force is plain
(:mod:`worker.tools.plain_ignore`), one pass does all three in this process: each directory
is read once, its entries tested against the rules by name, each wanted file stat-ed relative
to its directory's descriptor, and no process started.

Directories are opened below their parent's descriptor with ``O_NOFOLLOW`` (one swapped for
a link mid-walk is not followed), no link is followed, and a ``.gitignore`` met on the way is
read by the caller's function (through the read rule) before any entry beside it is judged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from worker.tools.plain_ignore import PlainRules, RuleChain

__all__ = ["Listing", "NameTest", "walk_listing"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class NameTest:
    """Which file names a listing stats: those ending in one of ``suffixes``, or that
    ``regex`` matches whole, or (both ``None``) every name. Only a first cut: the caller
    matches each listed path against its whole pattern."""

    suffixes: tuple[str, ...] | None = None
    regex: re.Pattern[str] | None = None

    def __call__(self, name: str) -> bool:
        if self.suffixes is not None:
            return name.endswith(self.suffixes)
        return self.regex is None or self.regex.fullmatch(name) is not None


@dataclass
class Listing:
    """What :func:`walk_listing` found below its top directory."""

    files: dict[str, int] = field(default_factory=dict)
    """Regular files whose name passed the test, by path relative to the top (posix), to
    their modification time in ns (0: gone before its ``stat``)."""
    links: list[str] = field(default_factory=list)
    """Absolute paths of the symlinks whose name matched ``links_named``."""
    failed: bool = False
    """A directory could not be read (its entries are missing, as in the walk)."""


def walk_listing(
    top: str,
    chain: RuleChain | None,
    read_rules: Callable[[str], PlainRules | None],
    *,
    max_depth: int | None = None,
    wanted: NameTest | None = None,
    links_named: re.Pattern[str] | None = None,
    left_out: Collection[str] = (),
) -> Listing | None:
    """The files and symlinks below directory ``top`` (absolute) that the walk visits, or
    ``None`` when an ignore file met on the way is not plain, or, with ignore rules, an
    entry's name holds a newline (the walk's matcher, pathspec, matches no rule across one,
    a name test does): use rg or the walk then.

    ``chain``: the rules in force in ``top`` (``None``: no ignore rules at all, as below a
    start directory that is itself ignored). ``read_rules(path)``: the rules of the ignore
    file at ``path`` (an empty :class:`PlainRules` when it cannot be read, ``None`` when it
    is not plain). ``max_depth``: entries at most that many levels down. ``wanted``: which
    file names to list and stat. ``links_named``: which symlinks to report (all when
    ``None``). ``left_out``: paths of directories relative to ``top`` with a trailing ``/``
    (specrun's own state) that are not entered. Directories named ``.git`` are not either."""
    found = Listing()
    files, links = found.files, found.links
    want = wanted if wanted is not None else NameTest()
    deepest = -1 if max_depth is None else max_depth
    top_prefix = top.rstrip("/") + "/"
    skipped = frozenset(left_out)
    try:
        fd = os.open(top, _DIR_FLAGS)
    except OSError:
        found.failed = True
        return found
    try:
        top_entries = _entries(fd)
    except OSError:
        os.close(fd)
        found.failed = True
        return found
    # A frame: the directory's descriptor, its entries not yet looked at, its path relative
    # to top ("" or ending in "/"), its depth (1: top) and the rules in force in it.
    frames: list[tuple[int, list[os.DirEntry[str]], str, int, RuleChain | None]] = []
    try:
        frames.append((fd, top_entries, "", 1, chain))
        while frames:
            fd, entries, prefix, depth, rules = frames[-1]
            file_rules = rules.files if rules is not None else None
            dir_rules = rules.dirs if rules is not None else None
            while entries:
                entry = entries.pop()
                name = entry.name
                if rules is not None and "\n" in name:
                    return None  # pathspec matches no rule across a newline; names do
                try:
                    if entry.is_file(follow_symlinks=False):
                        if (file_rules is not None and file_rules.fullmatch(name)) or not want(
                            name
                        ):
                            continue
                        try:
                            mtime = entry.stat(follow_symlinks=False).st_mtime_ns
                        except OSError:  # gone since its directory was read: listed, as
                            mtime = 0  # the walk lists it, with no time
                        files[prefix + name] = mtime
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if depth == deepest or name == ".git":
                            continue
                        if dir_rules is not None and dir_rules.fullmatch(name):
                            continue
                        inner = prefix + name + "/"
                        if inner in skipped:
                            continue
                        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                        try:
                            children = _entries(child)
                            own: PlainRules | None = _NO_FILE
                            if rules is not None:
                                own = _own_rules(children, top_prefix + inner, read_rules)
                        except BaseException:
                            os.close(child)
                            raise
                        if own is None:
                            os.close(child)
                            return None
                        below = rules
                        if rules is not None:  # (the chain without an own file is shared)
                            below = rules.below(None if own is _NO_FILE else own)
                        frames.append((child, children, inner, depth + 1, below))
                        break  # its parent's entries go on once it is done
                    if entry.is_symlink() and (
                        links_named is None or links_named.fullmatch(name) is not None
                    ):
                        links.append(top_prefix + prefix + name)
                except OSError:  # gone since its directory was read, or unreadable
                    found.failed = True
            else:
                frames.pop()
                os.close(fd)
    finally:
        for fd, *_ in frames:
            os.close(fd)
    return found


def _entries(fd: int) -> list[os.DirEntry[str]]:
    """A directory's entries, read whole (its ``.gitignore`` must be known before any of
    them is judged); the descriptor stays open for the ``stat`` and ``open`` below it."""
    with os.scandir(fd) as entries:
        return list(entries)


def _own_rules(
    entries: list[os.DirEntry[str]],
    directory: str,
    read_rules: Callable[[str], PlainRules | None],
) -> PlainRules | None:
    """The rules of the ignore file among a directory's ``entries`` (an empty set when it
    has none), or ``None`` when that file is not plain."""
    for entry in entries:
        if entry.name == ".gitignore":
            return read_rules(directory + ".gitignore")
    return _NO_FILE


_NO_FILE = PlainRules()
