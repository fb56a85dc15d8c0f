"""``run_shell_command``: run a bash command in the project directory.

In a speculation (``shell_mode="read_only"``) the command goes through the safe read-only
runner (clean environment, no stdin, timeout); the tool gate lets only commands proven
read-only get here. In the main chat (``"full"``) it runs as given, after the user's approval.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

from msgspec import Meta

from worker.tools.args import ToolArgs
from worker.tools.base import Tool, ToolContext
from worker.tools.errors import ToolError

NAME = "run_shell_command"
DESCRIPTION = (
    "Run a bash command in the project root and return its exit code, stdout and stderr. "
    "The command gets no stdin and is killed when it exceeds its timeout. Use it for "
    "tests, builds, git and other command-line work; prefer read_file, grep_search, glob "
    "and list_directory for looking at files."
)


class RunShellCommandArgs(ToolArgs, frozen=True):
    command: Annotated[
        str, Meta(description="The bash command to run, e.g. 'pytest -q tests/test_io.py'.")
    ]
    description: (
        Annotated[
            str, Meta(description="A short note on what the command does, shown to the user.")
        ]
        | None
    ) = None
    timeout: (
        Annotated[
            int, Meta(ge=1, description="Seconds before the command is killed. Default: 120.")
        ]
        | None
    ) = None


NOTES_ROOM = 1024
"""Characters of the tool output kept for the lines after the streams (timed out, no
network, what a sandboxed run kept), so a long output never cuts them off."""


def _section(title: str, text: str) -> str:
    body = text.rstrip("\n")
    return f"{title}:\n{body}" if body else f"{title}: (empty)"


def format_shell_output(
    exit_code: int | None,
    stdout: str,
    stderr: str,
    *,
    timed_out: bool,
    truncated: bool,
    timeout_s: float,
    notes: tuple[str, ...] = (),
) -> str:
    """The text the model sees for a finished command: ``Exit code: N``, the stdout and stderr
    sections, then notes (timed out; truncated, unless the runner already marked the cut in the
    streams themselves; the runner's own, such as a sandbox without network)."""
    code = "none" if exit_code is None else str(exit_code)
    if exit_code is not None and exit_code < 0:
        try:
            code += f" (killed by {signal.Signals(-exit_code).name})"
        except ValueError:
            code += f" (killed by signal {-exit_code})"
    parts = [f"Exit code: {code}", _section("Stdout", stdout), _section("Stderr", stderr)]
    if timed_out:
        parts.append(f"[The command timed out after {timeout_s:g} s and was killed.]")
    if truncated and "truncated" not in stdout + stderr:
        parts.append("[Output was truncated.]")
    parts.extend(notes)
    return "\n".join(parts)


async def run(args: RunShellCommandArgs, ctx: ToolContext) -> str:
    command = args.command
    if not command.strip():
        raise ToolError("command is empty")
    from worker.shell.runner import run_read_only, run_shell  # loaded on first use

    timeout_s = float(args.timeout if args.timeout is not None else ctx.shell_timeout_s)
    timeout_s = min(timeout_s, ctx.shell_max_timeout_s)
    cwd = ctx.cwd if ctx.cwd is not None else ctx.access.root
    # per stream, so both fit in the tool output with room left for the notes after them
    stream_cap = max(1, (ctx.output_cap - min(NOTES_ROOM, ctx.output_cap // 8)) // 2)
    if ctx.shell_mode == "captured":
        if ctx.captured_runner is None:
            raise ToolError("sandboxed shell commands are not available here")
        result = await asyncio.to_thread(ctx.captured_runner, command, cwd, timeout_s, stream_cap)
    elif ctx.shell_mode == "full" and ctx.full_runner is not None:
        result = await asyncio.to_thread(ctx.full_runner, command, cwd, timeout_s, stream_cap)
    elif ctx.shell_mode == "full":
        env = dict(ctx.shell_env) if ctx.shell_env is not None else None
        result = await asyncio.to_thread(run_shell, command, cwd, timeout_s, stream_cap, env=env)
    else:
        runner = ctx.read_only_runner or run_read_only
        result = await asyncio.to_thread(runner, command, cwd, timeout_s, stream_cap)
    return format_shell_output(
        result.exit_code,
        result.stdout,
        result.stderr,
        timed_out=result.timed_out,
        truncated=result.truncated,
        timeout_s=timeout_s,
        notes=result.notes,
    )


TOOL = Tool.define(NAME, DESCRIPTION, RunShellCommandArgs, run)
