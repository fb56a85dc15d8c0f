"""Shared pieces of the tools: the execution context, the tool itself, text helpers."""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Literal

from protocol.wire.chat import ToolSpec
from protocol.wire.work import ShellPermission
from worker.tools.args import Args, PathArg, decode_arguments, path_fields
from worker.tools.schema import parameters_schema

if TYPE_CHECKING:
    from worker.shell.runner import ShellResult
    from worker.tools.access import FileAccess

# A main-chat call runs as its job says (``ShellPermission``); a speculation captures the
# writes of a sandboxed command (``captured``).
ShellMode = Literal[ShellPermission, "captured"]

BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Everything a tool needs besides its arguments.

    ``access`` decides where paths lead (the real tree for the main chat, the overlay for a
    speculation). ``shell_mode`` ``"read_only"`` runs commands with the safe read-only runner
    (speculation); ``"full"`` runs them as they are (main chat, after the user's approval).
    """

    access: FileAccess
    shell_mode: ShellMode = "read_only"
    cwd: Path | None = None
    """Working directory of shell commands; ``None`` means the project root."""
    shell_env: Mapping[str, str] | None = None
    """Environment for ``"full"`` shell commands; ``None`` means the runner's default."""
    captured_runner: Callable[[str, str | Path, float, int], ShellResult] | None = None
    """Runs any command sandboxed, keeping its writes in the overlay (``"captured"``, the
    opt-in speculation of commands that are not read-only)."""
    read_only_runner: Callable[[str, str | Path, float, int], ShellResult] | None = None
    """Runs ``"read_only"`` commands instead of the plain safe runner (a speculation's
    shell helper, which shows the commands the overlay); same signature as
    ``run_read_only(command, cwd, timeout_s, output_cap)``."""
    full_runner: Callable[[str, str | Path, float, int], ShellResult] | None = None
    """Runs ``"full"`` commands instead of the plain ``run_shell`` (the main chat's kernel
    backstop, ``worker.contain.backstop``); same signature as ``read_only_runner``."""
    shell_timeout_s: float = 120.0
    """Shell timeout when the call gives none."""
    shell_max_timeout_s: float = 600.0
    """Upper bound for a timeout the model asks for."""
    output_cap: int = 30_000
    """Characters of tool output the model sees at most."""
    read_max_lines: int = 2000
    """Lines ``read_file`` returns when the call gives no ``limit``."""
    read_max_line_chars: int = 2000
    """Longer lines are cut by ``read_file``."""
    read_max_bytes: int = 10 * 1024 * 1024
    """Files larger than this are read only with an explicit ``offset``/``limit``."""
    search_max_matches: int = 500
    """``grep_search`` stops after this many matching lines."""
    search_max_line_chars: int = 500
    """Matching lines longer than this are cut in ``grep_search`` output."""
    search_max_file_bytes: int = 10 * 1024 * 1024
    """``grep_search`` skips larger files."""
    list_max_entries: int = 1000
    """``glob`` and ``list_directory`` show at most this many paths."""
    use_ripgrep: bool = True
    """``grep_search`` and ``glob`` let ripgrep pick the files to look at when its binary
    runs; ``False`` forces the pure-Python walk (same output, slower on big trees)."""


@dataclass(frozen=True, slots=True)
class Tool(Generic[Args]):
    """One tool: its arguments' struct, the schema the model sees and the path arguments
    (both read from the struct, once, when the tool is defined) and the coroutine that runs
    it on decoded arguments."""

    spec: ToolSpec
    args: type[Args]
    run: Callable[[Args, ToolContext], Awaitable[str]]
    paths: Mapping[str, PathArg]
    """The path arguments, as the struct declares them."""

    @classmethod
    def define(
        cls,
        name: str,
        description: str,
        args: type[Args],
        run: Callable[[Args, ToolContext], Awaitable[str]],
    ) -> Tool[Args]:
        spec = ToolSpec(name, description, parameters_schema(args))
        return cls(spec, args, run, path_fields(args))

    @property
    def name(self) -> str:
        return self.spec.name

    async def call(self, arguments: str, ctx: ToolContext) -> str:
        """Decode ``arguments`` (the call's JSON text) and run; bad arguments raise
        ``ToolError``."""
        return await self.run(decode_arguments(self.name, arguments, self.args), ctx)


# --- text --------------------------------------------------------------------------------------


def cap_text(text: str, cap: int) -> str:
    """``text`` cut to ``cap`` characters, with a note saying so when it was cut."""
    if len(text) <= cap:
        return text
    return (
        text[:cap].rstrip("\n")
        + f"\n[Output truncated: showing {cap:,} of {len(text):,} characters.]"
    )


def split_lines(text: str) -> list[str]:
    """Lines as the tools count them: split on ``\\n`` only (``\\r\\n`` too), so
    ``read_file`` and ``grep_search`` agree on line numbers."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def looks_binary(head: bytes) -> bool:
    """A NUL byte in the first 8 KB marks a binary file."""
    return b"\0" in head[:BINARY_SNIFF_BYTES]


def replace_file(path: Path, data: bytes) -> None:
    """Make ``data`` the whole content of ``path`` through a temp file in the same directory
    and a rename. A write that fails part-way (a full disk) leaves the previous content, or no
    file, instead of a torn one that an accept would copy into the real tree."""
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    tmp = path.with_name(f".specrun-write-{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def show_path(root: Path, path: Path) -> str:
    """How a path appears in tool output: relative to the project root when inside it,
    absolute otherwise; JSON-quoted when it holds control characters (a newline in a name
    would otherwise break one-path-per-line output)."""
    try:
        text = path.relative_to(root).as_posix()
    except ValueError:
        text = str(path)
    return quote_path(text)


def quote_path(text: str) -> str:
    """``text`` as tool output shows a path: JSON-quoted when it holds control characters
    or an undecodable byte (whose escape, ``protocol.text.inert_text.encodable``, must not read
    as a name with a backslash in it)."""
    if _CONTROL.search(text) is not None:
        return json.dumps(text, ensure_ascii=False)
    return text


_CONTROL = re.compile("[\x00-\x1f\x7f\udc80-\udcff]")


def describe_error(exc: BaseException) -> str:
    """One readable line for an exception raised by a tool."""
    if isinstance(exc, OSError) and exc.strerror:
        if exc.filename is not None:
            return f"{exc.strerror}: {os.fsdecode(exc.filename)}"
        return exc.strerror
    text = str(exc)
    return text if text else type(exc).__name__
