"""``Viewers``: who looks, from the chats' reports, with real processes (a pidfd in a real
event loop tells of an exit) and a clock the test moves (a report goes stale)."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from coordinator.service.speculation.viewers import STALE_AFTER_S, Viewers


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _process() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"])


def test_nobody_looks_only_when_every_live_report_says_so() -> None:
    async def run() -> None:
        clock = Clock()
        viewers = Viewers(clock)
        returns: list[int] = []
        viewers.on_return = lambda: returns.append(1)
        first, second = _process(), _process()
        try:
            assert viewers.absent() is None  # no chat: nothing is skipped
            viewers.report(first.pid, "unfocused")
            assert viewers.absent() == "unfocused"
            viewers.report(second.pid, "away")
            assert viewers.absent() == "away"  # not all unfocused: away
            viewers.report(second.pid, "present")
            assert viewers.absent() is None and returns == [1]
            viewers.report(second.pid, "present")  # a refresh is no return
            assert returns == [1]

            second.kill()
            second.wait()
            await asyncio.sleep(0.05)  # the loop reads the pidfd
            assert viewers.absent() == "unfocused"  # the dead chat no longer counts

            clock.now += STALE_AFTER_S + 1  # the live one stopped reporting
            assert viewers.absent() is None
            viewers.report(first.pid, "present")  # it reports again: someone is back
            assert returns == [1, 1]
            viewers.report(first.pid, "gone")
            assert viewers.absent() is None and viewers.live() == []
        finally:
            for proc in (first, second):
                proc.kill()
                proc.wait()
            viewers.close()

    asyncio.run(run())


def test_a_report_for_a_process_that_does_not_run_is_refused() -> None:
    async def run() -> None:
        viewers = Viewers()
        gone = subprocess.Popen(["true"])
        gone.wait()
        with pytest.raises(ProcessLookupError):
            viewers.report(gone.pid, "away")
        assert viewers.absent() is None

    asyncio.run(run())
