"""The speculated conversation, and how a turn stopped by a boundary is cut (design §5).

Call *i* of a model message pairs with response *i* of the tool message after it. When
the gate stops a turn part-way, the calls that already produced a response (an error
response counts) are kept **by position**, together with exactly those responses; calls
that never ran are dropped, so the history handed back never has a call without its
response, nor a response without its call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from protocol.wire.chat import Message, ToolResult


def cut_turn(reply: Message, responses: Sequence[ToolResult]) -> list[Message]:
    """What is kept of a model message when a boundary stopped its calls.

    N = ``len(responses)`` calls ran. N > 0: the message's text plus its first N calls,
    then one tool message with the N responses. N = 0: the text alone, or nothing when
    the message had only calls.
    """
    n = len(responses)
    if n > len(reply.tool_calls):
        raise ValueError(f"{n} responses for {len(reply.tool_calls)} calls")
    if n == 0:
        return [Message.assistant(reply.text)] if reply.text else []
    kept = Message.assistant(reply.text, reply.tool_calls[:n])
    return [kept, Message.tool(tuple(responses))]


@dataclass(slots=True)
class SpeculatedConversation:
    """The speculation's messages since the fork: the suggestion's user message first,
    then model and tool messages. ``len()`` is what the message limit counts."""

    suggestion: str
    messages: list[Message] = field(default_factory=list)
    tool_use_count: int = 0
    turns: int = 0

    def __post_init__(self) -> None:
        if not self.messages:
            self.messages.append(Message.user(self.suggestion))

    def __len__(self) -> int:
        return len(self.messages)

    def add(self, *messages: Message) -> None:
        self.messages.extend(messages)

    def add_cut(self, reply: Message, responses: Sequence[ToolResult]) -> None:
        self.messages.extend(cut_turn(reply, responses))

    def count_successes(self, responses: Sequence[ToolResult]) -> None:
        self.tool_use_count += sum(1 for r in responses if r.ok)

    @property
    def speculated(self) -> tuple[Message, ...]:
        """What the coordinator appends after its own ``Message.user(suggestion)``."""
        return tuple(self.messages[1:])

    def model_text(self) -> str:
        """All visible model text, one message per line."""
        return "\n".join(m.text for m in self.messages if m.role == "assistant" and m.text)
