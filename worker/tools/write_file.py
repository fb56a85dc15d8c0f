"""``write_file``: create or overwrite a whole file."""

from __future__ import annotations

import asyncio
from typing import Annotated

from msgspec import Meta

from worker.tools.args import PathArg, ToolArgs
from worker.tools.base import Tool, ToolContext, replace_file, show_path
from worker.tools.errors import ToolError

NAME = "write_file"
DESCRIPTION = (
    "Write a file with the given content, replacing it if it exists and creating it (and "
    "any missing parent directories) if not. Prefer edit for changing part of an existing "
    "file. Paths may be relative to the project root or absolute, and must be inside the "
    "project."
)


class WriteFileArgs(ToolArgs, frozen=True):
    file_path: Annotated[
        str,
        PathArg("write"),
        Meta(description="File to write: a path relative to the project root, or absolute."),
    ]
    content: Annotated[str, Meta(description="The complete new content of the file.")]


def _write(args: WriteFileArgs, ctx: ToolContext) -> str:
    access = ctx.access
    raw = args.file_path
    content = args.content
    shown = show_path(access.root, access.logical_path(raw))
    data = content.encode("utf-8")
    access.reserve(raw, len(data))
    path = access.resolve_write(raw)
    if path.is_dir():
        raise ToolError(f"{shown} is a directory; give the path of a file")
    existed = path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, data)
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {shown} ({lines} lines, {len(data):,} bytes)."


async def run(args: WriteFileArgs, ctx: ToolContext) -> str:
    if len(args.content) < 256 * 1024:
        return _write(args, ctx)
    return await asyncio.to_thread(_write, args, ctx)


TOOL = Tool.define(NAME, DESCRIPTION, WriteFileArgs, run)
