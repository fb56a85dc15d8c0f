"""Where a tree holds ``.git`` entries and ``.gitattributes`` files, remembered per directory.

The git hazard check (:mod:`worker.shell.git_config`) must know every repository and every
attributes file in the project and in a speculation's overlay: git reads a ``.gitattributes``
in any directory of a path it looks at, tracked or not, so git's own index is not enough.
Listing every directory on every read-only git command is linear in files (a third of a second
on a 200,000-file tree). A directory's listing can only change together with its change time,
so a listing is kept with the directory's identity and times, and a later scan lists only the
directories whose identity or times changed: the other ones cost one ``lstat`` each, no
listing and no file read. Nothing is ever refused for the size of the tree.

A listing made within :data:`RACY_NS` of its directory's last change is not kept: timestamps
come from a coarse clock, so a change in the same tick as the listing could leave the times
as they were (the same reason git distrusts "racily clean" index entries). ``ctime`` is in
the key as well as ``mtime`` because ``touch`` can put an ``mtime`` back; ``ctime`` only moves
with the clock.

The files found are not remembered: the caller reads every one of them on every check, so a
change inside a file that leaves its directory alone is still seen.
"""

from __future__ import annotations

import os
import stat
import time
from collections import OrderedDict
from dataclasses import dataclass

RACY_NS = 2_000_000_000
"""A listing is kept only once its directory's times are this much older than the scan."""

MAX_ROOTS = 4
"""Trees remembered at once (the project, a speculation's overlay, a few more)."""

_Stamp = tuple[int, int, int, int]  # st_dev, st_ino, st_mtime_ns, st_ctime_ns


@dataclass(frozen=True, slots=True)
class _Listing:
    stamp: _Stamp
    subdirs: tuple[str, ...]  # paths of real subdirectories (no symlinks, no .git)
    git: bool  # holds a ".git" entry (directory or gitdir file)
    attributes: bool  # holds a ".gitattributes" entry


@dataclass(frozen=True, slots=True)
class GitEntries:
    """The ``.git`` entries and ``.gitattributes`` paths of a tree, and what finding them cost."""

    repositories: tuple[str, ...]  # paths of ".git" entries
    attributes: tuple[str, ...]  # paths of ".gitattributes" entries
    directories: int  # directories visited
    listed: int  # of those, directories listed (not answered from memory)


_memory: OrderedDict[str, dict[str, _Listing]] = OrderedDict()


def git_entries(root: str) -> GitEntries:
    """Every ``.git`` and ``.gitattributes`` under ``root`` (not inside a ``.git``), not
    following symlinks (git does not follow them either). A missing ``root`` holds nothing;
    any other directory that cannot be read raises ``OSError``: the caller fails closed."""
    root = os.path.realpath(root)  # a symlinked project is its target, as git sees it
    if not os.path.lexists(root):
        return GitEntries((), (), 0, 0)
    known = _memory.pop(root, {})
    kept: dict[str, _Listing] = {}
    limit = time.time_ns() - RACY_NS
    repositories: list[str] = []
    attributes: list[str] = []
    visited = listed = 0
    stack = [root]
    try:
        while stack:
            path = stack.pop()
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                continue  # replaced since its parent was listed: no longer a directory
            visited += 1
            stamp = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
            listing = known.get(path)
            if listing is None or listing.stamp != stamp:
                listing = _list(path, stamp)  # the stamp was taken first: a later change shows
                listed += 1
            if st.st_mtime_ns < limit and st.st_ctime_ns < limit:
                kept[path] = listing
            if listing.git:
                repositories.append(os.path.join(path, ".git"))
            if listing.attributes:
                attributes.append(os.path.join(path, ".gitattributes"))
            stack.extend(listing.subdirs)
    finally:
        _memory[root] = kept  # only what this scan saw (deleted directories drop out)
        while len(_memory) > MAX_ROOTS:
            _memory.popitem(last=False)
    return GitEntries(tuple(repositories), tuple(attributes), visited, listed)


def forget() -> None:
    """Drop every remembered listing (tests, and a caller that wants a cold scan)."""
    _memory.clear()


def _list(path: str, stamp: _Stamp) -> _Listing:
    subdirs: list[str] = []
    git = attributes = False
    with os.scandir(path) as entries:
        for entry in entries:
            name = entry.name
            if name == ".git":
                git = True
                continue  # git's own directory: its files are read by the caller
            if name == ".gitattributes":
                attributes = True
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.path)
    return _Listing(stamp, tuple(subdirs), git, attributes)


__all__ = ["MAX_ROOTS", "RACY_NS", "GitEntries", "forget", "git_entries"]
