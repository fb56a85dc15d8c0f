"""``specrun chat``: the interactive prompt, the suggestion as grey ghost text."""

from __future__ import annotations

import sys
from typing import Any

import click

from coordinator.cli.context import CommandContext
from coordinator.cli.errors import CliError, friendly
from coordinator.cli.options import flags_dict, serve_flags


@click.command()
@serve_flags
@click.pass_obj
@friendly
def chat(obj: CommandContext, /, **flags: Any) -> None:
    """Interactive session: the suggestion appears as grey ghost text.

    Tab or Right arrow accepts it; Enter on an empty line puts it in the line and a
    second Enter sends it (enterAccepts: the first Enter accepts); Ctrl-O shows what Tab
    would change (files, then the diff; Esc closes). Typing its beginning keeps
    its speculation running (the rest stays grey), the first letter that differs kills
    it, and Enter sends what was typed (used as an accept when it equals a speculated
    prompt). With several ranked guesses (speculationBranches), Down/Up show the
    others. Ctrl-C aborts a running turn, Ctrl-D leaves. Starts the service if it is
    not running (with these flags).

    \b
    Example:
      specrun chat --approval-mode auto-edit
    """
    from coordinator.cli.chat.interactive import run_chat
    from coordinator.cli.service_start import ensure_service

    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise CliError("`specrun chat` needs a terminal.",
                       "Use `specrun ask` and `specrun accept` from scripts.")
    given = flags_dict(**flags)
    _, started = ensure_service(obj, given)
    if not started:
        _apply_to_running(obj, given)
    root = click.get_current_context().find_root().command
    assert isinstance(root, click.Group), root  # the `specrun` group: slash commands run it
    settings = obj.settings(given)
    away_s = settings.suggestion_away_minutes * 60 if settings.suggestion_away_minutes else None
    sys.exit(run_chat(obj.project, root, enter_accepts=settings.enter_accepts,
                      away_after_s=away_s, focus_reporting=settings.suggestion_focus_reporting,
                      verbose=obj.verbose))


def _apply_to_running(obj: CommandContext, given: dict[str, Any]) -> None:
    """The service already ran: --approval-mode changes its mode now; the other flags
    only take effect when it starts, and the chat says so instead of ignoring them."""
    from coordinator.cli import render
    from coordinator.cli.chat.slash import set_approval_mode
    from coordinator.settings import FLAG_NAMES
    from protocol.wire.approval import ApprovalMode

    mode = given.pop("approvalMode", None)
    if mode is not None:
        with obj.client() as client:
            render.console.print(set_approval_mode(client, ApprovalMode(mode)), highlight=False)
    if given:
        names = ", ".join(FLAG_NAMES[key] for key in given)
        render.warning(f"The service was already running, so {names} do not apply to it; "
                       "`specrun stop` and start the chat again to use them.")
