"""``specrun start``: the service for this project, in the background."""

from __future__ import annotations

from typing import Any

import click

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import friendly
from coordinator.cli.options import flags_dict, json_option, serve_flags
from coordinator.cli.service_start import ensure_service
from protocol.text.inert_text import inert


@click.command()
@serve_flags
@click.option("--no-check", is_flag=True, help="Do not probe the model endpoint first.")
@click.option("--web", "with_web", is_flag=True,
              help="Also start the live web view in the background and print its URL.")
@click.option("--web-port", type=int, default=0, show_default=True,
              help="The web view's port on 127.0.0.1 with --web (0: a free one).")
@json_option
@click.pass_obj
@friendly
def start(obj: CommandContext, /, as_json: bool, no_check: bool, with_web: bool, web_port: int,
          **flags: Any) -> None:
    """Start the service for this project in the background.

    A configured endpoint is probed first: a rejected API key stops the start, an
    unreachable endpoint is a warning.

    \b
    Examples:
      specrun start --approval-mode auto-edit
      specrun start --web          # and a live view of the session in the browser
      specrun start --base-url https://dashscope.aliyuncs.com/compatible-mode/v1 \\
                    --model qwen3-coder-plus --fast qwen3.5-flash
    """
    from coordinator.cli.daemon import log_path

    pid, started = ensure_service(obj, flags_dict(**flags), probe=not no_check)
    log = str(log_path(obj.project))
    url = None
    if with_web:
        from coordinator.cli.local.web import start_background_view

        url = start_background_view(obj.project, web_port, verbose=obj.verbose)
    if as_json:
        shown: dict[str, Any] = {"started": started, "already_running": not started, "pid": pid,
                                 "log": log}
        if url is not None:
            shown["web_url"] = url
        render.print_json(shown)
        return
    from rich.text import Text

    shown_pid = f" (pid {pid})" if obj.verbose else ""  # an internal: --verbose, --json
    what = (f"specrun started for {obj.project}{shown_pid}; log: {log}" if started
            else f"specrun is already running for {obj.project}{shown_pid}.")
    render.console.print(Text(inert(what)))  # a path is not markup
    if url is not None:
        render.console.print("web view (it ends with the service):", highlight=False)
        print(url, flush=True)
