"""Turning speculated messages into what the user sees on accept."""

from __future__ import annotations

from protocol.wire.chat import Message
from protocol.wire.control import ToolStatus, TranscriptEntry
from protocol.wire.display import call_diff, call_path, cut, format_args


def ensure_tool_result_pairing(messages: list[Message]) -> list[Message]:
    """The history may not end with unanswered calls: if the last message is the model's
    and has tool calls, keep only its text, or drop it when nothing remains."""
    if messages and messages[-1].role == "assistant" and messages[-1].tool_calls:
        last = messages[-1]
        head = messages[:-1]
        return [*head, Message.assistant(last.text)] if last.text.strip() else head
    return messages


RESULT_SHOWN = 500
"""How much of a tool result a transcript shows unless asked for it whole."""


def render_transcript(
    user_text: str, messages: list[Message], *, full: bool = False
) -> list[TranscriptEntry]:
    """User text, model text, and a tool group pairing call *i* with response *i* of the
    next message; each result cut to ``RESULT_SHOWN`` characters unless ``full`` (then as
    the model got it, already bounded by the command's output cap)."""
    entries = [TranscriptEntry(kind="user", text=user_text)]
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        if message.text.strip():
            entries.append(TranscriptEntry(kind="model", text=message.text))
        following = messages[index + 1] if index + 1 < len(messages) else None
        results = (
            following.tool_results if following is not None and following.role == "tool" else ()
        )
        for position, call in enumerate(message.tool_calls):
            result = results[position] if position < len(results) else None
            status: ToolStatus
            if result is None:
                status, text = "cancelled", ""
            elif result.ok:
                status = "error" if result.failed else "success"
                text = result.output or ""
            else:
                status, text = "error", result.error or ""
            entries.append(
                TranscriptEntry(
                    kind="tool",
                    tool=call.name,
                    args=format_args(call),
                    text=text if full else cut(text, RESULT_SHOWN),
                    status=status,
                    exit_code=result.exit_code if result is not None else None,
                    diff=call_diff(call),
                    path=call_path(call),
                )
            )
    return entries
