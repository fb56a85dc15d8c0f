"""Async memory recall for the main turn loop: fire on a user query, never wait for it.

How the turn loop uses a :class:`MemoryPrefetcher` (one per chat session)::

    # a user query arrives
    prefetcher.fire(query, turn_abort)              # starts recall in the background
    ... prepare the request (history, tools, other system reminders) ...
    prompt = prefetcher.consume_for_user_query()    # consume point 1: no waiting
    if prompt: reminders.insert(0, prompt)          #   memory goes FIRST among the reminders

    # every tool-result turn of that query
    prompt = prefetcher.consume_for_tool_results()  # consume point 2: no waiting
    if prompt: tool_message reminders += (prompt,)  #   memory goes AFTER the tool results

    # every early/abnormal exit of the turn (limits, stop signal, loop detected, error…)
    prefetcher.abort_and_clear(AbortReason.SESSION_TOKEN_LIMIT)
    # `specrun reset`
    prefetcher.reset()

A recall result is used at most once (also an empty one) and never crosses into a later user
query: the next :meth:`MemoryPrefetcher.fire` aborts whatever is still pending. A normal end
of turn keeps the pending handle. A recall that raises is logged and counts as empty.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from .abort import AbortLike, AbortSignal
from .recall import EMPTY_RECALL, RecallResult

log = logging.getLogger(__name__)

#: ``recall_fn(query, excluded_paths, abort)`` — :class:`~.recall.Recaller` fits.
RecallFn = Callable[[str, frozenset[str], AbortSignal], Awaitable[RecallResult]]
ConsumePoint = Literal["user_query", "tool_results"]


class AbortReason(StrEnum):
    """Why a pending recall was dropped (the places the turn loop must call abort_and_clear)."""

    NEW_USER_QUERY = "new_user_query"
    RESET = "reset"
    MAX_SESSION_TURNS = "max_session_turns"
    BOUNDED_TURNS_ZERO = "bounded_turns_zero"
    SESSION_TOKEN_LIMIT = "session_token_limit"
    CONTROL_STOP = "control_stop"
    LOOP_DETECTED = "loop_detected"
    ERROR = "error"
    TURN_ABORTED = "turn_aborted"
    ABNORMAL_EXIT = "abnormal_exit"
    SHUTDOWN = "shutdown"


@dataclass(eq=False)
class MemoryPrefetchHandle:
    """One in-flight (or finished, not yet used) recall for one user query."""

    task: asyncio.Task[RecallResult]
    abort: AbortSignal
    query: str
    fired_at: float  # time.monotonic()
    settled_at: float | None = None  # time.monotonic() when the task finished, else None
    consumed: bool = False
    _unbridge: Callable[[], None] = field(default=lambda: None, repr=False)

    def is_settled(self) -> bool:
        """Whether the recall has finished (a synchronous check, never waits)."""
        if self.settled_at is None and self.task.done():
            self._on_settled()  # the done callback is merely scheduled; settle now
        return self.settled_at is not None

    def _on_settled(self, _task: object = None) -> None:
        if self.settled_at is None:
            self.settled_at = time.monotonic()
        unbridge, self._unbridge = self._unbridge, _noop
        unbridge()  # the turn's abort no longer needs to reach this handle

    def result_now(self) -> RecallResult:
        """The finished result; empty if it is not finished, was cancelled or failed."""
        if not self.task.done() or self.task.cancelled() or self.task.exception() is not None:
            return EMPTY_RECALL
        return self.task.result()

    def cancel(self, reason: str) -> None:
        """Abort the recall: fires the abort signal, which also cancels the task."""
        self.abort.abort(reason)

    @property
    def latency_s(self) -> float | None:
        return None if self.settled_at is None else self.settled_at - self.fired_at


@dataclass(frozen=True, slots=True)
class Consumption:
    """What one consume point took (for logs, stats and tests)."""

    point: ConsumePoint
    result: RecallResult
    waited_s: float  # how long after the fire the result was used


@dataclass(slots=True)
class PrefetchStats:
    fired: int = 0
    consumed_user_query: int = 0
    consumed_tool_results: int = 0
    injected: int = 0
    aborted: int = 0
    failed: int = 0


def _noop() -> None:
    return None


class MemoryPrefetcher:
    """Owns the pending recall of one chat session and the paths already shown to the model."""

    def __init__(self, recall_fn: RecallFn, *, enabled: bool = True) -> None:
        self._recall_fn = recall_fn
        self.enabled = enabled
        self.pending: MemoryPrefetchHandle | None = None
        self.surfaced_paths: set[str] = set()
        self.stats = PrefetchStats()
        self.last_consumption: Consumption | None = None

    # ------------------------------------------------------------------ fire

    def fire(self, query: str, turn_abort: AbortLike | None = None) -> MemoryPrefetchHandle | None:
        """Start recall for a new user query in the background; returns at once.

        Aborts and drops the previous handle first. ``turn_abort`` (an :class:`AbortSignal`
        or an ``asyncio.Event``) is bridged to the new handle: already set → aborted at once;
        the bridge is removed when the recall settles. Must be called on the event loop.
        """
        self.abort_and_clear(AbortReason.NEW_USER_QUERY)
        if not self.enabled:
            return None
        abort = AbortSignal()
        task = asyncio.get_running_loop().create_task(
            self._run(query, frozenset(self.surfaced_paths), abort), name="memory-recall"
        )
        handle = MemoryPrefetchHandle(
            task=task, abort=abort, query=query, fired_at=time.monotonic()
        )

        def cancel_task(_reason: str) -> None:
            task.cancel()

        abort.add_listener(cancel_task)
        handle._unbridge = _bridge(turn_abort, abort)
        task.add_done_callback(handle._on_settled)
        self.pending = handle
        self.stats.fired += 1
        return handle

    async def _run(self, query: str, excluded: frozenset[str], abort: AbortSignal) -> RecallResult:
        try:
            return await self._recall_fn(query, excluded, abort)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A broken recall must never break the turn: it simply has nothing to say.
            self.stats.failed += 1
            log.warning("memory recall failed; continuing without memory", exc_info=True)
            return EMPTY_RECALL

    # ------------------------------------------------------------------ consume

    def consume_for_user_query(self) -> str | None:
        """Consume point 1, right before the user-query request is sent. Never waits.

        The memory prompt if the recall has finished and was not used yet, else ``None``.
        The caller puts it FIRST among the request's system reminders.
        """
        return self._consume("user_query")

    def consume_for_tool_results(self) -> str | None:
        """Consume point 2, on each tool-result turn until consumed. Never waits.

        The caller APPENDS it after the tool results (never before them).
        """
        return self._consume("tool_results")

    def _consume(self, point: ConsumePoint) -> str | None:
        handle = self.pending
        if handle is None or handle.consumed or not handle.is_settled():
            return None
        handle.consumed = True
        self.pending = None
        result = handle.result_now()
        if point == "user_query":
            self.stats.consumed_user_query += 1
        else:
            self.stats.consumed_tool_results += 1
        self.last_consumption = Consumption(point, result, time.monotonic() - handle.fired_at)
        if not result.prompt:
            return None
        self.stats.injected += 1
        self.surfaced_paths.update(d.path for d in result.selected_docs)
        log.debug(
            "memory injected at %s: %d doc(s), strategy %s",
            point,
            len(result.selected_docs),
            result.strategy,
        )
        return result.prompt

    # ------------------------------------------------------------------ cleanup

    def abort_and_clear(self, reason: str = AbortReason.ABNORMAL_EXIT) -> bool:
        """Abort the pending recall (if any) and drop it. True if there was one."""
        handle, self.pending = self.pending, None
        if handle is None:
            return False
        if not handle.is_settled():
            self.stats.aborted += 1
            log.debug("memory recall aborted: %s", reason)
        handle.cancel(str(reason))
        return True

    def reset(self) -> None:
        """New chat: drop the pending recall and forget which memories were shown."""
        self.abort_and_clear(AbortReason.RESET)
        self.surfaced_paths.clear()

    async def aclose(self) -> None:
        """Abort the pending recall and wait until its task has unwound (service shutdown)."""
        handle = self.pending
        self.abort_and_clear(AbortReason.SHUTDOWN)
        if handle is not None:
            await asyncio.gather(handle.task, return_exceptions=True)


def _bridge(turn_abort: AbortLike | None, target: AbortSignal) -> Callable[[], None]:
    """Make ``turn_abort`` abort ``target``; returns the function that removes the bridge."""
    if turn_abort is None:
        return _noop
    if turn_abort.is_set():
        target.abort(AbortReason.TURN_ABORTED)
        return _noop
    if isinstance(turn_abort, AbortSignal):
        return turn_abort.add_listener(lambda _r: target.abort(AbortReason.TURN_ABORTED))

    # A plain asyncio.Event cannot call back: a tiny watcher task stands in for the listener.
    async def watch() -> None:
        await turn_abort.wait()
        target.abort(AbortReason.TURN_ABORTED)

    watcher = asyncio.get_running_loop().create_task(watch(), name="memory-recall-abort-bridge")

    def remove() -> None:
        watcher.cancel()

    return remove
