"""``ApprovalModeRequest``: change the running service's approval mode (the chat's
``/mode`` and ``chat --approval-mode`` when the service already runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import ApprovalModeRequest, OkReply

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: ApprovalModeRequest) -> None:
    before = service.set_approval_mode(req.mode)
    if before is req.mode:
        said = f"The approval mode is already {req.mode.value}."
    else:
        running = (" (a turn running now keeps the mode it started with)"
                   if service.turn_running else "")
        said = f"Approval mode {req.mode.value} from the next turn on, was {before.value}{running}."
    await service.send(identity, OkReply(req.req_id, said))


COMMAND = Command("approval-mode", request=ApprovalModeRequest, reply=OkReply, serve=serve,
                  cli=False)
