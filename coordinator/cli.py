"""The `specrun` command line.

Exit codes: 0 ok; 1 an error (one sentence on stderr); 2 no service running for
this project, or bad usage. ``--json`` prints the reply structs of
``protocol.control`` as JSON objects (one per line for streamed commands).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from coordinator import render
from coordinator.client import ServiceClient, ServiceNotRunning, ServiceTimeout
from coordinator.settings import SettingsError, load_settings
from protocol.approval import ApprovalMode
from protocol.control import (
    AcceptRequest,
    ApprovalAnswer,
    ApprovalNeeded,
    AskRequest,
    CancelRequest,
    ControlReply,
    ErrorReply,
    KillWorkerRequest,
    OkReply,
    RejectRequest,
    ResetRequest,
    StatsReply,
    StatsRequest,
    StatusReply,
    StatusRequest,
    SuggestionReply,
    SuggestionRequest,
    TurnEnded,
    WorkersReply,
    WorkersRequest,
)

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 1
EXIT_NO_SERVICE = 2


def find_project_root(start: Path | None = None) -> Path:
    """The nearest directory upwards holding `.specrun/` or `.git`; else the start dir."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".specrun").is_dir() or (candidate / ".git").exists():
            return candidate
    return here


class Ctx:
    def __init__(self, project: Path, debug: bool) -> None:
        self.project = project
        self.debug = debug

    def client(self, timeout_s: float = 30.0) -> ServiceClient:
        return ServiceClient(self.project, timeout_s=timeout_s)


def friendly(fn: F) -> F:
    """One clear sentence instead of a traceback (unless --debug)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool(ctx.obj and ctx.obj.debug)
        try:
            return fn(*args, **kwargs)
        except ServiceNotRunning as exc:
            render.err_console.print(f"[red]error:[/red] {exc}")
            sys.exit(EXIT_NO_SERVICE)
        except (ServiceTimeout, SettingsError) as exc:
            render.err_console.print(f"[red]error:[/red] {exc}")
            sys.exit(EXIT_ERROR)
        except click.exceptions.Exit:
            raise
        except (click.ClickException, click.Abort):
            raise
        except Exception as exc:
            if debug:
                raise
            render.err_console.print(f"[red]error:[/red] {exc} (run with --debug for details)")
            sys.exit(EXIT_ERROR)

    return wrapper  # type: ignore[return-value]


def fail_on_error(reply: ControlReply) -> None:
    if isinstance(reply, ErrorReply):
        render.err_console.print(f"[red]error:[/red] {reply.message}")
        sys.exit(EXIT_ERROR)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Project root (default: nearest directory with .specrun/ or .git).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.pass_context
def cli(ctx: click.Context, project: Path | None, debug: bool) -> None:
    """specrun: runs your coding agent's predicted next prompt before you accept it.

    \b
    Example:
      specrun start && specrun ask "fix the failing test" && specrun accept
    """
    root = project.resolve() if project else find_project_root()
    ctx.obj = Ctx(root, debug)


# -- service lifecycle ---------------------------------------------------------


def _serve_flags(func: F) -> F:
    for option in reversed(
        [
            click.option("--model", default=None, help="Main model name."),
            click.option("--fast", "fast_model", default=None, help="Fast model for background work."),
            click.option("--base-url", default=None, help="OpenAI-compatible endpoint."),
            click.option("--approval-mode", type=click.Choice([m.value for m in ApprovalMode]), default=None),
            click.option("--workers", "worker_pool", type=int, default=None, help="Warm pool size."),
            click.option("--scenario", default=None, help="Scenario file for the scripted model."),
        ]
    ):
        func = option(func)
    return func


def _flags_dict(**kw: Any) -> dict[str, Any]:
    names = {"model": "model", "fast_model": "fastModel", "base_url": "baseUrl",
             "approval_mode": "approvalMode", "worker_pool": "workerPool", "scenario": "scenario"}
    return {names[k]: v for k, v in kw.items() if k in names and v is not None}


def _flags_argv(**kw: Any) -> list[str]:
    argv: list[str] = []
    for key, flag in (("model", "--model"), ("fast_model", "--fast"), ("base_url", "--base-url"),
                      ("approval_mode", "--approval-mode"), ("worker_pool", "--workers"),
                      ("scenario", "--scenario")):
        if kw.get(key) is not None:
            argv += [flag, str(kw[key])]
    return argv


@cli.command()
@_serve_flags
@click.pass_obj
@friendly
def serve(obj: Ctx, **flags: Any) -> None:
    """Run the service in the foreground (Ctrl-C stops it).

    Example: specrun serve --approval-mode auto-edit
    """
    from coordinator.pidfile import AlreadyRunning  # noqa: PLC0415
    from coordinator.service import Service  # noqa: PLC0415

    logging.basicConfig(
        level=logging.DEBUG if obj.debug or os.environ.get("SPECRUN_DEBUG") else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = load_settings(obj.project, flags=_flags_dict(**flags))
    try:
        asyncio.run(Service(obj.project, settings).run())
    except AlreadyRunning as exc:
        render.err_console.print(f"[yellow]{exc}[/yellow]")
        sys.exit(EXIT_ERROR)


@cli.command()
@_serve_flags
@json_option
@click.pass_obj
@friendly
def start(obj: Ctx, as_json: bool, **flags: Any) -> None:
    """Start the service for this project in the background.

    Example: specrun start --fast qwen3.5-flash
    """
    from coordinator.daemon import is_running, log_path, start_daemon  # noqa: PLC0415

    load_settings(obj.project, flags=_flags_dict(**flags))  # report bad settings before forking
    if is_running(obj.project):
        with obj.client() as client:
            pid = client.pid
        if as_json:
            render.print_json({"started": False, "already_running": True, "pid": pid})
        else:
            render.console.print(f"specrun is already running for {obj.project} (pid {pid}).")
        return
    pid = start_daemon(obj.project, _flags_argv(**flags))
    if as_json:
        render.print_json({"started": True, "already_running": False, "pid": pid, "log": str(log_path(obj.project))})
    else:
        render.console.print(f"specrun started for {obj.project} (pid {pid}); log: {log_path(obj.project)}")


@cli.command()
@json_option
@click.pass_obj
@friendly
def stop(obj: Ctx, as_json: bool) -> None:
    """Stop the service: abort speculations, kill workers, remove overlays.

    Example: specrun stop
    """
    from coordinator.daemon import stop_daemon  # noqa: PLC0415

    pid = stop_daemon(obj.project)
    if pid is None:
        raise ServiceNotRunning(obj.project)
    if as_json:
        render.print_json({"stopped": True, "pid": pid})
    else:
        render.console.print(f"specrun stopped (pid {pid}).")


@cli.command()
@json_option
@click.pass_obj
@friendly
def status(obj: Ctx, as_json: bool) -> None:
    """Show the service: project, pid, uptime, model endpoint, workers.

    Example: specrun status --json
    """
    with obj.client() as client:
        reply = client.call(StatusRequest)
    fail_on_error(reply)
    assert isinstance(reply, StatusReply)
    if as_json:
        render.print_json(reply)
    else:
        render.show_status(reply)


@cli.command()
@json_option
@click.pass_obj
@friendly
def workers(obj: Ctx, as_json: bool) -> None:
    """List worker processes: pid, state, speculation, overlay, age, RSS.

    Example: specrun workers
    """
    with obj.client() as client:
        reply = client.call(WorkersRequest)
    fail_on_error(reply)
    assert isinstance(reply, WorkersReply)
    if as_json:
        render.print_json(reply)
    else:
        render.console.print(render.workers_table(reply.workers))


# -- chat ----------------------------------------------------------------------


def run_streamed(client: ServiceClient, request: AskRequest | AcceptRequest, as_json: bool, interactive: bool) -> int:
    """Send a query or an accept and show its events; Ctrl-C cancels the turn."""
    printer = render.TurnPrinter()
    client.send(request)
    end: ControlReply | None = None
    try:
        for reply in client.replies(request.req_id, timeout_s=None):
            if as_json:
                render.print_json(reply)
            else:
                printer.show(reply)
            if isinstance(reply, ApprovalNeeded):
                approved = interactive and click.confirm(
                    f"Allow {reply.call.name}({reply.call.arguments})? ({reply.reason})", default=False
                )
                client.send(ApprovalAnswer(client.next_id(), request.req_id, reply.call.id, approved))
            end = reply
    except KeyboardInterrupt:
        client.send(CancelRequest(client.next_id(), request.req_id))
        for reply in client.replies(request.req_id, timeout_s=10):
            if as_json:
                render.print_json(reply)
            end = reply
    if isinstance(end, ErrorReply):
        return EXIT_ERROR
    if isinstance(end, TurnEnded) and end.reason in ("error",):
        return EXIT_ERROR
    return 0


@cli.command()
@click.argument("text")
@click.option("--approval-mode", type=click.Choice([m.value for m in ApprovalMode]), default=None)
@json_option
@click.pass_obj
@friendly
def ask(obj: Ctx, text: str, approval_mode: str | None, as_json: bool) -> None:
    """Send one user query; the answer streams as it is produced.

    If TEXT is exactly the current suggestion, its speculation is accepted instead.

    Example: specrun ask "fix the failing test in tests/test_calc.py"
    """
    interactive = sys.stdin.isatty() and not as_json
    with obj.client() as client:
        request = AskRequest(
            req_id=client.next_id(),
            text=text,
            approval_mode=ApprovalMode(approval_mode) if approval_mode else None,
            can_confirm=interactive,
        )
        sys.exit(run_streamed(client, request, as_json, interactive))


@cli.command()
@click.option("--wait", is_flag=True, help="Wait until a suggestion is visible (or none comes).")
@json_option
@click.pass_obj
@friendly
def suggestion(obj: Ctx, wait: bool, as_json: bool) -> None:
    """Show the predicted next prompt and its speculation's status.

    Example: specrun suggestion --wait --json
    """
    with obj.client() as client:
        reply = client.call(SuggestionRequest, wait_visible=wait)
    fail_on_error(reply)
    assert isinstance(reply, SuggestionReply)
    if as_json:
        render.print_json(reply)
        return
    if reply.text is None:
        why = f" ({reply.suppressed_reason})" if reply.suppressed_reason else ""
        render.console.print(f"[dim]no suggestion{why}[/dim]")
        return
    render.console.print(f"[bright_black]{reply.text}[/bright_black]  {'(visible)' if reply.visible else '(pending)'}")
    s = reply.speculation
    if s is not None:
        extra = f", boundary: {s.boundary_reason}" if s.boundary_reason else ""
        render.console.print(
            f"  speculation {s.status}: {s.turns} turn(s), {s.tool_uses} tool use(s), "
            f"{len(s.files_written)} file(s), {s.elapsed_s:.2f}s{extra}"
        )


@cli.command()
@json_option
@click.pass_obj
@friendly
def accept(obj: Ctx, as_json: bool) -> None:
    """Accept the current suggestion (Tab): apply its speculation instantly.

    Example: specrun accept
    """
    with obj.client() as client:
        sys.exit(run_streamed(client, AcceptRequest(req_id=client.next_id(), method="cli"), as_json, False))


def _simple(kind: Any, as_json: bool, obj: Ctx, **fields: Any) -> ControlReply:
    with obj.client() as client:
        reply = client.call(kind, **fields)
    fail_on_error(reply)
    if as_json:
        render.print_json(reply)
    elif isinstance(reply, OkReply):
        render.console.print(reply.message or "ok")
    return reply


@cli.command()
@json_option
@click.pass_obj
@friendly
def reject(obj: Ctx, as_json: bool) -> None:
    """Dismiss the current suggestion and kill its speculation.

    Example: specrun reject
    """
    _simple(RejectRequest, as_json, obj)


@cli.command()
@json_option
@click.pass_obj
@friendly
def reset(obj: Ctx, as_json: bool) -> None:
    """Start a new chat session (the old one stays on disk).

    Example: specrun reset
    """
    _simple(ResetRequest, as_json, obj)


@cli.command()
@json_option
@click.pass_obj
@friendly
def stats(obj: Ctx, as_json: bool) -> None:
    """Suggestions shown/accepted/ignored/suppressed, speculation outcomes, time saved.

    Example: specrun stats --json
    """
    with obj.client() as client:
        reply = client.call(StatsRequest)
    fail_on_error(reply)
    assert isinstance(reply, StatsReply)
    if as_json:
        render.print_json(reply)
        return
    c = render.console
    c.print(f"suggestions: {reply.suggestions_shown} shown, {reply.suggestions_accepted} accepted "
            f"{dict(reply.accepted_by_method) or ''}, {reply.suggestions_ignored} ignored, "
            f"{reply.suggestions_suppressed.total} suppressed {reply.suggestions_suppressed.by_reason or ''}")
    c.print(f"speculations: {reply.speculations_completed} completed, "
            f"{reply.speculations_boundary.total} boundary {reply.speculations_boundary.by_reason or ''}, "
            f"{reply.speculations_aborted} aborted, {reply.speculations_failed} failed")
    c.print(f"time saved: {reply.time_saved_total_s:.2f}s total, median {reply.time_saved_median_s:.2f}s "
            f"over {len(reply.time_saved_s)} accept(s)")


# -- tools for people and scripts ----------------------------------------------------


@cli.group()
def debug() -> None:
    """Debugging aids (used by stress tests)."""


@debug.command("kill-worker")
@click.argument("pid", type=int, required=False)
@click.option("--random", "pick_random", is_flag=True, help="Kill a random worker.")
@json_option
@click.pass_obj
@friendly
def kill_worker(obj: Ctx, pid: int | None, pick_random: bool, as_json: bool) -> None:
    """SIGKILL a worker process (PID or --random).

    Example: specrun debug kill-worker --random
    """
    if pid is None and not pick_random:
        raise click.UsageError("give a worker PID or --random")
    _simple(KillWorkerRequest, as_json, obj, pid=pid)


@cli.group()
def model() -> None:
    """The embedded scripted model."""


@model.command("serve")
@click.option("--scenario", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--port", type=int, default=0, show_default=True)
@click.option("--request-log", type=click.Path(dir_okay=False, path_type=Path), default=None)
@friendly
def model_serve(scenario: Path, port: int, request_log: Path | None) -> None:
    """Serve a scenario as an OpenAI-compatible endpoint until Ctrl-C.

    Example: specrun model serve --scenario demo.yaml --port 8000
    """
    from coordinator.scripted_model import serve_forever  # noqa: PLC0415

    serve_forever(scenario, port, request_log)


@cli.command("explain-shell")
@click.argument("command", required=False)
@click.option("--batch", is_flag=True, help="Read JSON-string lines from stdin; write JSON verdicts.")
def explain_shell(command: str | None, batch: bool) -> None:
    """Say whether a shell command is read-only, and which rule decided.

    Runs the worker's classifier in a child process; no service is needed.

    Example: specrun explain-shell "git log --oneline | head"
    """
    import subprocess  # noqa: PLC0415

    if not batch and command is None:
        raise click.UsageError("give a COMMAND or --batch")
    argv = [sys.executable, "-m", "worker.shell.explain"] + (["--batch"] if batch else [command or ""])
    sys.exit(subprocess.call(argv))


def main() -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    cli(prog_name="specrun")
