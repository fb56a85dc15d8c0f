"""A small abort signal with listeners, the asyncio counterpart of an ``AbortController``.

``asyncio.Event`` can be awaited but cannot call anyone back, and the prefetch handle needs
to *bridge* a turn's abort into its own (and to remove that bridge when the recall settles).
:class:`AbortSignal` is an event (``is_set`` / ``wait``, so it can stand in wherever an
``asyncio.Event`` is expected) plus listeners that run synchronously when it fires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TypeAlias

log = logging.getLogger(__name__)


class AbortSignal:
    """Fires once; listeners added before firing run once, listeners added after run at once."""

    __slots__ = ("_event", "_listeners", "reason")

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._listeners: list[Callable[[str], None]] = []
        self.reason: str | None = None

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> bool:
        return await self._event.wait()

    def abort(self, reason: str = "aborted") -> None:
        """Fire the signal (idempotent: only the first reason is kept)."""
        if self._event.is_set():
            return
        self.reason = reason
        self._event.set()
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            try:
                listener(reason)
            except Exception:  # a broken listener must not stop the others
                log.exception("abort listener failed")

    # ``asyncio.Event`` spelling, so an AbortSignal can be handed to code expecting an Event.
    def set(self) -> None:
        self.abort()

    def add_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call ``listener(reason)`` when the signal fires; returns a function removing it.

        If the signal already fired, the listener runs now and the remover is a no-op.
        """
        if self._event.is_set():
            listener(self.reason or "aborted")
            return _noop
        self._listeners.append(listener)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return remove

    @property
    def listener_count(self) -> int:
        return len(self._listeners)


def _noop() -> None:
    return None


# Anything recall can watch for an abort: an ``asyncio.Event`` or an ``AbortSignal``.
AbortLike: TypeAlias = asyncio.Event | AbortSignal
