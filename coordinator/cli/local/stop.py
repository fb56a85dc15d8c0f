"""``specrun stop``: stop the service and wait until it is gone."""

from __future__ import annotations

import click

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import friendly
from coordinator.cli.options import json_option


@click.command()
@json_option
@click.pass_obj
@friendly
def stop(obj: CommandContext, as_json: bool) -> None:
    """Stop the service: abort speculations, kill workers, remove overlays.

    \b
    Example:
      specrun stop
    """
    from coordinator.cli.client import ServiceNotRunning
    from coordinator.cli.daemon import stop_daemon

    pid = stop_daemon(obj.project)
    if pid is None:
        raise ServiceNotRunning(obj.project)
    if as_json:
        render.print_json({"stopped": True, "pid": pid})
    else:
        # the pid is an internal: said with --verbose (`--json` always has it)
        render.console.print(f"specrun stopped (pid {pid})." if obj.verbose else "specrun stopped.")
