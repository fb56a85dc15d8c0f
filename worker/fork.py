"""The forked chat of a speculation, and the pipelined suggestion asked through it.

A fork reuses the main chat's request prefix byte for byte: the snapshot's system
instruction, its tools in their fixed order and its last (at most 40) history entries,
exactly as the coordinator captured them. Everything the speculation adds (the
suggestion, model and tool messages, the pipelined prompt) comes after that prefix, so a
provider's prefix cache hits. Thinking is off for every forked request (design §5).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast, get_args

from protocol.model import ChatRequest, ModelClient, ModelError, Purpose
from protocol.prompts.prediction import (
    ALTERNATIVES_SCHEMA_NAME,
    SUGGESTION_SCHEMA,
    filter_alternatives,
    filter_suggestion,
    parse_alternatives_reply,
    parse_suggestion_reply,
    pipelined_prompt,
    suggestion_schema,
)
from protocol.wire.chat import CacheSafeSnapshot, Message, ToolSpec
from protocol.wire.work import PipelinedSkipReason

log = logging.getLogger("specrun.worker.fork")

MAX_HISTORY_FOR_CACHE = 40
PIPELINED_SCHEMA_NAME = "next_user_input"
_SKIP_REASONS = frozenset(get_args(PipelinedSkipReason))


@dataclass(frozen=True, slots=True)
class ForkedChat:
    """The main chat's cache-safe prefix plus a model to ask (the fast model)."""

    system: str
    tools: tuple[ToolSpec, ...]
    history: tuple[Message, ...]
    model: str

    @classmethod
    def from_snapshot(cls, snapshot: CacheSafeSnapshot, model: str = "") -> ForkedChat:
        """A fork of ``snapshot``; an empty ``model`` means the snapshot's (main) model."""
        return cls(
            system=snapshot.system,
            tools=snapshot.tools,
            history=snapshot.history[-MAX_HISTORY_FOR_CACHE:],
            model=model or snapshot.model,
        )

    def request(self, added: Sequence[Message], purpose: Purpose, **options: Any) -> ChatRequest:
        """A request whose history is the fork's prefix followed by ``added``."""
        return ChatRequest(
            system=self.system,
            history=(*self.history, *added),
            tools=self.tools,
            model=self.model,
            purpose=purpose,
            enable_thinking=False,
            **options,
        )


async def pipelined_suggestion(
    client: ModelClient,
    chat: ForkedChat,
    transcript: Sequence[Message],
    suggestion: str,
    n: int = 1,
) -> tuple[tuple[str, ...], PipelinedSkipReason | None]:
    """The next prompt after a completed speculation: ``((text, ...), None)``, best first,
    or ``((), reason)``. ``n`` > 1 asks for that many ranked guesses in the one request
    (``n == 1`` sends exactly the single-guess request).

    ``transcript`` is the speculated conversation starting with the suggestion's user
    message. The pipelined prompt goes after it as one more user message. Structured
    output first; a server that rejects the schema (HTTP 4xx) is asked again for raw
    text. Any failure gives ``((), "error")``: it never fails the speculation.
    """
    model_text = "\n".join(m.text for m in transcript if m.role == "assistant" and m.text)
    added = (*transcript, Message.user(pipelined_prompt(suggestion, model_text, n)))
    schema, name = (
        (SUGGESTION_SCHEMA, PIPELINED_SCHEMA_NAME)
        if n == 1
        else (suggestion_schema(n), ALTERNATIVES_SCHEMA_NAME)
    )
    try:
        try:
            result = await client.complete(
                chat.request(added, "pipelined", json_schema=schema, json_schema_name=name)
            )
        except ModelError as exc:
            if exc.kind != "bad_request":
                raise
            log.info("structured pipelined suggestion refused (%s); asking for raw text", exc)
            result = await client.complete(chat.request(added, "pipelined"))
    except Exception as exc:  # never fails the speculation
        log.warning("pipelined suggestion failed: %s", exc)
        return (), "error"
    if result.refusal is not None:
        return (), "refusal"
    if n == 1:
        text = parse_suggestion_reply(result.message.text)
        reason = filter_suggestion(text)
        if reason is not None:
            return (), reason
        return (text.strip(),), None
    kept, dropped = filter_alternatives(parse_alternatives_reply(result.message.text, n))
    if not kept:  # why the best-ranked guess went
        first = next((why for _, why in dropped if why in _SKIP_REASONS), "empty")
        return (), cast(PipelinedSkipReason, first)
    return tuple(kept), None
