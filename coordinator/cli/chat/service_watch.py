"""The chat follows its service: a thread that looks at the service's pidfile lock every
``WATCH_INTERVAL_S`` (the kernel releases the lock the moment the service dies, so a
look is a syscall, not a request), and says in one sentence when the service stopped or
was replaced by a new one (another pid)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from coordinator.pidfile import is_locked, read_pid
from protocol.wire.endpoints import Endpoints

WATCH_INTERVAL_S = 0.2


def stopped_sentence(project: Path) -> str:
    """Short enough for an 80-column toolbar; ``specrun logs`` says why it stopped."""
    return "The service stopped; `specrun start` starts it and this chat goes on."


def restarted_sentence(before: int | None, now: int | None, verbose: bool = False) -> str:
    """The pids are internals: named only with ``specrun --verbose chat``."""
    pids = f" (pid {before} → {now})" if verbose else ""
    return f"The service was restarted{pids}; the chat goes on with it."


class ServiceWatch(threading.Thread):
    """Calls ``on_change(sentence)`` when the service stops, comes back, or is replaced;
    ``alive`` and ``pid`` are what it saw last."""

    def __init__(self, project: Path, pid: int | None,
                 on_change: Callable[[str | None, bool], None], verbose: bool = False) -> None:
        super().__init__(name="specrun-service-watch", daemon=True)
        self.pidfile = Endpoints.for_project(project, create=False).pidfile
        self.project = project
        self.pid = pid
        self.alive = True
        self.on_change = on_change  # (sentence or None when all is well, restarted)
        self.verbose = verbose
        self.stopping = threading.Event()

    def look(self) -> None:
        alive = is_locked(self.pidfile)
        pid = read_pid(self.pidfile) if alive else None
        if not alive:
            if self.alive:
                self.alive = False
                self.on_change(stopped_sentence(self.project), False)
            return
        if pid is None or pid == self.pid:
            if not self.alive:  # the same pid back: a lock read between writes
                self.alive = True
                self.on_change(None, False)
            return
        before, self.pid, self.alive = self.pid, pid, True
        self.on_change(restarted_sentence(before, pid, self.verbose), True)

    def run(self) -> None:
        while not self.stopping.wait(WATCH_INTERVAL_S):
            self.look()
