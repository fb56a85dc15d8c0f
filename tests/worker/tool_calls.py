"""Calling a tool from a test the way the worker does, and reading its answer."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

from protocol.wire.chat import ToolCall, ToolResult
from worker.tools import ToolContext, execute

# Which engine picks the files a search tool reads: "rg", or "python" for the pure-Python
# walk (the ``search_engine`` fixture sets it; a context's ``use_ripgrep`` is the seam).
SEARCH_ENGINE = "rg"


def call(ctx: ToolContext, name: str, **args: Any) -> ToolResult:
    if SEARCH_ENGINE == "python" and ctx.use_ripgrep:
        ctx = dataclasses.replace(ctx, use_ripgrep=False)
    return asyncio.run(execute(ToolCall("c1", name, json.dumps(args)), ctx))


def ok(ctx: ToolContext, name: str, **args: Any) -> str:
    result = call(ctx, name, **args)
    assert result.error is None, result.error
    assert result.output is not None
    return result.output


def err(ctx: ToolContext, name: str, **args: Any) -> str:
    result = call(ctx, name, **args)
    assert result.output is None, result.output
    assert result.error is not None
    return result.error


def body(text: str) -> list[str]:
    """Output lines without the header line and bracketed notes."""
    return [line for line in text.splitlines()[1:] if not line.startswith("[")]


def make_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
