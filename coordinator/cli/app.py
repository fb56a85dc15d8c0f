"""The ``specrun`` click group, made from the commands' modules: the declared control
commands (``coordinator/commands``, made into click commands by ``declared.py``) and the
command line's own (``coordinator/cli/local``). A command is found by its module's name
and imported when it runs (or when help lists it): a command pays only for itself."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from pathlib import Path

import click

from coordinator.cli import local
from coordinator.cli.context import CommandContext

# A group of declared commands (``Command.group``) and what its help says.
GROUPS = {"debug": "Debugging aids (used by stress tests)."}


def local_names() -> list[str]:
    """The command line's own commands, by name."""
    return sorted(info.name.replace("_", "-") for info in pkgutil.iter_modules(local.__path__))


def local_command(name: str) -> click.Command | None:
    module_name = name.replace("-", "_")
    if not module_name.isidentifier() or module_name.startswith("_"):
        return None
    full = f"{local.__name__}.{module_name}"
    if importlib.util.find_spec(full) is None:
        return None
    command = getattr(importlib.import_module(full), module_name)
    assert isinstance(command, click.Command), (name, command)
    return command


def declared_command(name: str) -> click.Command | None:
    from coordinator.commands import find

    command = find(name)
    if command is None or not command.cli or command.group is not None:
        return None
    from coordinator.cli.declared import click_command

    return click_command(command)


def declared_group(name: str) -> click.Group | None:
    if name not in GROUPS:
        return None
    from coordinator.cli.declared import click_command
    from coordinator.commands import all_commands

    group = click.Group(name, help=GROUPS[name])
    for command in all_commands():
        if command.cli and command.group == name:
            group.add_command(click_command(command))
    return group


def command_names() -> list[str]:
    """Every top-level command's name, sorted."""
    from coordinator.commands import all_commands

    declared = {c.name for c in all_commands() if c.cli and c.group is None}
    return sorted(declared | set(GROUPS) | set(local_names()))


class CommandGroup(click.Group):
    """A group whose commands are imported from their own module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return command_names()

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return (declared_command(cmd_name) or declared_group(cmd_name)
                or local_command(cmd_name))


@click.group(cls=CommandGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Project root (default: nearest directory with .specrun/ or .git).")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option("--verbose", is_flag=True,
              help="Also show internals: process ids, overlay and sandbox paths, session and "
                   "speculation ids (in the chat, the web view and every command's output).")
@click.version_option(package_name="specrun", prog_name="specrun")
@click.pass_context
def cli(ctx: click.Context, project: Path | None, debug: bool, verbose: bool) -> None:
    """specrun runs your coding agent's predicted next prompt before you accept it.

    \b
    Example session:
      specrun start --approval-mode auto-edit
      specrun ask "fix the failing test in tests/test_calc.py"
      specrun suggestion          # the predicted next prompt and its speculation
      specrun accept              # Tab: its files and transcript appear at once
      specrun stop
    Or interactively: `specrun chat`. A whole session to watch: `specrun demo`.
    """
    ctx.obj = CommandContext.from_options(project, debug, verbose)
