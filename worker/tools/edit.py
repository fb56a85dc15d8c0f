"""``edit``: replace exact text in a file (or create a file from an empty ``old_string``)."""

from __future__ import annotations

import asyncio
from typing import Annotated

from msgspec import Meta

from worker.tools.args import PathArg, ToolArgs
from worker.tools.base import Tool, ToolContext, looks_binary, replace_file, show_path
from worker.tools.errors import ToolError

NAME = "edit"
DESCRIPTION = (
    "Replace text in a file. 'old_string' must match the file's current text exactly, "
    "including whitespace and indentation, and must occur exactly once unless "
    "'replace_all' is true; include enough surrounding lines to make it unique. With an "
    "empty 'old_string' and a file that does not exist yet, the file is created with "
    "'new_string' as its content. Paths must be inside the project."
)


class EditArgs(ToolArgs, frozen=True):
    file_path: Annotated[
        str,
        PathArg("write"),
        Meta(description="File to change: a path relative to the project root, or absolute."),
    ]
    old_string: Annotated[
        str, Meta(description="The exact text to replace (empty to create a new file).")
    ]
    new_string: Annotated[str, Meta(description="The text to put in its place.")]
    replace_all: (
        Annotated[bool, Meta(description="Replace every occurrence of old_string. Default: false.")]
        | None
    ) = None


def _edit(args: EditArgs, ctx: ToolContext) -> str:
    access = ctx.access
    raw = args.file_path
    old = args.old_string
    new = args.new_string
    replace_all = bool(args.replace_all)
    shown = show_path(access.root, access.logical_path(raw))
    if old == new:
        raise ToolError("old_string and new_string are identical; there is nothing to change")

    source = access.resolve_read(raw)
    if source.is_dir():
        raise ToolError(f"{shown} is a directory, not a file")
    if not source.exists():
        if old:
            raise ToolError(
                f"File not found: {shown} (to create a file, use write_file or an empty old_string)"
            )
        access.reserve(raw, len(new.encode("utf-8")))
        target = access.resolve_write(raw)
        target.parent.mkdir(parents=True, exist_ok=True)
        replace_file(target, new.encode("utf-8"))
        return f"Created {shown} ({len(new.encode('utf-8')):,} bytes)."

    data = source.read_bytes()
    if looks_binary(data):
        raise ToolError(f"{shown} is a binary file; edit changes text files only")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not valid UTF-8 text; edit refuses to change it") from None

    if not old:
        if text:
            raise ToolError(
                f"old_string is empty but {shown} already exists and is not empty; give the "
                f"text to replace, or use write_file to replace the whole file"
            )
        updated, count = new, 1
        access.reserve(raw, len(new.encode("utf-8")))
    else:
        count = text.count(old)
        if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
            # The model wrote LF line ends for a CRLF file: match and write in the file's style.
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
            count = text.count(old)
        if count == 0:
            raise ToolError(
                f"old_string was not found in {shown}; it must match the current text exactly, "
                f"including whitespace and indentation (read the file again to check)"
            )
        if count > 1 and not replace_all:
            raise ToolError(
                f"old_string appears {count} times in {shown}; pass replace_all or give more "
                f"context to make it unique"
            )
        # Size the result before building it: replace_all can multiply a file's size.
        growth = len(new.encode("utf-8")) - len(old.encode("utf-8"))
        access.reserve(raw, len(data) + count * growth)
        updated = text.replace(old, new)

    target = access.resolve_write(raw)
    replace_file(target, updated.encode("utf-8"))
    noun = "occurrence" if count == 1 else "occurrences"
    return f"Edited {shown}: replaced {count} {noun}."


async def run(args: EditArgs, ctx: ToolContext) -> str:
    return await asyncio.to_thread(_edit, args, ctx)


TOOL = Tool.define(NAME, DESCRIPTION, EditArgs, run)
