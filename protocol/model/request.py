"""What one chat-completions request is, what comes back, and the request body.

The body is built deterministically: the same system instruction, tools and
history always serialize to the same bytes, in the same key order, so a forked
request (suggestion, speculation, pipelined suggestion) shares the main chat's
prefix byte for byte and a provider's prefix cache can hit.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from protocol.wire.chat import Message, ToolSpec, Usage, to_openai

Purpose = Literal["main", "suggestion", "speculation", "pipelined", "recall", "compaction"]
PURPOSES: tuple[Purpose, ...] = (
    "main",
    "suggestion",
    "speculation",
    "pipelined",
    "recall",
    "compaction",
)

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


class ChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Everything that defines one model request.

    ``enable_thinking`` ``False`` turns a Qwen model's thinking off (forked queries);
    ``None`` leaves the server's default. ``json_schema`` asks for structured output
    (``response_format`` of type ``json_schema`` named ``json_schema_name``).
    """

    system: str | None
    history: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    model: str
    purpose: Purpose
    temperature: float | None = None
    enable_thinking: bool | None = None
    json_schema: dict[str, Any] | None = None
    json_schema_name: str = "response"
    max_tokens: int | None = None


class TextDelta(msgspec.Struct, frozen=True, tag="text_delta"):
    """A piece of visible answer text, as it streams in."""

    text: str


class ThinkingDelta(msgspec.Struct, frozen=True, tag="thinking_delta"):
    """A piece of the model's thinking; shown for progress, never kept in the message."""

    text: str


class ToolCallDelta(msgspec.Struct, frozen=True, tag="tool_call_delta"):
    """A tool call started (its name is known); its arguments are still streaming."""

    index: int
    id: str
    name: str


class ChatResult(msgspec.Struct, frozen=True, tag="chat_result"):
    """The finished answer: an assistant message with its visible text and named tool
    calls (thinking dropped), token usage, the finish reason and the server's id.

    ``refusal``: the model declined (OpenAI's ``refusal`` field); then ``finish_reason``
    is ``refusal`` and callers must not take the empty text for an answer."""

    message: Message
    usage: Usage
    finish_reason: str
    request_id: str | None = None
    refusal: str | None = None


class RetryWait(msgspec.Struct, frozen=True, tag="retry_wait"):
    """The request failed in a way that may pass (a rate limit, an overloaded or failing
    server, a dropped connection) and the client waits ``delay_s`` before attempt
    ``attempt`` of ``attempts``. ``text`` says so in one sentence for a person;
    ``asked_s`` is what the server asked for when that was more than the client waits."""

    reason: Literal["rate_limit", "server", "connect"]
    delay_s: float
    attempt: int
    attempts: int
    text: str
    status: int | None = None
    asked_s: float | None = None


StreamEvent = TextDelta | ThinkingDelta | ToolCallDelta | RetryWait | ChatResult


def _with_cache_marker(entry: dict[str, Any]) -> dict[str, Any]:
    """A copy of an OpenAI message whose last content part carries ``cache_control``.

    String content becomes a one-part list; a message without content (an assistant
    message with only tool calls) is returned unchanged: there is no part to mark.
    """
    content = entry.get("content")
    if isinstance(content, str):
        parts: list[Any] = [{"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        parts = [*content[:-1], {**content[-1], "cache_control": dict(EPHEMERAL)}]
    else:
        return entry
    return {**entry, "content": parts}


def build_body(
    req: ChatRequest,
    *,
    stream: bool,
    cache_markers: bool = False,
    thinking_style: Literal["top_level", "both", "omit"] = "top_level",
) -> dict[str, Any]:
    """The JSON body of a chat-completions request.

    Key order is fixed (``model``, ``messages``, ``tools``, then the options) so equal
    inputs give equal bytes. ``cache_markers`` adds DashScope's explicit cache
    markers: ``cache_control`` on the system message's last part, and when streaming
    also on the last message and on the last tool. ``thinking_style`` says how
    ``enable_thinking`` is sent: as a top-level field (DashScope), also inside
    ``chat_template_kwargs`` (vLLM, SGLang, llama.cpp), or not at all (servers that
    reject unknown fields).
    """
    messages = to_openai(req.system, req.history)
    tools = [t.to_openai() for t in req.tools]
    if cache_markers:
        if messages and messages[0].get("role") == "system":
            messages[0] = _with_cache_marker(messages[0])
        if stream and messages:
            messages[-1] = _with_cache_marker(messages[-1])
        if stream and tools:
            tools[-1] = {**tools[-1], "cache_control": dict(EPHEMERAL)}

    body: dict[str, Any] = {"model": req.model, "messages": messages}
    if tools:
        body["tools"] = tools
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.max_tokens is not None:
        body["max_tokens"] = req.max_tokens
    if req.enable_thinking is not None and thinking_style != "omit":
        body["enable_thinking"] = req.enable_thinking
        if thinking_style == "both":
            body["chat_template_kwargs"] = {"enable_thinking": req.enable_thinking}
    if req.json_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": req.json_schema_name, "schema": req.json_schema},
        }
    return body


def encode_body(body: dict[str, Any]) -> bytes:
    """The body as compact JSON bytes, keys in insertion order."""
    return msgspec.json.encode(body)
