"""Starting the service for a command (``start``, ``chat``): the settings checked before
anything forks, a configured model endpoint probed, a spinner while it starts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import CliError
from coordinator.cli.options import flags_argv
from protocol.text.secret_text import without_password

if TYPE_CHECKING:
    from coordinator.settings import Settings


def probe_endpoint(settings: Settings, timeout_s: float = 5.0) -> tuple[str, str] | None:
    """Ask a configured endpoint for its model list: (error kind, sentence), or None when it
    answered (or answered something that is not an auth or connection problem)."""
    if settings.uses_scripted_model:
        return None
    import asyncio

    from protocol.model import ModelClient, ModelError

    async def ask() -> list[str]:
        client = ModelClient(settings.base_url, settings.api_key or None, timeout_s=timeout_s,
                             connect_timeout_s=timeout_s, max_retries=0)
        async with client:
            return await client.list_models()

    try:
        offered = asyncio.run(ask())
    except ModelError as exc:
        if exc.kind in ("auth", "connect", "timeout", "tls", "quota"):
            return exc.kind, str(exc)
        return None
    missing = _missing_model(settings, offered)
    return ("model", missing) if missing else None


def _missing_model(settings: Settings, offered: list[str]) -> str | None:
    """A sentence naming a configured model the endpoint's list lacks, or None. Said at
    start, or the first query fails with a 404 that points at the base URL; only a list
    that names some model counts (an empty one may just be unpublished)."""
    if not offered:
        return None
    for key, name in (("model", settings.model), ("fastModel", settings.fast_model)):
        if not name or name in offered:
            continue
        unset = " (the default: no model is set)" if settings.sources.get(key) == "default" else ""
        listed = ", ".join(offered[:8]) + (f" and {len(offered) - 8} more" if len(offered) > 8
                                           else "")
        return (f"The model endpoint {without_password(settings.base_url)} does not list the {key} "
                f"{name!r}{unset}; it lists {listed}. Queries will fail if it does not have "
                f"it: `specrun config set {key} <name>`, then `specrun stop && specrun start`.")
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
    if kind == "model":
        render.warning(message)
        return
    render.warning(f"{message} Queries will fail until it answers.")


def ensure_service(obj: CommandContext, flags: dict[str, Any],
                   probe: bool = True) -> tuple[int, bool]:
    """Start the service unless it runs: (pid, started now)."""
    from coordinator.cli.daemon import StartError, is_running, log_path, start_daemon

    obj.require_directory()
    settings = obj.settings(flags)  # bad settings are reported before forking
    if is_running(obj.project):
        with obj.client() as client:
            return client.pid or 0, False
    if settings.trust_note:
        from coordinator.cli.local.trust import ask_trust

        ask_trust(obj)  # on a terminal, once; the answer is recorded either way
        settings = obj.settings(flags)
    if settings.trust_note:
        render.warning(settings.trust_note)
    from coordinator.legacy_state import adopt_legacy_state

    moved = adopt_legacy_state(obj.project, trusted=settings.project_trusted)
    if moved:
        render.warning(moved)
    check_endpoint(settings, probe)
    try:
        if render.console.is_terminal:
            with render.console.status(f"starting specrun for {obj.project}…", spinner="dots"):
                return start_daemon(obj.project, flags_argv(flags), debug=obj.debug), True
        return start_daemon(obj.project, flags_argv(flags), debug=obj.debug), True
    except StartError as exc:
        raise CliError(str(exc), f"The service log is {log_path(obj.project)}.") from None
