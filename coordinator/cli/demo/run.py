"""`specrun demo`: a whole session, played as a person would see it.

A copy of the sample project goes to a temp dir (a git repository, so `git diff` has
something to show); a service starts there in auto-edit mode on the embedded scripted
model, isolated from the user's own settings; then the story of the shipped scenario:

1. the person types "fix the failing test in tests/test_calc.py": model text and tool
   calls stream;
2. three ranked guesses of the next prompt appear (the project sets
   ``speculationBranches`` to 3), each speculated in its own worker's overlay: the top
   one, "run the tests", stops at the shell boundary; the person moves to the second
   (Down in ``specrun chat``), "add a test for negative numbers", whose speculation
   completed, and Tab applies it at once (``accept --branch 2``; the others are killed);
3. the pipelined suggestion "show me the diff" is being speculated while the person
   types its beginning, "show me": the speculation keeps running (same worker), and
   Tab takes it once it is done;
4. the next one, "commit this", is still being speculated when the person types
   "run the tests" instead: the first letter already tells the service the text no
   longer leads there, and it kills that worker (its pid is shown gone);
5. the person changes their mind about the new test: ``specrun undo --list`` shows every
   accept and turn that wrote files, and ``specrun undo`` takes the last one back (the
   test file it created is removed; git's index is untouched);
6. a table of time saved per accepted suggestion.

The service is stopped and the temp dir removed at the end, also on Ctrl-C or an error.
With ``--base-url`` the same prompts go to a real endpoint (best effort: what the model
suggests decides how far the story gets).
"""

from __future__ import annotations

import contextlib
import json
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
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from coordinator.boundary_text import describe_boundary
from coordinator.cli import approval, render
from coordinator.cli.client import ServiceClient, ServiceNotRunning, ServiceTimeout
from coordinator.cli.daemon import is_running, start_daemon, stop_own_daemon
from coordinator.cli.turns import stream_turn
from coordinator.settings import is_dashscope, load_settings
from coordinator.user_state import project_state_path
from overlay.kernel import libc
from protocol.text.branch_number import branch_name, branch_option
from protocol.text.inert_text import inert
from protocol.text.secret_text import without_password
from protocol.wire.control import (
    AcceptRequest,
    ApprovalNeeded,
    AskRequest,
    Branch,
    ControlReply,
    ErrorReply,
    SpeculationInfo,
    StatsReply,
    StatsRequest,
    SuggestionReply,
    SuggestionRequest,
    TurnEnded,
    TypedRequest,
    UndoReply,
    UndoRequest,
    WorkersReply,
    WorkersRequest,
)

SAMPLE_PROJECT = Path(__file__).resolve().parent / "sample_project"
SHIPPED_SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "demo.yaml"

FIRST_PROMPT = "fix the failing test in tests/test_calc.py"
TYPED_INSTEAD = "run the tests"
MAX_TABS = 2
BRANCHES = 3  # speculationBranches in the demo project's settings
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
    verbose: bool = False  # worker pids and overlay paths too (`specrun --verbose demo`)


@dataclass
class AcceptedRow:
    suggestion: str
    without_s: float  # the speculation's own run time: what a normal turn would have taken
    with_s: float  # Tab to "done", measured here
    files: tuple[str, ...]
    saved_s: float


@dataclass
class BranchesRow:
    """The round with ranked alternatives: what was offered, and which one was taken."""

    offered: list[tuple[int, str, str]]  # rank, text, speculation status
    taken_rank: int | None


@dataclass
class TypedPrefixRow:
    """Typing the beginning of a suggestion while it was being speculated."""

    suggestion: str
    typed: str
    status_when_typed: str
    worker_pid: int | None
    kept: bool  # the same speculation still there (not aborted) once typed


@dataclass
class RejectedRow:
    suggestion: str
    typed: str
    status_when_typed: str
    worker_pid: int | None
    worker_gone: bool


@dataclass
class UndoneRow:
    """``specrun undo`` at the end: the checkpoints there were, what it did to each file."""

    checkpoints: list[tuple[int, str, str]]  # (turn, kind, prompt)
    files: list[tuple[str, str]]  # (path, action)
    undone: bool


@dataclass
class Session:
    accepted: list[AcceptedRow] = field(default_factory=list)
    branches: BranchesRow | None = None
    typed_prefix: TypedPrefixRow | None = None
    rejected: RejectedRow | None = None
    undone: UndoneRow | None = None
    stats: StatsReply | None = None


class DemoError(RuntimeError):
    pass


def _as_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_demo(options: DemoOptions) -> int:
    out = Console(quiet=True) if options.as_json else render.console
    # SIGTERM (a timeout, `kill`) and SIGHUP (the terminal closed) clean up like Ctrl-C:
    # service stopped, temp dir removed.
    previous = {sig: signal.signal(sig, _as_ctrl_c) for sig in (signal.SIGTERM, signal.SIGHUP)}
    # The demo adopts what its service leaves behind: a service stopped while it starts
    # dies before its fork server and workers do, and they must not outlive the clean-up.
    with contextlib.suppress(OSError):
        libc.prctl(libc.PR_SET_CHILD_SUBREAPER, 1, what="prctl(PR_SET_CHILD_SUBREAPER)")
    try:
        return _run_demo(options, out)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
            session = Player(client, project, out, options.pace, options.verbose).play()
        if options.as_json:
            render.print_json(_summary_json(session))
        else:
            _show_summary(out, session, options.verbose)
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
    previous = {sig: signal.signal(sig, signal.SIG_IGN)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        if started:
            stop_own_daemon(project)
            if is_running(project):
                render.warning(f"the demo's service for {project} did not stop; "
                               f"stop it with `specrun --project {project} stop`.")
            _end_descendants(within_s=5.0)
        if not _remove_tree(base, within_s=5.0):
            render.warning(f"the demo's temporary directory {base} could not be removed.")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _end_descendants(within_s: float) -> None:
    """Wait for (then kill) and reap every process still below the demo. The demo is a
    subreaper, so that includes the fork server and workers of a service that died first
    (stopped while it started: no pidfile names it then), which could otherwise still write
    below the temporary directory after it is removed (the project's state, their HOME)."""
    with contextlib.suppress(psutil.Error):
        rest = psutil.Process().children(recursive=True)
        _, alive = psutil.wait_procs(rest, timeout=within_s)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(alive, timeout=2)


def _remove_tree(base: Path, within_s: float) -> bool:
    """Remove ``base``, again while something still writes in it: a service stopped while
    it was starting (Ctrl-C then) has no pidfile to be found by, and its fork server and
    workers, which die with it, can still write below ``base`` (its HOME, the project's
    state) for a moment after it is gone."""
    deadline = time.monotonic() + within_s
    while True:
        shutil.rmtree(base, ignore_errors=True)
        if not base.exists():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


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


def _own_settings(base: Path, project: Path) -> Path:
    """The demo's settings for its sample copy, as `config set` would keep them: in the
    state directory of the demo's own (``XDG_STATE_HOME`` of its service), never yours."""
    settings = project_state_path(project, "settings.json", state_root=base / "state" / "specrun")
    settings.parent.mkdir(parents=True, mode=0o700)
    settings.write_text(json.dumps({"speculationBranches": BRANCHES}, indent=2) + "\n")
    return settings


def _service_setup(base: Path, project: Path, options: DemoOptions) -> tuple[dict[str, str],
                                                                           list[str]]:
    """The service's environment and flags: the user's own settings never leak in (own
    HOME, no model variables); `python` is this interpreter (for the tests it runs)."""
    home = base / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DASHSCOPE_", "SPECRUN_")) or k == "SPECRUN_RUNTIME_DIR"}
    env["HOME"] = str(home)
    env["XDG_STATE_HOME"] = str(base / "state")
    _own_settings(base, project)
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
    """The shipped scenario, with two changes: the model takes a few seconds to answer the
    speculation of "commit this", as a real model would, so that speculation is still
    running when the person types something else (and its worker is killed mid-flight);
    and two to answer the speculation of "show me the diff" after the new test, so it
    is still running while the person types its beginning."""
    data: dict[str, Any] = yaml.safe_load(SHIPPED_SCENARIO.read_text(encoding="utf-8"))
    rules: list[dict[str, Any]] = data["rules"]
    diff = next((r for r in rules if r.get("name") == "diff, run git"), None)
    if diff is not None:
        # Only the pipelined one: the history of the guess "show me the diff" right after
        # the fix has no new test in it, and that one should settle quickly.
        slow_diff = {**diff, "name": "demo: the pipelined diff speculation is slow",
                     "when": {**diff["when"], "purpose": "speculation",
                              "prompt_contains": "Added tests/test_calc_negative.py"},
                     "reply": {**diff["reply"], "latency_ms": 2000}}
        rules.insert(rules.index(diff), slow_diff)
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
    model = (f"{options.model or 'the configured model'} at {without_password(options.base_url)}"
             if options.base_url else "the embedded scripted model (no key, no network)")
    body = Text()
    body.append("A throw-away copy of a small Python project: ", style="bold")
    body.append(f"{project}\n")
    body.append("src/calc.py has a bug (add subtracts), so tests/test_calc.py fails.\n")
    body.append(f"Model: {model}. Approval mode: auto-edit.\n")
    body.append("Grey text is the predicted next prompt; its speculation runs in a worker "
                "process inside a copy-on-write overlay before you accept it. The project's "
                f"settings ask for up to {BRANCHES} ranked guesses at once "
                "(speculationBranches), each speculated in its own worker.",
                style="bright_black")
    out.print(Panel(body, title="specrun demo", title_align="left", border_style="cyan"))


class Player:
    """Plays the session over one control connection."""

    def __init__(self, client: ServiceClient, project: Path, out: Console, pace: float,
                 verbose: bool = False) -> None:
        self.client = client
        self.project = project
        self.out = out
        self.pace = pace
        self.verbose = verbose  # name the worker processes and overlays by pid and path
        self.session = Session()

    def pause(self, seconds: float) -> None:
        if self.pace > 0:
            time.sleep(seconds * self.pace)

    def type_line(self, text: str, tell: bool = False, rest: str = "") -> SuggestionReply | None:
        """The prompt and the text, typed a character at a time. ``tell``: as ``chat``
        does, tell the service after each character what is typed so far, and return
        its last answer. ``rest``: grey text after the typed text (the suggestion's)."""
        self.out.print()
        self.out.print(Text(PROMPT, style="bold cyan"), end="")
        answer: SuggestionReply | None = None
        slow = self.pace > 0 and self.out.is_terminal
        if slow or tell:
            for i, char in enumerate(text, 1):
                if slow:
                    self.out.print(Text(inert(char, multiline=False)), end="")
                    time.sleep(0.03 * self.pace)
                if tell:
                    answer = self.typed(text[:i]) or answer
            if not slow:
                self.out.print(Text(inert(text, multiline=False)), end="")
        else:
            self.out.print(Text(inert(text, multiline=False)), end="")
        # the rest of the suggestion in grey, after the cursor (a bar: plain text has no grey)
        self.out.print(Text(f"▏{inert(rest, multiline=False)}", style="bright_black")
                       if rest else "")
        return answer

    def typed(self, text: str) -> SuggestionReply | None:
        """Tell the service what is typed; its answer (None from a service that does not
        follow typing: it refuses the request)."""
        reply = self.client.request(TypedRequest(req_id=self.client.next_id(), text=text))
        if isinstance(reply, ErrorReply):
            return None
        if not isinstance(reply, SuggestionReply):
            raise DemoError(f"unexpected answer to what was typed: {reply}")
        return reply

    # -- the story

    def play(self) -> Session:
        self.pause(0.8)
        self.type_line(FIRST_PROMPT)
        self.turn(AskRequest(req_id=self.client.next_id(), text=FIRST_PROMPT, can_confirm=True))
        for tabs in range(MAX_TABS + 1):
            reply = self.wait_for_suggestion()
            if reply is None:
                break
            assert reply.text is not None
            if tabs == MAX_TABS:  # by now the person has something else in mind
                self.reject(reply, self.watch_speculation(reply, patience_s=1.2 * self.pace))
                break
            branches = _branches(reply)
            if len(branches) > 1 and self.session.branches is None:
                branch = self.pick_branch(reply, branches)
                if branch is None or branch.speculation is None:
                    self.reject(reply, reply.speculation or _no_speculation())
                    break
                text, spec, rank = branch.text, branch.speculation, branch.rank
            elif self.session.typed_prefix is None:
                text, spec, rank = reply.text, self.type_prefix(reply), branches[0].rank
            else:
                text, spec, rank = reply.text, self.watch_speculation(reply), branches[0].rank
            if spec.status != "completed":
                self.reject(reply, spec)
                break
            self.tab(text, spec, rank)
        if self.session.accepted:
            self.session.undone = _undo_step(self)
        self.session.stats = self._stats()
        return self.session

    def pick_branch(self, reply: SuggestionReply, branches: list[Branch]) -> Branch | None:
        """Several ranked guesses: show them all while their speculations run, then take
        the best-ranked one that completed, moving to it as Down does in ``chat``."""
        assert reply.text is not None
        self.ghost(reply.text, reply.speculation or _no_speculation())
        self.out.print(Text(f"  {len(branches) - 1} more guesses, each speculated in its own "
                            "worker (Down/Up in `specrun chat`):", style="bright_black"))
        branches = self.watch_branches(branches)
        done = [b for b in branches if b.speculation and b.speculation.status == "completed"]
        offered = [(b.rank, b.text, str(b.speculation.status) if b.speculation else "none")
                   for b in branches]
        taken = done[0] if done else None
        self.session.branches = BranchesRow(offered, taken.rank if taken else None)
        if taken is None or taken.speculation is None:
            return None
        if taken.rank != branches[0].rank:
            self.pause(0.6)
            moves = next(i for i, b in enumerate(branches) if b.rank == taken.rank)
            top = branches[0].speculation
            why = (f"the top guess {_status_words(top)}" if top is not None
                   else "the top guess was not speculated")
            self.out.print(Text(f"  {'↓ ' * moves}Down: {why}; this one ran to the end",
                                style="bold"))
            line = Text(PROMPT, style="bold cyan")
            line.append(inert(taken.text, multiline=False), style="bright_black")
            self.out.print(line)
            self.out.print(render.speculation_line(taken.speculation))
        return taken

    def watch_branches(self, branches: list[Branch], timeout_s: float = 60.0) -> list[Branch]:
        """Follow every alternative's speculation until all settled (or another suggestion
        came); the alternatives as they stand then."""
        texts = [b.text for b in branches]
        deadline = time.monotonic() + timeout_s
        live = Live(self._branches_view(branches), console=self.out,
                    transient=not self.out.is_terminal, refresh_per_second=12)
        with live:
            while time.monotonic() < deadline and not all(
                    b.speculation is None or b.speculation.status in SETTLED for b in branches):
                time.sleep(0.05)
                now = _branches(self.suggestion())
                if [b.text for b in now] != texts:
                    break
                branches = now
                live.update(self._branches_view(branches))
        if not self.out.is_terminal:
            self.out.print(self._branches_view(branches))
        return branches

    def _branches_view(self, branches: list[Branch]) -> Any:
        top = branches[0].speculation
        parts: list[Any] = [self._spec_view(top) if top is not None else Text("")]
        parts += [render.branch_lines(b) for b in branches[1:]]
        return Group(*parts)

    def type_prefix(self, reply: SuggestionReply) -> SpeculationInfo:
        """The person starts typing the suggestion itself, while it is still being
        speculated: each keystroke is told to the service, which keeps the speculation
        (same id, same worker) as long as the text is how the suggestion begins."""
        assert reply.text is not None
        before = reply.speculation or _no_speculation()
        self.ghost(reply.text, before)
        words = reply.text.split()
        typed = " ".join(words[: max(1, len(words) // 2)])
        self.pause(0.6)
        answer = self.type_line(typed, tell=True, rest=reply.text[len(typed):]) or self.suggestion()
        now = answer.speculation if answer is not None else None
        kept = (answer is not None and answer.text == reply.text and now is not None
                and now.id == before.id and now.status != "aborted")
        pid = before.worker_pid
        alive = pid is not None and _alive(pid)
        self.session.typed_prefix = TypedPrefixRow(reply.text, typed, before.status, pid,
                                                   kept)
        if kept and now is not None:
            where = (f"{_worker(self.verbose, pid)} still alive" if alive
                     else "its worker already done")
            self.out.print(Text(f"  ✓ {typed!r} is how the suggestion begins: its speculation "
                                f"is kept ({_status_words(now)}, {where})", style="green"))
        else:
            self.out.print(Text(f"  ✗ typing {typed!r} lost the speculation", style="red"))
            return now or before
        return self.watch_speculation(reply, show_ghost=False)

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
        line.append(inert(text, multiline=False), style="bright_black")
        self.out.print(line)
        if spec.worker_pid:
            where = self._overlay_of(spec.worker_pid) if self.verbose else None
            worker = f"worker {spec.worker_pid}" if self.verbose else "its own worker"
            self.out.print(Text(f"  speculating in {worker}"
                                + (f" (overlay {where})" if where else ""),
                                style="bright_black"))

    def watch_speculation(self, reply: SuggestionReply, patience_s: float | None = None,
                          timeout_s: float = 60.0, show_ghost: bool = True) -> SpeculationInfo:
        """Show the ghost text and follow its speculation until it settles, or until the
        person's ``patience_s`` runs out (they type before it is done)."""
        assert reply.text is not None
        spec = reply.speculation or _no_speculation()
        if show_ghost:
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

    def tab(self, text: str, spec: SpeculationInfo, rank: int = 0) -> None:
        """Tab on the alternative of ``rank`` (the one shown)."""
        self.pause(0.9)
        how = f"  (specrun accept {branch_option(rank)})" if rank else ""
        self.out.print(Text(f"  ⇥ Tab{how}", style="bold"))
        ended, elapsed = self.turn(
            AcceptRequest(req_id=self.client.next_id(), method="tab", index=rank),
            show_user=False)
        if ended is not None and ended.reason == "accepted":
            files = tuple(spec.files_written)
            self.session.accepted.append(AcceptedRow(
                text, spec.elapsed_s, elapsed, files, max(0.0, spec.elapsed_s - elapsed)))
            changed = _git(self.project, "status", "--short").strip()
            if changed:
                self.out.print(Text("  on disk now (git status --short):", style="bright_black"))
                for line in changed.splitlines():
                    self.out.print(Text(f"    {inert(line)}", style="bright_black"))

    def reject(self, reply: SuggestionReply, spec: SpeculationInfo) -> None:
        """The person types something else; the service kills the speculation's worker."""
        assert reply.text is not None
        pid = spec.worker_pid
        alive_before = pid is not None and _alive(pid)
        self.pause(0.6)
        answer = self.type_line(TYPED_INSTEAD, tell=True)
        if answer is not None and answer.text != reply.text:
            self.out.print(Text(f"  {TYPED_INSTEAD[0]!r} is not how {reply.text!r} begins: "
                                "the service dropped it at the first letter",
                                style="bright_black"))
        self.turn(AskRequest(req_id=self.client.next_id(), text=TYPED_INSTEAD, can_confirm=True,
                             accept_method="typed"))
        gone = pid is not None and _wait_gone(pid)
        if pid is not None:
            how = "killed" if alive_before else "already exited"
            mark = "✓" if gone else "✗"
            self.out.print(Text(
                f"{mark} typed something else: the speculation of {reply.text!r} was aborted; "
                f"{_worker(self.verbose, pid)} {how}, {'gone' if gone else 'STILL ALIVE'}; "
                "overlay removed",
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


def _undo_step(player: Player) -> UndoneRow | None:
    """The person changes their mind: the checkpoints listed, the last one taken back."""
    from coordinator.cli.undo_view import undo_text

    client, out = player.client, player.out
    player.pause(0.8)
    out.print(Text("$ specrun undo --list", style="bold"))
    listed = client.request(UndoRequest(req_id=client.next_id(), list_only=True))
    if not isinstance(listed, UndoReply):
        return None
    out.print(Text(undo_text(listed)))
    player.pause(0.8)
    out.print(Text("$ specrun undo", style="bold"))
    done = client.request(UndoRequest(req_id=client.next_id()), timeout_s=60.0)
    if not isinstance(done, UndoReply):
        return None
    out.print(Text(undo_text(done)))
    changed = _git(player.project, "status", "--short").strip()
    out.print(Text("  on disk now (git status --short):", style="bright_black"))
    for line in (changed or "(nothing changed but the fix)").splitlines():
        out.print(Text(f"    {inert(line)}", style="bright_black"))
    return UndoneRow(
        [(c.turn, c.kind, c.prompt) for c in listed.checkpoints],
        [(f.path, f.action) for f in done.files], done.undone)


def _branches(reply: SuggestionReply) -> list[Branch]:
    """The live alternatives, best first (one, from a service without branches)."""
    if reply.branches:
        return list(reply.branches)
    if reply.text is None:
        return []
    return [Branch(0, reply.text, reply.speculation, reply.speculation_skipped)]


def _status_words(spec: SpeculationInfo) -> str:
    if spec.status == "boundary":
        return describe_boundary(spec.boundary)
    return {"running": "still running", "completed": "completed"}.get(spec.status, spec.status)


def _no_speculation() -> SpeculationInfo:
    # A stand-in for the demo's display only, never sent or decoded: "none" is no status.
    return SpeculationInfo(id="", status="none",  # type: ignore[arg-type]
                           turns=0, tool_uses=0, files_written=(),
                           boundary_reason=None, elapsed_s=0.0, worker_pid=None,
                           pipelined_suggestion=None)


def _worker(verbose: bool, pid: int | None) -> str:
    """A speculation's worker as the person reads it: by pid only with --verbose."""
    return f"worker {pid}" if verbose and pid is not None else "its worker"


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


def _show_summary(out: Console, session: Session, verbose: bool = False) -> None:
    out.print()
    table = Table(title="Time saved by speculation", title_justify="left", header_style="bold")
    table.add_column("accepted suggestion")
    table.add_column("without speculation", justify="right")
    table.add_column("with it (Tab → done)", justify="right")
    table.add_column("saved", justify="right", style="green")
    for row in session.accepted:
        table.add_row(Text(inert(row.suggestion, multiline=False)), f"{row.without_s:.2f} s",
                      f"{row.with_s * 1000:.0f} ms", f"{row.saved_s:.2f} s")
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
    if session.branches is not None:
        b = session.branches
        taken = next((text for rank, text, _ in b.offered if rank == b.taken_rank), None)
        offered = ", ".join(f"{text!r} ({status})" for _, text, status in b.offered)
        out.print(Text(f"alternatives: {offered}; took "
                       + (f"{taken!r} ({branch_name(b.taken_rank)})"
                          if taken is not None and b.taken_rank is not None else "none"),
                       style="bright_black"))
    if session.typed_prefix is not None:
        t = session.typed_prefix
        out.print(Text(
            f"typed {t.typed!r} of {t.suggestion!r} while it was {t.status_when_typed}: "
            f"speculation {'kept' if t.kept else 'lost'}", style="bright_black"))
    if session.rejected is not None:
        r = session.rejected
        out.print(Text(
            f"rejected: {r.suggestion!r} (speculation {r.status_when_typed} when you typed "
            f"{r.typed!r}); {f'worker {r.worker_pid}' if verbose else 'its worker'} "
            f"{'gone' if r.worker_gone else 'still alive'}",
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
        "branches": None if session.branches is None else {
            "offered": [{"rank": rank, "text": text, "speculation_status": status}
                        for rank, text, status in session.branches.offered],
            "taken_rank": session.branches.taken_rank,
        },
        "typed_prefix": None if session.typed_prefix is None else {
            "suggestion": session.typed_prefix.suggestion, "typed": session.typed_prefix.typed,
            "speculation_status": session.typed_prefix.status_when_typed,
            "worker_pid": session.typed_prefix.worker_pid,
            "speculation_kept": session.typed_prefix.kept,
        },
        "rejected": None if session.rejected is None else {
            "suggestion": session.rejected.suggestion, "typed": session.rejected.typed,
            "speculation_status": session.rejected.status_when_typed,
            "worker_pid": session.rejected.worker_pid,
            "worker_gone": session.rejected.worker_gone,
        },
        "undo": None if session.undone is None else {
            "checkpoints": [{"turn": turn, "kind": kind, "prompt": prompt}
                            for turn, kind, prompt in session.undone.checkpoints],
            "files": [{"path": path, "action": action}
                      for path, action in session.undone.files],
            "undone": session.undone.undone,
        },
        "stats": msgspec.to_builtins(session.stats) if session.stats is not None else None,
    }
