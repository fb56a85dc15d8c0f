"""Who looks at the session: the chats that report whether someone is at them
(``PresenceRequest``). Predicting the next prompt is skipped while every chat that reports
says nobody looks (``unfocused`` or ``away``); with no such chat (the command line alone,
a script) nothing is skipped.

A chat's report lasts while its process lives (a pidfd tells the event loop when it exits)
and for three refresh periods (``PRESENCE_REFRESH_S``): a chat that died, was stopped
(Ctrl-Z) or lost its connection stops counting either way, so it can neither keep the
service skipping nor keep it predicting for someone long gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from protocol.wire.control import PRESENCE_REFRESH_S, Presence, PresenceReport

log = logging.getLogger("specrun.viewers")

STALE_AFTER_S = 3 * PRESENCE_REFRESH_S

Absence = Literal["unfocused", "away"]


@dataclass(eq=False)
class Viewer:
    client_pid: int
    state: Presence
    reported_at: float
    pidfd: int | None = None


class Viewers:
    """The chats' last reports, by process. ``on_return`` is called when someone looks
    after nobody did: everyone who reported had looked away, or every chat had closed
    and one opens (the person is back either way; the predictor acts only on a turn
    whose prediction was skipped)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._viewers: dict[int, Viewer] = {}
        self.on_return: Callable[[], None] = lambda: None

    def report(self, client_pid: int, state: PresenceReport) -> None:
        """A chat's report; ``ProcessLookupError`` when ``client_pid`` is not running.
        ``gone``: the client no longer reports (its earlier report stops counting)."""
        if state == "gone":
            self.drop(client_pid)
            return
        someone_looked = self.someone_looks()
        viewer = self._viewers.get(client_pid)
        if viewer is None:
            viewer = Viewer(client_pid, state, self._clock())
            try:
                viewer.pidfd = os.pidfd_open(client_pid)
            except OSError:
                raise ProcessLookupError(f"process {client_pid} is not running") from None
            asyncio.get_running_loop().add_reader(viewer.pidfd, self.drop, client_pid)
            self._viewers[client_pid] = viewer
        if viewer.state != state:
            log.info("client (pid %d): %s", client_pid, state)
        viewer.state, viewer.reported_at = state, self._clock()
        if state == "present" and not someone_looked:
            self.on_return()

    def drop(self, client_pid: int) -> None:
        """The chat's process exited: its report no longer counts."""
        viewer = self._viewers.pop(client_pid, None)
        if viewer is None or viewer.pidfd is None:
            return
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(viewer.pidfd)
        os.close(viewer.pidfd)
        log.info("client (pid %d) gone", client_pid)

    def live(self) -> list[Viewer]:
        """The reports that still count (not older than ``STALE_AFTER_S``)."""
        now = self._clock()
        return [v for v in self._viewers.values() if now - v.reported_at <= STALE_AFTER_S]

    def someone_looks(self) -> bool:
        return any(v.state == "present" for v in self.live())

    def absent(self) -> Absence | None:
        """Why nobody looks, when every chat that counts says so: ``unfocused`` when all
        of them lost focus, else ``away``; None when someone looks or no chat reports."""
        states = {v.state for v in self.live()}
        if not states or "present" in states:
            return None
        return "unfocused" if states == {"unfocused"} else "away"

    def close(self) -> None:
        for client_pid in list(self._viewers):
            self.drop(client_pid)
