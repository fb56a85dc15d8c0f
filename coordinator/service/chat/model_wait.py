"""The main chat's model request waiting to retry (a rate limit, an overloaded server, a
dropped connection), kept for as long as the wait lasts so ``specrun status`` can say so."""

from __future__ import annotations

import time

import msgspec

from protocol.model import RetryWait
from protocol.model.retry import wait_sentence
from protocol.wire.control import ModelWaitInfo


class ModelWait:
    def __init__(self) -> None:
        self._wait: tuple[RetryWait, float] | None = None  # the wait, when it ends (monotonic)

    def started(self, wait: RetryWait) -> None:
        self._wait = (wait, time.monotonic() + wait.delay_s)

    def ended(self) -> None:
        self._wait = None

    def info(self) -> ModelWaitInfo | None:
        """The wait as ``specrun status`` shows it: its sentence with the time left."""
        if self._wait is None:
            return None
        wait, until = self._wait
        left = max(0.0, until - time.monotonic())
        return ModelWaitInfo(
            text=wait_sentence(msgspec.structs.replace(wait, delay_s=left)),
            reason=wait.reason,
            seconds_left=round(left, 1),
            attempt=wait.attempt,
            attempts=wait.attempts,
            status=wait.status,
        )
