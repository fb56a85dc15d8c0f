"""The `specrun` command line.

Exit codes: 0 ok; 1 an error (one sentence on stderr, and what to do); 2 no service
running for this project, or bad usage. ``--json`` prints the reply structs of
``protocol.control`` as JSON objects (one per line for streamed commands); commands that
need no service print the objects documented in ``docs/cli.md``.
"""

from __future__ import annotations

# A shell pays for every import here on every call, and `specrun status --json` needs
# little: click, the control socket (zmq), the codec (msgspec). So rich (through
# `render`, which imports it on first drawing), asyncio, logging, subprocess, the
# settings and the socket client are imported where a command needs them.
import functools
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from coordinator.cli import render
from coordinator.state_dir import state_dir
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

if TYPE_CHECKING:
    from coordinator.cli.client import ServiceClient
    from coordinator.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_NO_SERVICE = 2  # also click's exit code for bad usage


class CliError(Exception):
    """An error to show as one sentence plus what to do; never a traceback."""

    def __init__(self, message: str, hint: str = "", code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code


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
        from coordinator.cli.client import ServiceClient

        return ServiceClient(self.project, timeout_s=timeout_s)

    def settings(self, flags: dict[str, Any] | None = None) -> Settings:
        from coordinator.settings import load_settings

        return load_settings(self.project, flags=flags)


def _raised_by(module: str, name: str, exc: BaseException) -> bool:
    """Whether ``exc`` is ``module.name``. A module this run never imported cannot have
    raised it, and importing it only to ask would cost the light commands their saving."""
    found = sys.modules.get(module)
    return found is not None and isinstance(exc, getattr(found, name))


def friendly(fn: F) -> F:
    """One clear sentence instead of a traceback (unless --debug)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool(ctx.obj and ctx.obj.debug)
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except CliError as exc:
            render.error(exc.message, exc.hint)
            sys.exit(exc.code)
        except KeyboardInterrupt:
            render.err_console.print("[yellow]interrupted[/yellow]")
            sys.exit(EXIT_ERROR)
        except Exception as exc:
            if _raised_by("coordinator.cli.client", "ServiceNotRunning", exc):
                render.error(str(exc))
                sys.exit(EXIT_NO_SERVICE)
            if _raised_by("coordinator.settings", "SettingsError", exc):
                render.error(
                    f"Bad settings: {exc}",
                    "Fix the file (or the variable or flag) named above; "
                    "`specrun config show` checks the settings.",
                )
                sys.exit(EXIT_ERROR)
            if _raised_by("coordinator.cli.client", "ServiceTimeout", exc):
                render.error(str(exc))
                sys.exit(EXIT_ERROR)
            if debug:
                raise
            render.error(f"{exc}", "Run with `specrun --debug ...` to see the details.")
            sys.exit(EXIT_ERROR)

    return wrapper  # type: ignore[return-value]


def fail_on_error(reply: ControlReply, as_json: bool = False) -> None:
    """An error reply from the service: its sentence on stderr (and, for scripts, the
    reply itself on stdout), exit 1."""
    if isinstance(reply, ErrorReply):
        if as_json:
            render.print_json(reply)
        render.error(reply.message)
        sys.exit(EXIT_ERROR)


json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print JSON for scripts (schema: docs/cli.md).")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Project root (default: nearest directory with .specrun/ or .git).")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="specrun", prog_name="specrun")
@click.pass_context
def cli(ctx: click.Context, project: Path | None, debug: bool) -> None:
    """specrun runs your coding agent's predicted next prompt before you accept it.

    \b
    Example session:
      specrun start --approval-mode auto-edit
      specrun ask "fix the failing test in tests/test_calc.py"
      specrun suggestion          # the predicted next prompt and its speculation
      specrun accept              # Tab: its files and transcript appear at once
      specrun stop
    Or interactively: `specrun chat`. A whole session to watch: `specrun demo`.
    """
    root = project.resolve() if project else find_project_root()
    ctx.obj = Ctx(root, debug)


# -- service lifecycle ---------------------------------------------------------


def serve_flags(func: F) -> F:
    modes = click.Choice([m.value for m in ApprovalMode])
    for option in reversed(
        [
            click.option("--model", default=None, help="Main model name."),
            click.option("--fast", "fast_model", default=None,
                         help="Fast model for suggestions, speculation and recall."),
            click.option("--base-url", default=None,
                         help="OpenAI-compatible endpoint (default: embedded scripted model)."),
            click.option("--approval-mode", type=modes, default=None,
                         help="Which tool calls need a yes."),
            click.option("--workers", "worker_pool", type=click.IntRange(0, 64), default=None,
                         help="Warm pool size."),
            click.option("--scenario", default=None,
                         help="Scenario file for the embedded scripted model."),
        ]
    ):
        func = option(func)
    return func


_FLAG_KEYS = {"model": "model", "fast_model": "fastModel", "base_url": "baseUrl",
              "approval_mode": "approvalMode", "worker_pool": "workerPool", "scenario": "scenario"}


def flags_dict(**kw: Any) -> dict[str, Any]:
    return {_FLAG_KEYS[k]: v for k, v in kw.items() if k in _FLAG_KEYS and v is not None}


def flags_argv(flags: dict[str, Any]) -> list[str]:
    from coordinator.settings import FLAG_NAMES

    argv: list[str] = []
    for key, value in flags.items():
        argv += [FLAG_NAMES[key], str(value)]
    return argv


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


def ensure_service(obj: Ctx, flags: dict[str, Any], probe: bool = True) -> tuple[int, bool]:
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


@cli.command()
@serve_flags
@click.pass_obj
@friendly
def serve(obj: Ctx, **flags: Any) -> None:
    """Run the service in the foreground until Ctrl-C (logs go to stderr).

    \b
    Example:
      specrun serve --approval-mode auto-edit --workers 2
    """
    import asyncio
    import logging

    from coordinator.pidfile import AlreadyRunning
    from coordinator.service.service import Service
    from coordinator.settings import endpoint_problem

    logging.basicConfig(
        level=logging.DEBUG if obj.debug or os.environ.get("SPECRUN_DEBUG") else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = obj.settings(flags_dict(**flags))
    problem = endpoint_problem(settings)
    if problem:
        raise CliError(problem)
    try:
        asyncio.run(Service(obj.project, settings).run())
    except AlreadyRunning as exc:
        raise CliError(str(exc), "Stop it first with `specrun stop`.") from None


@cli.command()
@serve_flags
@click.option("--no-check", is_flag=True, help="Do not probe the model endpoint first.")
@json_option
@click.pass_obj
@friendly
def start(obj: Ctx, as_json: bool, no_check: bool, **flags: Any) -> None:
    """Start the service for this project in the background.

    A configured endpoint is probed first: a rejected API key stops the start, an
    unreachable endpoint is a warning.

    \b
    Examples:
      specrun start --approval-mode auto-edit
      specrun start --base-url https://dashscope.aliyuncs.com/compatible-mode/v1 \\
                    --model qwen3-coder-plus --fast qwen3.5-flash
    """
    from coordinator.cli.daemon import log_path

    pid, started = ensure_service(obj, flags_dict(**flags), probe=not no_check)
    log = str(log_path(obj.project))
    if as_json:
        render.print_json({"started": started, "already_running": not started, "pid": pid,
                           "log": log})
    elif started:
        render.console.print(f"specrun started for {obj.project} (pid {pid}); log: {log}")
    else:
        render.console.print(f"specrun is already running for {obj.project} (pid {pid}).")


@cli.command()
@json_option
@click.pass_obj
@friendly
def stop(obj: Ctx, as_json: bool) -> None:
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


@cli.command()
@json_option
@click.pass_obj
@friendly
def status(obj: Ctx, as_json: bool) -> None:
    """Show the service: project, pid, uptime, model endpoint, workers.

    \b
    Example:
      specrun status --json
    """
    _report(obj, as_json, StatusRequest, StatusReply, render.show_status)


@cli.command()
@json_option
@click.pass_obj
@friendly
def workers(obj: Ctx, as_json: bool) -> None:
    """List worker processes: pid, state, job, overlay, age, memory, sandbox.

    \b
    Example:
      specrun workers
    """
    _report(
        obj,
        as_json,
        WorkersRequest,
        WorkersReply,
        lambda reply: render.console.print(render.workers_table(reply.workers)),
    )


# -- chat ----------------------------------------------------------------------


def run_streamed(
    client: ServiceClient,
    request: AskRequest | AcceptRequest,
    as_json: bool,
    confirm: Callable[[ApprovalNeeded], bool] | None,
    printer: render.TurnPrinter | None = None,
) -> int:
    """Send a query or an accept and show its events until the turn ends; Ctrl-C
    cancels the turn. ``confirm`` answers approval questions (None: always no)."""
    from coordinator.cli.client import FOREVER

    # JSON lines need no printer, so a scripted `accept --json` never imports rich.
    shown = None if as_json else (printer or render.TurnPrinter())
    client.send(request)
    end: ControlReply | None = None
    if shown is not None:
        shown.waiting("[bright_black]thinking…[/]")
    try:
        try:
            for reply in client.replies(request.req_id, timeout_s=FOREVER):
                if shown is None:
                    render.print_json(reply)
                    if isinstance(reply, ErrorReply):
                        render.error(reply.message)
                else:
                    shown.show(reply)
                if isinstance(reply, ApprovalNeeded):
                    approved = confirm(reply) if confirm is not None else False
                    client.send(ApprovalAnswer(client.next_id(), request.req_id, reply.call.id,
                                               approved))
                end = reply
        except KeyboardInterrupt:
            if shown is not None:
                shown.close()
            client.send(CancelRequest(client.next_id(), request.req_id))
            for reply in client.replies(request.req_id, timeout_s=15):
                if shown is None:
                    render.print_json(reply)
                else:
                    shown.show(reply)
                end = reply
    finally:
        if shown is not None:
            shown.close()
    if isinstance(end, TurnEnded) and end.reason in ("completed", "accepted", "debounced"):
        return EXIT_OK
    return EXIT_ERROR


def ask_approval(reply: ApprovalNeeded) -> bool:
    from protocol.display import format_args

    try:
        return click.confirm(
            f"Allow {reply.call.name}({format_args(reply.call)})? ({reply.reason})",
            default=False,
        )
    except click.Abort:
        # click turns Ctrl-C (and end of input) at a prompt into Abort; the turn must be
        # cancelled like a Ctrl-C anywhere else, or the service waits for the answer.
        raise KeyboardInterrupt from None


@cli.command()
@click.argument("text")
@click.option("--approval-mode", type=click.Choice([m.value for m in ApprovalMode]), default=None,
              help="Approval mode for this query only.")
@json_option
@click.pass_obj
@friendly
def ask(obj: Ctx, text: str, approval_mode: str | None, as_json: bool) -> None:
    """Send one user query; the answer and tool calls stream as they happen.

    Typing something other than the current suggestion aborts its speculation; TEXT
    equal to the suggestion accepts it. Tool calls that need a yes are asked on a
    terminal and refused otherwise (or use --approval-mode auto-edit). Exits 1 if the
    turn did not complete (error, Ctrl-C).

    \b
    Example:
      specrun ask "fix the failing test in tests/test_calc.py"
    """
    interactive = sys.stdin.isatty() and not as_json
    with obj.client() as client:
        request = AskRequest(
            req_id=client.next_id(),
            text=text,
            approval_mode=ApprovalMode(approval_mode) if approval_mode else None,
            can_confirm=interactive,
            client_pid=os.getpid(),
        )
        code = run_streamed(client, request, as_json, ask_approval if interactive else None)
    sys.exit(code)


@cli.command()
@click.option("--wait", is_flag=True, help="Wait until a suggestion is visible (or none comes).")
@click.option("--settled", is_flag=True,
              help="Also wait until its speculation stopped running (up to 60 s), so that "
                   "accept applies it.")
@json_option
@click.pass_obj
@friendly
def suggestion(obj: Ctx, wait: bool, settled: bool, as_json: bool) -> None:
    """Show the predicted next prompt and its speculation's status.

    \b
    Example:
      specrun suggestion --wait --json
    """
    with obj.client() as client:
        reply = client.request(
            SuggestionRequest(req_id=client.next_id(), wait_visible=wait, wait_settled=settled),
            timeout_s=105.0 if settled else 45.0 if wait else None,
        )
    fail_on_error(reply, as_json)
    assert isinstance(reply, SuggestionReply)
    if as_json:
        render.print_json(reply)
    else:
        render.show_suggestion(reply)


@cli.command()
@json_option
@click.pass_obj
@friendly
def accept(obj: Ctx, as_json: bool) -> None:
    """Accept the current suggestion (Tab): apply its speculation at once.

    A speculation that is still running or stopped at a boundary is aborted and the
    suggestion runs as a normal turn instead.

    \b
    Example:
      specrun accept
    """
    with obj.client() as client:
        code = run_streamed(client, AcceptRequest(req_id=client.next_id(), method="cli"),
                            as_json, None)
    sys.exit(code)


def _report(
    obj: Ctx, as_json: bool, kind: Any, expected: type[R], show: Callable[[R], object]
) -> None:
    """Ask the service one question; print the reply as JSON or for a person."""
    with obj.client() as client:
        reply = client.call(kind)
    fail_on_error(reply, as_json)
    assert isinstance(reply, expected), reply
    if as_json:
        render.print_json(reply)
    else:
        show(reply)


def _simple(kind: Any, as_json: bool, obj: Ctx, **fields: Any) -> ControlReply:
    with obj.client() as client:
        reply = client.call(kind, **fields)
    fail_on_error(reply, as_json)
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

    \b
    Example:
      specrun reject
    """
    _simple(RejectRequest, as_json, obj)


@cli.command()
@json_option
@click.pass_obj
@friendly
def reset(obj: Ctx, as_json: bool) -> None:
    """Start a new chat session (the old one stays on disk).

    \b
    Example:
      specrun reset
    """
    _simple(ResetRequest, as_json, obj)


@cli.command()
@json_option
@click.pass_obj
@friendly
def stats(obj: Ctx, as_json: bool) -> None:
    """Suggestions shown/accepted/ignored/suppressed, speculation outcomes, time saved.

    \b
    Example:
      specrun stats --json
    """
    _report(obj, as_json, StatsRequest, StatsReply, render.show_stats)


@cli.command()
@serve_flags
@click.pass_obj
@friendly
def chat(obj: Ctx, **flags: Any) -> None:
    """Interactive session: the suggestion appears as grey ghost text.

    Tab, Right arrow or Enter on an empty line accepts it; typing something else and
    Enter sends that instead (its speculation is killed). Ctrl-C aborts a running turn,
    Ctrl-D leaves. Starts the service if it is not running (with these flags).

    \b
    Example:
      specrun chat --approval-mode auto-edit
    """
    from coordinator.cli.interactive import run_chat

    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise CliError("`specrun chat` needs a terminal.",
                       "Use `specrun ask` and `specrun accept` from scripts.")
    ensure_service(obj, flags_dict(**flags))
    sys.exit(run_chat(obj.project))


@cli.command()
@click.option("--model", default=None, help="Model of a real endpoint (with --base-url).")
@click.option("--fast", "fast_model", default=None, help="Fast model of a real endpoint.")
@click.option("--base-url", default=None, help="Play the session against this endpoint.")
@click.option("--pace", type=click.FloatRange(0, 10), default=1.0, show_default=True,
              help="Typing and reading pauses (0: none, 2: twice as slow).")
@json_option
@click.pass_obj
@friendly
def demo(obj: Ctx, model: str | None, fast_model: str | None, base_url: str | None,
         pace: float, as_json: bool) -> None:
    """Play a whole session in a throw-away copy of a sample project.

    On the embedded scripted model (no key, no network): fix a failing test, Tab
    through the predicted follow-ups, type something else and watch the speculation's
    worker die, then a table of time saved. Everything is removed at the end.

    \b
    Examples:
      specrun demo
      specrun demo --base-url http://127.0.0.1:8000/v1 --model qwen3-coder
    """
    from coordinator.cli.demo.run import DemoOptions, run_demo

    options = DemoOptions(model=model, fast_model=fast_model, base_url=base_url, pace=pace,
                          as_json=as_json, debug=obj.debug)
    sys.exit(run_demo(options))


# -- logs ------------------------------------------------------------------------


@cli.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option("-n", "--lines", "count", type=click.IntRange(0), default=40, show_default=True,
              help="How many of the last lines to print first.")
@json_option
@click.pass_obj
@friendly
def logs(obj: Ctx, follow: bool, count: int, as_json: bool) -> None:
    """Print the service log (.specrun/logs/service.log).

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
        else:
            sys.stdout.write(line + "\n")

    with open(path, "rb") as fh:
        for line in _last_lines(fh, count):
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


def _last_lines(fh: Any, count: int) -> list[str]:
    """The last ``count`` lines; leaves ``fh`` at the end of the file."""
    fh.seek(0, os.SEEK_END)
    end = fh.tell()
    size, data = 0, b""
    while size < end and data.count(b"\n") <= count:
        size = min(end, max(4096, size * 2))
        fh.seek(end - size)
        data = fh.read(size)
    fh.seek(end)
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[-count:] if count else []


# -- memory ----------------------------------------------------------------------


@cli.group()
def memory() -> None:
    """The project's and your memories (what recall picks from).

    \b
    Example:
      specrun memory add "pytest style" -d "tests use plain asserts" -t project
    """


def _memory_store(obj: Ctx) -> Any:
    from coordinator.memory import MemoryStore

    return MemoryStore(obj.project, memory_dir=obj.settings().memory_dir or None)


def _memory_json(doc: Any, body: bool = False) -> dict[str, Any]:
    out = {"name": doc.name, "description": doc.description, "type": doc.type,
           "scope": doc.scope, "path": doc.path, "relative_path": doc.relative_path,
           "mtime": doc.mtime}
    if body:
        out["body"] = doc.body
    return out


@memory.command("list")
@click.option("--scope", type=click.Choice(["project", "user"]), default=None,
              help="Only this memory root.")
@json_option
@click.pass_obj
@friendly
def memory_list(obj: Ctx, scope: str | None, as_json: bool) -> None:
    """List memories, newest first.

    \b
    Example:
      specrun memory list --json
    """
    from rich.table import Table

    store = _memory_store(obj)
    docs = store.list_memories(scope)
    if as_json:
        render.print_json({"project_dir": str(store.project_dir),
                           "user_dir": str(store.user_dir) if store.user_dir else None,
                           "memories": [_memory_json(d) for d in docs]})
        return
    if not docs:
        render.console.print(f"[bright_black]no memories (project: {store.project_dir})[/]")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("name", "type", "scope", "description", "file"):
        table.add_column(col, overflow="fold")
    for d in docs:
        table.add_row(d.name, d.type, d.scope, d.description, d.relative_path)
    render.console.print(table)


@memory.command("show")
@click.argument("name")
@json_option
@click.pass_obj
@friendly
def memory_show(obj: Ctx, name: str, as_json: bool) -> None:
    """Print one memory, found by name, file name or path.

    \b
    Example:
      specrun memory show "pytest style"
    """
    from coordinator.memory import MemoryNotFound

    try:
        doc = _memory_store(obj).show_memory(name)
    except MemoryNotFound as exc:
        raise CliError(f"{str(exc)[:1].upper()}{str(exc)[1:]}.",
                       "`specrun memory list` shows what there is.") from None
    if as_json:
        render.print_json(_memory_json(doc, body=True))
        return
    render.console.print(f"[bold]{doc.name}[/bold]  [bright_black]({doc.type}, {doc.scope}; "
                         f"{doc.path})[/]")
    render.console.print(doc.description, markup=False)
    render.console.print()
    render.console.print(doc.body.strip(), markup=False)


@memory.command("add")
@click.argument("name")
@click.option("-d", "--description", required=True, help="One line: when is it useful?")
@click.option("-t", "--type", "kind", type=click.Choice(["user", "feedback", "project",
                                                         "reference"]),
              default="project", show_default=True)
@click.option("--scope", type=click.Choice(["project", "user"]), default="project",
              show_default=True, help="The project's memory or yours (~/.specrun/memories).")
@click.option("-b", "--body", default=None, help="The memory's text (default: read stdin).")
@json_option
@click.pass_obj
@friendly
def memory_add(obj: Ctx, name: str, description: str, kind: str, scope: str,
               body: str | None, as_json: bool) -> None:
    """Write a new memory file and list it in MEMORY.md.

    \b
    Example:
      echo "Run tests with python -m pytest -q" | \\
        specrun memory add "how to test" -d "the test command of this project" -t project
    """
    if body is None:
        if sys.stdin.isatty():
            raise click.UsageError("give the memory's text with --body or on stdin")
        body = sys.stdin.read()
    if scope == "project":
        state_dir(obj.project)
    try:
        doc = _memory_store(obj).add_memory(name, description, kind, body, scope=scope)
    except ValueError as exc:
        raise CliError(f"{str(exc)[:1].upper()}{str(exc)[1:]}.") from None
    if as_json:
        render.print_json(_memory_json(doc, body=True))
    else:
        render.console.print(f"added memory [bold]{doc.name}[/bold]: {doc.path}")


# -- config ----------------------------------------------------------------------


@cli.group()
def config() -> None:
    """Settings: what is in effect and where each value came from.

    \b
    Order (later wins): defaults, <project>/.specrun/settings.json,
    ~/.specrun/settings.json, environment (OPENAI_API_KEY, OPENAI_BASE_URL,
    DASHSCOPE_API_KEY, SPECRUN_MODEL, SPECRUN_FAST_MODEL), flags.
    """


@config.command("show")
@json_option
@click.pass_obj
@friendly
def config_show(obj: Ctx, as_json: bool) -> None:
    """Print the merged settings and the source of each value (API key masked).

    \b
    Example:
      specrun config show --json
    """
    from rich.table import Table

    from coordinator.settings import KEYS, project_settings_path, user_settings_path

    settings = obj.settings()
    public = settings.public()
    files = {"project": str(project_settings_path(obj.project)),
             "user": str(user_settings_path())}
    if as_json:
        render.print_json({
            "project": str(obj.project),
            "files": files,
            "settings": {k: {"value": public[k], "source": settings.sources[k]} for k in KEYS},
        })
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("key")
    table.add_column("value", overflow="fold")
    table.add_column("from", style="bright_black", overflow="fold")
    for k in KEYS:
        value = public[k]
        shown = json.dumps(value) if not isinstance(value, str) else (value or '""')
        table.add_row(k, shown, settings.sources[k])
    render.console.print(table)
    render.console.print(f"[bright_black]project file: {files['project']}\nuser file:    "
                         f"{files['user']}[/]")


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--user", "user_file", is_flag=True,
              help="Write ~/.specrun/settings.json instead of the project's file.")
@json_option
@click.pass_obj
@friendly
def config_set(obj: Ctx, key: str, value: str, user_file: bool, as_json: bool) -> None:
    """Write KEY=VALUE into the project's settings.json (or yours with --user).

    An empty VALUE removes a non-string key. A running service reads settings at start:
    restart it for the change to apply.

    \b
    Examples:
      specrun config set approvalMode auto-edit
      specrun config set --user fastModel qwen3.5-flash
    """
    from coordinator.settings import project_settings_path, set_setting, user_settings_path

    path = user_settings_path() if user_file else project_settings_path(obj.project)
    if not user_file:
        state_dir(obj.project)
    stored = set_setting(path, key, value)
    obj.settings()  # the file as a whole must still load
    shown = "***" if key == "apiKey" and stored else stored
    if as_json:
        render.print_json({"key": key, "value": shown, "file": str(path)})
    else:
        what = "removed" if stored is None else f"= {json.dumps(shown)}"
        render.console.print(f"{key} {what} in {path}")


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
    """SIGKILL a worker process (PID or --random); the pool replaces it.

    \b
    Example:
      specrun debug kill-worker --random
    """
    if pid is None and not pick_random:
        raise click.UsageError("give a worker PID or --random")
    _simple(KillWorkerRequest, as_json, obj, pid=pid)


@cli.group()
def model() -> None:
    """The embedded scripted model."""


@model.command("serve")
@click.option("--scenario", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Scenario file (YAML or JSON).")
@click.option("--port", type=int, default=0, show_default=True, help="0: any free port.")
@click.option("--request-log", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append every request as a JSON line to this file.")
@friendly
def model_serve(scenario: Path, port: int, request_log: Path | None) -> None:
    """Serve a scenario as an OpenAI-compatible endpoint until Ctrl-C.

    \b
    Example:
      specrun model serve --scenario coordinator/scenarios/demo.yaml --port 8000
    """
    from coordinator.scripted_model import serve_forever

    try:
        serve_forever(scenario, port, request_log)
    except KeyboardInterrupt:
        return


@cli.command("explain-shell")
@click.argument("command", required=False)
@click.option("--batch", is_flag=True,
              help="Read one JSON string per line from stdin; write one JSON verdict per line.")
@json_option
def explain_shell(command: str | None, batch: bool, as_json: bool) -> None:
    """Say whether a shell command is read-only (a speculation may run it), and which
    rule decided. Needs no service; exits 0 for either verdict.

    \b
    Examples:
      specrun explain-shell "git log --oneline | head"
      specrun explain-shell --json "sed -i s/a/b/ x.txt"
    """
    import subprocess

    explain = [sys.executable, "-P", "-m", "worker.shell.explain"]
    if batch:
        sys.exit(subprocess.call([*explain, "--batch"]))
    if command is None:
        raise click.UsageError("give a COMMAND or --batch")
    if as_json:
        proc = subprocess.run([*explain, "--batch"], input=json.dumps(command) + "\n",
                              capture_output=True, text=True)
        if proc.returncode != 0 or not proc.stdout.strip():
            render.error(f"The shell classifier failed: {proc.stderr.strip()[-300:]}")
            sys.exit(EXIT_ERROR)
        sys.stdout.write(proc.stdout.strip().splitlines()[-1] + "\n")
        return
    code = subprocess.call([*explain, command])
    sys.exit(EXIT_OK if code in (0, 1) else EXIT_ERROR)


@cli.command("sandbox")
@click.option("--verify", is_flag=True,
              help="Attempt every escape inside the sandbox and report what held.")
@json_option
def sandbox(verify: bool, as_json: bool) -> None:
    """Show the layers of the sandbox that unapproved shell commands run in, or with
    --verify prove them live: a probe tries each escape (project metadata, $HOME read and
    write, TCP, a specrun socket, a signal, CPU/file/process limits, capabilities) and
    one line per check says what was tried and what happened. Needs no service; exits 1
    if a layer is missing or leaks.

    \b
    Examples:
      specrun sandbox
      specrun sandbox --verify
    """
    import subprocess

    args = [] if verify else ["--layers"]
    if as_json:
        args.append("--json")
    sys.exit(subprocess.call([sys.executable, "-P", "-m", "worker.contain.verify", *args]))


def main() -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    cli(prog_name="specrun")
