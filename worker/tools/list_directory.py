"""``list_directory``: the entries of one directory."""

from __future__ import annotations

import asyncio
from typing import Annotated

from msgspec import Meta

from worker.tools.args import PathArg, ToolArgs
from worker.tools.base import Tool, ToolContext, show_path
from worker.tools.errors import ToolError
from worker.tools.tree import SKIPPED_DIRS, IgnoreRules, Node, TreeView

NAME = "list_directory"
DESCRIPTION = (
    "List the files and subdirectories directly inside a directory (not recursive). "
    "Directories are marked with a trailing '/'. Entries ignored by .gitignore and the "
    ".git directory are left out."
)


class ListDirectoryArgs(ToolArgs, frozen=True):
    path: (
        Annotated[
            str,
            PathArg("read"),
            Meta(description="Directory to list. Default: the project root."),
        ]
        | None
    ) = None


def _list(args: ListDirectoryArgs, ctx: ToolContext) -> str:
    access = ctx.access
    path = access.logical_path(args.path or ".")
    where = show_path(access.root, path)
    view = TreeView(access)
    directory = view.start(NAME, path)
    if directory is None:
        raise ToolError(f"Directory not found: {where}")
    if not directory.is_dir:
        raise ToolError(f"{where} is a file, not a directory; use read_file to read it")
    rules = IgnoreRules.at(view, path)
    explicit_ignored = path != access.root and rules.ignored(path, True)
    dirs: list[str] = []
    files: list[str] = []
    hidden = 0

    def keep(node: Node) -> bool:
        nonlocal hidden
        if node.is_dir and node.name in SKIPPED_DIRS:
            return False
        if not explicit_ignored and rules.ignored(node.path, node.is_dir):
            hidden += 1
            return False
        return True

    for node in view.children(directory, keep):
        name = show_path(directory.path, node.path)
        (dirs if node.is_dir else files).append(name + "/" if node.is_dir else name)
    entries = dirs + files
    if not entries:
        text = f"Directory {where} is empty."
    else:
        shown = entries[: ctx.list_max_entries]
        text = f"Directory {where}:\n" + "\n".join(shown)
        if len(entries) > len(shown):
            text += f"\n[{len(entries) - len(shown)} more entries not shown.]"
    if hidden:
        noun = "entry" if hidden == 1 else "entries"
        text += f"\n[{hidden} gitignored {noun} not shown.]"
    links = view.skipped_note(path)
    if links:
        text += "\n" + links
    return text


async def run(args: ListDirectoryArgs, ctx: ToolContext) -> str:
    return await asyncio.to_thread(_list, args, ctx)


TOOL = Tool.define(NAME, DESCRIPTION, ListDirectoryArgs, run)
