"""`specrun chat`: an interactive prompt with the suggestion as grey ghost text.

A background thread asks the service for the current suggestion every 100 ms (with
its own socket: ZeroMQ sockets are not shared between threads). Once the suggestion
is visible it is drawn after the cursor in grey, and the bottom toolbar says whether
its speculation is running, completed or stopped at a boundary. Tab, Right arrow, or
Enter on an empty line accept it; anything else typed is sent as a normal query (the
service then kills the speculation). Ctrl-C aborts a running turn, Ctrl-D leaves.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggest, Suggestion
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.styles import Style

from coordinator.boundary_text import describe_boundary
from coordinator.cli import render
from coordinator.cli.approval import ask_person
from coordinator.cli.client import ServiceClient, ServiceNotRunning, ServiceTimeout
from coordinator.cli.errors import EXIT_NO_SERVICE, EXIT_OK
from coordinator.cli.turns import stream_turn
from protocol.control import (
    AcceptRequest,
    AskRequest,
    StatusReply,
    StatusRequest,
    SuggestionReply,
    SuggestionRequest,
)

POLL_INTERVAL_S = 0.1
PROMPT = "❯ "
AcceptMethod = Literal["tab", "enter", "right"]

STYLE = Style.from_dict({
    "prompt": "bold ansicyan",
    "ghost": "#808080",
    "auto-suggestion": "#808080",
    "bottom-toolbar": "noreverse bg:default #a0a0a0",
    "bottom-toolbar.running": "noreverse bg:default ansiyellow",
    "bottom-toolbar.completed": "noreverse bg:default ansigreen",
    "bottom-toolbar.boundary": "noreverse bg:default ansimagenta",
    "bottom-toolbar.failed": "noreverse bg:default ansired",
})


@dataclass(frozen=True)
class Accepted:
    method: AcceptMethod
    text: str


class SuggestionState:
    """What the poller last saw, fenced by a generation number: a submit bumps the
    generation, so a poll answered before it cannot bring back a stale suggestion."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.generation = 0
        self.reply: SuggestionReply | None = None
        self.error: str | None = None

    def update(self, generation: int, reply: SuggestionReply | None, error: str | None) -> bool:
        """Store a poll result; True when what the person sees changed."""
        with self._lock:
            if generation != self.generation:
                return False
            before = self._key(self.reply), self.error
            self.reply, self.error = reply, error
            return (self._key(reply), error) != before

    def clear(self) -> None:
        with self._lock:
            self.generation += 1
            self.reply = None

    @staticmethod
    def _key(reply: SuggestionReply | None) -> object:
        if reply is None:
            return None
        spec = reply.speculation
        return (reply.text, reply.visible, spec.status if spec else None,
                spec.tool_uses if spec else 0, len(spec.files_written) if spec else 0)

    @property
    def text(self) -> str | None:
        """The suggestion to show, once the service says it is visible."""
        reply = self.reply
        if reply is None or not reply.visible or not reply.text:
            return None
        if reply.speculation is not None and reply.speculation.status == "accepted":
            return None  # just accepted; its pipelined successor comes next
        return reply.text


class Poller(threading.Thread):
    def __init__(self, project: Path, state: SuggestionState, on_change: object) -> None:
        super().__init__(name="specrun-suggestion-poller", daemon=True)
        self.project = project
        self.state = state
        self.on_change = on_change
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            client = ServiceClient(self.project, timeout_s=2.0)
        except ServiceNotRunning:
            self.state.update(self.state.generation, None, "the service is not running")
            return
        with client:
            while not self.stopping.is_set():
                generation = self.state.generation
                result: tuple[SuggestionReply | None, str | None]
                try:
                    reply = client.request(SuggestionRequest(req_id=client.next_id()),
                                           timeout_s=2.0)
                    result = (reply if isinstance(reply, SuggestionReply) else None), None
                except ServiceTimeout:
                    result = None, "the service is not answering"
                    client.close()
                    try:
                        client = ServiceClient(self.project, timeout_s=2.0)
                    except ServiceNotRunning:
                        self.state.update(generation, None, "the service stopped")
                        self._changed()
                        return
                if self.state.update(generation, *result):
                    self._changed()
                self.stopping.wait(POLL_INTERVAL_S)

    def _changed(self) -> None:
        callback = self.on_change
        if callable(callback):
            callback()


class GhostSuggest(AutoSuggest):
    """The rest of the suggestion while what is typed is its beginning."""

    def __init__(self, state: SuggestionState) -> None:
        self.state = state

    def get_suggestion(self, buffer: Buffer, document: Document) -> Suggestion | None:
        text = self.state.text
        typed = document.text
        if text and typed and text.startswith(typed) and len(text) > len(typed):
            return Suggestion(text[len(typed):])
        return None


def toolbar_text(state: SuggestionState) -> FormattedText:
    keys = "Tab/→/Enter accept · Ctrl-C aborts a turn · Ctrl-D quits"
    if state.error:
        return FormattedText([("class:bottom-toolbar.failed", f" {state.error}")])
    reply = state.reply
    if reply is None or state.text is None:
        return FormattedText([("class:bottom-toolbar", " no suggestion · Ctrl-D quits")])
    spec = reply.speculation
    if spec is None:
        return FormattedText([("class:bottom-toolbar", f" suggestion (not speculated) · {keys}")])
    detail = f"{spec.tool_uses} tool use(s), {len(spec.files_written)} file(s)"
    marks = {
        "running": ("running", f"⟳ speculation running ({detail})"),
        "completed": ("completed", f"✓ speculation completed ({detail}): Tab applies it at once"),
        "boundary": ("boundary", f"⏸ speculation "
                                 f"{describe_boundary(spec.boundary_reason or '')}; "
                                 "accepting runs it as a normal turn"),
        "failed": ("failed", "✗ speculation failed: accepting runs it as a normal turn"),
        "aborted": ("failed", "speculation aborted"),
    }
    cls, label = marks.get(spec.status, ("", f"speculation {spec.status}"))
    style = f"class:bottom-toolbar.{cls}" if cls else "class:bottom-toolbar"
    return FormattedText([(style, f" {label}"), ("class:bottom-toolbar", f" · {keys}")])


def _bindings(state: SuggestionState) -> KeyBindings:
    kb = KeyBindings()

    def ghost(event_buffer: Buffer) -> str | None:
        text = state.text
        if text is None or not text.startswith(event_buffer.text):
            return None
        return text

    @Condition
    def has_ghost() -> bool:
        from prompt_toolkit.application.current import get_app

        buffer = get_app().current_buffer
        return ghost(buffer) is not None and buffer.cursor_position == len(buffer.text)

    @Condition
    def empty_line() -> bool:
        from prompt_toolkit.application.current import get_app

        return get_app().current_buffer.text == ""

    def accept(event: KeyPressEvent, method: AcceptMethod) -> None:
        text = ghost(event.current_buffer)
        if text is None:
            return
        event.current_buffer.text = text  # the finished prompt line shows what was accepted
        event.current_buffer.cursor_position = len(text)
        event.app.exit(result=Accepted(method, text))

    @kb.add("tab", filter=has_ghost)
    def _tab(event: KeyPressEvent) -> None:
        accept(event, "tab")

    @kb.add("right", filter=has_ghost)
    def _right(event: KeyPressEvent) -> None:
        accept(event, "right")

    @kb.add("enter", filter=has_ghost & empty_line)
    def _enter(event: KeyPressEvent) -> None:
        accept(event, "enter")

    return kb


def _banner(client: ServiceClient) -> None:
    reply = client.call(StatusRequest)
    if isinstance(reply, StatusReply):
        model = "embedded scripted model" if reply.scripted_model else reply.model_endpoint
        render.console.print(
            f"[bold]specrun chat[/bold] · {reply.project} · {reply.model} ({model}) · "
            f"approval {reply.approval_mode.value}"
        )
    render.console.print(
        "[bright_black]The grey text is the predicted next prompt: Tab, → or Enter accept it; "
        "type anything else to send that instead. Ctrl-C aborts a turn, Ctrl-D quits.[/]"
    )


def run_chat(project: Path) -> int:
    """The interactive loop; returns the exit code."""
    state = SuggestionState()
    session: PromptSession[object] = PromptSession(
        message=FormattedText([("class:prompt", PROMPT)]),
        placeholder=lambda: FormattedText([("class:ghost", state.text or "")]),
        auto_suggest=GhostSuggest(state),
        key_bindings=_bindings(state),
        bottom_toolbar=lambda: toolbar_text(state),
        style=STYLE,
        enable_history_search=False,
    )
    poller = Poller(project, state, on_change=lambda: session.app.invalidate())
    try:
        client = ServiceClient(project, timeout_s=30.0)
    except ServiceNotRunning as exc:
        render.error(str(exc))
        return EXIT_NO_SERVICE
    poller.start()
    try:
        with client:
            _banner(client)
            while True:
                try:
                    answer = session.prompt()
                except KeyboardInterrupt:
                    continue  # Ctrl-C at the prompt clears the line
                except EOFError:
                    return EXIT_OK
                request: AskRequest | AcceptRequest
                if isinstance(answer, Accepted):
                    request = AcceptRequest(req_id=client.next_id(), method=answer.method)
                else:
                    text = str(answer).strip()
                    if not text:
                        continue
                    request = AskRequest(req_id=client.next_id(), text=text, can_confirm=True,
                                         accept_method="enter", client_pid=os.getpid())
                state.clear()
                try:
                    stream_turn(client, request, render.TurnPrinter(show_user=False), ask_person)
                except ServiceTimeout as exc:
                    render.error(str(exc))
                state.clear()
    except ServiceNotRunning as exc:
        render.error(str(exc))
        return EXIT_NO_SERVICE
    finally:
        poller.stopping.set()
        poller.join(timeout=3)
