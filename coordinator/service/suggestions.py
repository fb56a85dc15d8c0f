"""Predicting the user's next prompt with the fast model (SPEC §6)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from protocol.chat import CacheSafeSnapshot, Message
from protocol.control import SuppressReason
from protocol.model import ChatRequest, ModelClient, ModelError
from protocol.suggestion import (
    SUGGESTION_PROMPT,
    SUGGESTION_SCHEMA,
    filter_suggestion,
    parse_suggestion_reply,
)

log = logging.getLogger("specrun.suggestions")


@dataclass(frozen=True)
class SuggestionResult:
    text: str | None
    suppressed: SuppressReason | None  # the filter or condition that stopped it


async def generate_suggestion(
    model: ModelClient, snapshot: CacheSafeSnapshot, fast_model: str
) -> SuggestionResult:
    """A forked query: the main chat's exact prefix plus the suggestion prompt."""
    request = ChatRequest(
        system=snapshot.system,
        history=(*snapshot.history, Message.user(SUGGESTION_PROMPT)),
        tools=snapshot.tools,
        model=fast_model,
        purpose="suggestion",
        enable_thinking=False,
        json_schema=SUGGESTION_SCHEMA,
        json_schema_name="suggestion",
    )
    try:
        result = await model.complete(request)
    except ModelError as exc:
        log.info("suggestion request failed: %s", exc)
        return SuggestionResult(None, "error")
    if result.refusal is not None:
        log.info("the suggestion model refused: %s", result.refusal)
        return SuggestionResult(None, "refusal")
    text = parse_suggestion_reply(result.message.text)
    reason = filter_suggestion(text)
    if reason is not None:
        return SuggestionResult(None, reason)
    return SuggestionResult(text.strip(), None)
