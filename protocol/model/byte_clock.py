"""When the last byte of a streamed answer came, for the wait for the next one.

A wait is bounded by bytes, not by events: ``llama-server`` sends an SSE comment (``:``)
every 30 s while it reads a long prompt, which is no event but says the server is alive and
working, so it restarts the between-bytes timeout. Servers that send nothing while they read
(Ollama, vLLM, older llama.cpp) meet the first-byte deadline instead (``first_byte.py``).

The clock wraps the response's byte stream; while the client waits for an event it lends
the clock that wait's ``asyncio.Timeout``, which every chunk pushes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

import httpx

T = TypeVar("T")


class ByteClock(httpx.AsyncByteStream):
    """Stands in for ``response.stream``; ``last`` is the loop time of the latest chunk
    (None before the first)."""

    def __init__(self, response: httpx.Response, between_s: float, deadline: float | None) -> None:
        inner = response.stream
        assert isinstance(inner, httpx.AsyncByteStream)
        self._inner = inner
        self._between_s = between_s
        self._deadline = deadline
        self._loop = asyncio.get_running_loop()
        self.last: float | None = None
        self.waiting: asyncio.Timeout | None = None
        response.stream = self

    def next_limit(self, first_by: float) -> float:
        """When the wait for the next bytes ends: the first-byte deadline before any byte,
        else the between-bytes timeout after the last; never past the total deadline."""
        when = first_by if self.last is None else self.last + self._between_s
        return when if self._deadline is None else min(when, self._deadline)

    async def next_event(self, events: AsyncIterator[T], first_by: float) -> T:
        """The next of ``events``, waited for until ``next_limit`` (pushed back by every
        chunk meanwhile); ``TimeoutError`` when it passes. Only the wait is timed, never
        the caller's time between events."""
        try:
            async with asyncio.timeout_at(self.next_limit(first_by)) as waiting:
                self.waiting = waiting
                return await anext(events)
        finally:
            self.waiting = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            if chunk:
                self.last = self._loop.time()
                if self.waiting is not None:
                    self.waiting.reschedule(self.next_limit(self.last))
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
