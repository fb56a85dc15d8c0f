"""The tool categories, by name: which tools read, which write files, which runs a shell.

Defined once here and used by both sides: the worker's gate (what a speculation may do
with each), the worker's main-chat tool jobs (reads outside the project, unapproved shell
commands) and the service's approval policy (which calls need the user's yes). A tool
in no category is unknown to all of them, and a speculation stops at it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, get_args

ReadTool = Literal["read_file", "grep_search", "glob", "list_directory", "lsp"]
"""Tools that only read (``lsp`` has no implementation yet; it is gated as a read)."""

WriteTool = Literal["edit", "write_file"]
"""Tools that change files."""

ShellTool = Literal["run_shell_command"]

READ_TOOLS: Final[frozenset[str]] = frozenset(get_args(ReadTool))
WRITE_TOOLS: Final[frozenset[str]] = frozenset(get_args(WriteTool))
SHELL_TOOL: Final[ShellTool] = "run_shell_command"

WRITE_PATH_ARGUMENTS: Final[Mapping[str, tuple[str, ...]]] = {
    "edit": ("file_path",),
    "write_file": ("file_path",),
}
"""The arguments each write tool writes to, for the service's approval policy (which never
imports the tools). The worker's argument structs are where they are declared
(``PathArg("write")``); a test holds this table to those declarations."""
