"""A declared command (``coordinator/commands``) as a click command: its parameters as
click's, ``--json``, its help; the body runs its client half (``client_side``)."""

from __future__ import annotations

from typing import Any

import click

from coordinator.cli.client_side import run_declared
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import call_friendly
from coordinator.cli.options import JSON_HELP
from coordinator.commands.declaration import Argument, Command, Flag, Param, Retired


def _click_param(param: Param) -> click.Parameter:
    if isinstance(param, Retired):  # read only to say what to type instead
        return click.Option([param.name, param.dest], hidden=True, default=None)
    if isinstance(param, Flag):
        return click.Option([param.name, param.dest], is_flag=True, help=param.help)
    if isinstance(param, Argument):
        return click.Argument([param.dest], type=param.kind, required=param.required)
    kind: Any = param.kind
    if param.choices is not None:
        kind = click.Choice(param.choices)
    elif param.kind is int and param.minimum is not None:
        kind = click.IntRange(min=param.minimum)
    return click.Option([param.name, param.dest], type=kind, default=param.default,
                        metavar=param.metavar, help=param.help)


def click_command(command: Command[Any]) -> click.Command:
    def body(**values: Any) -> None:
        obj = click.get_current_context().obj
        assert isinstance(obj, CommandContext), obj
        call_friendly(obj.debug, run_declared, obj, command, values)

    params = [_click_param(p) for p in command.params]
    params.append(click.Option(["--json", "as_json"], is_flag=True, help=JSON_HELP))
    return click.Command(command.name, callback=body, params=params, help=command.help)
