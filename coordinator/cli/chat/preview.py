"""The chat's preview (Ctrl-O): what Tab would apply now with the speculation of the
suggestion shown, before pressing it.

The service computes it as accept computes its listing (``DiffRequest``, the same answer
``specrun diff`` prints): first the files (created, modified, deleted, mode changed), the
warning naming files that run later without a key press, and the sentence saying Tab would
refuse it when a real file changed since the speculation read it; then the unified diff of
each file. A running speculation shows what it wrote so far; each opening (and ``r``) asks
again. Every file name, diff line and the suggestion's text pass through the display rule
(``protocol.text.inert_text``) before they reach the screen.

It is a full-screen pager run inside the chat (``in_terminal``): the prompt and what is typed
in it stay as they were, and Esc (or q) returns to them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from prompt_toolkit.application import Application, in_terminal
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.input import Input, create_input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.key_binding.bindings.scroll import (
    scroll_one_line_down,
    scroll_one_line_up,
    scroll_page_down,
    scroll_page_up,
)
from prompt_toolkit.layout import HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.lexers import Lexer
from prompt_toolkit.styles import Style

from coordinator.cli.changes_view import (
    classified_lines,
    conflicts_line,
    file_line,
    ignored_line,
    runs_later_line,
    state_phrase,
)
from coordinator.cli.client import ServiceClient, ServiceNotRunning, ServiceTimeout
from protocol.text.branch_number import branch_name
from protocol.text.inert_text import inert
from protocol.wire.control import DiffReply, DiffRequest, ErrorReply

PREVIEW_KEY = "c-o"
PREVIEW_KEY_NAME = "Ctrl-O"
END_MARK = "(end)"
FETCH_TIMEOUT_S = 10.0

Line = list[tuple[str, str]]  # (style, text) fragments of one screen line, without newline

STYLE = Style.from_dict({
    "preview.title": "bold",
    "preview.suggestion": "bold ansicyan",
    "preview.created": "ansigreen",
    "preview.modified": "ansiyellow",
    "preview.deleted": "ansired",
    "preview.mode": "ansicyan",
    "preview.warning": "bold ansiyellow",
    "preview.refused": "bold ansired",
    "preview.muted": "#a0a0a0",
    "preview.file": "bold",
    "preview.hunk": "ansicyan",
    "preview.added": "ansigreen",
    "preview.removed": "ansired",
    "preview.context": "",
    "preview.status": "reverse",
})


def preview_lines(reply: DiffReply | str) -> list[Line]:
    """The preview, one entry per screen line: files, warnings and conflicts first, then
    each file's diff. A ``str`` is a sentence saying why there is nothing to show."""
    if isinstance(reply, str):
        return [[("class:preview.refused", inert(reply, multiline=False))]]
    lines: list[Line] = [[
        ("class:preview.title", "What Tab would do with "),
        ("class:preview.suggestion", f"“{inert(reply.suggestion, multiline=False)}”"),
        ("", f" ({branch_name(reply.rank)}; {state_phrase(reply)})"),
    ]]
    if reply.refused:
        lines.append([("class:preview.refused", f"  {inert(reply.refused, multiline=False)}")])
        return lines
    changes = [f.change for f in reply.files]
    listed = [f for f in reply.files if not f.change.summarized]
    if not changes:
        lines.append([("class:preview.muted", "  no file changes")])
    for item in listed:
        lines.append([(f"class:preview.{item.change.status}", f"  {file_line(item)}")])
    warning = runs_later_line(changes)
    if warning:
        lines.append([("class:preview.warning", f"  {warning}")])
    summary = ignored_line([c for c in changes if c.summarized], 0, applied=False)
    if summary:
        lines.append([("class:preview.muted", f"  {summary}")])
    refuse = conflicts_line(changes)
    if refuse:
        lines.append([("class:preview.refused", f"  {refuse}")])
    for item in listed:
        if not item.diff:
            continue
        lines.append([])
        for text, kind in classified_lines(item.diff):
            lines.append([(f"class:preview.{kind}", inert(text, multiline=False))])
    return lines


def fetch_preview(project: Path, rank: int) -> DiffReply | str:
    """Ask the service what Tab would do now with the speculation of rank ``rank`` (its
    own socket: this runs off the prompt's thread)."""
    try:
        with ServiceClient(project, timeout_s=FETCH_TIMEOUT_S) as client:
            reply = client.request(DiffRequest(req_id=client.next_id(), index=rank))
    except (ServiceNotRunning, ServiceTimeout) as exc:
        return str(exc)
    if isinstance(reply, DiffReply):
        return reply
    if isinstance(reply, ErrorReply):
        return reply.message
    return "The service gave no preview."


class _Lines(Lexer):
    """Colours the pager's lines from the fragments they were made of."""

    def __init__(self) -> None:
        self.lines: list[Line] = []

    def lex_document(self, document: Document) -> Callable[[int], StyleAndTextTuples]:
        lines = self.lines

        def line(lineno: int) -> StyleAndTextTuples:
            return list(lines[lineno]) if lineno < len(lines) else []

        return line


class Preview:
    """The pager: a read-only buffer of the preview's lines, scrolled with the arrows,
    PgUp/PgDn, Home/End (and Space, b), refreshed with r, closed with Esc or q."""

    def __init__(self, load: Callable[[], DiffReply | str], keys: Input | None = None) -> None:
        self.load = load
        self.lexer = _Lines()
        self.buffer = Buffer(read_only=True)
        self.body = Window(BufferControl(self.buffer, lexer=self.lexer, focusable=True),
                           wrap_lines=True, always_hide_cursor=True)
        status = Window(FormattedTextControl(self._status), height=1, style="class:preview.status")
        self.app: Application[None] = Application(
            layout=Layout(HSplit([self.body, status]), focused_element=self.body),
            key_bindings=self._bindings(),
            style=STYLE,
            full_screen=True,
            input=keys,
        )
        # Esc alone closes after 0.1 s (as vim waits), not half a second; longer than the
        # gap inside one arrow key's bytes on a local terminal
        self.app.ttimeoutlen = 0.1

    async def refresh(self) -> None:
        reply = await asyncio.to_thread(self.load)
        self.show(preview_lines(reply))

    def show(self, lines: list[Line]) -> None:
        self.lexer.lines = lines
        text = "\n".join("".join(t for _, t in line) for line in lines)
        self.buffer.set_document(Document(text, 0), bypass_readonly=True)
        self.body.vertical_scroll = 0

    def _status(self) -> StyleAndTextTuples:
        count = len(self.lexer.lines)
        info = self.body.render_info
        if info is None or not count:
            where = ""
        else:
            first, last = info.first_visible_line() + 1, info.last_visible_line() + 1
            end = f" {END_MARK}" if last >= count else ""
            where = f"lines {first}-{last} of {count}{end} · "
        return [("", f" {where}↑↓ PgUp PgDn Home End scroll · r refreshes · Esc closes ")]

    def _bindings(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("escape", eager=True)
        @kb.add("q")
        @kb.add("c-c")
        @kb.add(PREVIEW_KEY)
        def _close(event: KeyPressEvent) -> None:
            event.app.exit()

        kb.add("down")(scroll_one_line_down)
        kb.add("up")(scroll_one_line_up)
        kb.add("pagedown")(scroll_page_down)
        kb.add(" ")(scroll_page_down)
        kb.add("pageup")(scroll_page_up)
        kb.add("b")(scroll_page_up)

        @kb.add("home")
        @kb.add("g")
        def _top(event: KeyPressEvent) -> None:
            self.buffer.cursor_position = 0
            self.body.vertical_scroll = 0

        @kb.add("end")
        @kb.add("G")
        def _bottom(event: KeyPressEvent) -> None:
            self.buffer.cursor_position = len(self.buffer.text)

        @kb.add("r")
        async def _refresh(event: KeyPressEvent) -> None:
            await self.refresh()

        return kb


async def show_preview(project: Path, rank: int) -> None:
    """Open the preview of the speculation of rank ``rank`` over the chat's prompt; back
    to the prompt, as it was, when it closes."""
    # Its own reader of the terminal's keys, not the chat's: the chat prompt flushes its
    # reader half a second after the last key it read (Ctrl-O), and through a shared one
    # that late flush took the Esc the preview was holding for its own 0.1 s wait.
    keys = create_input()
    try:
        preview = Preview(lambda: fetch_preview(project, rank), keys)
        await preview.refresh()
        async with in_terminal():
            await preview.app.run_async()
    finally:
        keys.close()
