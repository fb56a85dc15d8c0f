"""The service's lifecycle and what it runs: start, stop, status, workers, logs, and
``debug kill-worker``."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click

from coordinator.cli import render, service_requests
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import CliError, friendly
from coordinator.cli.options import flags_dict, json_option, serve_flags
from coordinator.cli.service_start import ensure_service
from protocol.text.inert_text import inert
from protocol.wire.control import KillWorkerRequest


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
        from coordinator.cli.web_cmds import start_background_view

        url = start_background_view(obj.project, web_port)
    if as_json:
        shown: dict[str, Any] = {"started": started, "already_running": not started, "pid": pid,
                                 "log": log}
        if url is not None:
            shown["web_url"] = url
        render.print_json(shown)
        return
    from rich.text import Text

    what = (f"specrun started for {obj.project} (pid {pid}); log: {log}" if started
            else f"specrun is already running for {obj.project} (pid {pid}).")
    render.console.print(Text(inert(what)))  # a path is not markup
    if url is not None:
        render.console.print("web view (it ends with the service):", highlight=False)
        print(url, flush=True)


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
        render.console.print(f"specrun stopped (pid {pid}).")


@click.command()
@json_option
@click.pass_obj
@friendly
def status(obj: CommandContext, as_json: bool) -> None:
    """Show the service: project, pid, uptime, model endpoint, workers.

    \b
    Example:
      specrun status --json
    """
    service_requests.status(obj, as_json)


@click.command()
@json_option
@click.pass_obj
@friendly
def workers(obj: CommandContext, as_json: bool) -> None:
    """List worker processes: pid, state, job, overlay, age, memory, sandbox.

    \b
    Example:
      specrun workers
    """
    service_requests.workers(obj, as_json)


@click.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option("-n", "--lines", "count", type=click.IntRange(0), default=40, show_default=True,
              help="How many of the last lines to print first.")
@json_option
@click.pass_obj
@friendly
def logs(obj: CommandContext, follow: bool, count: int, as_json: bool) -> None:
    """Print the service log (in specrun's state directory, outside the project).

    \b
    Examples:
      specrun logs -n 100
      specrun logs -f
    """
    from coordinator.cli.daemon import log_path

    path = log_path(obj.project)
    if not path.exists():
        raise CliError(f"There is no service log at {path} yet.",
                       "It is written once the service runs: `specrun start`.")

    def emit(line: str) -> None:
        if as_json:
            render.print_json({"line": line})
        else:  # a log line may quote the model, a command or a file name
            sys.stdout.write(inert(line) + "\n")

    with open(path, "rb") as fh:
        for line in last_lines(fh, count):
            emit(line)
        sys.stdout.flush()
        if not follow:
            return
        pending = b""
        try:
            while True:
                chunk = fh.read()
                if not chunk:
                    if path.exists() and path.stat().st_size < fh.tell():
                        fh.seek(0)  # truncated or replaced: start over
                    time.sleep(0.2)
                    continue
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    emit(raw.decode("utf-8", "replace"))
                sys.stdout.flush()
        except KeyboardInterrupt:
            return


def last_lines(fh: Any, count: int) -> list[str]:
    """The last ``count`` lines; leaves ``fh`` at the end of the file."""
    fh.seek(0, os.SEEK_END)
    end = fh.tell()
    size, data = 0, b""
    while size < end and data.count(b"\n") <= count:
        size = min(end, max(4096, size * 2))
        fh.seek(end - size)
        data = fh.read(size)
    fh.seek(end)
    # Lines end at "\n" only, as --follow splits them: str.splitlines also breaks at
    # "\r", "\x1c"-"\x1e", U+0085 and U+2028, so a quoted model or file text holding one
    # would print as a separate line that looks like the log's own (inert shows it).
    lines = data.decode("utf-8", "replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines[-count:] if count else []


@click.group()
def debug() -> None:
    """Debugging aids (used by stress tests)."""


@debug.command("kill-worker")
@click.argument("pid", type=int, required=False)
@click.option("--random", "pick_random", is_flag=True, help="Kill a random worker.")
@json_option
@click.pass_obj
@friendly
def kill_worker(obj: CommandContext, pid: int | None, pick_random: bool, as_json: bool) -> None:
    """SIGKILL a worker process (PID or --random); the pool replaces it.

    \b
    Example:
      specrun debug kill-worker --random
    """
    if pid is None and not pick_random:
        raise click.UsageError("give a worker PID or --random")
    service_requests.request_ok(obj, as_json, KillWorkerRequest, pid=pid)
