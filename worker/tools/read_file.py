"""``read_file``: a text file with line numbers, a window of it for big files."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Annotated, BinaryIO

from msgspec import Meta

from worker.tools.args import PathArg, ToolArgs
from worker.tools.base import Tool, ToolContext, looks_binary, show_path, split_lines
from worker.tools.errors import ToolError

NAME = "read_file"
DESCRIPTION = (
    "Read a text file from the project. Returns its lines numbered from 1, one per output "
    "line as '<number><TAB><text>'. Reads at most 2000 lines by default; use 'offset' and "
    "'limit' to read a window of a longer file. Very long lines are cut. Binary files "
    "are refused. Paths may be relative to the project root or absolute."
)


class ReadFileArgs(ToolArgs, frozen=True):
    file_path: Annotated[
        str,
        PathArg("read"),
        Meta(description="File to read: a path relative to the project root, or absolute."),
    ]
    offset: (
        Annotated[
            int, Meta(ge=1, description="Line number to start reading from (1-based). Default: 1.")
        ]
        | None
    ) = None
    limit: (
        Annotated[int, Meta(ge=1, description="How many lines to read. Default: up to 2000.")]
        | None
    ) = None


def _number(n: int, line: str) -> str:
    return f"{n:>6}\t{line}"


def _read(args: ReadFileArgs, ctx: ToolContext) -> str:
    access = ctx.access
    raw = args.file_path
    logical = access.logical_path(raw)
    shown = show_path(access.root, logical)
    access.reach.check(NAME, logical)
    physical: Path = access.resolve_read(raw)
    offset = args.offset if args.offset is not None else 1
    limit = args.limit

    if not os.path.lexists(physical):
        raise ToolError(f"File not found: {shown}")
    try:
        fd = access.reach.open(logical, physical, explicit=True)
    except FileNotFoundError:
        raise ToolError(f"File not found: {shown}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{shown} is a directory, not a file; use list_directory to see it")
        raise ToolError(f"{shown} is not a regular file (a pipe, socket or device)")
    with os.fdopen(fd, "rb") as handle:
        size = info.st_size
        if size > ctx.read_max_bytes and args.offset is None and limit is None:
            raise ToolError(
                f"{shown} is {size:,} bytes, more than the {ctx.read_max_bytes:,}-byte limit "
                f"for reading a whole file; read a window with offset and limit, or use "
                f"grep_search"
            )
        if looks_binary(handle.read(8192)):
            raise ToolError(f"{shown} is a binary file")
        handle.seek(0)
        if size > ctx.read_max_bytes:
            return _read_window_streaming(handle, shown, offset, limit, ctx)
        data = handle.read()

    lines = split_lines(data.decode("utf-8", errors="replace"))
    total = len(lines)
    if total == 0:
        return f"[{shown} is empty]"
    if offset > total:
        raise ToolError(f"offset {offset} is past the end of {shown} ({total} lines)")
    count = limit if limit is not None else ctx.read_max_lines
    window = lines[offset - 1 : offset - 1 + count]
    return _render(window, offset, total, shown, ctx)


def _read_window_streaming(
    handle: BinaryIO, shown: str, offset: int, limit: int | None, ctx: ToolContext
) -> str:
    """A window of a file too big to load: read line by line, never the whole file."""
    count = limit if limit is not None else ctx.read_max_lines
    window: list[str] = []
    more = False
    for n, raw_line in enumerate(handle, start=1):
        if n < offset:
            continue
        if len(window) >= count:
            more = True
            break
        line = raw_line.decode("utf-8", errors="replace").rstrip("\n")
        window.append(line[:-1] if line.endswith("\r") else line)
    if not window:
        raise ToolError(f"offset {offset} is past the end of {shown}")
    return _render(window, offset, None if more else offset + len(window) - 1, shown, ctx)


def _render(window: list[str], offset: int, total: int | None, shown: str, ctx: ToolContext) -> str:
    out: list[str] = []
    used = 0
    cut_lines = 0
    budget = ctx.output_cap - 200  # room for the notes
    for i, line in enumerate(window):
        if len(line) > ctx.read_max_line_chars:
            line = line[: ctx.read_max_line_chars] + " [line cut]"
            cut_lines += 1
        entry = _number(offset + i, line)
        if out and used + len(entry) + 1 > budget:
            break
        out.append(entry)
        used += len(entry) + 1
    last = offset + len(out) - 1
    notes: list[str] = []
    if total is None or last < total:
        of_total = f" of {total}" if total is not None else ""
        notes.append(
            f"[Showing lines {offset}-{last}{of_total} of {shown}. "
            f"Use offset={last + 1} to read more.]"
        )
    if cut_lines:
        notes.append(
            f"[{cut_lines} line(s) longer than {ctx.read_max_line_chars} characters were cut.]"
        )
    return "\n".join(out + notes)


async def run(args: ReadFileArgs, ctx: ToolContext) -> str:
    return await asyncio.to_thread(_read, args, ctx)


TOOL = Tool.define(NAME, DESCRIPTION, ReadFileArgs, run)
