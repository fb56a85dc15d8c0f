"""Where a running request's events go: one client, one request id."""

from __future__ import annotations

from typing import Literal

from coordinator.service.ports import ReplySink
from protocol.wire.chat import ToolCall
from protocol.wire.control import ApprovalNeeded, ControlReply, Notice, TextChunk, ToolShown
from protocol.wire.display import call_diff, call_path, cut, format_args


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
        exit_code: int | None = None,
    ) -> None:
        await self.send(
            ToolShown(self.req_id, call.id, call.name, format_args(call), status,
                      cut(result, 500), exit_code, call_diff(call), call_path(call))
        )

    async def approval(self, call: ToolCall, reason: str, rememberable: bool = False) -> None:
        await self.send(ApprovalNeeded(self.req_id, call, reason, rememberable))


