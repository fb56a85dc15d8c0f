"""``write_file``: create or overwrite a whole file."""

from __future__ import annotations

import asyncio
from typing import Any

from protocol.chat import ToolSpec
from worker.tools.base import Tool, ToolContext, replace_file, show_path
from worker.tools.errors import ToolError

SPEC = ToolSpec(
    name="write_file",
    description=(
        "Write a file with the given content, replacing it if it exists and creating it (and "
        "any missing parent directories) if not. Prefer edit for changing part of an existing "
        "file. Paths may be relative to the project root or absolute, and must be inside the "
        "project."
    ),
    parameters={
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "File to write: a path relative to the project root, or absolute.",
            },
            "content": {
                "type": "string",
                "description": "The complete new content of the file.",
            },
        },
        "required": ["file_path", "content"],
    },
)


def _write(args: dict[str, Any], ctx: ToolContext) -> str:
    access = ctx.access
    raw: str = args["file_path"]
    content: str = args["content"]
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


async def run(args: dict[str, Any], ctx: ToolContext) -> str:
    if len(args["content"]) < 256 * 1024:
        return _write(args, ctx)
    return await asyncio.to_thread(_write, args, ctx)


TOOL = Tool(SPEC, run)
