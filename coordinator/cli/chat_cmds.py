"""The main chat: ask (one query), chat (the interactive prompt), reset (a new session)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from coordinator.cli import service_requests
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import CliError, friendly
from coordinator.cli.options import APPROVAL_MODES, flags_dict, json_option, serve_flags


@click.command()
@click.argument("text")
@click.option("--approval-mode", type=APPROVAL_MODES, default=None,
              help="Approval mode for this query only.")
@json_option
@click.pass_obj
@friendly
def ask(obj: CommandContext, text: str, approval_mode: str | None, as_json: bool) -> None:
    """Send one user query; the answer and tool calls stream as they happen.

    Typing something other than the current suggestion aborts its speculation; TEXT
    equal to the suggestion accepts it. Tool calls that need a yes are asked on a
    terminal and refused otherwise (or use --approval-mode auto-edit). Exits 1 if the
    turn did not complete (error, Ctrl-C).

    \b
    Example:
      specrun ask "fix the failing test in tests/test_calc.py"
    """
    from coordinator.cli.approval import ask_person
    from coordinator.cli.turns import stream_turn, view_for
    from protocol.wire.approval import ApprovalMode
    from protocol.wire.control import AskRequest

    interactive = sys.stdin.isatty() and not as_json
    with obj.client() as client:
        request = AskRequest(
            req_id=client.next_id(),
            text=text,
            approval_mode=ApprovalMode(approval_mode) if approval_mode else None,
            can_confirm=interactive,
            client_pid=os.getpid(),
        )
        outcome = stream_turn(client, request, view_for(as_json),
                              ask_person if interactive else None)
    sys.exit(outcome.exit_code)


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
    from coordinator.cli.interactive import run_chat
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
    sys.exit(run_chat(obj.project, root, enter_accepts=obj.settings(given).enter_accepts))


def _apply_to_running(obj: CommandContext, given: dict[str, Any]) -> None:
    """The service already ran: --approval-mode changes its mode now; the other flags
    only take effect when it starts, and the chat says so instead of ignoring them."""
    from coordinator.cli import render
    from coordinator.cli.chat_slash import set_approval_mode
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


@click.command()
@json_option
@click.pass_obj
@friendly
def reset(obj: CommandContext, as_json: bool) -> None:
    """Start a new chat session (the old one stays on disk).

    \b
    Example:
      specrun reset
    """
    service_requests.reset(obj, as_json)


@click.command()
@json_option
@click.pass_obj
@friendly
def compact(obj: CommandContext, as_json: bool) -> None:
    """Summarize the chat so far, all but its last turn, into one message (the fast
    model writes it; the full history stays on disk). specrun also does this by itself
    once a request would pass compactAt of the context window.

    \b
    Example:
      specrun compact
    """
    service_requests.compact(obj, as_json)
