"""`specrun chat` and the terminal's focus (issue 35), in a real pseudo-terminal against a
real service on the scripted model. The test is the terminal: the chat turns focus
reporting on (ESC [ ? 1004 h) and the test answers as a terminal does, ESC [ O when the
window loses focus and ESC [ I when it gets it back. Neither sequence may reach the screen
or the line; while the chat is unfocused (or away: no keystroke for suggestionAwayMinutes)
the service skips the next prompt's prediction, and makes it when the person is back; when
the chat ends, however it ends, focus reporting is off (ESC [ ? 1004 l)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import pexpect
import pytest

from protocol.wire.control import SuggestionRequest
from tests.coordinator.pty_screen import ScreenTerminal, chats
from tests.support import Specrun, wait_until

FIX = "fix the failing test in tests/test_calc.py"
NEG = "add a test for negative numbers"
FOCUS_ON = b"\x1b[?1004h"
FOCUS_OFF = b"\x1b[?1004l"
FOCUS_IN = "\x1b[I"
FOCUS_OUT = "\x1b[O"


def _settings(specrun: Specrun, **values: Any) -> None:
    """The person's own user-wide settings (the chat and the service read them)."""
    path = specrun.env.home / ".specrun" / "settings.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(values))


@pytest.fixture
def chat(specrun: Specrun) -> Iterator[Any]:
    with chats(specrun) as start:
        yield lambda: start("chat", "--approval-mode", "auto-edit")


def _suggestion(specrun: Specrun) -> dict[str, Any]:
    reply: dict[str, Any] = specrun.query(SuggestionRequest)
    return reply


def _reporting(term: ScreenTerminal) -> bool:
    """Focus reporting is on: the last of the two modes the chat wrote is 1004 h."""
    return term.raw.rfind(FOCUS_ON) > term.raw.rfind(FOCUS_OFF)


def _ends(term: ScreenTerminal) -> None:
    """Read the chat's last bytes until it exits."""
    term.child.expect(pexpect.EOF, timeout=15)
    term.raw += term.child.before


def _no_garbage(term: ScreenTerminal) -> None:
    text = term.text()
    assert "[O" not in text and "[I" not in text and "^[" not in text, text


def test_an_unfocused_chat_skips_the_prediction_and_makes_it_on_focus(
    chat: Any, specrun: Specrun
) -> None:
    term: ScreenTerminal = chat()
    term.wait(_reporting, what="focus reporting on")

    # A focus change in the middle of typing: read, neither shown nor put in the line.
    term.send("fix the failing")
    term.wait_for("❯ fix the failing")
    term.send(FOCUS_OUT)
    term.send(" test in tests/test_calc.py")
    term.wait_for("❯ " + FIX)
    _no_garbage(term)

    term.send("\r")  # sent while unfocused (a paste from elsewhere, say)
    term.wait_for("done in")
    assert wait_until(lambda: _suggestion(specrun)["suppressed_reason"] == "unfocused",
                      timeout=15)
    term.wait_for("no suggestion")
    assert _suggestion(specrun)["text"] is None
    assert "no answer scripted" not in term.text()  # the model got the line as typed

    term.send(FOCUS_IN)  # the person is back: the skipped prediction is made now
    term.wait_for(NEG)
    term.wait_for("speculation completed")
    _no_garbage(term)
    stats = specrun.json("stats")
    assert stats["suggestions_suppressed"]["by_reason"] == {"unfocused": 1}
    assert stats["suggestions_made_on_return"] == 1

    term.send("\x04")  # Ctrl-D: the terminal stops reporting focus
    _ends(term)
    assert not _reporting(term)


def test_focus_reporting_is_off_after_quit_and_sigterm(chat: Any) -> None:
    quit_ = chat()
    quit_.wait(_reporting, what="focus reporting on")
    quit_.send("/quit\r")
    _ends(quit_)
    assert not _reporting(quit_)

    killed = chat()
    killed.wait(_reporting, what="focus reporting on")
    killed.child.kill(signal.SIGTERM)  # a chat ended from outside
    _ends(killed)
    assert not _reporting(killed)


def test_a_chat_without_keystrokes_is_away_and_a_key_brings_the_prediction(
    chat: Any, specrun: Specrun
) -> None:
    # away after 0.6 s without a keystroke; focus reporting off (nothing asks the terminal)
    _settings(specrun, suggestionAwayMinutes=0.01, suggestionFocusReporting=False,
              suggestionBackoffAfter=0)
    term: ScreenTerminal = chat()
    term.wait(lambda t: b"Ctrl-D quits" in t.raw)
    assert FOCUS_ON not in term.raw
    # the turn comes from the command line while the chat sits untouched
    term.wait(lambda t: _idle(specrun), timeout=15, what="the chat away")
    specrun.run("ask", FIX, check=True)
    assert specrun.json("suggestion", "--wait")["suppressed_reason"] == "away"
    # A terminal reporting the focus it already had (tmux does at every prompt) is no
    # keystroke: the chat stays away.
    term.send(FOCUS_IN)
    _pump_for(term, 1.0)
    assert "): present" not in specrun.run("logs", "-n", "400").stdout
    assert _suggestion(specrun)["text"] is None
    term.send(" ")  # a keystroke: present again, and the skipped prediction is made
    assert wait_until(lambda: _suggestion(specrun)["text"] == NEG, timeout=15)
    assert specrun.json("stats")["suggestions_made_on_return"] == 1


def _pump_for(term: ScreenTerminal, seconds: float) -> None:
    """Let the chat run (its output read) for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        term._pump(0.05)


def _idle(specrun: Specrun) -> bool:
    """The service's log says the chat reported itself away."""
    return "): away" in specrun.run("logs", "-n", "400").stdout
