"""``glob``: find files by name pattern, most recently modified first."""

from __future__ import annotations

import asyncio
import heapq
import os
import re
from typing import Annotated

from msgspec import Meta

from worker.tools.args import PathArg, ToolArgs
from worker.tools.base import Tool, ToolContext, quote_path, show_path
from worker.tools.errors import ToolError
from worker.tools.rg import FileSearch, name_glob, plain_listing, start_search
from worker.tools.tree import TreeView, glob_regex, split_glob, walk_files

NAME = "glob"
DESCRIPTION = (
    "Find files whose paths match a glob pattern, such as '**/*.py', 'src/**/*.{ts,tsx}' "
    "or '*.md' (top level only). '*' matches within one directory level, '**' across "
    "levels. Skips .git and files ignored by .gitignore. Returns paths sorted by "
    "modification time, newest first."
)


class GlobArgs(ToolArgs, frozen=True):
    pattern: Annotated[
        str,
        PathArg("read", glob=True),
        Meta(description="Glob pattern matched against paths relative to 'path'."),
    ]
    path: (
        Annotated[
            str,
            PathArg("read"),
            Meta(description="Directory to search in. Default: the project root."),
        ]
        | None
    ) = None


def _depth(rest: str) -> int | None:
    """How many directory levels a match of ``rest`` can be below its start, when bounded."""
    if "**" in rest or "{" in rest:
        return None
    return rest.count("/") + 1


def _glob(args: GlobArgs, ctx: ToolContext) -> str:
    access = ctx.access
    pattern = args.pattern
    if not pattern.strip():
        raise ToolError("pattern is empty")
    base_arg = args.path or "."
    prefix, rest = split_glob(pattern)
    base_path = access.logical_path(base_arg)
    where = show_path(access.root, base_path)
    start_path = access.logical_path(os.path.join(base_path, prefix)) if prefix else base_path

    view = TreeView(access)
    base = view.start(NAME, base_path)
    if base is None:
        raise ToolError(f"Path not found: {where}")
    if not base.is_dir:
        raise ToolError(f"{where} is not a directory")
    start = view.start(NAME, start_path)
    regex = glob_regex(rest)
    found: list[tuple[int, str]] | None = None
    if start is not None and start.is_dir:
        if ctx.use_ripgrep:
            name, depth = name_glob(rest), _depth(rest)
            # plain ignore rules: one walk here; else rg, with a scan for links beside it
            search = plain_listing(view, start, name=name, max_depth=depth)
            if search is None:
                search = start_search(view, start, name=name, max_depth=depth)
            if search is not None:
                with search:
                    found = _from_search(search, regex, str(access.root))
        if found is None:
            found = []
            for node, rel in walk_files(view, start):
                if not regex.match(rel):
                    continue
                try:
                    mtime = node.physical.stat().st_mtime_ns
                except OSError:
                    mtime = 0
                found.append((-mtime, show_path(access.root, node.path)))
    links = ""
    if start is not None:
        links = view.skipped_note(start.path, lambda rel: regex.match(rel) is not None)
    if not found:
        return f"No files match {pattern!r} in {where}" + (f"\n{links}" if links else "")
    total = len(found)
    # newest first, equal times by path: the first entries of the sorted list
    shown_paths = [entry[1] for entry in heapq.nsmallest(ctx.list_max_entries, found)]
    noun = "file" if total == 1 else "files"
    header = f"Found {total} {noun} matching {pattern!r} in {where}, newest first:"
    body = "\n".join(shown_paths)
    if total > len(shown_paths):
        body += f"\n[{total - len(shown_paths)} more not shown; use a narrower pattern or path.]"
    if links:
        body += "\n" + links
    return header + "\n" + body


def _from_search(
    search: FileSearch, regex: re.Pattern[str], root: str
) -> list[tuple[int, str]] | None:
    """(-mtime in ns, shown path) of every match, from rg's list (or a plain listing's), or
    ``None`` (use the walk). Tens of thousands of files on a big tree: strings only, one
    ``stat`` each, done on each block of rg's output while rg still walks (and the symlink
    scan runs); a plain listing has the times already."""
    base = search.base
    shown = base[len(root.rstrip("/")) + 1 :]  # the start directory as output shows it, + "/"
    found: list[tuple[int, str]] = []
    append, match, stat = found.append, regex.match, os.stat
    times = search.times()
    directory: int | None = None
    try:
        for rels in search.batches():
            if directory is None:
                try:
                    directory = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                except OSError:
                    return None
            if times:  # a plain listing: every time known (0 for a file gone before it)
                found += [(-times[rel], shown + rel) for rel in rels if match(rel) is not None]
                continue
            for rel in rels:
                if match(rel) is None:
                    continue
                try:
                    mtime = stat(rel, dir_fd=directory).st_mtime_ns
                except OSError:
                    mtime = 0
                append((-mtime, shown + rel))
    finally:
        if directory is not None:
            os.close(directory)
    listed = search.listed()
    if listed is None:
        return None
    if not search.plain or quote_path(shown) != shown:
        found = [(mtime, quote_path(path)) for mtime, path in found]
    extra = search.extra(listed)
    if extra is None:
        return None
    for hit in extra:
        if not match(hit.rel):
            continue
        try:
            mtime = os.stat(hit.physical).st_mtime_ns
        except OSError:
            mtime = 0
        found.append((-mtime, quote_path(shown + hit.rel)))
    return found


async def run(args: GlobArgs, ctx: ToolContext) -> str:
    return await asyncio.to_thread(_glob, args, ctx)


TOOL = Tool.define(NAME, DESCRIPTION, GlobArgs, run)
