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
    from coordinator.cli.interactive import run_chat
    from coordinator.cli.service_start import ensure_service

    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise CliError("`specrun chat` needs a terminal.",
                       "Use `specrun ask` and `specrun accept` from scripts.")
    given = flags_dict(**flags)
    ensure_service(obj, given)
    sys.exit(run_chat(obj.project, enter_accepts=obj.settings(given).enter_accepts))
