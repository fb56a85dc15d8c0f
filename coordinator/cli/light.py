"""The light commands, run without click.

A shell pays for every import on every call, and click (with its command tree) is
the largest cost of a ``specrun status --json`` after the control socket and the codec.
So ``main`` first asks ``light_call``: a command line made only of the group's
``--project``/``--debug``/``--verbose``, a declared command (``coordinator/commands``)
whose parameters are flags and options, and that command's flags (each written out
plainly) is run here, with the same client half its click command runs
(``client_side.run_declared``) and the same error handling (``errors.call_friendly``);
options left out take their defaults.
Anything else (help, ``--version``, a misspelt or unknown option, an option with a
value, an argument, shell completion) goes to click, which gives the usual answer.

This module imports nothing but the standard library's smallest parts and, for a word
that names a declared command, that command's declaration: a command line that is not
light pays almost nothing for asking.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coordinator.commands.declaration import Command

COMPLETION_VARIABLE = "_SPECRUN_COMPLETE"  # click's shell completion for prog_name specrun


class LightCall:
    """A light command line, parsed. (A plain class: ``@dataclass`` would cost every
    call the time to write and compile its methods.)"""

    __slots__ = ("command", "debug", "flags", "project", "verbose")

    def __init__(self, command: str, flags: dict[str, Any], project: Path | None,
                 debug: bool, verbose: bool = False) -> None:
        self.command = command
        self.flags = flags  # parameter name -> value, e.g. {"as_json": True, "stat": False}
        self.project = project
        self.debug = debug
        self.verbose = verbose


def light_call(argv: list[str]) -> LightCall | None:
    """The light command that ``argv`` asks for, or None when click should parse it."""
    if os.environ.get(COMPLETION_VARIABLE):
        return None
    project: str | None = None
    debug = verbose = False
    rest = iter(argv)
    for arg in rest:
        if arg == "--debug":
            debug = True
        elif arg == "--verbose":
            verbose = True
        elif arg == "--project":
            project = next(rest, None)
            if project is None:
                return None
        elif arg.startswith("--project="):
            project = arg.removeprefix("--project=")
        else:
            command = arg
            break
    else:
        return None
    declared = _declared(command)
    light_flags = declared.light_flags if declared is not None else None
    if declared is None or light_flags is None:
        return None
    names = {"--json": "as_json", **light_flags}
    flags = {"as_json": False, **declared.defaults()}
    for arg in rest:
        if arg not in names:
            return None
        flags[names[arg]] = True
    if project is not None and not _plain_directory(project):
        return None
    return LightCall(command, flags, Path(project) if project is not None else None, debug,
                     verbose)


def _declared(name: str) -> Command[Any] | None:
    """The declared command a light command line may run: one of its own, not in a group."""
    if name.startswith("-"):
        return None
    from coordinator.commands import find

    command = find(name)
    return command if command is not None and command.cli and command.group is None else None


def _plain_directory(value: str) -> bool:
    """Whether click's ``Path(file_okay=False)`` takes ``value`` without a word: an
    absent path, or a readable one that is not a file. (A value that looks like an
    option is left to click too.)"""
    if not value or value.startswith("-"):
        return False
    try:
        info = os.stat(value)
    except OSError:
        return True
    return not stat.S_ISREG(info.st_mode) and os.access(value, os.R_OK)


def run_light(call: LightCall) -> None:
    """Run the command and exit as click would have: its code, else 0."""
    try:
        from coordinator.cli.client_side import run_declared
        from coordinator.cli.context import CommandContext
        from coordinator.cli.errors import call_friendly

        obj = CommandContext.from_options(call.project, call.debug, call.verbose)
        command = _declared(call.command)
        assert command is not None, call.command
        call_friendly(call.debug, run_declared, obj, command, dict(call.flags))
    except KeyboardInterrupt:
        # Outside the body (while importing, say): click's answer to Ctrl-C.
        sys.stderr.write("\nAborted!\n")
        sys.exit(1)
    sys.exit(0)
