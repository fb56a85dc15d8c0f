"""`specrun web`: the live web view of the session, in the foreground; and the background
one `specrun start --web` starts (``start_background_view``)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import click

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import EXIT_NO_SERVICE, CliError, friendly
from coordinator.cli.options import json_option
from coordinator.user_state import logs_dir


def web_log_path(project_root: Path) -> Path:
    return logs_dir(project_root) / "web.log"


def _check_port(port: int) -> None:
    if not 0 <= port <= 65535:
        raise CliError(f"--port {port} is not a port number (0 to 65535; 0 picks a free one).")


@click.command()
@click.option("--port", type=int, default=0, show_default=True,
              help="Port on 127.0.0.1 (0: a free one).")
@json_option
@click.pass_obj
@friendly
def web(obj: CommandContext, port: int, as_json: bool) -> None:
    """Serve a live view of the session on 127.0.0.1 until Ctrl-C.

    The page shows the conversation as it streams, every live suggestion and branch with
    its tool calls and the diff of what Tab would apply, the workers and the containment
    in force, and the stats as charts; its buttons send a prompt, accept a branch or
    reject, exactly as `specrun ask`, `accept --branch N` and `reject` do. Open the URL it
    prints: it holds a token, without which the view answers nothing.

    \b
    Examples:
      specrun web
      specrun web --port 8765
      specrun start --web        # the service and a background view; it prints the URL
    """
    import asyncio

    from coordinator.web.link import NoService
    from coordinator.web.run import PortInUse, serve

    _check_port(port)

    def announce(url: str) -> None:
        if as_json:
            render.print_json({"url": url, "pid": os.getpid()})
        else:
            render.console.print(f"specrun web view for {obj.project}:", highlight=False)
            print(url, flush=True)
            render.console.print("Ctrl-C stops it; it also ends when the service stops.",
                                 highlight=False)

    try:
        service_stopped = asyncio.run(serve(obj.project, port, announce, obj.verbose))
    except NoService as exc:
        raise CliError(str(exc), code=EXIT_NO_SERVICE) from None
    except PortInUse as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        return
    if service_stopped and not as_json:
        # Else the view would just end, and its person would not know why.
        render.err_console.print(
            "The service stopped, and this web view with it: `specrun start --web` (or "
            "`specrun start`, then `specrun web`) serves a new one.", highlight=False)


def start_background_view(project_root: Path, port: int, timeout_s: float = 20.0,
                          verbose: bool = False) -> str:
    """Start the web view detached (it ends with the service); its URL once it serves.
    ``verbose``: its page shows the internals too."""
    _check_port(port)
    log = web_log_path(project_root)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "coordinator.web", "--project", str(project_root),
             "--port", str(port), "--background", *(["--verbose"] if verbose else [])],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
            start_new_session=True, close_fds=True,
        )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline().decode(errors="replace").strip() if ready else ""
    proc.stdout.close()
    if not line.startswith("http://"):
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        why = _last_error(log)
        raise CliError(
            "The service is running, but its web view did not start"
            + (f": {why}" if why else "")
            + f" (log: {log}). `specrun web` starts one on a free port."
        )
    return line


def _last_error(log: Path) -> str:
    """The web view's own one-sentence error, the last ``error:`` line of its log."""
    try:
        lines = log.read_text(errors="replace").splitlines()[-20:]
    except OSError:
        return ""
    errors = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    return errors[-1] if errors else ""
