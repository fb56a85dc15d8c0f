"""Predicting the person's next prompt after a main turn (design §6): the fast model is
asked, in the background, for the next prompt (up to ``speculationBranches`` ranked ones)
as a forked request over the main chat's exact prefix, and what passes the filters is
offered as the next suggestion; otherwise the reason none is shown is kept.

With ``speculationBranches`` N > 1 the same forked request asks for up to N ranked
alternatives in one structured answer; N == 1 sends exactly the single-suggestion request.
The prompt and the reading of its answer are ``protocol.prompts.prediction``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import get_args

import msgspec

from coordinator.service.speculation.context import Offer, SpeculationContext, SpeculationPart
from coordinator.service.speculation.suggestion import SUGGESTION_DELAY_MS
from protocol.model import ChatRequest, ChatResult, ModelClient, ModelError
from protocol.prompts.prediction import (
    ALTERNATIVES_SCHEMA_NAME,
    filter_alternatives,
    filter_suggestion,
    parse_alternatives_reply,
    parse_suggestion_reply,
    suggestion_prompt,
    suggestion_schema,
)
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import CacheSafeSnapshot, Message
from protocol.wire.control import SuppressReason, TurnEndReason

log = logging.getLogger("specrun.suggestions")

# The schema name the single-suggestion request has always carried (N == 1 stays
# byte-identical: provider prefix caches and recorded requests see no change).
SINGLE_SCHEMA_NAME = "suggestion"
_SUPPRESS_REASONS: frozenset[str] = frozenset(get_args(SuppressReason))


@dataclass(frozen=True)
class Prediction:
    text: str | None  # the top guess
    suppressed: SuppressReason | None  # the filter or condition that stopped it
    # Every guess that passed the filters, best first (``text`` is the first); one at most
    # when a single suggestion was asked for.
    alternatives: tuple[str, ...] = ()
    # Guesses dropped by the filters, with the reason (``duplicate`` among them).
    dropped: tuple[tuple[str, str], ...] = field(default=())


async def predict_next_prompt(
    model: ModelClient, snapshot: CacheSafeSnapshot, fast_model: str, n: int = 1
) -> Prediction:
    """A forked query: the main chat's exact prefix plus the suggestion prompt asking for up
    to ``n`` ranked guesses. Structured output first; a server that rejects the schema
    (HTTP 4xx) is asked once more for raw text, which the parsers also read."""
    request = ChatRequest(
        system=snapshot.system,
        history=(*snapshot.history, Message.user(suggestion_prompt(n))),
        tools=snapshot.tools,
        model=fast_model,
        purpose="suggestion",
        enable_thinking=False,
        json_schema=suggestion_schema(n),
        json_schema_name=SINGLE_SCHEMA_NAME if n == 1 else ALTERNATIVES_SCHEMA_NAME,
    )
    try:
        result = await _complete(model, request)
    except ModelError as exc:
        log.info("suggestion request failed: %s", exc)
        return Prediction(None, "error")
    if result.refusal is not None:
        log.info("the suggestion model refused: %s", result.refusal)
        return Prediction(None, "refusal")
    if n == 1:
        text = parse_suggestion_reply(result.message.text)
        reason = filter_suggestion(text)
        if reason is not None:
            return Prediction(None, reason)
        return Prediction(text.strip(), None, (text.strip(),))
    guesses = parse_alternatives_reply(result.message.text, n)
    kept, dropped = filter_alternatives(guesses)
    if dropped:
        log.info("suggestion guesses dropped: %s", dropped)
    if not kept:
        return Prediction(None, _first_reason(dropped), (), tuple(dropped))
    return Prediction(kept[0], None, tuple(kept), tuple(dropped))


async def _complete(model: ModelClient, request: ChatRequest) -> ChatResult:
    try:
        return await model.complete(request)
    except ModelError as exc:
        if exc.kind != "bad_request":
            raise
        log.info("structured suggestion refused (%s); asking for raw text", exc)
    return await model.complete(msgspec.structs.replace(request, json_schema=None))


def _first_reason(dropped: list[tuple[str, str]]) -> SuppressReason:
    """Why a whole answer is suppressed: the best-ranked guess's reason."""
    for _, reason in dropped:
        if reason in _SUPPRESS_REASONS:
            return reason  # type: ignore[return-value]  # checked just above
    return "empty"


class Predictor(SpeculationPart):
    """Asks the fast model after each completed turn and hands what it predicts to
    ``offer``; a suggestion still on its way when the person moves on is cancelled."""

    def __init__(self, context: SpeculationContext, model: ModelClient, offer: Offer) -> None:
        super().__init__(context)
        self.model = model
        self.offer = offer
        self._generation: asyncio.Task[object] | None = None
        self._backoff_skipped = 0  # turns skipped since the last prediction while backing off
        # The last turn's prediction was skipped because nobody looked: made when someone
        # looks again, unless something was sent meanwhile.
        self._skipped_while_away = False
        context.viewers.on_return = self.returned

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
        absent = self.context.viewers.absent()
        if absent is not None:
            self._skipped_while_away = True
            self._suppress(absent)
            return
        guard = self._guard()
        if guard is not None:
            self._suppress(guard)
            return
        self._generation = self.context.background.spawn(self._suggest())

    def returned(self) -> None:
        """Someone looks again: the turn that ended while nobody looked gets its
        prediction now (the person is back at the prompt, about to type the next one),
        through the same guards as at the turn's end."""
        if not self._skipped_while_away or self.chat.busy or self.generating:
            return
        self._skipped_while_away = False
        if self.context.shown.current is not None:
            return
        guard = self._guard()
        if guard is not None:
            self._suppress(guard)
            return
        self.context.stats.made_on_return += 1
        log.info("someone looks again: predicting the next prompt now")
        self._generation = self.context.background.spawn(self._suggest())

    def _guard(self) -> SuppressReason | None:
        """Why a prediction would not earn its tokens now: the provider's prefix cache is
        cold (it would pay for the whole prompt again), or the last suggestions went
        unused (back off: predict every 2nd, 4th, then 8th turn until one is taken)."""
        cold = self.settings.suggestion_cold_cache_tokens
        main = self.context.stats.cost.by_purpose.get("main")
        if cold and main is not None and main.last_uncached > cold:
            return "cold_cache"
        after = self.settings.suggestion_backoff_after
        streak = self.context.stats.unused_streak
        if not after or streak < after:
            self._backoff_skipped = 0
            return None
        every = min(8, 2 ** (streak - after + 1))
        if self._backoff_skipped + 1 < every:
            self._backoff_skipped += 1
            return "backoff"
        self._backoff_skipped = 0
        return None

    async def _suggest(self) -> None:
        snapshot = self.chat.snapshot
        if snapshot is None:
            self._suppress("no_snapshot")
            return
        result = await predict_next_prompt(
            self.model, snapshot, self.chat.fast_model, self.settings.speculation_branches
        )
        if result.text is None:
            self._suppress(result.suppressed or "empty")
            return
        await self.offer(result.alternatives or result.text, SUGGESTION_DELAY_MS / 1000)

    def cancel(self) -> None:
        """The person moved on: a suggestion still being generated for the previous turn
        (or a pipelined one still on its way) must not appear during the next one."""
        self.context.shown.moved_on()
        self._skipped_while_away = False
        if self._generation is not None and not self._generation.done():
            self._generation.cancel()
        self._generation = None

    async def wait_visible(self, timeout_s: float) -> None:
        """Until a suggestion is visible or generation is over."""
        deadline = time.monotonic() + timeout_s
        if self._generation is not None:
            # asyncio.wait neither raises if the generation is cancelled nor cancels it.
            await asyncio.wait({self._generation}, timeout=timeout_s)
        current = self.context.shown.current
        if current is not None and not current.visible:
            await asyncio.sleep(max(0.0, min(current.delay_s, deadline - time.monotonic())))

    def _suppress(self, reason: SuppressReason) -> None:
        self.context.shown.suppressed(reason)
        self.context.stats.suppressed[reason] += 1
