"""`specrun demo`: a whole session, played as a person would see it.

A copy of the sample project goes to a temp dir (a git repository, so `git diff` has
something to show); a service starts there in auto-edit mode on the embedded scripted
model, isolated from the user's own settings; then the story of the shipped scenario:

1. the person types "fix the failing test in tests/test_calc.py": model text and tool
   calls stream;
2. the suggestion "add a test for negative numbers" appears as grey text while its
   speculation runs in a worker's overlay; Tab applies it at once;
3. the pipelined suggestion "show me the diff" is already speculated; Tab again;
4. the next one, "commit this", is still being speculated when the person types
   "run the tests" instead: the service kills that worker (its pid is shown gone);
5. a table of time saved per accepted suggestion.

The service is stopped and the temp dir removed at the end, also on Ctrl-C or an error.
With ``--base-url`` the same prompts go to a real endpoint (best effort: what the model
suggests decides how far the story gets).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import psutil
import yaml
from rich.console import Console
from rich.live import Live
from rich.panel import Panel
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from coordinator.cli import approval, render
from coordinator.cli.client import ServiceClient, ServiceNotRunning, ServiceTimeout
from coordinator.cli.daemon import is_running, start_daemon, stop_daemon
from coordinator.cli.turns import stream_turn
from coordinator.pidfile import read_pid
from coordinator.settings import is_dashscope, load_settings
from protocol.control import (
    AcceptRequest,
    ApprovalNeeded,
    AskRequest,
    ControlReply,
    ErrorReply,
    SpeculationInfo,
    StatsReply,
    StatsRequest,
    SuggestionReply,
    SuggestionRequest,
    TurnEnded,
    WorkersReply,
    WorkersRequest,
)
from protocol.endpoints import Endpoints

SAMPLE_PROJECT = Path(__file__).resolve().parent / "sample_project"
SHIPPED_SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "demo.yaml"

FIRST_PROMPT = "fix the failing test in tests/test_calc.py"
TYPED_INSTEAD = "run the tests"
MAX_TABS = 2
SETTLED = ("completed", "boundary", "failed", "aborted", "accepted")
PROMPT = "❯ "


@dataclass
class DemoOptions:
    model: str | None = None
    fast_model: str | None = None
    base_url: str | None = None
    pace: float = 1.0
    as_json: bool = False
    debug: bool = False


@dataclass
class AcceptedRow:
    suggestion: str
    without_s: float  # the speculation's own run time: what a normal turn would have taken
    with_s: float  # Tab to "done", measured here
    files: tuple[str, ...]
    saved_s: float


@dataclass
class RejectedRow:
    suggestion: str
    typed: str
    status_when_typed: str
    worker_pid: int | None
    worker_gone: bool


@dataclass
class Session:
    accepted: list[AcceptedRow] = field(default_factory=list)
    rejected: RejectedRow | None = None
    stats: StatsReply | None = None


class DemoError(RuntimeError):
    pass


def _as_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_demo(options: DemoOptions) -> int:
    out = Console(quiet=True) if options.as_json else render.console
    # SIGTERM (a timeout, `kill`) cleans up like Ctrl-C: service stopped, temp dir removed.
    previous_term = signal.signal(signal.SIGTERM, _as_ctrl_c)
    try:
        return _run_demo(options, out)
    finally:
        signal.signal(signal.SIGTERM, previous_term)


def _run_demo(options: DemoOptions, out: Console) -> int:
    base = Path(tempfile.mkdtemp(prefix="specrun-demo-"))
    project = base / "calc"
    started = False
    try:
        _prepare_project(project)
        env, argv = _service_setup(base, project, options)
        _intro(out, project, options)
        with _step(out, "starting the service"):
            started = True
            start_daemon(project, argv, env=env)
        with ServiceClient(project, timeout_s=30.0) as client:
            session = Player(client, project, out, options.pace).play()
        if options.as_json:
            render.print_json(_summary_json(session))
        else:
            _show_summary(out, session)
        return 0
    except KeyboardInterrupt:
        render.err_console.print("[yellow]demo interrupted; cleaning up[/yellow]")
        return 1
    except (DemoError, ServiceNotRunning, ServiceTimeout, OSError) as exc:
        if options.debug:
            raise
        render.error(f"The demo stopped: {exc}",
                     "Run `specrun --debug demo` for details; nothing was left behind.")
        return 1
    except Exception as exc:
        if options.debug:
            raise
        render.error(f"The demo stopped: {exc}", "Run `specrun --debug demo` for details.")
        return 1
    finally:
        _cleanup(base, project, started)


def _cleanup(base: Path, project: Path, started: bool) -> None:
    """Stop the service (and wait for every process it had), then remove the temp dir;
    a second Ctrl-C cannot interrupt this."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    previous_term = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        if started:
            tree = _service_tree(project)
            with contextlib.suppress(Exception):
                stop_daemon(project)
            _, alive = psutil.wait_procs(tree, timeout=10)
            for proc in alive:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            for proc in tree:  # the service is our child: reap it
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(proc.pid, os.WNOHANG)
            if is_running(project):
                render.warning(f"the demo's service for {project} did not stop; "
                               f"stop it with `specrun --project {project} stop`.")
        shutil.rmtree(base, ignore_errors=True)
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)


def _service_tree(project: Path) -> list[psutil.Process]:
    pid = read_pid(Endpoints.for_project(project, create=False).pidfile)
    if pid is None:
        return []
    try:
        service = psutil.Process(pid)
        return [service, *service.children(recursive=True)]
    except psutil.Error:
        return []


# -- setup ---------------------------------------------------------------------------


def _git(project: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "specrun demo", "GIT_AUTHOR_EMAIL": "demo@localhost",
           "GIT_COMMITTER_NAME": "specrun demo", "GIT_COMMITTER_EMAIL": "demo@localhost"}
    proc = subprocess.run(["git", *args], cwd=project, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise DemoError(f"`git {' '.join(args)}` failed: {proc.stderr.strip()[:200]}")
    return proc.stdout


def _prepare_project(project: Path) -> None:
    if shutil.which("git") is None:
        raise DemoError("the demo needs git on PATH (for `git diff`); install git and retry")
    shutil.copytree(SAMPLE_PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    (project / ".gitignore").write_text(".specrun/\n__pycache__/\n.pytest_cache/\n")
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "calc: add and multiply")


def _service_setup(base: Path, project: Path, options: DemoOptions) -> tuple[dict[str, str],
                                                                           list[str]]:
    """The service's environment and flags: the user's own settings never leak in (own
    HOME, no model variables); `python` is this interpreter (for the tests it runs)."""
    home = base / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DASHSCOPE_", "SPECRUN_")) or k == "SPECRUN_RUNTIME_DIR"}
    env["HOME"] = str(home)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    argv = ["--approval-mode", "auto-edit"]
    if options.base_url:
        mine = load_settings(project, flags={"baseUrl": options.base_url})  # user's key
        key_var = "DASHSCOPE_API_KEY" if is_dashscope(options.base_url) else "OPENAI_API_KEY"
        if mine.api_key:
            env[key_var] = mine.api_key
        argv += ["--base-url", options.base_url]
        if options.model:
            argv += ["--model", options.model]
        if options.fast_model:
            argv += ["--fast", options.fast_model]
    else:
        scenario = base / "scenario.yaml"
        scenario.write_text(yaml.safe_dump(demo_scenario(), sort_keys=False, allow_unicode=True))
        argv += ["--scenario", str(scenario)]
    return env, argv


def demo_scenario() -> dict[str, Any]:
    """The shipped scenario, with one change: the model takes a few seconds to answer the
    speculation of "commit this", as a real model would, so that speculation is still
    running when the person types something else (and its worker is killed mid-flight)."""
    data: dict[str, Any] = yaml.safe_load(SHIPPED_SCENARIO.read_text(encoding="utf-8"))
    rules: list[dict[str, Any]] = data["rules"]
    commit = next((r for r in rules if r.get("name") == "commit, run git"), None)
    if commit is not None:
        slow = {**commit, "name": "demo: the commit speculation is slow",
                "when": {**commit["when"], "purpose": "speculation"},
                "reply": {**commit["reply"], "latency_ms": 4000}}
        rules.insert(rules.index(commit), slow)
    return data


# -- showing ---------------------------------------------------------------------------


@contextlib.contextmanager
def _step(out: Console, what: str) -> Iterator[None]:
    if out.is_terminal:
        with out.status(f"[bright_black]{what}…[/]", spinner="dots"):
            yield
    else:
        yield


def _intro(out: Console, project: Path, options: DemoOptions) -> None:
    model = (f"{options.model or 'the configured model'} at {options.base_url}"
             if options.base_url else "the embedded scripted model (no key, no network)")
    body = Text()
    body.append("A throw-away copy of a small Python project: ", style="bold")
    body.append(f"{project}\n")
    body.append("src/calc.py has a bug (add subtracts), so tests/test_calc.py fails.\n")
    body.append(f"Model: {model}. Approval mode: auto-edit.\n")
    body.append("Grey text is the predicted next prompt; its speculation runs in a worker "
                "process inside a copy-on-write overlay before you accept it.",
                style="bright_black")
    out.print(Panel(body, title="specrun demo", title_align="left", border_style="cyan"))


class Player:
    """Plays the session over one control connection."""

    def __init__(self, client: ServiceClient, project: Path, out: Console, pace: float) -> None:
        self.client = client
        self.project = project
        self.out = out
        self.pace = pace
        self.session = Session()

    def pause(self, seconds: float) -> None:
        if self.pace > 0:
            time.sleep(seconds * self.pace)

    def type_line(self, text: str) -> None:
        """The prompt and the text, typed a character at a time."""
        self.out.print()
        self.out.print(Text(PROMPT, style="bold cyan"), end="")
        if self.pace > 0 and self.out.is_terminal:
            for char in text:
                self.out.print(char, end="", markup=False)
                time.sleep(0.03 * self.pace)
            self.out.print()
        else:
            self.out.print(text, markup=False)

    # -- the story

    def play(self) -> Session:
        self.pause(0.8)
        self.type_line(FIRST_PROMPT)
        self.turn(AskRequest(req_id=self.client.next_id(), text=FIRST_PROMPT, can_confirm=True))
        for tabs in range(MAX_TABS + 1):
            reply = self.wait_for_suggestion()
            if reply is None:
                break
            if tabs == MAX_TABS:  # by now the person has something else in mind
                self.reject(reply, self.watch_speculation(reply, patience_s=1.2 * self.pace))
                break
            spec = self.watch_speculation(reply)
            if spec.status != "completed":
                self.reject(reply, spec)
                break
            self.tab(reply, spec)
        self.session.stats = self._stats()
        return self.session

    def wait_for_suggestion(self, timeout_s: float = 20.0) -> SuggestionReply | None:
        deadline = time.monotonic() + timeout_s
        with _step(self.out, "waiting for the next-prompt suggestion"):
            while time.monotonic() < deadline:
                reply = self.suggestion(wait=True)
                accepted = reply.speculation is not None and reply.speculation.status == "accepted"
                if reply.text is not None and reply.visible and not accepted:
                    return reply
                if reply.text is None and reply.suppressed_reason:
                    break
                time.sleep(0.05)
        why = f" ({reply.suppressed_reason})" if reply.suppressed_reason else ""
        self.out.print(Text(f"\n(no suggestion this time{why})", style="bright_black"))
        return None

    def suggestion(self, wait: bool = False) -> SuggestionReply:
        reply = self.client.request(SuggestionRequest(req_id=self.client.next_id(),
                                                      wait_visible=wait), timeout_s=45.0)
        if not isinstance(reply, SuggestionReply):
            raise DemoError(f"unexpected answer to a suggestion request: {reply}")
        return reply

    def ghost(self, text: str, spec: SpeculationInfo) -> None:
        self.out.print()
        line = Text(PROMPT, style="bold cyan")
        line.append(text, style="bright_black")
        self.out.print(line)
        if spec.worker_pid:
            where = self._overlay_of(spec.worker_pid)
            self.out.print(Text(f"  speculating in worker {spec.worker_pid}"
                                + (f" (overlay {where})" if where else ""),
                                style="bright_black"))

    def watch_speculation(self, reply: SuggestionReply, patience_s: float | None = None,
                          timeout_s: float = 60.0) -> SpeculationInfo:
        """Show the ghost text and follow its speculation until it settles, or until the
        person's ``patience_s`` runs out (they type before it is done)."""
        assert reply.text is not None
        spec = reply.speculation or _no_speculation()
        self.ghost(reply.text, spec)
        deadline = time.monotonic() + timeout_s
        typed_at = None if patience_s is None else time.monotonic() + patience_s
        live = Live(self._spec_view(spec), console=self.out, transient=not self.out.is_terminal,
                    refresh_per_second=12)
        with live:
            while spec.status not in SETTLED and spec.id and time.monotonic() < deadline:
                if typed_at is not None and time.monotonic() >= typed_at:
                    break
                time.sleep(0.05)
                now = self.suggestion()
                if now.text != reply.text or now.speculation is None:
                    break
                spec = now.speculation
                live.update(self._spec_view(spec))
        if not self.out.is_terminal:
            self.out.print(self._spec_view(spec))
        return spec

    def _spec_view(self, spec: SpeculationInfo) -> Any:
        line = render.speculation_line(spec)
        if spec.status == "running" and self.out.is_terminal:
            return Spinner("dots", text=line, style="yellow")
        return line

    def _overlay_of(self, pid: int) -> str | None:
        reply = self.client.request(WorkersRequest(req_id=self.client.next_id()))
        if isinstance(reply, WorkersReply):
            for worker in reply.workers:
                if worker.pid == pid:
                    return worker.overlay_dir
        return None

    def tab(self, reply: SuggestionReply, spec: SpeculationInfo) -> None:
        assert reply.text is not None
        self.pause(0.9)
        self.out.print(Text("  ⇥ Tab", style="bold"))
        ended, elapsed = self.turn(AcceptRequest(req_id=self.client.next_id(), method="tab"),
                                   show_user=False)
        if ended is not None and ended.reason == "accepted":
            files = tuple(spec.files_written)
            self.session.accepted.append(AcceptedRow(
                reply.text, spec.elapsed_s, elapsed, files, max(0.0, spec.elapsed_s - elapsed)))
            changed = _git(self.project, "status", "--short").strip()
            if changed:
                self.out.print(Text("  on disk now (git status --short):", style="bright_black"))
                for line in changed.splitlines():
                    self.out.print(Text(f"    {line}", style="bright_black"))

    def reject(self, reply: SuggestionReply, spec: SpeculationInfo) -> None:
        """The person types something else; the service kills the speculation's worker."""
        assert reply.text is not None
        pid = spec.worker_pid
        alive_before = pid is not None and _alive(pid)
        self.pause(0.6)
        self.type_line(TYPED_INSTEAD)
        self.turn(AskRequest(req_id=self.client.next_id(), text=TYPED_INSTEAD, can_confirm=True))
        gone = pid is not None and _wait_gone(pid)
        if pid is not None:
            how = "killed" if alive_before else "already exited"
            mark = "✓" if gone else "✗"
            self.out.print(Text(
                f"{mark} typed something else: the speculation of {reply.text!r} was aborted; "
                f"worker {pid} {how}, {'gone' if gone else 'STILL ALIVE'}; overlay removed",
                style="green" if gone else "red",
            ))
        self.session.rejected = RejectedRow(reply.text, TYPED_INSTEAD, spec.status, pid, gone)

    # -- one turn

    def turn(self, request: AskRequest | AcceptRequest,
             show_user: bool = True) -> tuple[TurnEnded | None, float]:
        """The turn as ``specrun chat`` shows it, and how long it took. Ctrl-C cancels
        the turn (the service is told), then stops the demo."""
        printer = render.TurnPrinter(self.out, show_user=show_user)
        started = time.monotonic()
        outcome = stream_turn(self.client, request, printer, self.approve)
        if outcome.interrupted:
            raise KeyboardInterrupt
        if isinstance(outcome.end, ErrorReply):
            raise DemoError(outcome.end.message)
        return outcome.ended, time.monotonic() - started

    def approve(self, reply: ApprovalNeeded) -> bool:
        """The demo's person says yes to running the tests, and no to anything else;
        the question and the answer show as the prompt would show them."""
        command = str(reply.call.args().get("command", ""))
        yes = reply.call.name == "run_shell_command" and command.split()[:3] in (
            ["python", "-m", "pytest"], ["pytest"], ["python3", "-m", "pytest"])
        self.pause(0.5)
        self.out.print(Text(approval.answered(reply, yes), style="bold"))
        return yes

    def _stats(self) -> StatsReply | None:
        reply: ControlReply = self.client.request(StatsRequest(req_id=self.client.next_id()))
        return reply if isinstance(reply, StatsReply) else None


def _no_speculation() -> SpeculationInfo:
    # A stand-in for the demo's display only, never sent or decoded: "none" is no status.
    return SpeculationInfo(id="", status="none",  # type: ignore[arg-type]
                           turns=0, tool_uses=0, files_written=(),
                           boundary_reason=None, elapsed_s=0.0, worker_pid=None,
                           pipelined_suggestion=None)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(pid: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# -- the end -------------------------------------------------------------------------------


def _show_summary(out: Console, session: Session) -> None:
    out.print()
    table = Table(title="Time saved by speculation", title_justify="left", header_style="bold")
    table.add_column("accepted suggestion")
    table.add_column("without speculation", justify="right")
    table.add_column("with it (Tab → done)", justify="right")
    table.add_column("saved", justify="right", style="green")
    for row in session.accepted:
        table.add_row(row.suggestion, f"{row.without_s:.2f} s", f"{row.with_s * 1000:.0f} ms",
                      f"{row.saved_s:.2f} s")
    if session.accepted:
        total = sum(r.saved_s for r in session.accepted)
        table.add_row("[bold]total[/bold]", f"{sum(r.without_s for r in session.accepted):.2f} s",
                      f"{sum(r.with_s for r in session.accepted) * 1000:.0f} ms",
                      f"[bold]{total:.2f} s[/bold]")
    out.print(table)
    out.print(Text(
        "\"without\" is how long the speculation took to run the same prompt in the background "
        "(an accepted prompt cannot be run again as a normal turn to compare); \"with\" is what "
        "the CLI measured from Tab to the end of the turn.", style="bright_black"))
    if session.rejected is not None:
        r = session.rejected
        out.print(Text(
            f"rejected: {r.suggestion!r} (speculation {r.status_when_typed} when you typed "
            f"{r.typed!r}); worker {r.worker_pid} {'gone' if r.worker_gone else 'still alive'}",
            style="bright_black"))
    if session.stats is not None:
        s = session.stats
        out.print(Text(
            f"stats: {s.suggestions_shown} suggestions shown, {s.suggestions_accepted} accepted, "
            f"{s.suggestions_ignored} ignored; speculations: {s.speculations_completed} completed, "
            f"{s.speculations_aborted} aborted", style="bright_black"))
    out.print(Text("The service is stopped and the temp project removed.", style="bright_black"))


def _summary_json(session: Session) -> dict[str, Any]:
    return {
        "accepted": [
            {"suggestion": r.suggestion, "without_speculation_s": round(r.without_s, 4),
             "with_speculation_s": round(r.with_s, 4), "saved_s": round(r.saved_s, 4),
             "files": list(r.files)}
            for r in session.accepted
        ],
        "rejected": None if session.rejected is None else {
            "suggestion": session.rejected.suggestion, "typed": session.rejected.typed,
            "speculation_status": session.rejected.status_when_typed,
            "worker_pid": session.rejected.worker_pid,
            "worker_gone": session.rejected.worker_gone,
        },
        "stats": msgspec.to_builtins(session.stats) if session.stats is not None else None,
    }
