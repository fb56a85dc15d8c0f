"""``PresenceRequest``: a chat says whether someone looks at it (its terminal's focus, the
time since the last keystroke); the service skips predicting while nobody looks at any."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import ErrorReply, OkReply, PresenceRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: PresenceRequest) -> None:
    try:
        service.presence(req.client_pid, req.state)
    except ProcessLookupError as exc:
        await service.send(identity, ErrorReply(req.req_id, "not_found", f"Not counted: {exc}."))
        return
    await service.send(identity, OkReply(req.req_id, req.state))


COMMAND = Command("presence", request=PresenceRequest, reply=OkReply, serve=serve, cli=False)
