"""``CancelRequest``: Ctrl-C for a running prompt (the chat and ``ask`` send it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import CancelRequest, OkReply

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: CancelRequest) -> None:
    cancelled = service.cancel(req.ask_req_id)
    said = "cancelled" if cancelled else "nothing to cancel"
    await service.send(identity, OkReply(req.req_id, said))


COMMAND = Command("cancel", request=CancelRequest, reply=OkReply, serve=serve, cli=False)
