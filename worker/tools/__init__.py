"""The agent's tools, shared by speculations and by the main chat's tool calls.

One module per tool, each defining its arguments' struct (``worker.tools.args``: the schema
the model sees is generated from it, and it declares which arguments are paths) and
``TOOL``. :data:`TOOL_SPECS` lists them in a fixed order so the main chat and every fork send a
byte-identical ``tools`` array. :func:`execute` runs one call and never raises for a tool's own
failure: it answers with an error result instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from protocol.text.inert_text import encodable
from protocol.wire.chat import ToolCall, ToolResult, ToolSpec
from worker.tools import (
    edit,
    glob,
    grep_search,
    list_directory,
    read_file,
    run_shell_command,
    write_file,
)
from worker.tools.access import DirectAccess, FileAccess, OverlayAccess
from worker.tools.args import PathArg, ToolArgs, decode_arguments
from worker.tools.base import ShellMode, Tool, ToolContext, cap_text, describe_error
from worker.tools.errors import ToolError, ToolStop

__all__ = [
    "TOOLS",
    "TOOL_SPECS",
    "DirectAccess",
    "FileAccess",
    "OverlayAccess",
    "PathArg",
    "ShellMode",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolError",
    "ToolStop",
    "arguments_fit",
    "declared_paths",
    "execute",
    "get_tool",
]

TOOLS: tuple[Tool[Any], ...] = (
    read_file.TOOL,
    write_file.TOOL,
    edit.TOOL,
    grep_search.TOOL,
    glob.TOOL,
    list_directory.TOOL,
    run_shell_command.TOOL,
)
"""Every tool, in the fixed order the model sees them."""

TOOL_SPECS: tuple[ToolSpec, ...] = tuple(tool.spec for tool in TOOLS)
"""The tool schemas in their fixed order (send these, never a re-sorted copy)."""

_BY_NAME: dict[str, Tool[Any]] = {tool.name: tool for tool in TOOLS}


def get_tool(name: str) -> Tool[Any] | None:
    """The tool called ``name``, or ``None``."""
    return _BY_NAME.get(name)


def arguments_fit(name: str, arguments: str) -> bool:
    """Whether the tool ``name`` exists and its own argument struct accepts ``arguments``
    (the JSON text of a call): the model client's check of a call it read from text."""
    tool = _BY_NAME.get(name)
    if tool is None:
        return False
    try:
        decode_arguments(name, arguments, tool.args)
    except ToolError:
        return False
    return True


def declared_paths(name: str) -> Mapping[str, PathArg]:
    """The path arguments the tool ``name`` declares; none for a tool that is not
    registered (such as ``lsp``: no call of it runs)."""
    tool = _BY_NAME.get(name)
    return tool.paths if tool is not None else {}


async def execute(call: ToolCall, ctx: ToolContext) -> ToolResult:
    """Run one tool call: ``output`` on success; ``error`` for an unknown tool, bad arguments
    or a failure (the exception's message). Output is capped at ``ctx.output_cap`` characters
    with a note, and an undecodable byte of a file name in it is escaped (``encodable``).
    Cancellation propagates."""
    tool = _BY_NAME.get(call.name)
    if tool is None:
        return ToolResult(call.id, call.name, error=f"Tool '{call.name}' not found")
    try:
        output = await tool.call(call.arguments, ctx)
    except (asyncio.CancelledError, ToolStop):
        raise
    except Exception as exc:
        error = encodable(describe_error(exc))
        return ToolResult(call.id, call.name, error=cap_text(error, ctx.output_cap))
    return ToolResult(call.id, call.name, output=cap_text(encodable(output), ctx.output_cap))
