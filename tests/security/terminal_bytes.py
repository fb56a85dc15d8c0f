"""Reading what a command writes to a pseudo-terminal, byte for byte, and checking that
no escape sequence in it came from untrusted text."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping

import pexpect

from protocol.text.inert_text import find_hidden
from tests.support import REPO, Specrun

# What specrun's own renderers write: rich's colours, cursor hide/show and the spinner's
# one-line erase; prompt_toolkit (chat) also moves the cursor, sets modes and asks where
# the cursor is. Never OSC, DCS, or any other introducer.
RICH_OWN = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[1A|\x1b\[2K|\r")
# prompt_toolkit's own cursor moves; a move one column back it writes as a bare backspace
# (its renderer's cursor_backward(1)), which only ever comes right before the prompt sign.
PROMPT_TOOLKIT_OWN = re.compile(
    r"\x1b\[\??[0-9;]*[ABCDGHJKlhmnr]|\x1b[78]|\r|\x08(?=(?:\x1b\[\??[0-9;]*[A-Za-z])*❯)"
)


def terminal_env(runner: Specrun) -> dict[str, str]:
    return {**runner.env.vars, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "50"}


def in_terminal(runner: Specrun, *args: str, answer: str | None = None) -> str:
    """Run ``specrun ARGS`` in a pseudo-terminal; the raw bytes it wrote, decoded.
    ``answer``: what the person types at each approval question (none expected without)."""
    child = pexpect.spawn(
        sys.executable, ["-m", "coordinator", "--project", str(runner.project), *args],
        env=terminal_env(runner), cwd=str(REPO), encoding=None, dimensions=(50, 160),
        timeout=60,
    )
    try:
        raw: bytes = b""
        while answer is not None and child.expect([rb"\[y/[a-z/]+\]: ", pexpect.EOF]) == 0:
            raw += (child.before or b"") + (child.after or b"")
            child.sendline(answer)
        if answer is None:
            child.expect(pexpect.EOF)
        raw += child.before or b""
    finally:
        if child.isalive():
            child.terminate(force=True)
        child.close()
    return raw.decode("utf-8", "replace")


def assert_only_own_sequences(raw: str, marked: Mapping[str, str],
                              own: re.Pattern[str] = RICH_OWN) -> str:
    """``raw`` holds none of the ``marked`` pairs (a marker word and the hostile control
    that follows it in the untrusted text: found even where the control is one specrun
    also writes), and, once specrun's own sequences are taken out, no control, bidi or
    invisible character; returns that text, as a person reads it."""
    for word, control in marked.items():
        assert word + control not in raw, f"the {control!r} after {word!r} reached the tty"
    shown = own.sub("", raw)
    hidden = find_hidden(shown, allow="\n")
    assert hidden is None, f"{hidden!r} reached the terminal: {shown!r}"
    return shown
