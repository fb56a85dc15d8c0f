"""``scripts/real_model``: the demo's story against a real small model served on this machine.

Gets the model and ``llama-server`` (``_local_model.py``), serves the model on 127.0.0.1
with one slot, puts a recording proxy in front of it (``_model_recorder.py``), starts a
specrun service on a copy of the demo's sample project pointed at the proxy, and plays:
the demo's first prompt, then for each round the suggestion specrun makes, its speculation
followed to its end, and Tab. It prints a table: per prompt the model's time, the tool calls
read from text (and native ones), the suggestion made after it, its speculation's status
and what Tab applied.

Opt-in and slow (minutes: the model reads ~40 prompt tokens and writes ~15 a second on
2 cores); not one of the README's two commands and not in CI. ``--record DIR`` keeps every
exchange with the model (the suite's recorded streams came from such a run).
"""

from __future__ import annotations

import argparse
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

import httpx
from rich.console import Console
from rich.markup import escape
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # scripts/ is sys.path[0] when run; the project may not be
    sys.path.insert(1, str(ROOT))

from _local_model import (  # noqa: E402
    MODEL_NAME,
    SetupError,
    cache_dir,
    ensure_model,
    ensure_server,
    serve,
)
from _model_recorder import Exchange, Recorder, recording_proxy  # noqa: E402

from coordinator.cli import render  # noqa: E402
from coordinator.cli.client import ServiceClient  # noqa: E402
from coordinator.cli.daemon import start_daemon, stop_own_daemon  # noqa: E402
from coordinator.cli.demo.run import FIRST_PROMPT, SAMPLE_PROJECT  # noqa: E402
from coordinator.cli.turns import stream_turn  # noqa: E402
from coordinator.user_state import project_state_path  # noqa: E402
from protocol.model.text_tool_calls import recover_tool_calls  # noqa: E402
from protocol.wire.chat import ToolSpec  # noqa: E402
from protocol.wire.control import (  # noqa: E402
    AcceptRequest,
    ApprovalNeeded,
    AskRequest,
    SpeculationInfo,
    SuggestionReply,
    SuggestionRequest,
)

SETTLED = ("completed", "boundary", "failed", "aborted", "accepted")
TAB_TAKES = ("completed", "boundary")  # what Tab applies (a boundary: then the chat goes on)
PROJECT_SETTINGS = {
    "speculationBranches": 1,  # one slot: alternatives would only queue behind each other
    "enableMemory": False,  # no recall requests: they would queue in the one slot too
    "maxTokensSuggestion": 96,
}


@dataclass
class Calls:
    native: int = 0
    from_text: int = 0

    def add(self, other: Calls) -> None:
        self.native += other.native
        self.from_text += other.from_text

    def __str__(self) -> str:
        return f"{self.from_text} from text" + (f", {self.native} native" if self.native else "")


@dataclass
class Row:
    prompt: str
    how: str  # typed | Tab
    model_s: float = 0.0
    calls: Calls = field(default_factory=Calls)
    first_byte_s: float = 0.0
    suggestion: str | None = None
    suggestion_note: str = ""
    speculation: str = "-"
    spec_calls: Calls = field(default_factory=Calls)
    tab: str = "-"
    turn_end: str = ""


def calls_in(exchange: Exchange) -> Calls:
    """Tool calls the endpoint returned, and those the client reads from its text."""
    request = exchange.request or {}
    offered = tuple(
        ToolSpec(f["name"], f.get("description", ""), f.get("parameters", {}))
        for t in request.get("tools", [])
        if isinstance(t, dict) and isinstance(f := t.get("function"), dict) and "name" in f
    )
    text, native = [], 0
    for event in exchange.answer_events():
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                if (call.get("function") or {}).get("name"):
                    native += 1
    if native or not offered:
        return Calls(native=native)
    _, found = recover_tool_calls("".join(text), offered)
    return Calls(from_text=len(found))


def _git(project: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "specrun", "GIT_AUTHOR_EMAIL": "real@localhost",
           "GIT_COMMITTER_NAME": "specrun", "GIT_COMMITTER_EMAIL": "real@localhost"}
    done = subprocess.run(["git", *args], cwd=project, env=env, capture_output=True, text=True,
                          check=False)
    return done.stdout


def prepare_project(base: Path, max_tokens: int) -> Path:
    project = base / "calc"
    shutil.copytree(SAMPLE_PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    (project / ".gitignore").write_text(".specrun/\n__pycache__/\n.pytest_cache/\n")
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "calc: add and multiply")
    # As `config set` keeps them: in the state directory of the run's own service (its
    # XDG_STATE_HOME), where a project's settings apply without `specrun trust`.
    settings = project_state_path(project, "settings.json", state_root=base / "state" / "specrun")
    settings.parent.mkdir(parents=True, mode=0o700)
    # Small caps: a model that rambles (one wrote 700 tokens of prose here, at 0.35 tokens
    # a second on a loaded machine) must end within minutes, not at the window's end.
    caps = {"maxTokensMain": max_tokens, "maxTokensSpeculation": max_tokens}
    settings.write_text(json.dumps({**PROJECT_SETTINGS, **caps}, indent=2) + "\n")
    return project


class Story:
    def __init__(self, client: ServiceClient, project: Path, recorder: Recorder,
                 out: Console, spec_timeout_s: float) -> None:
        self.client = client
        self.project = project
        self.recorder = recorder
        self.out = out
        self.spec_timeout_s = spec_timeout_s
        self.turn_ended = time.monotonic()

    def approve(self, reply: ApprovalNeeded) -> bool:
        """Yes to running the tests, as the demo's person says; no to anything else."""
        command = str(reply.call.args().get("command", "")).split()
        return reply.call.name == "run_shell_command" and (
            command[:1] == ["pytest"] or command[1:3] == ["-m", "pytest"])

    def turn(self, request: AskRequest | AcceptRequest, row: Row) -> None:
        started = time.monotonic()
        printer = render.TurnPrinter(self.out, show_user=isinstance(request, AskRequest))
        outcome = stream_turn(self.client, request, printer, self.approve)
        if outcome.interrupted:
            raise KeyboardInterrupt
        ended = outcome.ended
        row.turn_end = ended.reason if ended is not None else "error"
        self.turn_ended = time.monotonic()  # what the suggestion and speculation ask is after
        for exchange in self.recorder.since(started):
            if exchange.purpose == "main":
                row.model_s += exchange.total_s
                # The first event, not llama-server's keep-alive: the prompt's reading time.
                row.first_byte_s = max(row.first_byte_s, exchange.first_data_s or 0.0)
                row.calls.add(calls_in(exchange))

    def suggestion(self, wait: bool = False) -> SuggestionReply:
        reply = self.client.request(
            SuggestionRequest(req_id=self.client.next_id(), wait_visible=wait), timeout_s=600.0)
        assert isinstance(reply, SuggestionReply), reply
        return reply

    def wait_suggestion(self, row: Row, timeout_s: float = 300.0) -> SuggestionReply | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            reply = self.suggestion(wait=True)
            if reply.text is not None and reply.visible:
                row.suggestion = reply.text
                return reply
            if reply.text is None and reply.suppressed_reason:
                row.suggestion_note = str(reply.suppressed_reason)
                return None
            time.sleep(0.5)
        row.suggestion_note = f"none within {timeout_s:.0f} s"
        return None

    def follow(self, reply: SuggestionReply, row: Row) -> SpeculationInfo | None:
        assert reply.text is not None
        started = time.monotonic()
        spec = reply.speculation
        deadline = started + self.spec_timeout_s
        while spec is not None and spec.status not in SETTLED and time.monotonic() < deadline:
            time.sleep(1.0)
            now = self.suggestion()
            if now.text != reply.text:
                break
            spec = now.speculation
        if spec is None:
            skipped = reply.speculation_skipped
            row.speculation = f"not speculated ({skipped})" if skipped else "not speculated"
            return None
        row.speculation = f"{spec.status} in {spec.elapsed_s:.0f} s"
        if spec.status == "boundary" and spec.boundary_reason:
            row.speculation += f" ({spec.boundary_reason})"
        for exchange in self.recorder.since(self.turn_ended):
            if exchange.purpose == "speculation":
                row.spec_calls.add(calls_in(exchange))
        return spec

    def play(self, rounds: int, first: str = FIRST_PROMPT) -> list[Row]:
        rows = [Row(first, "typed")]
        self.out.rule(f"typed: {first}")
        self.turn(AskRequest(req_id=self.client.next_id(), text=first, can_confirm=True),
                  rows[0])
        for _ in range(rounds):
            row = rows[-1]
            reply = self.wait_suggestion(row)
            if reply is None or reply.text is None:
                break
            self.out.rule(f"suggested: {reply.text}")
            spec = self.follow(reply, row)
            if spec is None or spec.status not in TAB_TAKES:
                row.tab = "not offered"
                break
            before = set(_git(self.project, "status", "--short").splitlines())
            nxt = Row(reply.text, "Tab")
            self.out.rule("Tab")
            self.turn(AcceptRequest(req_id=self.client.next_id(), method="tab"), nxt)
            after = set(_git(self.project, "status", "--short").splitlines())
            changed = sorted(after - before)
            written = ", ".join(spec.files_written) or "no files"
            row.tab = f"{nxt.turn_end}: {written}" + (
                f"; on disk: {'; '.join(c.strip() for c in changed)}" if changed else "")
            rows.append(nxt)
        return rows


def cold_prompt(proxy: str, tokens: int) -> dict[str, float]:
    """One request of about ``tokens`` prompt tokens the server has not seen (the repository's
    docs, after a fresh nonce): how long until its first byte and its first event."""
    from protocol.model.tokens import cut_to_tokens

    docs = "\n\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
    text = f"[{os.urandom(8).hex()}]\n" + cut_to_tokens(docs, tokens)
    body = {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": f"{text}\n\nSummarize this in one line."}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 8,
    }
    started = time.monotonic()
    first_byte = first_event = None
    usage: dict[str, float] = {}
    with httpx.stream("POST", f"{proxy}/chat/completions", json=body,
                      headers={"X-Specrun-Purpose": "cold"},
                      timeout=httpx.Timeout(3600.0, connect=10.0)) as answer:
        for line in answer.iter_lines():
            now = time.monotonic() - started
            first_byte = now if first_byte is None else first_byte
            if line.startswith("data:") and first_event is None:
                first_event = now
            if line.startswith("data:") and '"usage"' in line:
                usage = json.loads(line[5:]).get("usage") or {}
    return {"prompt_tokens": float(usage.get("prompt_tokens", 0)),
            "first_byte_s": first_byte or 0.0, "first_event_s": first_event or 0.0}


def table(rows: list[Row], model: str) -> Table:
    out = Table(title=f"specrun on {model} (llama.cpp, 1 slot, this machine)")
    for name in ("#", "prompt", "model s", "longest read s", "tool calls (main)", "suggestion",
                 "speculation", "its calls", "Tab applied"):
        out.add_column(name, overflow="fold")
    for number, row in enumerate(rows, 1):
        last = number == len(rows)
        out.add_row(
            str(number), escape(f"[{row.how}] {row.prompt}"), f"{row.model_s:.0f}",
            f"{row.first_byte_s:.1f}", str(row.calls),
            escape(row.suggestion or ("-" if last and not row.suggestion_note
                                      else f"none ({row.suggestion_note})")),
            row.speculation, str(row.spec_calls) if row.suggestion else "-", escape(row.tab))
    return out


@contextlib.contextmanager
def service(project: Path, base_url: str, home: Path) -> Iterator[ServiceClient]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DASHSCOPE_", "SPECRUN_")) or k == "SPECRUN_RUNTIME_DIR"}
    env["HOME"] = str(home)
    env["XDG_STATE_HOME"] = str(home.parent / "state")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    argv = ["--approval-mode", "auto-edit", "--base-url", base_url, "--model", MODEL_NAME]
    start_daemon(project, argv, env=env)
    try:
        with ServiceClient(project, timeout_s=60.0) as client:
            yield client
    finally:
        stop_own_daemon(project)


def keep_metadata(root: str, into: Path) -> None:
    """What the server says about its model and window (``/props``, ``/v1/models``),
    where the recorded exchanges go: the suite reads the window from them."""
    into.mkdir(parents=True, exist_ok=True)
    for path, name in (("/props", "props"), ("/v1/models", "models")):
        answer = httpx.get(root + path, timeout=10)
        data = answer.json()
        if isinstance(data, dict):
            data.pop("chat_template", None)  # long, and the model file's, not the server's
            data.pop("chat_template_tool_use", None)
            data.pop("model_path", None)  # this machine's cache path
        (into / f"llamacpp_{name}.json").write_text(json.dumps(data, indent=1) + "\n")


def _as_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/real_model", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="suggestions to follow (2)")
    parser.add_argument("--context", type=int, default=8192, help="the slot's window (8192)")
    parser.add_argument("--speculation-timeout", type=float, default=600.0,
                        help="seconds to wait for a speculation to settle (600)")
    parser.add_argument("--record", type=Path, help="keep every model exchange in this directory")
    parser.add_argument("--first-prompt", default=FIRST_PROMPT,
                        help=f"what the person types first (the demo's: {FIRST_PROMPT!r})")
    parser.add_argument("--max-tokens", type=int, default=256,
                        help="maxTokensMain and maxTokensSpeculation of the project (256)")
    # The main chat sends no temperature: the server's default (0.8) decides, and at 0.8
    # the 1.5B model wrote a tool call in one of three runs of the first prompt here.
    parser.add_argument("--temperature", type=float, default=0.2,
                        help="llama-server's default temperature (0.2)")
    parser.add_argument("--threads", type=int, default=2, help="llama-server's threads (2)")
    parser.add_argument("--cold-prompt", type=int, default=0, metavar="TOKENS",
                        help="then time one request of this many unseen prompt tokens")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _as_ctrl_c)
    out = Console(stderr=True)
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="specrun-real-model-"))
    try:
        model = ensure_model(cache)
        binary = ensure_server(cache)
        project = prepare_project(base, args.max_tokens)
        (base / "home").mkdir()
        out.print(f"serving {model.name} with {binary} (log: {cache / 'server.log'})")
        with serve(binary, model, context=args.context, log=cache / "server.log",
                   threads=args.threads, temperature=args.temperature) as served:
            recorder = Recorder(served.root, args.record)
            if args.record is not None:
                keep_metadata(served.root, args.record)
            with (
                recording_proxy(recorder) as proxy,
                service(project, proxy, base / "home") as client,
            ):
                story = Story(client, project, recorder, out, args.speculation_timeout)
                rows = story.play(args.rounds, args.first_prompt) if args.rounds >= 0 else []
                cold = cold_prompt(proxy, args.cold_prompt) if args.cold_prompt else None
        if rows:
            Console(width=max(160, shutil.get_terminal_size().columns)).print(
                table(rows, MODEL_NAME))
        if cold is not None:
            Console().print(
                f"cold prompt: {cold['prompt_tokens']:.0f} tokens; first byte after "
                f"{cold['first_byte_s']:.1f} s (a keep-alive comment), first event after "
                f"{cold['first_event_s']:.1f} s "
                f"({cold['prompt_tokens'] / max(cold['first_event_s'], 0.001):.1f} tokens/s)")
        return 0
    except SetupError as exc:
        print(f"scripts/real_model: {exc}.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("scripts/real_model: interrupted; cleaned up.", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
