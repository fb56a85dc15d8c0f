"""Tool calls a model wrote as text, recovered when the endpoint returned none.

Small local models (Qwen2.5-Coder 1.5B behind llama.cpp, measured in docs/local-models.md)
often answer a request that offers tools with the call written out: a JSON object in a
code fence, or Hermes/Qwen ``<tool_call>{...}</tool_call>`` tags, or the bare object as the
whole answer. The server passes that on as plain content, so without this the chat sees
prose, runs nothing, and the turn looks empty.

A block becomes a call only when it is one JSON object (or a list of them) naming a tool
the request offered, with arguments that are an object the tool accepts (``fits``: the
tool's own argument struct decides; without it, the schema's required keys must be there).
Everything else stays text, word for word: the model's text is hostile input, and a block
that merely looks like a call must not run anything.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from protocol.model.request import ChatRequest, ChatResult
from protocol.wire.chat import Message, ToolCall, ToolSpec

log = logging.getLogger("specrun.model")

ArgumentsFit = Callable[[str, str], bool]
"""``fits(tool_name, arguments_json)``: whether the tool's own argument struct accepts them."""

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FENCED = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)
_FENCE_LANGUAGES = frozenset({"", "json", "json5", "tool_call", "tool", "javascript", "js"})
MAX_BLOCK_CHARS = 200_000  # a longer "call" is not one: no decoding of megabytes of text


class TextCallReader:
    """What one client does with answers: read the calls their text holds, or not."""

    def __init__(self, enabled: bool, fits: ArgumentsFit | None) -> None:
        self.enabled = enabled
        self._fits = fits

    def read(self, req: ChatRequest, result: ChatResult) -> ChatResult:
        """``result`` with the tool calls its text holds, when the endpoint returned none,
        the request offered tools and this client reads such calls; else ``result``."""
        message = result.message
        if not self.enabled or not req.tools or message.tool_calls or result.refusal:
            return result
        text, calls = recover_tool_calls(message.text, req.tools, self._fits)
        if not calls:
            return result
        log.info("read %d tool call(s) written as text (%s)", len(calls),
                 ", ".join(call.name for call in calls))
        return msgspec.structs.replace(
            result, message=Message.assistant(text, calls), finish_reason="tool_calls"
        )


def recover_tool_calls(
    text: str, offered: Sequence[ToolSpec], fits: ArgumentsFit | None = None
) -> tuple[str, tuple[ToolCall, ...]]:
    """``(the text left, the calls found in it)``; ``(text, ())`` when none is found."""
    if not offered or not text.strip():
        return text, ()
    tools = {tool.name: tool for tool in offered}
    spans: list[tuple[int, int]] = []
    calls: list[ToolCall] = []
    for match in _TAGGED.finditer(text):
        found = _calls_in(match.group(1), tools, fits)
        if found:
            spans.append(match.span())
            calls.extend(found)
    if not calls:
        for match in _FENCED.finditer(text):
            if match.group(1).lower() not in _FENCE_LANGUAGES:
                continue
            found = _calls_in(match.group(2), tools, fits)
            if found:
                spans.append(match.span())
                calls.extend(found)
    if not calls:
        found = _calls_in(text.strip(), tools, fits)  # the whole answer is the call
        if found:
            return "", tuple(found)
        return text, ()
    left = text
    for start, end in reversed(spans):
        left = left[:start] + left[end:]
    return _tidy(left), tuple(calls)


def _tidy(text: str) -> str:
    """The text around removed blocks, without the blank lines they leave."""
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _calls_in(
    block: str, tools: dict[str, ToolSpec], fits: ArgumentsFit | None
) -> list[ToolCall]:
    """The calls one block holds: all of them, or none when any part of it is not a call."""
    block = block.strip()
    if not block or len(block) > MAX_BLOCK_CHARS or block[0] not in "{[":
        return []
    try:
        value = msgspec.json.decode(block)
    except msgspec.DecodeError:
        return []
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        call = _call(item, tools, fits)
        if call is None:
            return []
        calls.append(call)
    return calls


def _call(item: Any, tools: dict[str, ToolSpec], fits: ArgumentsFit | None) -> ToolCall | None:
    if not isinstance(item, dict):
        return None
    function = item.get("function")
    if isinstance(function, dict):  # the OpenAI shape written out: {"function": {...}}
        item = function
    name = item.get("name")
    if not isinstance(name, str) or name not in tools:
        return None
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):  # the wire shape: arguments as a JSON string
        try:
            arguments = msgspec.json.decode(arguments)
        except msgspec.DecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    encoded = msgspec.json.encode(arguments).decode()
    if fits is not None:
        if not fits(name, encoded):
            return None
    elif not _fits_schema(arguments, tools[name]):
        return None
    return ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=name, arguments=encoded)


def _fits_schema(arguments: dict[str, Any], tool: ToolSpec) -> bool:
    """The arguments against the tool's schema, which the tool generates from its argument
    struct: required keys there, known keys of the declared type, as leniently as the
    struct decodes them (``"10"`` for an integer, ``"true"`` for a boolean, ``null`` as
    absent; keys it does not know are ignored)."""
    required = tool.parameters.get("required", [])
    if not isinstance(required, list):
        return False
    if any(arguments.get(key) is None for key in required):
        return False
    properties = tool.parameters.get("properties", {})
    if not isinstance(properties, dict):
        return False
    for key, value in arguments.items():
        declared = properties.get(key)
        if value is None or not isinstance(declared, dict):
            continue
        if not _of_type(value, declared):
            return False
    return True


def _of_type(value: Any, declared: dict[str, Any]) -> bool:
    kind = declared.get("type")
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if kind in ("integer", "number"):
        number = _number(value)
        if number is None or (kind == "integer" and number != int(number)):
            return False
        least = declared.get("minimum")
        return not isinstance(least, int | float) or number >= least
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True  # a type this check does not know: the tool's own decoding decides


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None
