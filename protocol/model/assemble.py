"""Turning chat-completions answers (streamed chunks or one JSON body) into a result.

Servers differ in how they stream tool calls: OpenAI and vLLM send the id and the
name in a call's first delta and then argument fragments under the same ``index``;
some send a whole call in one delta; some leave ``index`` out (then the id, or the
order, tells calls apart); some (Ollama among them) send every parallel call with
``index`` 0 and a distinct id, so a new id on an occupied index starts a new call.
A refusal (``refusal`` in the delta or message) is kept apart from the text and
makes the result's finish reason ``refusal``. Thinking arrives as
``reasoning_content`` (or ``reasoning``) or, from servers without a reasoning parser,
as a ``<think>…</think>`` block at the start of the content; either way it is
reported as thinking and kept out of the message.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import msgspec

from protocol.model.request import ChatResult, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta
from protocol.wire.chat import Message, ToolCall, Usage

_OPEN = "<think>"
_CLOSE = "</think>"


class ThinkSplitter:
    """Splits streamed content into thinking (a leading ``<think>`` block) and text."""

    def __init__(self) -> None:
        self._state = "start"  # start -> think -> after -> text, or start -> text
        self._buf = ""

    def feed(self, piece: str) -> Iterator[tuple[bool, str]]:
        """Yields ``(is_thinking, text)`` pairs for what can be decided so far."""
        self._buf += piece
        while True:
            if self._state == "start":
                head = self._buf.lstrip()
                if not head or (len(head) < len(_OPEN) and _OPEN.startswith(head)):
                    return
                if head.startswith(_OPEN):
                    self._buf = head[len(_OPEN) :]
                    self._state = "think"
                    continue
                self._state = "text"
                continue
            if self._state == "think":
                end = self._buf.find(_CLOSE)
                if end >= 0:
                    if end:
                        yield True, self._buf[:end]
                    self._buf = self._buf[end + len(_CLOSE) :]
                    self._state = "after"
                    continue
                keep = len(_CLOSE) - 1  # a closing tag may be split across pieces
                if len(self._buf) > keep:
                    yield True, self._buf[:-keep]
                    self._buf = self._buf[-keep:]
                return
            if self._state == "after":
                self._buf = self._buf.lstrip()
                if not self._buf:
                    return
                self._state = "text"
                continue
            # text
            if self._buf:
                yield False, self._buf
                self._buf = ""
            return

    def flush(self) -> Iterator[tuple[bool, str]]:
        """Whatever is still held back once the content has ended."""
        rest, self._buf = self._buf, ""
        if rest and self._state == "think":
            yield True, rest
        elif rest and self._state in ("start", "text"):
            yield False, rest


def _arguments_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()  # some servers send an object


def parse_usage(raw: Any) -> Usage | None:
    """``Usage`` from a ``usage`` object, with cached prompt tokens when reported."""
    if not isinstance(raw, dict):
        return None

    def num(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    prompt = num(raw.get("prompt_tokens"))
    completion = num(raw.get("completion_tokens"))
    total = num(raw.get("total_tokens")) or prompt + completion
    details = raw.get("prompt_tokens_details")
    cached = num(details.get("cached_tokens")) if isinstance(details, dict) else 0
    cached = cached or num(raw.get("prompt_cache_hit_tokens"))  # DeepSeek's spelling
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=total, cached_tokens=cached
    )


class _CallSlot:
    __slots__ = ("announced", "arguments", "id", "name", "order")

    def __init__(self, order: int) -> None:
        self.order = order
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []
        self.announced = False


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _visible(text: str) -> str:
    """Text counts only if it has something visible; whitespace alone is dropped."""
    return text if text.strip() else ""


class StreamAssembler:
    """Accumulates streamed chunks of one response (choice 0) into a :class:`ChatResult`."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._splitter = ThinkSplitter()
        self._slots: dict[Any, _CallSlot] = {}
        self._by_index: dict[int, Any] = {}  # a server's index -> the slot it names now
        self._refusal: list[str] = []
        self._last_key: Any = None
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._request_id: str | None = None
        self.done = False  # ``data: [DONE]`` seen
        self.chunks = 0
        self._choice_seen = False

    @property
    def complete(self) -> bool:
        """Whether the stream said it was finished (``[DONE]`` or a finish reason)."""
        return self.done or self._finish_reason is not None

    @property
    def answered(self) -> bool:
        """Whether any chunk carried a choice (a stream of only ``[DONE]`` and usage did
        not answer at all)."""
        return self._choice_seen

    def feed(self, chunk: dict[str, Any]) -> Iterator[StreamEvent]:
        """Events for one decoded chunk (``data:`` JSON object)."""
        self.chunks += 1
        if self._request_id is None and isinstance(chunk.get("id"), str) and chunk["id"]:
            self._request_id = chunk["id"]
        usage = parse_usage(chunk.get("usage"))
        if usage is not None:
            self._usage = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self._choice_seen = True
            delta = choice.get("delta") or choice.get("message") or {}
            if isinstance(delta, dict):
                yield from self._feed_delta(delta)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self._finish_reason = reason

    def _feed_delta(self, delta: dict[str, Any]) -> Iterator[StreamEvent]:
        thinking = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(thinking, str) and thinking:
            yield ThinkingDelta(thinking)
        content = delta.get("content")
        if isinstance(content, str) and content:
            yield from self._emit(self._splitter.feed(content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self._refusal.append(refusal)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, call in enumerate(calls):
                if isinstance(call, dict):
                    yield from self._feed_call(position, call)

    def _emit(self, pieces: Iterator[tuple[bool, str]]) -> Iterator[StreamEvent]:
        for is_thinking, text in pieces:
            if is_thinking:
                yield ThinkingDelta(text)
            else:
                self._text.append(text)
                yield TextDelta(text)

    def _slot_key(self, position: int, call: dict[str, Any]) -> Any:
        index = call.get("index")
        call_id = call.get("id")
        if isinstance(index, int) and not isinstance(index, bool):
            key = self._by_index.get(index)
            held = self._slots.get(key) if key is not None else None
            if key is None or (
                held is not None
                and isinstance(call_id, str)
                and call_id
                and held.id
                and call_id != held.id
            ):
                # First use of this index, or a different call reusing it.
                key = index if key is None else ("reused", index, len(self._slots))
                self._by_index[index] = key
            return key
        if isinstance(call_id, str) and call_id:
            # No index: the id tells calls apart (a repeated id continues its call).
            return ("id", call_id)
        function = call.get("function")
        named = isinstance(function, dict) and bool(function.get("name"))
        last = self._slots.get(self._last_key)
        if last is not None and position == 0 and not (named and last.name):
            return self._last_key  # a bare fragment continues the latest call
        return ("pos", len(self._slots))

    def _feed_call(self, position: int, call: dict[str, Any]) -> Iterator[StreamEvent]:
        key = self._slot_key(position, call)
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _CallSlot(len(self._slots))
        self._last_key = key
        call_id = call.get("id")
        if isinstance(call_id, str) and call_id and not slot.id:
            slot.id = call_id
        function = call.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if isinstance(name, str) and name and not slot.name:
                slot.name = name
            fragment = _arguments_text(function.get("arguments"))
            if fragment:
                slot.arguments.append(fragment)
        if slot.name and not slot.announced:
            slot.announced = True
            if not slot.id:
                slot.id = _new_call_id()
            yield ToolCallDelta(index=slot.order, id=slot.id, name=slot.name)

    def finish(self) -> Iterator[StreamEvent]:
        """Text still held back by the thinking splitter, once the stream has ended."""
        yield from self._emit(self._splitter.flush())

    def result(self, fallback_request_id: str | None = None) -> ChatResult:
        calls = []
        for slot in sorted(self._slots.values(), key=lambda s: s.order):
            if not slot.name:
                continue  # only named calls are kept
            calls.append(
                ToolCall(
                    id=slot.id or _new_call_id(),
                    name=slot.name,
                    arguments="".join(slot.arguments) or "{}",
                )
            )
        reason = self._finish_reason or ("tool_calls" if calls else "stop")
        refusal = "".join(self._refusal).strip() or None
        if refusal is not None:
            reason = "refusal"  # whatever the server said, this answer is not a success
        return ChatResult(
            message=Message.assistant(_visible("".join(self._text)), tuple(calls)),
            usage=self._usage or Usage(),
            finish_reason=reason,
            request_id=self._request_id or fallback_request_id,
            refusal=refusal,
        )


def parse_completion(payload: Any, fallback_request_id: str | None = None) -> ChatResult:
    """A :class:`ChatResult` from a non-streamed chat-completions body.

    Raises ``ValueError`` when the body has no usable choice.
    """
    if not isinstance(payload, dict):
        raise ValueError("the body is not a JSON object")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("the body has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ValueError("the first choice has no message")
    assembler = StreamAssembler()
    # A whole message is one big delta: reuse the streaming path for text, thinking
    # and tool calls so both paths agree on every server quirk.
    chunk = {
        "id": payload.get("id"),
        "usage": payload.get("usage"),
        "choices": [
            {"index": 0, "delta": message, "finish_reason": choices[0].get("finish_reason")}
        ],
    }
    for _ in assembler.feed(chunk):
        pass
    for _ in assembler.finish():
        pass
    return assembler.result(fallback_request_id)
