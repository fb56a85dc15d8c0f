"""``ApprovalAnswer``: the person's yes or no to a tool call that waits for one (the
client that asked the query sends it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import ApprovalAnswer, ErrorReply, OkReply

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: ApprovalAnswer) -> None:
    if not service.answer_approval(req.ask_req_id, req.call_id, req.approved, req.remember,
                                   req.reason):
        problem = "No tool call is waiting for that answer."
        await service.send(identity, ErrorReply(req.req_id, "not_found", problem))
        return
    await service.send(identity, OkReply(req.req_id))


COMMAND = Command("approval-answer", request=ApprovalAnswer, reply=OkReply, serve=serve,
                  cli=False)
