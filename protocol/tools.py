"""The tool categories, by name: which tools read, which write files, which runs a shell.

Defined once here and used by both sides: the worker's gate (what a speculation may do
with each), the worker's main-chat tool jobs (reads outside the project, unapproved shell
commands) and the service's approval policy (which calls need the user's yes). A tool
in no category is unknown to all of them, and a speculation stops at it.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

ReadTool = Literal["read_file", "grep_search", "glob", "list_directory", "lsp"]
"""Tools that only read (``lsp`` has no implementation yet; it is gated as a read)."""

WriteTool = Literal["edit", "write_file"]
"""Tools that change files."""

ShellTool = Literal["run_shell_command"]

READ_TOOLS: Final[frozenset[str]] = frozenset(get_args(ReadTool))
WRITE_TOOLS: Final[frozenset[str]] = frozenset(get_args(WriteTool))
SHELL_TOOL: Final[ShellTool] = "run_shell_command"

PATH_ARGUMENTS: Final = ("file_path", "filePath", "path", "notebook_path")
"""The argument names that hold a tool's file path (the first one present is used)."""
