"""Whether someone looks at the chat: its terminal's focus and the time since the last
keystroke, which the chat tells the service (``PresenceRequest``) so that no next prompt is
predicted, and no tokens spent, while nobody looks.

Focus comes from the terminal's focus reporting (DECSET 1004): while it is on, the terminal
sends ESC [ I when it gains focus and ESC [ O when it loses it. prompt_toolkit's input
parser knows neither sequence, so it splits each into the keys Escape, ``[`` and ``I`` (or
``O``); ``focus_bindings`` binds exactly those three-key sequences, so they are read, never
inserted into the line or echoed.

Reporting is on only while the prompt reads the keyboard: ``FocusReportingOutput`` turns it
on and off where prompt_toolkit turns bracketed paste on and off, inside its raw mode. While
a turn runs the terminal is in its ordinary (cooked, echoing) mode and a focus sequence
would be printed as ``^[[O``; many terminals (tmux among them) report the current focus
when reporting is turned on again, so the next prompt learns what happened meanwhile.
``FOCUS_OFF`` is also written when the chat ends, however it ends (``focus_reporting_off``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output
from prompt_toolkit.output.vt100 import Vt100_Output

from protocol.wire.control import Presence

FOCUS_ON = "\x1b[?1004h"
FOCUS_OFF = "\x1b[?1004l"


class PresenceTracker:
    """The terminal's focus (as last reported; focused until told otherwise) and the time
    of the last keystroke; ``state`` is what to tell the service."""

    def __init__(self, away_after_s: float | None, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self.away_after_s = away_after_s  # None: never away
        self.focused = True
        self.last_key = clock()
        self._focus_report = False  # the keys just read were a focus report, not typing

    def key_pressed(self) -> None:
        with self._lock:
            self.last_key = self._clock()

    def focus(self, focused: bool) -> None:
        """A focus report. Coming back is a sign of life; the same state reported again
        is not (tmux, for one, reports the focus each time reporting is turned on, that
        is at every prompt, with nobody there)."""
        with self._lock:
            if focused and not self.focused:
                self.last_key = self._clock()
            self.focused = focused
            self._focus_report = True

    def was_focus_report(self) -> bool:
        """Whether the keys read last were a focus report (then they are no keystroke);
        asked once per binding that ran."""
        with self._lock:
            report, self._focus_report = self._focus_report, False
            return report

    def state(self) -> Presence:
        with self._lock:
            if not self.focused:
                return "unfocused"
            idle = self._clock() - self.last_key
            if self.away_after_s is not None and idle >= self.away_after_s:
                return "away"
            return "present"


def focus_bindings(tracker: PresenceTracker, changed: Callable[[], None]) -> KeyBindings:
    """ESC [ I and ESC [ O, as prompt_toolkit's parser hands them on (three keys each)."""
    kb = KeyBindings()

    @kb.add("escape", "[", "I")
    def _focus_in(event: KeyPressEvent) -> None:
        tracker.focus(True)
        changed()

    @kb.add("escape", "[", "O")
    def _focus_out(event: KeyPressEvent) -> None:
        tracker.focus(False)
        changed()

    return kb


class FocusReportingOutput(Vt100_Output):
    """The terminal's output, with focus reporting on for exactly as long as prompt_toolkit
    has bracketed paste on: while a prompt reads the keyboard in raw mode."""

    def enable_bracketed_paste(self) -> None:
        super().enable_bracketed_paste()
        self.write_raw(FOCUS_ON)

    def disable_bracketed_paste(self) -> None:
        self.write_raw(FOCUS_OFF)
        super().disable_bracketed_paste()


def focus_output() -> Output | None:
    """The output for the chat's prompt with focus reporting, when stdout is a terminal
    (None: prompt_toolkit's own choice)."""
    if not sys.stdout.isatty():
        return None
    return FocusReportingOutput.from_pty(sys.stdout, term=os.environ.get("TERM"))


def focus_reporting_off() -> None:
    """Turn focus reporting off, whatever state the prompt left it in (the chat is
    ending: a shell after it would read ESC [ I as typed text)."""
    if sys.stdout.isatty():
        try:
            sys.stdout.write(FOCUS_OFF)
            sys.stdout.flush()
        except OSError:  # the terminal is gone
            pass
