"""`specrun chat` in a pseudo-terminal read as a person sees it: every byte it writes goes
through a terminal emulator (pyte), so a full-screen view that redraws only what changed
can be read back row by row. The raw bytes are kept too, for the escape-sequence checks."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable

import pexpect
import pyte

from tests.support import REPO, Specrun

CPR_REQUEST = b"\x1b[6n"  # prompt_toolkit asks the terminal where the cursor is


class ScreenTerminal:
    """A pexpect child drawn on a pyte screen; answers cursor-position requests with the
    emulated cursor, as a real terminal does."""

    def __init__(self, runner: Specrun, *args: str, rows: int = 24, cols: int = 120) -> None:
        env = {**runner.env.vars, "TERM": "xterm-256color", "COLUMNS": str(cols),
               "LINES": str(rows)}
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        self._pending = b""  # the tail of a chunk that may be the start of a CPR request
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
        # feed up to each CPR request, then answer with where the cursor is at that point
        parts = data.split(CPR_REQUEST)
        for part in parts[:-1]:
            self.stream.feed(part)
            self.child.send(f"\x1b[{self.screen.cursor.y + 1};{self.screen.cursor.x + 1}R")
        tail = parts[-1]
        cut = tail.rfind(b"\x1b")
        if cut >= 0 and CPR_REQUEST.startswith(tail[cut:]):
            self._pending = tail[cut:]
            tail = tail[:cut]
        else:
            self._pending = b""
        self.stream.feed(tail)

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
                raise AssertionError(f"waited for {what or predicate}; the screen:\n{self.text()}")
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

