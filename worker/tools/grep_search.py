"""``grep_search``: regular-expression search over the project's text files."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from typing import Annotated

from msgspec import Meta

from worker.tools.args import PathArg, ToolArgs
from worker.tools.base import Tool, ToolContext, looks_binary, show_path, split_lines
from worker.tools.errors import ToolError
from worker.tools.rg import find_files, name_glob
from worker.tools.tree import Node, TreeView, glob_regex, walk_files

NAME = "grep_search"
DESCRIPTION = (
    "Search file contents with a regular expression (Python syntax). Returns matching "
    "lines as 'path:line:text'. Searches the project root or the given directory or file "
    "recursively, skipping .git, files ignored by .gitignore and binary files. Use "
    "'include' to limit the search to files matching a glob such as '*.py' or "
    "'src/**/*.{ts,tsx}'."
)


class GrepSearchArgs(ToolArgs, frozen=True):
    pattern: Annotated[
        str, Meta(description="Regular expression to search for, e.g. 'def \\w+_handler'.")
    ]
    path: (
        Annotated[
            str,
            PathArg("read"),
            Meta(description="Directory or file to search. Default: the project root."),
        ]
        | None
    ) = None
    include: (
        Annotated[
            str,
            Meta(
                description=(
                    "Glob of files to search, e.g. '*.py' (matched against file names) or "
                    "'src/**/*.js' (matched against paths relative to the searched directory)."
                )
            ),
        ]
        | None
    ) = None


def _search_file(
    view: TreeView, node: Node, regex: re.Pattern[str], explicit: bool
) -> list[tuple[int, str]] | None:
    """Matching (line number, line) pairs, or ``None`` for a file that is not searched.
    ``explicit``: the file the call named as its path (not one the walk found)."""
    try:
        data = view.read_bytes(node, explicit=explicit)
    except OSError:
        return None
    if looks_binary(data):
        return None
    text = data.decode("utf-8", errors="replace")
    return [(n, line) for n, line in enumerate(split_lines(text), start=1) if regex.search(line)]


def _included(include: re.Pattern[str], by_name: bool, rel: str) -> bool:
    return include.match(rel.rsplit("/", 1)[-1] if by_name else rel) is not None


def _too_big(node: Node, ctx: ToolContext) -> bool:
    try:
        return node.physical.stat().st_size > ctx.search_max_file_bytes
    except OSError:
        return False


def _candidates(
    view: TreeView, start: Node, pattern: str, include: str | None, ctx: ToolContext
) -> Iterable[tuple[Node, str]]:
    """(node, path relative to the start) of every file to search: the start itself when it
    is a file; else the files ripgrep picks (when it runs), or the walk."""
    if not start.is_dir:
        return [(start, start.name)]
    if ctx.use_ripgrep:
        name = include.removeprefix("./") if include else None
        chosen = find_files(
            view,
            start,
            pattern=pattern,
            name=name_glob(name) if name else None,
            max_filesize=ctx.search_max_file_bytes,
        )
        if chosen is not None:
            return ((hit.node(), hit.rel) for hit in chosen)
    return walk_files(view, start)


def _grep(args: GrepSearchArgs, ctx: ToolContext) -> str:
    access = ctx.access
    pattern = args.pattern
    include = args.include or None
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"Invalid regular expression {pattern!r}: {exc}") from None
    include_regex = glob_regex(include.removeprefix("./")) if include else None
    by_name = include is not None and "/" not in include.removeprefix("./")

    view = TreeView(access)
    start_path = access.logical_path(args.path or ".")
    start = view.start(NAME, start_path)
    where = show_path(access.root, start_path)
    if start is None:
        raise ToolError(f"Path not found: {where}")

    lines: list[str] = []
    too_big: list[str] = []
    matched_files = 0
    limit_hit = False
    for node, rel in _candidates(view, start, pattern, include, ctx):
        if include_regex is not None and not _included(include_regex, by_name, rel):
            continue
        if _too_big(node, ctx):
            too_big.append(show_path(access.root, node.path))
            continue
        found = _search_file(view, node, regex, node is start)
        if not found:
            continue
        matched_files += 1
        shown = show_path(access.root, node.path)
        for n, line in found:
            if len(lines) >= ctx.search_max_matches:
                limit_hit = True
                break
            if len(line) > ctx.search_max_line_chars:
                line = line[: ctx.search_max_line_chars] + " [line cut]"
            lines.append(f"{shown}:{n}:{line}")
        if limit_hit:
            break

    scope = f" in {where}" + (f" (include {include!r})" if include else "")
    skipped = ""
    if too_big:
        mib = ctx.search_max_file_bytes / 2**20
        skipped = f"\n[Not searched, over {mib:g} MiB: {', '.join(too_big[:20])}" + (
            f" and {len(too_big) - 20} more]" if len(too_big) > 20 else "]"
        )
    if include_regex is not None:
        links = view.skipped_note(start.path, lambda rel: _included(include_regex, by_name, rel))
    else:
        links = view.skipped_note(start.path)
    if links:
        skipped += "\n" + links
    if not lines:
        return f"No matches for {pattern!r}{scope}{skipped}"
    noun = "match" if len(lines) == 1 else "matches"
    files_noun = "file" if matched_files == 1 else "files"
    header = f"Found {len(lines)} {noun} for {pattern!r}{scope} in {matched_files} {files_noun}:"
    if limit_hit:
        header = (
            f"Showing the first {len(lines)} matches for {pattern!r}{scope} (stopped at the "
            f"limit; narrow the pattern, path or include to see the rest):"
        )
    return header + "\n" + "\n".join(lines) + skipped


async def run(args: GrepSearchArgs, ctx: ToolContext) -> str:
    return await asyncio.to_thread(_grep, args, ctx)


TOOL = Tool.define(NAME, DESCRIPTION, GrepSearchArgs, run)
