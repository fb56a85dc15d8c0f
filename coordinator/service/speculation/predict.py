"""Predicting the user's next prompt with the fast model (design §6).

With ``speculationBranches`` N > 1 the same forked request asks for up to N ranked
alternatives in one structured answer; N == 1 sends exactly the single-suggestion request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import get_args

import msgspec

from protocol.model import ChatRequest, ChatResult, ModelClient, ModelError
from protocol.prompts.suggestion import (
    ALTERNATIVES_SCHEMA_NAME,
    filter_alternatives,
    filter_suggestion,
    parse_alternatives_reply,
    parse_suggestion_reply,
    suggestion_prompt,
    suggestion_schema,
)
from protocol.wire.chat import CacheSafeSnapshot, Message
from protocol.wire.control import SuppressReason

log = logging.getLogger("specrun.suggestions")

# The schema name the single-suggestion request has always carried (N == 1 stays
# byte-identical: provider prefix caches and recorded requests see no change).
SINGLE_SCHEMA_NAME = "suggestion"
_SUPPRESS_REASONS: frozenset[str] = frozenset(get_args(SuppressReason))


@dataclass(frozen=True)
class SuggestionResult:
    text: str | None  # the top guess
    suppressed: SuppressReason | None  # the filter or condition that stopped it
    # Every guess that passed the filters, best first (``text`` is the first); one at most
    # when a single suggestion was asked for.
    alternatives: tuple[str, ...] = ()
    # Guesses dropped by the filters, with the reason (``duplicate`` among them).
    dropped: tuple[tuple[str, str], ...] = field(default=())


async def generate_suggestion(
    model: ModelClient, snapshot: CacheSafeSnapshot, fast_model: str, n: int = 1
) -> SuggestionResult:
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
        return SuggestionResult(None, "error")
    if result.refusal is not None:
        log.info("the suggestion model refused: %s", result.refusal)
        return SuggestionResult(None, "refusal")
    if n == 1:
        text = parse_suggestion_reply(result.message.text)
        reason = filter_suggestion(text)
        if reason is not None:
            return SuggestionResult(None, reason)
        return SuggestionResult(text.strip(), None, (text.strip(),))
    guesses = parse_alternatives_reply(result.message.text, n)
    kept, dropped = filter_alternatives(guesses)
    if dropped:
        log.info("suggestion guesses dropped: %s", dropped)
    if not kept:
        return SuggestionResult(None, _first_reason(dropped), (), tuple(dropped))
    return SuggestionResult(kept[0], None, tuple(kept), tuple(dropped))


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
