"""Stopping a model that repeats itself: the same tool calls, turn after turn."""

from __future__ import annotations

from protocol.wire.chat import Message

LOOP_REPEATS = 4  # reading a file twice is normal; four identical turns in a row is not


class LoopDetector:
    def __init__(self, repeats: int = LOOP_REPEATS) -> None:
        self.repeats = repeats
        self._last: tuple[tuple[str, str], ...] | None = None
        self._count = 0

    def observe(self, answer: Message) -> bool:
        """True once the same batch of calls (names and arguments) came ``repeats`` times
        in a row."""
        batch = tuple((c.name, c.arguments) for c in answer.tool_calls)
        if not batch:
            self._last, self._count = None, 0
            return False
        self._count = self._count + 1 if batch == self._last else 1
        self._last = batch
        return self._count >= self.repeats
