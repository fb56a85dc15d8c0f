"""What the live view (``SubscribeRequest``) is told, and the snapshot it starts from.

The service's parts report here as things happen: every turn event a client is sent
(``turn_event``), every prompt (``prompt``), every event of a speculation's worker
(``worker_event``), and "something about the suggestion may have changed" (``poke``).
Nothing is built unless someone subscribed (``LiveHub.active``), so a service nobody
watches pays one attribute test per event.

While someone watches, a tick compares the suggestion and the stats with what was last
sent (every ``TICK_S``, and at once after a poke) and samples the workers' CPU, memory and
overlay sizes once a second (``workers``); each live speculation's steps and diff are
kept and sent by ``speculations.SpeculationViews``. All of it goes out through the hub,
which never waits for a subscriber.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from coordinator.service.live.hub import LiveHub, SendNowait
from coordinator.service.live.speculations import MAX_ENTRY_CHARS, SpeculationViews
from coordinator.service.live.workers import WorkerSampler
from coordinator.service.speculation import render_transcript
from protocol.wire.chat import Message
from protocol.wire.control import (
    AcceptRequest,
    ApprovalNeeded,
    AskRequest,
    ControlReply,
    ControlRequest,
    LiveChange,
    LivePrompt,
    LiveReset,
    LiveSnapshot,
    LiveStats,
    LiveSuggestion,
    LiveTurnEvent,
    LiveWorkers,
    Notice,
    StatusReply,
    SuggestionReply,
    TextChunk,
    ToolShown,
    Transcript,
    TranscriptEntry,
    TurnEnded,
)
from protocol.wire.display import cut
from protocol.wire.work import (
    WorkerEvent,
)

if TYPE_CHECKING:
    from coordinator.service.chat import MainChat
    from coordinator.service.pool import WorkerHandle, WorkerPool
    from coordinator.service.speculation import SpeculationManager

log = logging.getLogger("specrun.live")

TICK_S = 0.25
TEXT_FLUSH_S = 0.05  # streamed text reaches the view at most this late
WORKERS_EVERY_S = 1.0
MAX_CONVERSATION = 400  # entries in a snapshot (the newest)
TURN_EVENTS = (TextChunk, ToolShown, ApprovalNeeded, Notice, Transcript, TurnEnded)


def conversation_entries(history: list[Message]) -> tuple[TranscriptEntry, ...]:
    """The chat history as the view shows it: each user prompt, then the model's text and
    tool calls (the rendering an accepted speculation's transcript uses)."""
    entries: list[TranscriptEntry] = []
    starts = [i for i, m in enumerate(history) if m.role == "user"]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(history)
        entries += render_transcript(history[start].text, history[start + 1 : end])
    kept = entries[-MAX_CONVERSATION:]
    return tuple(
        msgspec.structs.replace(e, text=cut(e.text, MAX_ENTRY_CHARS)) for e in kept
    )


class LiveState:
    """What the live view is told; its hub (``LiveHub``) sends it to the subscribers
    through ``send_nowait``."""

    def __init__(
        self,
        send_nowait: SendNowait,
        project_root: Path,
        chat: MainChat,
        speculation: SpeculationManager,
        pool: WorkerPool,
        status: Callable[[int], StatusReply],
    ) -> None:
        self.hub = LiveHub(send_nowait, on_active=self._start_ticking)
        self.project_root = project_root
        self.chat = chat
        self.speculation = speculation
        self.pool = pool
        self.status = status
        self._turns: OrderedDict[tuple[bytes, int], int] = OrderedDict()
        self._turn_count = 0
        self.speculations = SpeculationViews(self.hub, project_root, speculation, self._spawn)
        self._last: dict[str, bytes] = {}
        self._workers = WorkerSampler(pool)
        self._last_workers = LiveWorkers(())
        self._tick: asyncio.Task[object] | None = None
        self._watch: asyncio.Task[object] | None = None
        self._poked = False
        self._session = chat.session_id
        self._tasks: set[asyncio.Task[object]] = set()
        # Streamed text not sent yet: (turn, the asking client's req_id) and its pieces.
        self._text_turn: tuple[int, int] | None = None
        self._text: list[str] = []
        self._text_timer: asyncio.TimerHandle | None = None

    # -- what the service reports ----------------------------------------------------

    def _publish(self, change: LiveChange) -> None:
        self.hub.publish(change)

    def _turn(self, identity: bytes, req_id: int) -> int:
        key = (identity, req_id)
        turn = self._turns.get(key)
        if turn is None:
            self._turn_count += 1
            turn = self._turns[key] = self._turn_count
            while len(self._turns) > 64:
                self._turns.popitem(last=False)
        return turn

    def request(self, identity: bytes, request: ControlRequest) -> None:
        """A control request arrived: a prompt (or an accept, whose prompt is the branch
        it takes) starts a turn in the view."""
        if not self.hub.active:
            return
        text: str | None = None
        if isinstance(request, AskRequest):
            text = request.text.strip()
        elif isinstance(request, AcceptRequest):
            current = self.speculation.current
            stale = request.shown_text is not None and (
                current is None
                or not current.shows(request.index, request.shown_text, request.shown_speculation)
            )
            if current is not None and not stale:  # a stale one is refused: no turn
                index = request.index
                branch = current.top if index is None else current.branch(index)
                text = branch.text if branch is not None else None
        if text:
            turn = self._turn(identity, request.req_id)
            self._publish(LivePrompt(turn, text))

    def turn_event(self, identity: bytes, reply: ControlReply) -> None:
        """A turn event a client was sent. Streamed text is gathered for up to
        ``TEXT_FLUSH_S`` and sent as one chunk (a model streams a few words at a time:
        hundreds of events a turn, which a person reads no faster in); any other event of
        the turn sends the text gathered before it first, so the order stays."""
        if not self.hub.active or not isinstance(reply, TURN_EVENTS):
            return
        turn = self._turn(identity, reply.req_id)
        if isinstance(reply, TextChunk):
            if self._text_turn is not None and self._text_turn[0] != turn:
                self._flush_text()
            if self._text_turn is None:
                self._text_turn = (turn, reply.req_id)
                loop = asyncio.get_running_loop()
                self._text_timer = loop.call_later(TEXT_FLUSH_S, self._flush_text)
            self._text.append(reply.text)
            return
        self._flush_text()
        self._publish(LiveTurnEvent(turn, reply))
        if isinstance(reply, (TurnEnded, Transcript)):
            self.poke()

    def _flush_text(self) -> None:
        if self._text_timer is not None:
            self._text_timer.cancel()
            self._text_timer = None
        if self._text_turn is None:
            return
        (turn, req_id), text = self._text_turn, "".join(self._text)
        self._text_turn = None
        self._text.clear()
        if self.hub.active:
            self._publish(LiveTurnEvent(turn, TextChunk(req_id, text)))

    def worker_event(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        """An event of a worker; a speculation's steps stream to the view."""
        if not self.hub.active or handle.job_kind != "speculation":
            return
        spec_id = getattr(event, "job_id", None)
        if not spec_id:
            return
        self.speculations.event(spec_id, event)
        self.poke()

    def reset(self) -> None:
        if self.hub.active:
            self._publish(LiveReset(self.chat.session_id))

    def poke(self) -> None:
        """The suggestion or the stats may have changed: compare and send soon."""
        if not self.hub.active or self._poked:
            return
        self._poked = True
        asyncio.get_running_loop().call_soon(self._check)

    # -- the periodic comparison -------------------------------------------------------

    def _start_ticking(self) -> None:
        if self._tick is None or self._tick.done():
            self._tick = self._spawn(self._ticking())
        if self._watch is None or self._watch.done():
            self._watch = self._spawn(self._watching_the_suggestion())

    async def _watching_the_suggestion(self) -> None:
        """Poke when the speculation core says the shown suggestion changed (it never
        calls up into this layer: it sets ``ShownSuggestion.changed``)."""
        changed = self.speculation.shown.changed
        while self.hub.active:
            await changed.wait()
            changed.clear()
            self.poke()

    async def _ticking(self) -> None:
        next_workers = 0.0
        while self.hub.active:
            self._check()
            self.hub.catch_up()
            now = time.monotonic()
            if now >= next_workers:
                next_workers = now + WORKERS_EVERY_S
                workers = await self._workers.sample()
                if self._changed("workers", workers):
                    self._last_workers = workers
                    self._publish(workers)
                await self.speculations.recheck_real_files()
            await asyncio.sleep(TICK_S)

    def _changed(self, key: str, value: object) -> bool:
        encoded = msgspec.msgpack.encode(value)
        if self._last.get(key) == encoded:
            return False
        self._last[key] = encoded
        return True

    def _check(self) -> None:
        self._poked = False
        if not self.hub.active:
            return
        if self.chat.session_id != self._session:
            self._session = self.chat.session_id
            self.reset()
        suggestion = self._suggestion()
        if self._changed("suggestion", suggestion):
            self._publish(LiveSuggestion(suggestion))
        stats = self._stats()
        if self._changed("stats", stats):
            self._publish(stats)

    def _suggestion(self) -> SuggestionReply:
        return self.speculation.suggestion_reply(0)

    def _stats(self) -> LiveStats:
        stats = self.speculation.stats_reply(0)
        by_rank: dict[int, int] = {}
        for record in self.speculation.stats.branches.values():
            by_rank[record.rank] = by_rank.get(record.rank, 0) + 1
        return LiveStats(stats, by_rank)

    # -- the snapshot ------------------------------------------------------------------

    async def snapshot(self, req_id: int) -> LiveSnapshot:
        await self.speculations.fill_diffs()
        if not self._last_workers.workers:
            self._last_workers = await self._workers.sample()
        # Everything below is read without a wait in between: the state as of ``seq``.
        suggestion = self._suggestion()
        live_ids = [b.speculation.id for b in suggestion.branches if b.speculation is not None]
        current = self.speculation.current
        live = [s for s in (current.speculations() if current is not None else [])
                if s.id in live_ids]
        return LiveSnapshot(
            req_id=req_id,
            seq=self.hub.seq,
            status=self.status(req_id),
            conversation=conversation_entries(self.chat.history),
            suggestion=suggestion,
            steps=self.speculations.steps_of(live),
            diffs=self.speculations.diffs_of(live_ids),
            workers=self._last_workers,
            stats=self._stats(),
        )

    def close(self) -> None:
        self.hub.close()
        if self._text_timer is not None:
            self._text_timer.cancel()
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
