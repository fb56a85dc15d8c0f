"""`specrun chat` in a pseudo-terminal read as a person sees it: every byte it writes goes
through a terminal emulator (pyte), so a full-screen view that redraws only what changed
can be read back row by row, and what the chat showed before it comes back when it
closes. The raw bytes are kept too, for the escape-sequence checks."""

from __future__ import annotations

import contextlib
import copy
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pexpect
import pyte

from tests.support import REPO, Specrun

CPR_REQUEST = b"\x1b[6n"  # prompt_toolkit asks the terminal where the cursor is
# A full-screen view draws on the alternate screen; leaving it brings back what was there
# (pyte has no alternate screen: kept here, as xterm does).
ALT_SCREEN_ON = b"\x1b[?1049h"
ALT_SCREEN_OFF = b"\x1b[?1049l"
_OWN = (CPR_REQUEST, ALT_SCREEN_ON, ALT_SCREEN_OFF)
_OWN_SPLIT = re.compile(b"(" + b"|".join(re.escape(seq) for seq in _OWN) + b")")


class ScreenTerminal:
    """A pexpect child drawn on a pyte screen; answers cursor-position requests with the
    emulated cursor, as a real terminal does."""

    def __init__(self, runner: Specrun, *args: str, rows: int = 24, cols: int = 120) -> None:
        env = {**runner.env.vars, "TERM": "xterm-256color", "COLUMNS": str(cols),
               "LINES": str(rows)}
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        self._pending = b""  # the tail of a chunk that may be the start of a sequence
        self._saved: tuple[Any, Any] | None = None  # the main screen, while the alternate shows
        self.child = pexpect.spawn(
            sys.executable, ["-m", "coordinator", "--project", str(runner.project), *args],
            env=env, cwd=str(REPO), encoding=None, dimensions=(rows, cols), timeout=60,
        )

    def _pump(self, wait_s: float) -> None:
        try:
            chunk: bytes = self.child.read_nonblocking(65536, timeout=wait_s)
        except pexpect.TIMEOUT:
            return
        except pexpect.EOF:
            raise AssertionError(f"the chat ended; its screen:\n{self.text()}") from None
        self.raw += chunk
        data = self._pending + chunk
        # A sequence cut at the chunk's end waits for the rest.
        cut = data.rfind(b"\x1b")
        if cut >= 0 and any(seq.startswith(data[cut:]) and seq != data[cut:] for seq in _OWN):
            data, self._pending = data[:cut], data[cut:]
        else:
            self._pending = b""
        for piece in _OWN_SPLIT.split(data):
            if piece == CPR_REQUEST:  # answer with where the cursor is at this point
                self.child.send(f"\x1b[{self.screen.cursor.y + 1};{self.screen.cursor.x + 1}R")
            elif piece == ALT_SCREEN_ON:
                self._saved = (copy.deepcopy(self.screen.buffer), copy.copy(self.screen.cursor))
                self.screen.erase_in_display(2)
            elif piece == ALT_SCREEN_OFF:
                if self._saved is not None:
                    self.screen.buffer, self.screen.cursor = self._saved
                    self.screen.dirty.update(range(self.screen.lines))
                    self._saved = None
            else:
                self.stream.feed(piece)

    def rows(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def text(self) -> str:
        return "\n".join(self.rows())

    def wait(self, predicate: Callable[[ScreenTerminal], bool], timeout: float = 30,
             what: str = "") -> None:
        """Read until ``predicate`` holds of the screen (or fail, showing it)."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"waited for {what or predicate}; the screen:\n{self.text()}"
                                     f"\nthe last bytes: {bytes(self.raw[-600:])!r}")
            self._pump(0.05)

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Read until the screen shows ``pattern`` (a regex); its match."""
        found: list[re.Match[str]] = []

        def shows(term: ScreenTerminal) -> bool:
            match = re.search(pattern, term.text())
            if match:
                found.append(match)
            return match is not None

        self.wait(shows, timeout, pattern)
        return found[0]

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
        self.child.close()


@contextlib.contextmanager
def chats(runner: Specrun) -> Iterator[Callable[..., ScreenTerminal]]:
    """``start(*args, rows=40, cols=120)`` opens ``specrun *args`` (a chat) in a terminal of
    its own and waits for its prompt; every terminal opened is closed at the end, and the
    service the chats started is stopped."""
    started: list[ScreenTerminal] = []

    def start(*args: str, rows: int = 40, cols: int = 120) -> ScreenTerminal:
        term = ScreenTerminal(runner, *args, rows=rows, cols=cols)
        started.append(term)
        term.wait_for("Ctrl-D quits")
        return term

    try:
        yield start
    finally:
        for term in started:
            term.close()
        runner.run("stop")
