"""``specrun serve``: the service in the foreground. The only module of the client side
that imports the service side (``start`` runs this command in a background process)."""

from __future__ import annotations

from typing import Any

import click

from coordinator.cli.context import CommandContext
from coordinator.cli.errors import CliError, friendly
from coordinator.cli.options import flags_dict, serve_flags
from protocol.wire.seams import NO_SEAMS, WorkerSeams


@click.command()
@serve_flags
@click.pass_obj
@friendly
def serve(obj: CommandContext, /, **flags: Any) -> None:
    """Run the service in the foreground until Ctrl-C (logs go to stderr).

    \b
    Example:
      specrun serve --approval-mode auto-edit --workers 2
    """
    run_service(obj, flags_dict(**flags))


def run_service(
    obj: CommandContext, flags: dict[str, Any], *, worker_seams: WorkerSeams = NO_SEAMS
) -> None:
    """The body of ``serve``: ``flags`` as settings keys. ``worker_seams``: what a test's own
    entry point builds into the workers (``protocol.wire.seams``); the command passes none."""
    import asyncio
    import logging

    from coordinator.log_filter import PasswordLogFilter
    from coordinator.pidfile import AlreadyRunning
    from coordinator.service.service import Service
    from coordinator.settings import endpoint_problem

    logging.basicConfig(
        level=logging.DEBUG if obj.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = obj.settings(flags)
    for handler in logging.getLogger().handlers:
        handler.addFilter(PasswordLogFilter(settings.base_url))
    problem = endpoint_problem(settings)
    if problem:
        raise CliError(problem)
    try:
        asyncio.run(Service(obj.project, settings, worker_seams=worker_seams).run())
    except AlreadyRunning as exc:
        raise CliError(str(exc), "Stop it first with `specrun stop`.") from None
