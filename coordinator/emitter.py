"""Where a running request's events go: one client, one request id."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from protocol.chat import ToolCall
from protocol.control import ApprovalNeeded, ControlReply, Notice, TextChunk, ToolShown


class ReplySink(Protocol):
    async def send(self, identity: bytes, reply: ControlReply) -> None: ...


def cut(text: str, limit: int, *, one_line: bool = False) -> str:
    """``text`` shortened to ``limit`` characters with an ellipsis; ``one_line`` folds
    newlines first (argument displays)."""
    if one_line:
        text = text.replace("\n", " ").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_args(call: ToolCall) -> str:
    """`key: value` pairs for display, each cut to 80 characters."""
    parts = []
    for key, value in call.args().items():
        shown = value if isinstance(value, str) else repr(value)
        parts.append(cut(f"{key}: {shown}", 80, one_line=True))
    return ", ".join(parts)


class Emitter:
    def __init__(self, sink: ReplySink, identity: bytes, req_id: int) -> None:
        self.sink = sink
        self.identity = identity
        self.req_id = req_id

    async def send(self, reply: ControlReply) -> None:
        await self.sink.send(self.identity, reply)

    async def text(self, text: str) -> None:
        await self.send(TextChunk(self.req_id, text))

    async def notice(self, text: str) -> None:
        await self.send(Notice(self.req_id, text))

    async def tool(
        self,
        call: ToolCall,
        status: Literal["running", "success", "error", "refused", "cancelled"],
        result: str = "",
    ) -> None:
        await self.send(
            ToolShown(self.req_id, call.id, call.name, format_args(call), status, cut(result, 500))
        )

    async def approval(self, call: ToolCall, reason: str) -> None:
        await self.send(ApprovalNeeded(self.req_id, call, reason))


class NullSink:
    """Discards replies (a turn nobody watches, e.g. a benchmark)."""

    async def send(self, identity: bytes, reply: Any) -> None:
        return None
