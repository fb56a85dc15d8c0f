"""The suggestion after a main turn: the fast model predicts the next prompt (up to
``speculationBranches`` ranked ones) in the background, or says why it will not."""

from __future__ import annotations

import asyncio
import time

from coordinator.service.ports import ForkSource
from coordinator.service.speculation.background import Background
from coordinator.service.speculation.board import Board, Offer
from coordinator.service.speculation.predict import generate_suggestion
from coordinator.service.speculation.stats import Stats
from coordinator.service.speculation.suggestion import SUGGESTION_DELAY_MS
from coordinator.settings import Settings
from protocol.model import ModelClient
from protocol.wire.approval import ApprovalMode
from protocol.wire.control import SuppressReason, TurnEndReason


class SuggestionGenerator:
    """Asks the fast model after each completed turn and hands what it predicts to
    ``offer``; a suggestion still on its way when the person moves on is cancelled."""

    def __init__(
        self,
        settings: Settings,
        chat: ForkSource,
        model: ModelClient,
        stats: Stats,
        board: Board,
        background: Background,
        offer: Offer,
    ) -> None:
        self.settings = settings
        self.chat = chat
        self.model = model
        self.stats = stats
        self.board = board
        self.background = background
        self.offer = offer
        self._generation: asyncio.Task[object] | None = None

    @property
    def generating(self) -> bool:
        return self._generation is not None and not self._generation.done()

    def after_turn(self, reason: TurnEndReason, mode: ApprovalMode) -> None:
        """A main turn ended; predict the next prompt in the background."""
        if not self.settings.enable_followup_suggestions:
            return
        if reason != "completed" or mode is ApprovalMode.PLAN:
            return
        if self.chat.model_turns() < 2:
            self._suppress("early_conversation")
            return
        self._generation = self.background.spawn(self._suggest())

    async def _suggest(self) -> None:
        snapshot = self.chat.snapshot
        if snapshot is None:
            self._suppress("no_snapshot")
            return
        result = await generate_suggestion(
            self.model, snapshot, self.chat.fast_model, self.settings.speculation_branches
        )
        if result.text is None:
            self._suppress(result.suppressed or "empty")
            return
        await self.offer(result.alternatives or result.text, SUGGESTION_DELAY_MS / 1000)

    def cancel(self) -> None:
        """The person moved on: a suggestion still being generated for the previous turn
        (or a pipelined one still on its way) must not appear during the next one."""
        self.board.moves += 1
        if self._generation is not None and not self._generation.done():
            self._generation.cancel()
        self._generation = None

    async def wait_visible(self, timeout_s: float) -> None:
        """Until a suggestion is visible or generation is over."""
        deadline = time.monotonic() + timeout_s
        if self._generation is not None:
            # asyncio.wait neither raises if the generation is cancelled nor cancels it.
            await asyncio.wait({self._generation}, timeout=timeout_s)
        current = self.board.current
        if current is not None and not current.visible:
            await asyncio.sleep(max(0.0, min(current.delay_s, deadline - time.monotonic())))

    def _suppress(self, reason: SuppressReason) -> None:
        self.board.last_suppressed = reason
        self.stats.suppressed[reason] += 1
