"""The ``specrun`` click group. Each command lives in its family's module, imported when
the command runs (or when help lists it): a command pays only for its own family."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import click

from coordinator.cli.context import CommandContext

# command -> the module that defines it (as the attribute of its name, '-' as '_')
COMMAND_FAMILIES: dict[str, str] = {
    "start": "service_cmds",
    "stop": "service_cmds",
    "status": "service_cmds",
    "workers": "service_cmds",
    "logs": "service_cmds",
    "debug": "service_cmds",
    "serve": "serve",
    "ask": "chat_cmds",
    "chat": "chat_cmds",
    "reset": "chat_cmds",
    "compact": "chat_cmds",
    "suggestion": "speculation_cmds",
    "accept": "speculation_cmds",
    "reject": "speculation_cmds",
    "stats": "speculation_cmds",
    "diff": "speculation_cmds",
    "undo": "undo_cmds",
    "memory": "memory_cmds",
    "config": "config_cmds",
    "explain-shell": "sandbox_cmds",
    "sandbox": "sandbox_cmds",
    "model": "model_cmds",
    "demo": "demo_cmd",
    "web": "web_cmds",
}


def import_family(family: str) -> ModuleType:
    """A command family's module. Written out, so the import graph shows every edge."""
    match family:
        case "service_cmds":
            from coordinator.cli import service_cmds

            return service_cmds
        case "serve":
            from coordinator.cli import serve

            return serve
        case "chat_cmds":
            from coordinator.cli import chat_cmds

            return chat_cmds
        case "speculation_cmds":
            from coordinator.cli import speculation_cmds

            return speculation_cmds
        case "memory_cmds":
            from coordinator.cli import memory_cmds

            return memory_cmds
        case "config_cmds":
            from coordinator.cli import config_cmds

            return config_cmds
        case "sandbox_cmds":
            from coordinator.cli import sandbox_cmds

            return sandbox_cmds
        case "model_cmds":
            from coordinator.cli import model_cmds

            return model_cmds
        case "demo_cmd":
            from coordinator.cli import demo_cmd

            return demo_cmd
        case "undo_cmds":
            from coordinator.cli import undo_cmds

            return undo_cmds
        case "web_cmds":
            from coordinator.cli import web_cmds

            return web_cmds
    raise LookupError(f"no command family {family!r}")


class FamilyGroup(click.Group):
    """A group whose commands are imported from their family's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_FAMILIES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        family = COMMAND_FAMILIES.get(cmd_name)
        if family is None:
            return None
        command = getattr(import_family(family), cmd_name.replace("-", "_"))
        assert isinstance(command, click.Command), (cmd_name, command)
        return command


@click.group(cls=FamilyGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Project root (default: nearest directory with .specrun/ or .git).")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="specrun", prog_name="specrun")
@click.pass_context
def cli(ctx: click.Context, project: Path | None, debug: bool) -> None:
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
    ctx.obj = CommandContext.from_options(project, debug)
