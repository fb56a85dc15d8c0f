"""``glob``: find files by name pattern, most recently modified first."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from protocol.chat import ToolSpec
from worker.tools.base import Tool, ToolContext, ToolError, quote_path, show_path
from worker.tools.rg import find_files, name_glob
from worker.tools.tree import TreeView, glob_regex, split_glob, walk_files

SPEC = ToolSpec(
    name="glob",
    description=(
        "Find files whose paths match a glob pattern, such as '**/*.py', 'src/**/*.{ts,tsx}' "
        "or '*.md' (top level only). '*' matches within one directory level, '**' across "
        "levels. Skips .git and files ignored by .gitignore. Returns paths sorted by "
        "modification time, newest first."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "Glob pattern matched against paths relative to 'path'.",
            },
            "path": {
                "type": "string",
                "description": "Directory to search in. Default: the project root.",
            },
        },
        "required": ["pattern"],
    },
)


def _depth(rest: str) -> int | None:
    """How many directory levels a match of ``rest`` can be below its start, when bounded."""
    if "**" in rest or "{" in rest:
        return None
    return rest.count("/") + 1


def _glob(args: dict[str, Any], ctx: ToolContext) -> str:
    access = ctx.access
    pattern: str = args["pattern"]
    if not pattern.strip():
        raise ToolError("pattern is empty")
    base_arg: str = args.get("path") or "."
    prefix, rest = split_glob(pattern)
    base_path = access.logical_path(base_arg)
    where = show_path(access.root, base_path)
    start_path = access.logical_path(os.path.join(base_path, prefix)) if prefix else base_path

    view = TreeView(access)
    base = view.node(base_path)
    if base is None:
        raise ToolError(f"Path not found: {where}")
    if not base.is_dir:
        raise ToolError(f"{where} is not a directory")
    start = view.node(start_path)
    regex = glob_regex(rest)
    found: list[tuple[int, str]] = []
    if start is not None and start.is_dir:
        hits = None
        if ctx.use_ripgrep:
            hits = find_files(
                view, start, name=name_glob(rest), max_depth=_depth(rest), ordered=False
            )
        if hits is not None:
            cut = len(str(access.root).rstrip("/")) + 1
            for hit in hits:  # strings all the way: a big tree lists tens of thousands
                if not regex.match(hit.rel):
                    continue
                try:
                    mtime = os.stat(hit.physical).st_mtime_ns
                except OSError:
                    mtime = 0
                found.append((-mtime, quote_path(hit.logical[cut:])))
        else:
            for node, rel in walk_files(view, start):
                if not regex.match(rel):
                    continue
                try:
                    mtime = node.physical.stat().st_mtime_ns
                except OSError:
                    mtime = 0
                found.append((-mtime, show_path(access.root, node.path)))
    if not found:
        return f"No files match {pattern!r} in {where}"
    found.sort()
    total = len(found)
    shown_paths = [entry[1] for entry in found[: ctx.list_max_entries]]
    noun = "file" if total == 1 else "files"
    header = f"Found {total} {noun} matching {pattern!r} in {where}, newest first:"
    body = "\n".join(shown_paths)
    if total > len(shown_paths):
        body += f"\n[{total - len(shown_paths)} more not shown; use a narrower pattern or path.]"
    return header + "\n" + body


async def run(args: dict[str, Any], ctx: ToolContext) -> str:
    return await asyncio.to_thread(_glob, args, ctx)


TOOL = Tool(SPEC, run)
