"""The scripted model's brain: match a request against the rules, plan the answer.

Independent of HTTP: :meth:`Engine.plan` takes the decoded body and the headers and
returns what to send (a failure, or chunks and timing). Counters for ``times`` and
``fail.times`` and the request log are guarded by one lock, so concurrent requests
see the rules in a consistent order.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec

from coordinator.scripted_model.scenario import OverflowStyle, Reply, Rule, Scenario
from protocol.model.tokens import estimate_json_tokens
from protocol.prompts.prediction import (
    ALTERNATIVES_KEY,
    parse_suggestion_reply,
    requested_alternatives,
)

PURPOSE_HEADER = "x-specrun-purpose"
NO_MATCH_TEXT = "[scripted model: no rule matched this request]"

_REMINDER_ONLY = re.compile(r"\s*(?:<system-reminder>.*?</system-reminder>\s*)+", re.S)
_WORD_GROUP = re.compile(r"\s*(?:\S+\s+){0,2}\S+\s*|\s+")


def content_text(content: Any) -> str:
    """The text of an OpenAI message ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


@dataclass(frozen=True)
class Failure:
    """An error answer; ``body``: the exact JSON to send (None: built from ``message``)."""

    status: int
    message: str
    retry_after: float | None = None
    body: Any = None


def overflow_failure(style: OverflowStyle, window: int, requested: int) -> Failure:
    """The 400 a provider of ``style`` sends for a prompt of ``requested`` tokens that
    does not fit its ``window`` (bodies as those servers send them)."""
    if style == "vllm":
        text = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{requested} tokens ({requested} in the messages, 0 in the completion). Please "
            "reduce the length of the messages or completion."
        )
        body: dict[str, Any] = {
            "object": "error", "message": text, "type": "BadRequestError", "param": None,
            "code": 400,
        }  # fmt: skip
    elif style == "dashscope":
        text = (
            "<400> InternalError.Algo.InvalidParameter: Range of input length should be "
            f"[1, {window}]"
        )
        body = {
            "error": {
                "message": text, "type": "invalid_request_error", "param": None,
                "code": "invalid_parameter_error",
            },
            "id": "chatcmpl-scripted-overflow",
            "request_id": "scripted-overflow",
        }  # fmt: skip
    elif style == "llamacpp":
        text = "the request exceeds the available context size, try increasing it"
        body = {
            "error": {
                "code": 400, "message": text, "type": "exceed_context_size_error",
                "n_prompt_tokens": requested, "n_ctx": window,
            }
        }  # fmt: skip
    elif style == "ollama":  # it names no window
        text = "the input length exceeds the context length"
        body = {"error": text}
    elif style == "anthropic":  # Anthropic's own words, as LiteLLM's proxy passes them on
        inner = {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {requested} tokens > {window} maximum",
            },
        }
        text = (
            "litellm.BadRequestError: litellm.ContextWindowExceededError: "
            f"AnthropicException - {json.dumps(inner)}"
        )
        body = {"error": {"message": text, "type": None, "param": None, "code": "400"}}
    else:
        text = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {requested} tokens. Please reduce the length of the messages."
        )
        body = {
            "error": {
                "message": text, "type": "invalid_request_error", "param": "messages",
                "code": "context_length_exceeded",
            }
        }  # fmt: skip
    return Failure(400, text, body=body)


@dataclass
class Answer:
    """A planned successful answer."""

    model: str
    request_id: str
    created: int
    text: str
    thinking: str
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    usage: dict[str, Any]
    latency_s: float
    chunk_s: float
    stall: bool = False
    refusal: str = ""

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.thinking:
            message["reasoning_content"] = self.thinking
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.refusal:
            message["refusal"] = self.refusal
        return message

    def completion(self) -> dict[str, Any]:
        """The non-streamed body."""
        return {
            "id": self.request_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "message": self.message(), "finish_reason": self.finish_reason}
            ],
            "usage": self.usage,
        }

    def chunks(self, include_usage: bool) -> list[dict[str, Any]]:
        """The streamed chunks: thinking and text in word groups, then each tool call
        (id and name first, arguments in fragments), the finish, then usage."""
        deltas: list[dict[str, Any]] = []
        deltas += [{"reasoning_content": piece} for piece in _word_groups(self.thinking)]
        deltas += [{"content": piece} for piece in _word_groups(self.text)]
        deltas += [{"refusal": piece} for piece in _word_groups(self.refusal)]
        for index, call in enumerate(self.tool_calls):
            function = call["function"]
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": function["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for fragment in _fragments(function["arguments"]):
                deltas.append(
                    {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}
                )
        if not deltas:
            deltas.append({"content": ""})
        deltas[0] = {"role": "assistant", **deltas[0]}
        out = [self._chunk([{"index": 0, "delta": d, "finish_reason": None}]) for d in deltas]
        out.append(self._chunk([{"index": 0, "delta": {}, "finish_reason": self.finish_reason}]))
        if include_usage:
            out.append(self._chunk([], usage=self.usage))
        return out

    def _chunk(self, choices: list[dict[str, Any]], usage: Any = None) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.request_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage is not None:
            chunk["usage"] = usage
        return chunk


def _word_groups(text: str) -> list[str]:
    """Text cut into pieces of about three words (concatenating gives the text back)."""
    if not text:
        return []
    return [m.group(0) for m in _WORD_GROUP.finditer(text) if m.group(0)]


def _fragments(text: str, parts: int = 3) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


@dataclass
class _Counters:
    matched: int = 0
    failed: int = 0


@dataclass
class Decision:
    """What the engine decided for one request, with what the log records."""

    rule: int | None
    outcome: str  # reply | fail | stall | no_match | bad_request
    failure: Failure | None = None
    answer: Answer | None = None
    stream: bool = False
    include_usage: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Engine:
    def __init__(
        self,
        scenario: Scenario,
        request_log: str | Path | None = None,
        *,
        keep_requests: int = 500,
    ) -> None:
        self.scenario = scenario
        self._last_user = [_compile(r.when.last_user if r.when else None) for r in scenario.rules]
        self._turn_user = [_compile(r.when.turn_user if r.when else None) for r in scenario.rules]
        self._counters = [_Counters() for _ in scenario.rules]
        self._lock = threading.Lock()
        self._seq = 0
        self._prefixes: deque[tuple[str, list[tuple[bytes, int]]]] = deque(maxlen=32)
        self.requests: deque[dict[str, Any]] = deque(maxlen=keep_requests)  # the latest ones
        self._log_path = Path(request_log) if request_log is not None else None
        self._log: IO[str] | None = None
        if self._log_path is not None:
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self._log_path.open("a", encoding="utf-8")

    def close(self) -> None:
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    # ----------------------------------------------------------- request log

    def record(
        self,
        *,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: Any,
        decision: Decision | None,
        status: int,
    ) -> dict[str, Any]:
        """Append one request to the in-memory list and the log file (one JSON line)."""
        entry: dict[str, Any] = {
            "time": round(time.time(), 6),
            "method": method,
            "path": path,
            "purpose": _header(headers, PURPOSE_HEADER),
            "headers": {k: v for k, v in headers.items() if k.lower() != "authorization"},
            "body": body,
            "rule": decision.rule if decision else None,
            "outcome": decision.outcome if decision else None,
            "status": status,
        }
        if decision is not None:
            entry.update(decision.extra)
        line = msgspec.json.encode(entry).decode()
        with self._lock:
            self.requests.append(entry)
            if self._log is not None:
                self._log.write(line + "\n")
                self._log.flush()
        return entry

    # ----------------------------------------------------------- matching

    def plan(self, body: Any, headers: Mapping[str, str]) -> Decision:
        """Decide the answer to one ``POST /v1/chat/completions``."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return Decision(
                None,
                "bad_request",
                Failure(400, "The request body needs a `messages` list."),
            )
        purpose = _header(headers, PURPOSE_HEADER)
        messages = [m for m in body["messages"] if isinstance(m, dict)]
        stream = body.get("stream") is True
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        window = self.scenario.context_window
        if window is not None:
            requested = request_tokens(body, messages)
            if requested > window:
                failure = overflow_failure(self.scenario.overflow_style, window, requested)
                return Decision(
                    None, "context_overflow", failure, stream=stream,
                    extra={"prompt_tokens": requested},
                )  # fmt: skip
        with self._lock:
            self._seq += 1
            seq = self._seq
            for index, rule in enumerate(self.scenario.rules):
                if not self._matches(index, rule, purpose, messages):
                    continue
                counters = self._counters[index]
                if rule.times is not None and counters.matched >= rule.times:
                    continue
                if rule.fail is not None and counters.failed < rule.fail.times:
                    counters.failed += 1
                    fail = rule.fail
                    message = fail.message or f"Scripted failure {counters.failed} of {fail.times}."
                    return Decision(
                        index,
                        "fail",
                        Failure(
                            fail.status,
                            message,
                            fail.retry_after,
                            None if fail.body is msgspec.UNSET else fail.body,
                        ),
                        stream=stream,
                    )
                counters.matched += 1
                wanted = _alternatives_wanted(body, messages)
                answer = self._answer(
                    seq, rule.answer, body, messages, stall=rule.stall, alternatives=wanted
                )
                outcome = "stall" if rule.stall else "reply"
                extra = {"alternatives": wanted[1]} if wanted[0] else {}
                return Decision(index, outcome, None, answer, stream, include_usage, extra)
            answer = self._answer(seq, Reply(text=NO_MATCH_TEXT), body, messages, stall=False)
            return Decision(None, "no_match", None, answer, stream, include_usage)

    def _matches(
        self, index: int, rule: Rule, purpose: str | None, messages: list[dict[str, Any]]
    ) -> bool:
        when = rule.when
        if when is None:
            return True
        if when.purpose is not None and when.purpose != purpose:
            return False
        if when.system_contains is not None and not any(
            when.system_contains in content_text(m.get("content"))
            for m in messages
            if m.get("role") == "system"
        ):
            return False
        if when.prompt_contains is not None and not any(
            when.prompt_contains in content_text(m.get("content")) for m in messages
        ):
            return False
        last = _effective_last(messages)
        regex = self._last_user[index]
        if regex is not None:
            if last is None or last.get("role") != "user":
                return False
            if not regex.search(content_text(last.get("content"))):
                return False
        regex = self._turn_user[index]
        if regex is not None:
            turn = _turn_user(messages)
            if turn is None or not regex.search(content_text(turn.get("content"))):
                return False
        return when.last_tool is None or when.last_tool in _last_tool_names(messages)

    # ----------------------------------------------------------- answers

    def _answer(
        self,
        seq: int,
        reply: Reply,
        body: dict[str, Any],
        messages: list[Any],
        *,
        stall: bool,
        alternatives: tuple[bool, int | None] = (False, None),
    ) -> Answer:
        """``alternatives``: whether the request wants several ranked suggestions, and
        at most how many (``None``: no limit given)."""
        wanted, limit = alternatives
        if reply.select_memories is not None:
            picked = _select_memories(messages, reply.select_memories)
            text = msgspec.json.encode({"selected_memories": picked}).decode()
        elif (guesses := _scripted_guesses(reply, wanted)) is not None:
            if wanted:
                answer: dict[str, Any] = {ALTERNATIVES_KEY: guesses[:limit]}
            else:
                answer = {"suggestion": guesses[0] if guesses else ""}
            text = msgspec.json.encode(answer).decode()
        elif reply.has_json:
            text = msgspec.json.encode(reply.json).decode()
        else:
            text = reply.text or ""
        calls = [
            {
                "id": call.id or f"call_{seq}_{i}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments_text(),
                },
            }
            for i, call in enumerate(reply.tool_calls)
        ]
        thinking = reply.thinking or ""
        refusal = reply.refusal or ""
        model = str(body.get("model") or (self.scenario.models or ["scripted"])[0])
        produced = len(text) + len(thinking)
        produced += sum(len(c.arguments_text()) for c in reply.tool_calls)
        prompt_tokens, cached_tokens = self._prompt_tokens(model, body, messages)
        completion_tokens = max(1, produced // 4)
        if self.scenario.context_window is not None:
            # Counted as specrun estimates them: the chat's accounting is exact here.
            prompt_tokens = request_tokens(body, messages)
            echoed: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                echoed["tool_calls"] = calls
            completion_tokens = estimate_json_tokens(echoed)
        if reply.usage is not None:
            if reply.usage.prompt_tokens is not None:
                prompt_tokens = reply.usage.prompt_tokens
            if reply.usage.completion_tokens is not None:
                completion_tokens = reply.usage.completion_tokens
            if reply.usage.cached_tokens is not None:
                cached_tokens = reply.usage.cached_tokens
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": min(cached_tokens, prompt_tokens)},
        }
        latency = reply.latency_ms if reply.latency_ms is not None else self.scenario.latency_ms
        chunk = reply.chunk_ms if reply.chunk_ms is not None else self.scenario.chunk_ms
        return Answer(
            model=model,
            request_id=f"chatcmpl-scripted-{seq}",
            created=int(time.time()),
            text=text,
            thinking=thinking,
            tool_calls=calls,
            finish_reason=reply.finish_reason or ("tool_calls" if calls else "stop"),
            usage=usage,
            latency_s=latency / 1000,
            chunk_s=chunk / 1000,
            stall=stall,
            refusal=refusal,
        )

    def _prompt_tokens(
        self, model: str, body: dict[str, Any], messages: list[Any]
    ) -> tuple[int, int]:
        """Prompt tokens (≈ 4 bytes each) and how many a prefix cache would hold: the
        longest run of leading segments (tools, then each message, cache markers
        ignored) shared with an earlier request for the same model."""
        segments = [_segment(body.get("tools") or [])] + [_segment(m) for m in messages]
        sizes = [(data, len(data)) for data in segments]
        total = sum(size for _, size in sizes)
        cached = 0
        for seen_model, seen in self._prefixes:
            if seen_model != model:
                continue
            shared = 0
            for (a, size), (b, _) in zip(sizes, seen, strict=False):
                if a != b:
                    break
                shared += size
            cached = max(cached, shared)
        self._prefixes.append((model, sizes))
        return max(1, total // 4), cached // 4


def request_tokens(body: dict[str, Any], messages: list[Any]) -> int:
    """A request's prompt tokens by specrun's estimator: the tools, then every message
    as it is on the wire (cache markers ignored), as ``estimate_request`` counts them."""
    tools = body.get("tools") or []
    total = estimate_json_tokens(_strip_cache_control(tools)) if tools else 0
    return total + sum(estimate_json_tokens(_strip_cache_control(m)) for m in messages)


def _alternatives_wanted(body: dict[str, Any], messages: list[Any]) -> tuple[bool, int | None]:
    """Whether a request asks for several ranked suggestions, and at most how many.

    Structured output decides when the request has a schema: one with a ``suggestions``
    property wants a list, cut to its ``maxItems`` (else to the prompt's N, else uncut);
    any other schema does not. Without a schema (a client's raw-text retry) the last
    user message's ``[RANKED GUESSES: up to N]`` line asks for N > 1.
    """
    prompt = next(
        (content_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"),
        "",
    )
    asked = requested_alternatives(prompt)
    schema = _response_schema(body)
    if schema is None:
        return (True, asked) if asked > 1 else (False, None)
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not isinstance(properties.get(ALTERNATIVES_KEY), dict):
        return False, None
    most = properties[ALTERNATIVES_KEY].get("maxItems")
    if isinstance(most, int) and not isinstance(most, bool) and most >= 0:
        return True, most
    return True, asked if asked > 1 else None


def _response_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema of a request's ``response_format``, if it has one."""
    fmt = body.get("response_format")
    spec = fmt.get("json_schema") if isinstance(fmt, dict) else None
    schema = spec.get("schema") if isinstance(spec, dict) else None
    return schema if isinstance(schema, dict) else None


def _scripted_guesses(reply: Reply, wanted: bool) -> list[str] | None:
    """The ranked suggestions a reply scripts, or ``None`` when it is not answered as such.

    ``suggestions`` always count. For a request that wants several, one scripted
    suggestion counts too (``json: {suggestion: X}``, or a plain ``text`` without tool
    calls) as a one-element list, empty when X is.
    """
    if reply.suggestions is not None:
        return list(reply.suggestions)
    if not wanted:
        return None
    if reply.has_json:
        value = reply.json
        if isinstance(value, dict) and set(value) == {"suggestion"}:
            single = value["suggestion"]
            if isinstance(single, str):
                return [single.strip()] if single.strip() else []
        return None
    if reply.text is not None and not reply.tool_calls and reply.refusal is None:
        single = parse_suggestion_reply(reply.text)
        return [single] if single else []
    return None


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    return re.compile(pattern) if pattern is not None else None


_MANIFEST_LINE = re.compile(r"^- \[[^\]]*\] (?P<path>.+?) \([^()]*\): ", re.M)


def _select_memories(messages: list[dict[str, Any]], words: list[str]) -> list[str]:
    """Paths of the manifest lines in the last user message that mention any word."""
    user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    if user is None:
        return []
    picked: list[str] = []
    needles = [w.lower() for w in words if w]
    for line in content_text(user.get("content")).splitlines():
        found = _MANIFEST_LINE.match(line)
        if found and any(n in line.lower() for n in needles) and found["path"] not in picked:
            picked.append(found["path"])
    return picked[:5]


def _segment(value: Any) -> bytes:
    return msgspec.json.encode(_strip_cache_control(value))


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        parts = [_strip_cache_control(v) for v in value]
        # [{"type": "text", "text": X}] is the same prompt as the string X
        if len(parts) == 1 and isinstance(parts[0], dict) and set(parts[0]) == {"type", "text"}:
            return parts[0]["text"]
        return parts
    return value


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _is_reminder_only(message: dict[str, Any]) -> bool:
    if message.get("role") != "user":
        return False
    return _REMINDER_ONLY.fullmatch(content_text(message.get("content"))) is not None


def _effective_last(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last message, where a reminder-only user message right after tool results
    counts as part of those results (specrun attaches reminders that way)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if _is_reminder_only(message) and i > 0 and messages[i - 1].get("role") == "tool":
            continue
        return message
    return None


def _turn_user(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The user message that started the current turn (reminder-only ones skipped)."""
    for message in reversed(messages):
        if message.get("role") == "user" and not _is_reminder_only(message):
            found: dict[str, Any] = message
            return found
    return None


def _last_tool_names(messages: list[dict[str, Any]]) -> set[str]:
    """Names of the tools whose results end the request (the trailing tool group)."""
    end = len(messages)
    while end > 0 and _is_reminder_only(messages[end - 1]):
        end -= 1
    start = end
    while start > 0 and messages[start - 1].get("role") == "tool":
        start -= 1
    if start == end:
        return set()
    names: dict[str, str] = {}
    for message in messages[:start]:
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names[str(call.get("id"))] = str(call["function"].get("name", ""))
    return {names.get(str(m.get("tool_call_id")), "") for m in messages[start:end]} - {""}
