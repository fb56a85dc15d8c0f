"""The chat data model that crosses processes.

One schema for the coordinator's main history, the worker's forked chat, the
persisted history file and the wire. It converts to and from the OpenAI
chat-completions format at the model client's edge only.

A ``tool`` message holds *all* responses to the preceding assistant message's
calls, in call order (response *i* pairs with call *i*), like a Gemini
function-response turn. On the OpenAI wire it becomes one ``tool`` message per
result. ``reminders`` are system-reminder texts attached to a user or tool
message: before the user's text on a user message, after the tool results on a
tool message (the API needs tool results right after the calls).
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

from protocol.wire.json_depth import too_deep

Role = Literal["system", "user", "assistant", "tool"]

#: How the shell tool's result starts (``worker/tools/run_shell_command.py`` writes it):
#: ``Exit code: N``, or ``Exit code: none`` for a command that timed out.
SHELL_EXIT_PREFIX = "Exit code: "


class ToolCall(msgspec.Struct, frozen=True, omit_defaults=True):
    """A named tool call as the model produced it. ``arguments`` is the JSON text, kept
    byte-for-byte so a forked request reproduces the main chat's prefix exactly."""

    id: str
    name: str
    arguments: str = "{}"

    def args(self) -> dict[str, Any]:
        """The arguments as a dict; malformed JSON, a non-object or a text nested too deep
        to decode safely (``json_depth``) gives ``{}``."""
        if too_deep(self.arguments):
            return {}
        try:
            value = msgspec.json.decode(self.arguments or "{}")
        except (msgspec.DecodeError, RecursionError):
            return {}
        return value if isinstance(value, dict) else {}


class ToolResult(msgspec.Struct, frozen=True, omit_defaults=True):
    """The response to one tool call: exactly one of ``output`` or ``error`` is set."""

    call_id: str
    name: str
    output: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """The tool ran (a command that ran and exited non-zero is ok: see ``failed``)."""
        return self.error is None

    @property
    def exit_code(self) -> int | None:
        """A shell command's exit status, from the ``Exit code: N`` line the shell tool
        writes first (negative: killed by that signal); None for other tools, and for a
        command that has none (timed out)."""
        first = (self.output or "").split("\n", 1)[0]
        if self.error is not None or not first.startswith(SHELL_EXIT_PREFIX):
            return None
        word = first.removeprefix(SHELL_EXIT_PREFIX).split(" ", 1)[0]
        try:
            return int(word)
        except ValueError:
            return None

    @property
    def failed(self) -> bool:
        """Shown as failed: the tool reported an error, or its command exited non-zero
        (or has no exit status: it timed out and was killed)."""
        if self.error is not None:
            return True
        if not (self.output or "").startswith(SHELL_EXIT_PREFIX):
            return False
        return self.exit_code != 0

    def content(self) -> str:
        """The JSON body the model sees: ``{"output": …}`` or ``{"error": …}``."""
        body = {"error": self.error} if self.error is not None else {"output": self.output or ""}
        return msgspec.json.encode(body).decode()


class Message(msgspec.Struct, frozen=True, omit_defaults=True):
    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    reminders: tuple[str, ...] = ()

    @classmethod
    def user(cls, text: str, reminders: tuple[str, ...] = ()) -> Message:
        return cls(role="user", text=text, reminders=reminders)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls(role="assistant", text=text, tool_calls=tool_calls)

    @classmethod
    def tool(cls, results: tuple[ToolResult, ...], reminders: tuple[str, ...] = ()) -> Message:
        return cls(role="tool", tool_results=results, reminders=reminders)


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool as the model sees it (OpenAI function schema)."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


#: A reminder tag written inside a reminder's text, in any case or spacing: ``</system-
#: reminder>`` in a compaction summary or a memory file (model or repository text) would
#: close the reminder early, and what follows would read as the person's own words.
_REMINDER_TAG = re.compile(r"<(\s*/?\s*system-reminder)", re.IGNORECASE)


def _wrap_reminder(text: str) -> str:
    """``text`` inside one reminder that nothing in it can close or open: a reminder tag
    in it keeps its letters but loses its ``<`` (shown as ``&lt;``)."""
    framed = _REMINDER_TAG.sub(r"&lt;\1", text)
    return f"<system-reminder>\n{framed}\n</system-reminder>"


def message_to_openai(message: Message) -> list[dict[str, Any]]:
    """One chat message as OpenAI messages (a tool message may expand to several)."""
    if message.role == "tool":
        out: list[dict[str, Any]] = [
            {"role": "tool", "tool_call_id": r.call_id, "content": r.content()}
            for r in message.tool_results
        ]
        if message.reminders:
            out.append(
                {"role": "user", "content": "\n".join(_wrap_reminder(r) for r in message.reminders)}
            )
        return out
    if message.role == "assistant":
        entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            entry["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in message.tool_calls
            ]
        return [entry]
    if message.role == "user" and message.reminders:
        parts = [_wrap_reminder(r) for r in message.reminders]
        parts.append(message.text)
        return [{"role": "user", "content": "\n".join(parts)}]
    return [{"role": message.role, "content": message.text}]


def to_openai(
    system: str | None, history: list[Message] | tuple[Message, ...]
) -> list[dict[str, Any]]:
    """The ``messages`` array of a chat-completions request."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in history:
        out.extend(message_to_openai(message))
    return out


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0


class CacheSafeSnapshot(msgspec.Struct, frozen=True):
    """What a forked chat needs to reproduce the main chat's request prefix byte for byte:
    system instruction, tools, the last ``MAX_HISTORY_FOR_CACHE`` history entries, the model,
    and a version that changes only when the system instruction or the tools change."""

    system: str
    tools: tuple[ToolSpec, ...]
    history: tuple[Message, ...]
    model: str
    version: int
