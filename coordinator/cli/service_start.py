"""Starting the service for a command (``start``, ``chat``): the settings checked before
anything forks, a configured model endpoint probed, a spinner while it starts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import CliError
from coordinator.cli.options import flags_argv

if TYPE_CHECKING:
    from coordinator.settings import Settings


def probe_endpoint(settings: Settings, timeout_s: float = 5.0) -> tuple[str, str] | None:
    """Ask a configured endpoint for its model list: (error kind, sentence), or None when it
    answered (or answered something that is not an auth or connection problem)."""
    if settings.uses_scripted_model:
        return None
    import asyncio

    from protocol.model import ModelClient, ModelError

    async def ask() -> None:
        client = ModelClient(settings.base_url, settings.api_key or None, timeout_s=timeout_s,
                             connect_timeout_s=timeout_s, max_retries=0)
        async with client:
            await client.list_models()

    try:
        asyncio.run(ask())
    except ModelError as exc:
        if exc.kind in ("auth", "connect", "timeout"):
            return exc.kind, str(exc)
    return None


def check_endpoint(settings: Settings, probe: bool = True) -> None:
    """Refuse a model configuration that cannot work; warn about an unreachable endpoint."""
    from coordinator.settings import endpoint_problem

    problem = endpoint_problem(settings)
    if problem:
        raise CliError(problem)
    found = probe_endpoint(settings) if probe else None
    if found is None:
        return
    kind, message = found
    if kind == "auth":
        raise CliError(message, "Set OPENAI_API_KEY (or DASHSCOPE_API_KEY for DashScope) or "
                                "`specrun config set apiKey <key>`, then start again.")
    render.warning(f"{message} Queries will fail until it answers.")


def ensure_service(obj: CommandContext, flags: dict[str, Any],
                   probe: bool = True) -> tuple[int, bool]:
    """Start the service unless it runs: (pid, started now)."""
    from coordinator.cli.daemon import StartError, is_running, log_path, start_daemon

    settings = obj.settings(flags)  # bad settings are reported before forking
    if is_running(obj.project):
        with obj.client() as client:
            return client.pid or 0, False
    check_endpoint(settings, probe)
    try:
        if render.console.is_terminal:
            with render.console.status(f"starting specrun for {obj.project}…", spinner="dots"):
                return start_daemon(obj.project, flags_argv(flags)), True
        return start_daemon(obj.project, flags_argv(flags)), True
    except StartError as exc:
        raise CliError(str(exc), f"The service log is {log_path(obj.project)}.") from None
