"""The main chat's one-turn-at-a-time slot.

A turn, an accept and ``specrun compact`` each hold it, so the history only ever grows from
one place at a time. Two things make it more than a lock:

- a prompt waiting for it can be called off (Ctrl-C) and then never runs;
- an accept can hand it on to a follow-up (the compaction its turn made due) that runs in
  the background: the accept's reply does not wait for it, but the next turn does, and so
  does the next speculation (``forkable``), which must never fork from the over-full
  history.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

FollowUp = Coroutine[Any, Any, None]


class TurnSlot:
    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._follow_up: asyncio.Task[None] | None = None
        self._forkable = asyncio.Event()  # clear from an accept's record to its snapshot
        self._forkable.set()

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    async def take(self, cancelled: asyncio.Event) -> bool:
        """Wait for the slot: True once held, False (not held) if ``cancelled`` is set
        first, so a Ctrl-C ends a waiting prompt at once."""
        acquiring = asyncio.ensure_future(self._lock.acquire())
        stop = asyncio.ensure_future(cancelled.wait())
        try:
            await asyncio.wait({acquiring, stop}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # this request itself was cancelled (shutdown)
            await self._give_up(acquiring)
            raise
        finally:
            stop.cancel()
        if cancelled.is_set():
            await self._give_up(acquiring)
            return False
        return True

    async def _give_up(self, acquiring: asyncio.Task[bool]) -> None:
        """Stop waiting for the slot; if it was taken in the same moment, hand it back."""
        acquiring.cancel()
        try:
            await acquiring
        except asyncio.CancelledError:
            return  # never taken
        self._lock.release()

    def release(self) -> None:
        self._lock.release()

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        async with self._lock:
            yield

    def snapshot_changing(self) -> None:
        """An accept recorded its turn: speculations wait (``forkable``) until it leaves
        the slot with the new snapshot taken."""
        self._forkable.clear()

    @asynccontextmanager
    async def held_for_accept(self, settle: Callable[[], FollowUp | None]) -> AsyncIterator[None]:
        """Held while an accept applies its speculation; on the way out ``settle`` takes the
        snapshot, or returns the follow-up that must run first, which then keeps the slot
        until it ends (in the background)."""
        await self._lock.acquire()
        follow_up: FollowUp | None = None
        try:
            yield
        finally:
            try:
                follow_up = settle()
            finally:
                if follow_up is None:
                    self._forkable.set()
                    self._lock.release()
                else:
                    self._follow_up = asyncio.ensure_future(follow_up)
                    # A done callback, not a ``finally`` in the follow-up: it runs even when
                    # the task is cancelled before its first step (a reset right after).
                    self._follow_up.add_done_callback(self._follow_up_done)

    def _follow_up_done(self, task: asyncio.Task[None]) -> None:
        self._follow_up = None
        self._forkable.set()
        self._lock.release()
        if not task.cancelled():
            task.exception()  # the follow-up logs its own failures; this marks it seen

    def cancel_follow_up(self) -> None:
        """Reset or shutdown: stop an accept's follow-up (it releases the slot as it ends)."""
        if self._follow_up is not None:
            self._follow_up.cancel()

    async def forkable(self) -> None:
        """Until the snapshot is the one to fork the next speculation from."""
        await self._forkable.wait()
