"""`specrun chat`: an interactive prompt with the suggestion as grey ghost text.

A background thread asks the service for the current suggestion every 100 ms (with
its own socket: ZeroMQ sockets are not shared between threads). Once the suggestion
is visible it is drawn after the cursor in grey, and the bottom toolbar says whether
its speculation is running, completed or stopped at a boundary. Tab or Right arrow
accept it at once. Enter on an empty line fills the line with it (nothing is sent); a
second Enter sends that line, which takes the speculation as the typed-prompt path does
(``acceptTypedPrompt``) and counts as an ``enter`` accept. ``enterAccepts`` makes the
first Enter accept at once instead. Ctrl-O opens the preview of what Tab would apply
(``preview``). Ctrl-C aborts a running turn, Ctrl-D leaves.

Typing does not throw the speculation away while the typed text is the beginning of
the suggestion (case and whitespace aside, ``protocol.prompts.prediction.is_typed_prefix``):
the rest stays grey after the cursor, as a shell's autosuggestion does. The same
thread tells the service what is typed (``TypedRequest``; one in flight at a time,
always the latest text), and the service kills the speculations the text no longer
leads to. With several ranked alternatives (``speculationBranches``) the grey text is
the top one still matching; Down/Up show the others. Enter on a typed prompt sends it
as a query; the service uses a speculation whose prompt it equals and says so.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import click
from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import get_app
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent, merge_key_bindings
from prompt_toolkit.key_binding.key_processor import KeyProcessor
from prompt_toolkit.layout.processors import Processor, Transformation, TransformationInput
from prompt_toolkit.styles import Style

from coordinator.boundary_text import describe_boundary
from coordinator.cli import render
from coordinator.cli.approval import ask_person
from coordinator.cli.chat.presence import (
    PresenceTracker,
    focus_bindings,
    focus_output,
    focus_reporting_off,
)
from coordinator.cli.chat.preview import PREVIEW_KEY, PREVIEW_KEY_NAME, show_preview
from coordinator.cli.chat.recap import show_recap
from coordinator.cli.chat.service_watch import ServiceWatch, stopped_sentence
from coordinator.cli.chat.slash import (
    SlashCompleter,
    SlashContext,
    as_prompt,
    is_command,
    run_slash,
)
from coordinator.cli.client import ServiceClient, ServiceNotRunning, ServiceTimeout
from coordinator.cli.daemon import is_running
from coordinator.cli.errors import EXIT_NO_SERVICE, EXIT_OK
from coordinator.cli.turns import stream_turn
from protocol.prompts.prediction import is_typed_prefix, normalize_prompt
from protocol.text.branch_number import branch_number
from protocol.text.inert_text import inert
from protocol.wire.control import (
    PRESENCE_REFRESH_S,
    AcceptRequest,
    AskRequest,
    Branch,
    ControlReply,
    Presence,
    PresenceRequest,
    StatusReply,
    StatusRequest,
    SuggestionReply,
    SuggestionRequest,
    TypedRequest,
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
    rank: int = 0  # the alternative taken (AcceptRequest.index)
    speculation: str = ""  # the id of its speculation as shown ('' for none yet)


def ghost_rest(typed: str, suggestion: str) -> str | None:
    """What is left of ``suggestion`` to show after ``typed``, or None when ``typed``
    does not lead to it. The comparison ignores case and runs of whitespace, so
    "Run  the" shows " tests" of "run the tests"; a typed text that ends in a space has
    finished its word, so the rest starts at the next word."""
    if not is_typed_prefix(typed, suggestion):
        return None
    if not typed.strip():
        return suggestion if not typed else suggestion.lstrip()
    wanted = normalize_prompt(typed)
    for end in range(len(suggestion) + 1):
        if normalize_prompt(suggestion[:end]) == wanted:
            rest = suggestion[end:]
            return rest.lstrip() if typed[-1].isspace() else rest
    return ""  # typed all of it (a trailing period, say)


class SuggestionState:
    """What the poller last saw, fenced by a generation number: a submit bumps the
    generation, so a poll answered before it cannot bring back a stale suggestion.

    Also what is typed at the prompt (set by the prompt's thread), which alternative
    the person picked with Down/Up (``selected``), and what the service was last told
    was typed (so the poller tells it again only when the text or the alternatives
    changed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.generation = 0
        self.reply: SuggestionReply | None = None
        self.error: str | None = None
        self.typed = ""
        self.selected: int | None = None  # a rank picked with Down/Up
        self.accepting = False  # Tab & co. put the whole text in the line: not typing
        self.filled: str | None = None  # the line Enter filled with the suggestion
        # one sentence answering a key that had nothing to act on (Ctrl-O with no
        # suggestion); shown in the toolbar until the line changes
        self.flash: str | None = None
        # what the service watch said: the service stopped (until it is back)
        self.service_note: str | None = None
        # when the service began predicting the next prompt (None: it is not)
        self.predicting_since: float | None = None
        self._told: tuple[str, frozenset[str]] = ("", frozenset())

    def update(self, generation: int, reply: SuggestionReply | None, error: str | None) -> bool:
        """Store a poll result; True when what the person sees changed."""
        with self._lock:
            if generation != self.generation:
                return False
            before = self._key(self.reply), self.error
            self.reply, self.error = reply, error
            pending = reply is not None and reply.pending and not reply.text
            if not pending:
                self.predicting_since = None
            elif self.predicting_since is None:
                self.predicting_since = time.monotonic()
            return (self._key(reply), error) != before

    def clear(self) -> None:
        with self._lock:
            self.generation += 1
            self.reply = None
            self.typed = ""
            self.selected = None
            self.accepting = False
            self.filled = None
            self._told = ("", frozenset())

    def set_typed(self, text: str) -> bool:
        """Note what the line holds now; False when it is not the person typing (an
        accept, or the line Enter filled: the person chose the suggestion, typed nothing)."""
        with self._lock:
            self.flash = None
            if self.accepting or text == self.filled:
                return False
            # a slash command is for the chat, not a prompt: the guesses stay as they are
            self.typed = "" if is_command(text) else text
            return True

    def to_tell(self) -> tuple[int, str] | None:
        """``(generation, text)`` when the service should hear what is typed: the text
        changed since it was last told, or alternatives it has not been checked against
        arrived. Nothing while there is no suggestion, or while nothing is typed and
        nothing was."""
        with self._lock:
            texts = frozenset(b.text for b in self.branches(visible_only=False))
            told_text, told_against = self._told
            if not texts or (not self.typed and not told_text):
                return None
            if self.typed == told_text and texts <= told_against:
                return None
            self._told = (self.typed, texts | told_against)
            return self.generation, self.typed

    @staticmethod
    def _key(reply: SuggestionReply | None) -> object:
        if reply is None:
            return None
        spec = reply.speculation
        return (reply.text, reply.visible, reply.pending, spec.status if spec else None,
                spec.tool_uses if spec else 0, len(spec.files_written) if spec else 0,
                tuple((b.rank, b.text, b.speculation.status if b.speculation else None,
                       b.speculation.tool_uses if b.speculation else 0)
                      for b in reply.branches))

    def branches(self, visible_only: bool = True) -> list[Branch]:
        """The live alternatives in rank order (one, for a service without branches)."""
        reply = self.reply
        if reply is None or not reply.text or (visible_only and not reply.visible):
            return []
        found = list(reply.branches) or [
            Branch(0, reply.text, reply.speculation, reply.speculation_skipped)]
        # one just accepted is gone; its pipelined successor comes next
        return [b for b in found
                if b.text and not (b.speculation and b.speculation.status == "accepted")]

    def matching(self, typed: str | None = None) -> list[Branch]:
        """The visible alternatives that the typed text still leads to."""
        typed = self.typed if typed is None else typed
        return [b for b in self.branches() if is_typed_prefix(typed, b.text)]

    def current(self, typed: str | None = None) -> Branch | None:
        """The alternative shown in grey: the one picked with Down/Up while it still
        matches, else the best-ranked one that matches."""
        matching = self.matching(typed)
        picked = [b for b in matching if b.rank == self.selected]
        return next(iter(picked or matching), None)

    def cycle(self, step: int) -> None:
        """Show the next (``step`` 1) or previous (-1) matching alternative."""
        matching = self.matching()
        current = self.current()
        if len(matching) < 2 or current is None:
            return
        index = next(i for i, b in enumerate(matching) if b.rank == current.rank)
        self.selected = matching[(index + step) % len(matching)].rank

    @property
    def text(self) -> str | None:
        """The suggestion shown in grey, once the service says it is visible."""
        branch = self.current()
        return branch.text if branch is not None else None


class Poller(threading.Thread):
    """Asks for the suggestion every ``POLL_INTERVAL_S``, and tells the service what is
    typed as soon as it changes (``wake``): one request at a time, so keystrokes that
    come while one is in flight are told together, as the latest text."""

    def __init__(self, project: Path, state: SuggestionState, on_change: object,
                 presence: PresenceTracker | None = None,
                 wake: threading.Event | None = None) -> None:
        super().__init__(name="specrun-suggestion-poller", daemon=True)
        self.project = project
        self.state = state
        self.presence = presence
        self._told_presence: tuple[Presence, float] | None = None  # what, when
        self.on_change = on_change
        self.stopping = threading.Event()
        self.wake = wake or threading.Event()
        self.reconnect = threading.Event()  # set when the service was replaced

    def run(self) -> None:
        client: ServiceClient | None = None
        try:  # not `with client`: a reconnect replaces it, and the last one is closed
            while not self.stopping.is_set():
                if self.reconnect.is_set() and client is not None:
                    self.reconnect.clear()  # the service was replaced: a new socket
                    client.close()
                    client = None
                    self._told_presence = None  # the new service has heard nothing
                if client is None:
                    try:
                        client = ServiceClient(self.project, timeout_s=2.0)
                    except ServiceNotRunning:
                        # the service watch says so; look again for one started meanwhile
                        if self.state.update(self.state.generation, None, None):
                            self._changed()
                        self.stopping.wait(POLL_INTERVAL_S * 5)
                        continue
                try:
                    self._tell_presence(client)
                except ServiceTimeout:
                    client.close()
                    client = None
                    continue
                generation = self.state.generation
                tell = self.state.to_tell()
                result: tuple[SuggestionReply | None, str | None]
                try:
                    reply: ControlReply
                    if tell is not None:
                        generation, typed = tell
                        reply = client.request(TypedRequest(req_id=client.next_id(),
                                                            text=typed), timeout_s=2.0)
                    else:
                        reply = client.request(SuggestionRequest(req_id=client.next_id()),
                                               timeout_s=2.0)
                    result = (reply if isinstance(reply, SuggestionReply) else None), None
                except ServiceTimeout:
                    result = None, "the service is not answering"
                    client.close()  # its late reply would be kept forever: a new socket
                    client = None
                if self.state.update(generation, *result):
                    self._changed()
                self.wake.wait(POLL_INTERVAL_S)  # set by a keystroke
                self.wake.clear()
        finally:
            if client is not None:
                client.close()

    def _tell_presence(self, client: ServiceClient) -> None:
        """Tell the service whether someone looks at this chat when that changed, and
        again every ``PRESENCE_REFRESH_S`` (an older report no longer counts there)."""
        if self.presence is None:
            return
        state, now = self.presence.state(), time.monotonic()
        told = self._told_presence
        if told is not None and told[0] == state and now - told[1] < PRESENCE_REFRESH_S:
            return
        client.request(PresenceRequest(req_id=client.next_id(), state=state,
                                       client_pid=os.getpid()), timeout_s=2.0)
        self._told_presence = (state, now)

    def _changed(self) -> None:
        callback = self.on_change
        if callable(callback):
            callback()


class GhostText(Processor):
    """Draws the rest of the shown alternative in grey after the cursor (also on an
    empty line), from the state at each redraw: a poll, Down/Up or a keystroke only
    need the screen redrawn."""

    def __init__(self, state: SuggestionState) -> None:
        self.state = state

    def apply_transformation(self, ti: TransformationInput) -> Transformation:
        document = ti.document
        if ti.lineno != document.line_count - 1 or not document.is_cursor_at_the_end:
            return Transformation(fragments=ti.fragments)
        branch = self.state.current(document.text)
        rest = ghost_rest(document.text, branch.text) if branch is not None else None
        # model text: controls visible (the suggestion filter refuses them anyway)
        shown = inert(rest or "", multiline=False)
        return Transformation(fragments=[*ti.fragments, ("class:ghost", shown)])


def keys_text(enter_accepts: bool) -> str:
    enter = "Tab/→/Enter accept" if enter_accepts else "Tab/→ accept · Enter fills"
    return f"{enter} · {PREVIEW_KEY_NAME} preview · Ctrl-C aborts a turn · Ctrl-D quits"


def toolbar_text(state: SuggestionState, enter_accepts: bool = False,
                 width: int | None = None) -> FormattedText:
    keys = keys_text(enter_accepts)
    if state.service_note:
        return FormattedText([("class:bottom-toolbar.failed", f" {state.service_note}")])
    if state.flash:
        return FormattedText([("class:bottom-toolbar", f" {state.flash}")])
    if state.error:
        return FormattedText([("class:bottom-toolbar.failed", f" {state.error}")])
    matching = state.matching()
    branch = state.current()
    if branch is None:
        since = state.predicting_since
        if since is not None:
            waited = int(time.monotonic() - since)
            return FormattedText([("class:bottom-toolbar.running",
                                   f" ⟳ predicting the next prompt… {waited} s"),
                                  ("class:bottom-toolbar", " · /help · Ctrl-D quits")])
        return FormattedText([("class:bottom-toolbar", " no suggestion · /help · Ctrl-D quits")])
    # With alternatives, which one is shown comes first; ``fitted`` below picks the
    # longest whole form that fits the terminal's width.
    which: list[tuple[str, str]] = []
    if len(matching) > 1:
        which = [("class:bottom-toolbar", f" ↓↑ {which_branch(branch, matching)} ·")]
    spec = branch.speculation
    if spec is None:
        why = " (speculation budget spent)" if branch.skipped == "budget" else ""
        return fitted(width, [
            [*which, ("class:bottom-toolbar", f" suggestion not speculated{why} · {keys}")],
            [*which, ("class:bottom-toolbar", f" suggestion not speculated{why}")],
        ])
    detail = f"{spec.tool_uses} tool use(s), {len(spec.files_written)} file(s)"
    stopped = inert(describe_boundary(spec.boundary), multiline=False)
    marks = {
        "running": ("running", f"⟳ speculation running ({detail})"),
        "completed": ("completed", f"✓ speculation completed ({detail}): Tab applies it at once"),
        "boundary": ("boundary", "⏸ speculation "
                                 f"{stopped}; "
                                 "accepting runs it as a normal turn"),
        "failed": ("failed", "✗ speculation failed: accepting runs it as a normal turn"),
        "aborted": ("failed", "speculation aborted"),
    }
    short = {
        "running": f"⟳ speculating ({spec.tool_uses} tool use(s))",
        "completed": "✓ ready: Tab applies it at once",
        "boundary": f"⏸ {stopped.split(': ', 1)[0]}: Tab runs it, asking",  # whole, or not
        "failed": "✗ failed: Tab runs it as a turn",
    }
    # The shortest forms, whole: with "↓↑ branch 2 of 3" in front they still fit 80
    # columns, where a longer one would be cut mid-word (issue 35: hints fit 80 columns).
    terse = (f"⏸ {stopped.split(': ', 1)[0].replace('before the shell command ', 'before ')}"
             ": Tab runs it, asking") if spec.status == "boundary" else None
    tiny = {
        "running": "⟳ speculating",
        "completed": "✓ ready: Tab applies it",
        "boundary": "⏸ stopped at a boundary: Tab runs it, asking",
        "failed": "✗ failed: Tab runs it as a turn",
    }
    cls, label = marks.get(spec.status, ("", f"speculation {spec.status}"))
    style = f"class:bottom-toolbar.{cls}" if cls else "class:bottom-toolbar"
    plain = "class:bottom-toolbar"
    brief = short.get(spec.status, label)
    # the longest that fits the terminal's width: a hint cut at the edge says nothing
    return fitted(width, [
        [*which, (style, f" {label}"), (plain, f" · {keys}")],
        [*which, (style, f" {label}"), (plain, f" · Tab accepts · {PREVIEW_KEY_NAME} preview")],
        [*which, (style, f" {label}")],
        [*which, (style, f" {brief}"), (plain, f" · {PREVIEW_KEY_NAME} preview")],
        [*which, (style, f" {brief}")],
        *([[*which, (style, f" {terse}")]] if terse else []),
        [*which, (style, f" {tiny.get(spec.status, brief)}"),
         (plain, f" · {PREVIEW_KEY_NAME} preview")],
        [*which, (style, f" {tiny.get(spec.status, brief)}")],
    ])


def which_branch(branch: Branch, matching: list[Branch]) -> str:
    """The shown branch by its number (``protocol.text.branch_number``: the number
    `specrun accept --branch` takes): ``branch 2 of 3``, or ``branch 3 (2 left)`` once
    typing or a kill left only some of them."""
    number = branch_number(branch.rank)
    if [b.rank for b in matching] == list(range(len(matching))):
        return f"branch {number} of {len(matching)}"
    return f"branch {number} ({len(matching)} left)"


def terminal_width() -> int:
    try:
        return get_app().output.get_size().columns
    except Exception:  # no application running (a test draws the toolbar alone)
        return 80


def fitted(width: int | None, candidates: list[list[tuple[str, str]]]) -> FormattedText:
    """The first candidate that fits in ``width`` columns (the last one cut to fit)."""
    from prompt_toolkit.utils import get_cwidth

    room = (width if width is not None else terminal_width()) - 1
    for fragments in candidates:
        if sum(get_cwidth(text) for _, text in fragments) <= room:
            return FormattedText(fragments)
    kept: list[tuple[str, str]] = []
    for style, text in candidates[-1]:
        while len(text) > 1 and sum(get_cwidth(t) for _, t in kept) + get_cwidth(text) > room:
            text = text[:-2] + "…"
        kept.append((style, text))
    return FormattedText(kept)


def _bindings(state: SuggestionState, project: Path, enter_accepts: bool) -> KeyBindings:
    kb = KeyBindings()

    def shown(buffer: Buffer) -> Branch | None:
        """The alternative whose rest is grey after the cursor, if any."""
        if buffer.cursor_position != len(buffer.text):
            return None
        return state.current(buffer.text)

    @Condition
    def has_ghost() -> bool:
        return shown(get_app().current_buffer) is not None

    @Condition
    def has_alternatives() -> bool:
        buffer = get_app().current_buffer
        return shown(buffer) is not None and len(state.matching(buffer.text)) > 1

    @Condition
    def empty_line() -> bool:
        return get_app().current_buffer.text == ""

    def accept(event: KeyPressEvent, method: AcceptMethod) -> None:
        branch = shown(event.current_buffer)
        if branch is None:
            return
        state.accepting = True  # the line below is not typing to tell the service about
        line = inert(branch.text, multiline=False)  # the finished line shows what was taken
        event.current_buffer.text = line
        event.current_buffer.cursor_position = len(line)
        spec_id = branch.speculation.id if branch.speculation else ""
        event.app.exit(result=Accepted(method, branch.text, branch.rank, spec_id))

    @kb.add("tab", filter=has_ghost)
    def _tab(event: KeyPressEvent) -> None:
        accept(event, "tab")

    @kb.add("right", filter=has_ghost)
    def _right(event: KeyPressEvent) -> None:
        accept(event, "right")

    @kb.add("enter", filter=has_ghost & empty_line)
    def _enter(event: KeyPressEvent) -> None:
        if enter_accepts:
            accept(event, "enter")
            return
        branch = shown(event.current_buffer)
        if branch is None:
            return
        # Filled, not sent: a second Enter sends it. The line shows the text the display
        # rule lets through (a suggestion with controls never gets this far anyway).
        line = inert(branch.text, multiline=False)
        state.filled = line
        event.current_buffer.text = line
        event.current_buffer.cursor_position = len(line)

    @kb.add(PREVIEW_KEY, filter=has_ghost)
    async def _preview(event: KeyPressEvent) -> None:
        branch = shown(event.current_buffer)
        if branch is not None:
            await show_preview(project, branch.rank)

    # Without a suggestion Ctrl-O previews nothing, and must not fall through to the
    # prompt library's own Ctrl-O (which sends the half-typed line as a prompt).
    @kb.add(PREVIEW_KEY, filter=~has_ghost)
    def _nothing_to_preview(event: KeyPressEvent) -> None:
        state.flash = f"{PREVIEW_KEY_NAME}: there is no suggestion to preview right now"

    @kb.add("down", filter=has_alternatives)
    def _next(event: KeyPressEvent) -> None:
        state.cycle(1)

    @kb.add("up", filter=has_alternatives)
    def _previous(event: KeyPressEvent) -> None:
        state.cycle(-1)

    return kb


def _banner(client: ServiceClient, enter_accepts: bool) -> None:
    from rich.text import Text

    reply = client.call(StatusRequest)
    if isinstance(reply, StatusReply):
        model = "embedded scripted model" if reply.scripted_model else reply.model_endpoint
        render.console.print(Text.assemble(
            ("specrun chat", "bold"),
            inert(f" · {reply.project} · {reply.model} ({model}) · "  # a path is not markup
                  f"approval {reply.approval_mode.value}", multiline=False),
        ))
        if reply.context is not None:
            from coordinator.cli.context_fill import context_line

            render.console.print(Text(context_line(reply.context), style="bright_black"))
    enter = ("Tab, → or Enter accept it" if enter_accepts
             else "Tab or → accept it, Enter puts it in the line (Enter again sends it)")
    render.console.print(
        f"[bright_black]The grey text is the predicted next prompt: {enter}; "
        f"{PREVIEW_KEY_NAME} shows what Tab would change (files, then the diff; Esc closes); "
        "typing its beginning keeps it, ↓/↑ show other guesses when there are some; "
        "type anything else to send that instead. Ctrl-C aborts a turn, Ctrl-D quits.[/]"
    )


def _show_context_fill(client: ServiceClient) -> None:
    """After a turn, once the context window is half full, say how full it is."""
    from rich.text import Text

    from coordinator.cli.context_fill import context_line, worth_showing

    reply = client.call(StatusRequest)
    if isinstance(reply, StatusReply) and reply.context and worth_showing(reply.context):
        render.console.print(Text(context_line(reply.context), style="bright_black"))


def _prompt_session(state: SuggestionState, project: Path, enter_accepts: bool,
                    presence: PresenceTracker, focus_reporting: bool,
                    presence_changed: Callable[[], None]) -> PromptSession[object]:
    return PromptSession(
        message=FormattedText([("class:prompt", PROMPT)]),
        input_processors=[GhostText(state)],
        key_bindings=merge_key_bindings([
            _bindings(state, project, enter_accepts),
            focus_bindings(presence, presence_changed),
        ]),
        output=focus_output() if focus_reporting else None,
        bottom_toolbar=lambda: toolbar_text(state, enter_accepts),
        style=STYLE,
        enable_history_search=False,
        completer=SlashCompleter(),
        complete_while_typing=True,
        refresh_interval=0.5,  # the toolbar's seconds count up while it waits
    )


def _request_for(answer: object, client: ServiceClient,
                 state: SuggestionState) -> AskRequest | AcceptRequest | None:
    """What the line the person sent asks of the service; None: nothing to send."""
    if isinstance(answer, Accepted):
        # What was shown (grey, or in the Ctrl-O preview) is what is taken:
        # a suggestion that changed meanwhile is refused, nothing applied.
        return AcceptRequest(req_id=client.next_id(), method=answer.method,
                             index=answer.rank, shown_text=answer.text,
                             shown_speculation=answer.speculation,
                             can_confirm=True, client_pid=os.getpid())
    text = as_prompt(str(answer))
    if not text:
        return None
    # Equal to a speculated prompt, the service takes that speculation
    # (acceptTypedPrompt) and says so in a notice: an `enter` accept when
    # it is the line Enter filled, sent unchanged; `typed` otherwise.
    filled = str(answer) == state.filled
    return AskRequest(req_id=client.next_id(), text=text, can_confirm=True,
                      accept_method="enter" if filled else "typed",
                      filled=filled, client_pid=os.getpid())


def _run_turn(client: ServiceClient, request: AskRequest | AcceptRequest) -> None:
    try:
        stream_turn(client, request, render.TurnPrinter(show_user=False), ask_person)
        _show_context_fill(client)
    except ServiceTimeout as exc:
        render.error(str(exc))
    except ServiceNotRunning:
        # not the model's fault: say what happened to the service
        render.error("The specrun service stopped during this turn (`specrun logs` "
                     "says why); `specrun start` starts it again, and this chat "
                     "goes on with it.")


def run_chat(project: Path, cli: click.Group, enter_accepts: bool = False,
             away_after_s: float | None = None, focus_reporting: bool = True,
             verbose: bool = False) -> int:
    """The interactive loop; returns the exit code. ``enter_accepts``: Enter on an empty
    line accepts the suggestion at once instead of filling the line with it;
    ``away_after_s``: no keystroke for this long counts as away (None: never);
    ``focus_reporting``: the terminal's focus tells whether someone looks; ``verbose``
    (``specrun --verbose chat``): pids and the like in what it says, and its slash
    commands run with ``--verbose``."""
    # A SIGTERM ends the chat through its finally blocks (the terminal's modes restored)
    # rather than at once, as Python's default would.
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _chat(project, cli, enter_accepts, away_after_s, focus_reporting, verbose)
    finally:
        focus_reporting_off()  # however the chat ends, the terminal stops reporting focus
        signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _chat(project: Path, cli: click.Group, enter_accepts: bool,
          away_after_s: float | None, focus_reporting: bool, verbose: bool = False) -> int:
    state = SuggestionState()
    presence = PresenceTracker(away_after_s)
    wake = threading.Event()  # the poller's: it tells the service at once

    session = _prompt_session(state, project, enter_accepts, presence, focus_reporting,
                              wake.set)
    poller = Poller(project, state, on_change=lambda: session.app.invalidate(),
                    presence=presence, wake=wake)

    _follow_keys(session, state, presence, poller)
    try:
        client = ServiceClient(project, timeout_s=30.0)
    except ServiceNotRunning as exc:
        render.error(str(exc))
        return EXIT_NO_SERVICE
    renew = threading.Event()  # the service was replaced: the next request on a new socket

    def service_changed(sentence: str | None, restarted: bool) -> None:
        if restarted:
            renew.set()
            poller.reconnect.set()
            state.service_note = None
            state.flash = sentence  # until the next keystroke
        else:
            state.service_note = sentence
        session.app.invalidate()

    watch = ServiceWatch(project, client.pid, service_changed, verbose)
    poller.start()
    watch.start()
    slash = SlashContext(project, client, cli, verbose=verbose)
    line = ""  # put back in the line when it could not be sent
    try:
        _banner(client, enter_accepts)
        show_recap(client)
        while True:
            try:
                answer = session.prompt(default=line)
            except KeyboardInterrupt:
                line = ""
                continue  # Ctrl-C at the prompt clears the line
            except EOFError:
                _say_what_keeps_running(state, watch)
                return EXIT_OK
            line = ""
            if renew.is_set() and is_running(project):
                renew.clear()
                client.close()
                client = ServiceClient(project, timeout_s=30.0)  # the new service's
                slash.client = client
            if renew.is_set() or not watch.alive or not is_running(project):
                render.error(stopped_sentence(project))
                line = answer.text if isinstance(answer, Accepted) else str(answer)
                continue
            if not isinstance(answer, Accepted) and is_command(str(answer)):
                if run_slash(slash, str(answer)):
                    _say_what_keeps_running(state, watch)
                    return EXIT_OK
                continue
            request = _request_for(answer, client, state)
            if request is not None:
                state.clear()
                _run_turn(client, request)
                state.clear()
    except ServiceNotRunning as exc:  # gone between a look and a connect: said, left
        render.error(str(exc))
        return EXIT_NO_SERVICE
    finally:
        watch.stopping.set()
        poller.stopping.set()
        poller.wake.set()
        poller.join(timeout=3)
        watch.join(timeout=3)
        client.close()


def _follow_keys(session: PromptSession[object], state: SuggestionState,
                 presence: PresenceTracker, poller: Poller) -> None:
    """What the chat learns from each key: that the person is here, and what they typed
    (the poller asks the service at once when either changes)."""

    def key_pressed(processor: KeyProcessor) -> None:
        # After each key read: one that only starts a longer sequence (ESC of a focus
        # report, say) waits for the binding it leads to; a focus report is no keystroke.
        if processor.key_buffer or presence.was_focus_report():
            return
        presence.key_pressed()
        poller.wake.set()  # an away chat is present again at once

    session.app.key_processor.after_key_press += key_pressed

    def typed(buffer: Buffer) -> None:
        if state.set_typed(buffer.text):
            poller.wake.set()

    session.default_buffer.on_text_changed += typed


def _say_what_keeps_running(state: SuggestionState, watch: ServiceWatch) -> None:
    """Leaving the chat leaves the service (and any speculation) running: say so, and
    how to stop it."""
    if not watch.alive:
        render.console.print("Left the chat; the service is not running.", highlight=False)
        return
    running = [b for b in state.branches(visible_only=False)
               if b.speculation is not None and b.speculation.status == "running"]
    also = ""
    if running:
        also = (f", with the speculation of “{inert(running[0].text, multiline=False)}” "
                "still running")
    render.console.print(
        "Left the chat. The specrun service keeps running in the background"
        f"{f' (pid {watch.pid})' if watch.verbose else ''}{also}; `specrun chat` comes back "
        "to this conversation, "
        "`specrun stop` stops it.", highlight=False)
